"""The toy Japanese -> English corpus: the shipped file and the code that wrote it.

``ja_en.tsv`` is what training reads (through ``transformer_edu.toy.data``). ``lexicon``
and ``grammar`` only rebuild it, at build time:
``python -m transformer_edu.toy.corpus.grammar`` (``--check`` compares, writes nothing).
Nothing here is imported when the package is.
"""
