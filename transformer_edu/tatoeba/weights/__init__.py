"""Trained weights that ship with the package: ``tatoeba_ja_en.pt`` (the real-Japanese
model, written by ``python -m transformer_edu train --corpus tatoeba``; its ``.json``
records the command, seed, minutes, commit and the dev-BLEU curve)."""
