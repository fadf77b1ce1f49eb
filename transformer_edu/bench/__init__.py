"""Benchmarks (``python -m transformer_edu bench``), each a ratio measured side by side
in one run: ``model`` (this package's Transformer against ``torch.nn.Transformer``, and
the toy model's training), ``tatoeba`` (the real recipe's steps and settings) and
``decoding`` (beam search with and without the KV cache, on the shipped model)."""
