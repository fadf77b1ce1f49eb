"""The paper's model, bottom up (chapters 2–9): ``config`` (one TransformerConfig) ->
``masks`` -> ``embeddings`` (token embedding, positional encodings) -> ``attention``
(scaled dot-product, multi-head, grouped-query) -> ``feed_forward`` -> ``norm`` ->
``layers`` (encoder and decoder layers, post-LN and pre-LN) -> ``transformer``
(Encoder, Decoder, Generator, Transformer, ``make_model``). Beside it, ``seq2seq``:
the GRU encoder-decoders chapter 1 starts from.

Mask polarity everywhere: boolean, True = "may attend".
"""
