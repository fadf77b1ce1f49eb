"""The toy task, 私は太郎です -> I am Taro: ``corpus/`` (the shipped sentences and the
grammar that wrote them), ``data`` (reading, segmentation, vocabularies, batches),
``training`` (the loss, the schedule, the loop, the toy model's recipe) and
``checkpoint`` (the trained toy model, trained once and cached)."""
