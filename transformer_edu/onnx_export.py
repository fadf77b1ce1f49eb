"""The trained model as two ONNX graphs, for onnxruntime in a web page or in Python.

An encoder graph (source ids -> memory and its padding mask) and a decoder-step graph
(prefix ids, memory, mask -> next-token log-probabilities and the cross-attention of
the newest position), plus a JSON file with what a page needs besides the weights: the
vocabularies, the segmenter's lexicon, max_len and the special ids. Greedy decoding over
them equals ``greedy_decode`` (``greedy_onnx`` here is that loop, for the tests).
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from .data import Vocab
from .model import Transformer

ENCODER_FILE = "encoder.onnx"
DECODER_FILE = "decoder_step.onnx"
META_FILE = "translator.json"
OPSET = 18  # onnxruntime-web 1.2x runs it on its WASM backend
TOP_K = 5  # next-token candidates a trace shows (as translate(..., trace=True))
MAX_OUTPUT = 40  # most tokens greedy decoding appends (translate's max_len)


class EncoderGraph(nn.Module):
    """The encoder as the graph sees it.

    Shape: src (1, S) int64 -> memory (1, S, D), src_mask (1, 1, 1, S) bool
    (True = may attend).
    """

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        return self.model.encode(src)


class DecoderStep(nn.Module):
    """One greedy step: the whole prefix again (no cache), so the graph has no state.

    Shape: tgt (1, t) int64, memory (1, S, D), src_mask (1, 1, 1, S)
    -> log_probs (V,), cross_attention (L, H, S) of the newest position.
    """

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        out = self.model.decode(tgt, memory, src_mask)  # (1, t, D)
        log_probs = self.model.generator(out[:, -1]).log_softmax(dim=-1)[0]  # (V,)
        # the reference path kept each layer's weights (record_attention is on)
        cross = [
            m.attn_weights[0, :, -1] for m in self.model.attention_modules()["cross"]
        ]
        return log_probs, torch.stack(cross)  # (V,), (L, H, S)


def translator_meta(model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab) -> dict:
    """What a page needs besides the graphs: vocabularies, lexicon, limits, ids."""
    c = model.config
    return {
        "src_itos": src_vocab.itos,
        "tgt_itos": tgt_vocab.itos,
        # translate() segments over the source vocabulary; so does the page
        "lexicon": src_vocab.itos,
        # sources longer than this are refused (None: no positional encoding, no limit)
        "max_len": None if c.positional == "none" else c.max_len,
        "max_output": MAX_OUTPUT,
        "top_k": TOP_K,
        "pad_id": Vocab.PAD,
        "bos_id": Vocab.BOS,
        "eos_id": Vocab.EOS,
        "unk_id": Vocab.UNK,
        "n_layers": c.n_decoder_layers,
        "n_heads": c.n_heads,
        "encoder": ENCODER_FILE,
        "decoder": DECODER_FILE,
    }


def export_onnx(
    model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, out_dir: str | Path
) -> dict[str, Path]:
    """Write the encoder graph, the decoder-step graph and the JSON into ``out_dir``.

    Uses torch.onnx.export with dynamo=True (torch.export, then onnxscript); S and t
    are dynamic. Returns the written paths by name: encoder, decoder, meta.
    """
    if model.config.n_decoder_layers == 0:
        raise ValueError(
            "the model has no decoder layers: no cross-attention to export"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    was_training, was_recording = model.training, model.recording_attention
    model.eval()
    # 1) the reference attention path, which keeps the weights the page draws
    model.record_attention(True)
    limit = model.config.max_len if model.config.positional != "none" else 512
    S = torch.export.Dim("S", min=1, max=limit)
    t = torch.export.Dim("t", min=1, max=limit)
    device = next(model.parameters()).device
    # 2) example inputs longer than 1: export specialises sizes of 0 and 1
    src = torch.tensor([[4, 5, 6, 7]], device=device)  # (1, S)
    tgt = torch.tensor([[Vocab.BOS, 4, 5]], device=device)  # (1, t)
    # torch.onnx logs a line per torchvision operator it cannot register; none is used
    onnx_log = logging.getLogger("torch.onnx")
    log_level = onnx_log.level
    onnx_log.setLevel(logging.ERROR)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # the recorded weights are plain attributes, not buffers; export says so
            warnings.simplefilter("ignore")
            memory, src_mask = model.encode(src)
            graphs = {
                "encoder": (
                    ENCODER_FILE, EncoderGraph(model), (src,), ["src"],
                    ["memory", "src_mask"], {"src": {1: S}},
                ),
                "decoder": (
                    DECODER_FILE, DecoderStep(model), (tgt, memory, src_mask),
                    ["tgt", "memory", "src_mask"], ["log_probs", "cross_attention"],
                    {"tgt": {1: t}, "memory": {1: S}, "src_mask": {3: S}},
                ),
            }  # fmt: skip
            paths = {}
            for name, (file, module, args, inputs, outputs, dynamic) in graphs.items():
                program = torch.onnx.export(
                    module, args, dynamo=True, opset_version=OPSET,
                    input_names=inputs, output_names=outputs,
                    dynamic_shapes=dynamic, external_data=False, verbose=False,
                )  # fmt: skip
                paths[name] = out / file
                program.save(str(paths[name]))
                _drop_debug_metadata(paths[name])
    finally:
        onnx_log.setLevel(log_level)
        model.record_attention(was_recording)
        model.train(was_training)
    # 3) the data the page needs besides the weights, compact
    paths["meta"] = out / META_FILE
    meta = translator_meta(model, src_vocab, tgt_vocab)
    paths["meta"].write_text(
        json.dumps(meta, ensure_ascii=False, separators=(",", ":")), encoding="utf8"
    )
    return paths


def _drop_debug_metadata(path: Path) -> None:
    """Remove what the exporter notes per node for debugging (the torch op, a stack
    trace with this machine's paths): a tenth of the file, and nothing runs on it."""
    import onnx

    model = onnx.load(str(path))
    for node in model.graph.node:
        del node.metadata_props[:]
    for info in [*model.graph.value_info, *model.graph.input, *model.graph.output]:
        del info.metadata_props[:]
    onnx.save(model, str(path))


def greedy_onnx(
    encoder, decoder, src_ids: list[int], meta: dict
) -> tuple[list[int], list[Tensor], list[Tensor]]:
    """Greedy decoding over two onnxruntime sessions (the loop the page runs).

    Returns the output ids (EOS included), each step's log-probabilities (V,) and
    cross-attention (L, H, S).
    """
    import numpy as np

    memory, src_mask = encoder.run(None, {"src": np.array([src_ids], dtype=np.int64)})
    ys, steps_logp, steps_attn = [meta["bos_id"]], [], []
    for _ in range(meta["max_output"]):
        feed = {"tgt": np.array([ys], dtype=np.int64), "memory": memory,
                "src_mask": src_mask}  # fmt: skip
        log_probs, cross = decoder.run(None, feed)
        steps_logp.append(torch.from_numpy(log_probs))
        steps_attn.append(torch.from_numpy(cross))
        ys.append(int(log_probs.argmax()))
        if ys[-1] == meta["eos_id"]:
            break
    return ys[1:], steps_logp, steps_attn
