"""What changed since 2017 (chapter 13): ``rope`` and ``alibi`` (positions inside
attention), ``moe`` (a routed mixture of feed-forward networks), ``switches`` (the
config switches that swap each successor into the paper's model; the defaults are the
paper's, bit for bit), ``decoder_only`` (a decoder-only translator and prefix LM),
``experiments`` (short controlled runs: the same batches and steps for every model)
and ``scaling`` (C ≈ 6 N D for the book's model)."""
