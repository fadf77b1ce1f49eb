"""The real task, Tatoeba's Japanese -> English (chapters 12 and 12b): ``corpus/``
(the shipped pairs, their split and the SentencePiece model), ``data`` (reading them,
subwords, token-count batches), ``recipe`` (the shipped model's sizes and the training
settings for this machine), ``train`` (time-budgeted training, alone or under
``torchrun``; dev loss, checkpoint averaging), ``translate`` (translating and scoring),
``checkpoint`` (saving and loading a model, the shipped one included), ``analysis``
(what the model gets wrong) and ``weights/`` (the trained model and the records
written with it)."""
