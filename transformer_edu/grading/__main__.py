"""``python -m transformer_edu.grading SUBMISSIONS [--out grades]``."""

import sys

from . import main

sys.exit(main())
