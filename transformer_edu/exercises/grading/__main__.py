"""``python -m transformer_edu.exercises.grading SUBMISSIONS [--out grades]``."""

import sys

from . import main

sys.exit(main())
