"""The browser side: what the book's pages run without a kernel.

Exports of the models and of their tokenizers, the widgets that show them, and those
widgets' JavaScript (``static/``). ``spm_vocab`` writes the SentencePiece model as the
JSON file that ``static/spm.js`` segments with, exactly as Python's ``sentencepiece``.
"""
