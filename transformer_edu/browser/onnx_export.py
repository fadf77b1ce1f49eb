"""Trained models as ONNX graphs, for onnxruntime in a web page or in Python.

A translator is two graphs: an encoder (source ids -> every decoder layer's
cross-attention keys and values, and the source's padding mask: once per sentence) and
a decoder step with a KV cache (the newest token of K prefixes, and the keys and values
of their earlier positions -> each prefix's next-token log-probabilities, the
cross-attention of its newest position, every layer and head, and the keys and values
with the newest position added), plus a JSON file with what a page needs besides the
weights. K is dynamic, so beam search sends its K hypotheses in one call, their cached
keys and values reordered by the surviving parents first. Greedy decoding and beam
search over the graphs (``greedy_onnx``, ``beam_onnx``, ``GraphSession``) are the
loops the page runs in JavaScript (``static/translator.js``), written here once more
for the tests: over float32 graphs they equal ``decoding.greedy_decode`` and
``decoding.beam_search``.

- The toy model (chapter 10): ``export_onnx``, float32, its vocabularies and lexicon.
- The shipped Tatoeba model (chapter 12): ``export_tatoeba``, weights stored as int8
  (``quantize_int8``: the matrices dequantised once when the page loads them, the
  embedding tables by onnxruntime's quantiser) and the SentencePiece vocabulary for
  ``static/spm.js``.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from pathlib import Path

import torch
from torch import Tensor, nn

from ..decoding import length_penalty
from ..model.transformer import Transformer
from ..toy.data import Vocab

ENCODER_FILE = "encoder.onnx"
DECODER_FILE = "decoder_step.onnx"
META_FILE = "translator.json"
SPM_FILE = "spm.json"  # the Tatoeba model's SentencePiece vocabulary, for spm.js
OPSET = 18  # onnxruntime-web 1.2x runs it on its WASM backend
TOP_K = 5  # next-token candidates a trace shows (as translate(..., trace=True))
MAX_OUTPUT = 40  # most tokens the toy appends (translate's max_len)
EXTRA_OUTPUT = 50  # the Tatoeba model: at most source length + 50 (translate_batch)


class EncoderGraph(nn.Module):
    """The encoder, then what every decoder layer's cross-attention needs of its
    output: the keys and values, projected once per sentence.

    Shape: src (1, S) int64 -> memory_keys, memory_values (L, 1, H, S, Dh),
    src_mask (1, 1, 1, S) bool (True = may attend).
    """

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        memory, src_mask = self.model.encode(src)  # (1, S, D), (1, 1, 1, S)
        cache = self.model.decoder.new_cache(memory)  # one dict per decoder layer
        # every layer's keys and values, stacked: (L, 1, H, S, Dh) each
        keys = torch.stack([layer["memory_kv"][0] for layer in cache])
        values = torch.stack([layer["memory_kv"][1] for layer in cache])
        return keys, values, src_mask


class DecoderStep(nn.Module):
    """One step for K prefixes at once, with the KV cache: each prefix's newest token
    in, with every layer's self-attention keys and values of its P earlier positions
    (the page reorders them by the surviving parents); out come the next token's
    log-probabilities, the newest position's cross-attention, and the keys and values
    of P + 1 positions. The sentence's cross-attention keys and values come from the
    encoder graph, one row for all K. The generator gets a weight of its own, a MatMul
    rather than the tied Gemm that reads the embedding's table: every node reads a
    tensor of its own when int8 quantisation rewrites them (onnxruntime 1.32 also
    quantises the shared one correctly, measured; the copy costs no bytes in the int8
    file).

    Shape: tokens (K, 1) int64, past_keys and past_values (L, K, H, P, Dh),
    memory_keys and memory_values (L, 1, H, S, Dh), src_mask (1, 1, 1, S)
    -> log_probs (K, V), cross_attention (K, L, H, S), present_keys and
    present_values (L, K, H, P + 1, Dh).
    """

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model
        proj = model.generator.proj
        self.out_weight = nn.Parameter(proj.weight.detach().t().contiguous())  # (D, V)
        self.out_bias = nn.Parameter(proj.bias.detach().clone())  # (V,)

    def forward(
        self,
        tokens: Tensor,
        past_keys: Tensor,
        past_values: Tensor,
        memory_keys: Tensor,
        memory_values: Tensor,
        src_mask: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        cache = [
            {"self_kv": (past_keys[i], past_values[i]),
             "memory_kv": (memory_keys[i], memory_values[i])}
            for i in range(past_keys.size(0))
        ]  # fmt: skip
        # the newest token at position P; the cache holds the rest (memory: unused)
        out = self.model.decode(tokens, None, src_mask, cache, past_keys.size(3))
        logits = out[:, -1] @ self.out_weight + self.out_bias  # (K, V)
        # the reference path kept each layer's weights (record_attention is on)
        cross = [
            m.attn_weights[:, :, -1] for m in self.model.attention_modules()["cross"]
        ]
        # the cache with the newest position added: (L, K, H, P + 1, Dh) each
        keys = torch.stack([layer["self_kv"][0] for layer in cache])
        values = torch.stack([layer["self_kv"][1] for layer in cache])
        return logits.log_softmax(dim=-1), torch.stack(cross, dim=1), keys, values


def translator_meta(model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab) -> dict:
    """What the toy's page needs besides the graphs: vocabularies, lexicon, limits."""
    c = model.config
    return {
        "kind": "toy",
        "src_itos": src_vocab.itos,
        "tgt_itos": tgt_vocab.itos,
        # translate() segments over the source vocabulary; so does the page
        "lexicon": src_vocab.itos,
        # sources longer than this are refused (None: no positional encoding, no limit)
        "max_len": None if c.positional == "none" else c.max_len,
        "max_output": MAX_OUTPUT,
        **_common_meta(model),
    }


def _common_meta(model: Transformer) -> dict:
    c = model.config
    return {
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


def export_graphs(model: Transformer, out_dir: str | Path) -> dict[str, Path]:
    """Write the encoder graph and the decoder-step graph into ``out_dir`` (float32).

    Uses torch.onnx.export with dynamo=True (torch.export, then onnxscript); K, S and t
    are dynamic. Returns the written paths by name: encoder, decoder.
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
    K = torch.export.Dim("K", min=1, max=64)
    S = torch.export.Dim("S", min=1, max=limit)
    P = torch.export.Dim("P", min=0, max=limit - 1)
    device = next(model.parameters()).device
    # 2) example inputs longer than 1: export specialises sizes of 0 and 1
    src = torch.tensor([[4, 5, 6, 7]], device=device)  # (1, S)
    tokens = torch.tensor([[4], [5]], device=device)  # (K, 1)
    # torch.onnx logs a line per torchvision operator it cannot register; none is used
    onnx_log = logging.getLogger("torch.onnx")
    log_level = onnx_log.level
    onnx_log.setLevel(logging.ERROR)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # the recorded weights are plain attributes, not buffers; export says so
            warnings.simplefilter("ignore")
            memory_keys, memory_values, src_mask = EncoderGraph(model)(src)
            L, _, H, _, Dh = memory_keys.shape  # the cache's heads, as the model's
            past = torch.zeros(L, 2, H, 3, Dh, device=device)  # (L, K, H, P, Dh)
            kv = (past, past.clone())  # past keys and values: two inputs
            step_args = (tokens, *kv, memory_keys, memory_values, src_mask)
            past_dims = {1: K, 3: P}
            graphs = {
                "encoder": (
                    ENCODER_FILE, EncoderGraph(model), (src,), ["src"],
                    ["memory_keys", "memory_values", "src_mask"], {"src": {1: S}},
                ),
                "decoder": (
                    DECODER_FILE, DecoderStep(model), step_args,
                    ["tokens", "past_keys", "past_values", "memory_keys",
                     "memory_values", "src_mask"],
                    ["log_probs", "cross_attention", "present_keys", "present_values"],
                    {"tokens": {0: K}, "past_keys": past_dims,
                     "past_values": past_dims, "memory_keys": {3: S},
                     "memory_values": {3: S}, "src_mask": {3: S}},
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
    return paths


def _write_json(path: Path, data: dict) -> Path:
    path.write_text(
        json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf8"
    )
    return path


def export_onnx(
    model: Transformer, src_vocab: Vocab, tgt_vocab: Vocab, out_dir: str | Path
) -> dict[str, Path]:
    """The toy translator: both graphs (float32) and its JSON into ``out_dir``.
    Returns the written paths by name: encoder, decoder, meta."""
    paths = export_graphs(model, out_dir)
    meta = translator_meta(model, src_vocab, tgt_vocab)
    paths["meta"] = _write_json(Path(out_dir) / META_FILE, meta)
    return paths


INT8_BLOCK = 128  # weights per scale along a matrix's input dimension


def quantize_int8(path: Path) -> Path:
    """Rewrite the graph at ``path`` with int8 weights, in place: every matrix of a
    MatMul as 8-bit blocks of ``INT8_BLOCK`` weights with a scale each
    (``int8_weights_fp32_product``: dequantised once, when the session loads), and the
    embedding tables of the Gathers as int8 (onnxruntime's ``quantize_dynamic``).

    Weight-only, measured: ``quantize_dynamic`` on the MatMuls also quantises their
    inputs to 8 bits at run time, and onnxruntime on x86 and onnxruntime-web (WASM)
    then disagreed on 20 dev sentences by up to 6e-4 in a next-token probability
    (1.6e-3 with one scale per matrix): an input a hair from a rounding boundary
    rounds one way in one runtime and the other way in the other. Weight-only, they
    agree to 2e-6, at about the same size."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    plain = path.with_suffix(".fp32.onnx")
    path.replace(plain)
    root_log = logging.getLogger()  # the quantiser advises pre-processing on root
    level = root_log.level
    root_log.setLevel(logging.ERROR)
    try:
        int8_weights_fp32_product(plain)
        quantize_dynamic(str(plain), str(path), weight_type=QuantType.QInt8,
                         op_types_to_quantize=["Gather"])  # fmt: skip
    finally:
        root_log.setLevel(level)
        plain.unlink(missing_ok=True)
    _drop_debug_metadata(path)
    return path


def int8_weights_fp32_product(path: Path) -> None:
    """Rewrite, in place, each MatMul whose matrix is a weight (K, N) as int8 blocks
    of ``INT8_BLOCK`` rows with a float32 scale each (symmetric: scale = the block's
    largest |w| / 127), and the float32 matrix rebuilt from them by Cast, Mul and
    Reshape. Those three nodes have only constant inputs, so onnxruntime's constant
    folding computes them once, when the session is created: the file holds one byte
    a weight, and every step multiplies in float32 as the unquantised graph does.

    Departs from onnxruntime's ``MatMulNBitsQuantizer`` (weight-only too, the same
    blocks), measured: its MatMulNBits dequantises the 8-bit weights at every call
    (92 % of a step's kernel time), 4.95 ms a decoder step against 0.45 ms this way
    (onnxruntime 1.32, one thread, greedy, a prefix of 10, an AMD EPYC with AVX-512:
    ``scripts/profile_onnx_step.py``); in headless Chromium the page's greedy
    translation of a 15-piece dev sentence went from 86.5 to 21.7 ms (median), beam 4
    from 161.4 to 44.1 ms (``scripts/bench_browser.py --before``). The graph costs
    the page about 0.3 s more at load, when the matrices are rebuilt."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    weights = {w.name: w for w in graph.initializer}
    nodes = []
    for node in graph.node:
        name = node.input[1] if node.op_type == "MatMul" else None
        if name in weights:
            w = numpy_helper.to_array(weights[name])
            if w.ndim == 2 and w.shape[0] % INT8_BLOCK == 0:
                k, n = w.shape
                blocks = w.reshape(k // INT8_BLOCK, INT8_BLOCK, n)
                scale = np.abs(blocks).max(axis=1, keepdims=True) / 127.0
                scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
                q = np.clip(np.rint(blocks / scale), -127, 127).astype(np.int8)
                graph.initializer.remove(weights.pop(name))
                graph.initializer.extend([
                    numpy_helper.from_array(q, f"{name}_int8"),
                    numpy_helper.from_array(scale, f"{name}_scale"),
                    numpy_helper.from_array(np.array([k, n], np.int64), f"{name}_shape"),
                ])  # fmt: skip
                nodes += [
                    helper.make_node(
                        "Cast",
                        [f"{name}_int8"],
                        [f"{name}_float"],
                        to=TensorProto.FLOAT,
                    ),
                    helper.make_node(
                        "Mul", [f"{name}_float", f"{name}_scale"], [f"{name}_blocks"]
                    ),
                    helper.make_node(
                        "Reshape", [f"{name}_blocks", f"{name}_shape"], [name]
                    ),
                ]
        nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, str(path))


def tatoeba_meta(model: Transformer, spm_file: str = SPM_FILE) -> dict:
    """What chapter 12's page needs besides the graphs and the vocabulary file."""
    from ..tatoeba.data import MAX_JA_CHARS

    c = model.config
    return {
        "kind": "tatoeba",
        "spm": spm_file,
        "max_chars": MAX_JA_CHARS,  # longest sentence the model was trained on
        "max_len": c.max_len,  # positional encoding: most tokens on either side
        "extra_output": EXTRA_OUTPUT,  # at most source length + this many tokens
        **_common_meta(model),
    }


def export_tatoeba(
    out_dir: str | Path,
    model: Transformer | None = None,
    tok=None,
    quantize: bool = True,
) -> dict[str, Path]:
    """The Tatoeba translator (default: the shipped model): both graphs, int8 unless
    ``quantize=False``, the SentencePiece vocabulary for spm.js and the JSON; with the
    files' sizes in the JSON (the page says how much it will fetch).
    Returns the written paths by name: encoder, decoder, spm, meta."""
    from ..tatoeba.checkpoint import load_tatoeba_checkpoint
    from .spm_vocab import spm_vocab

    if model is None:
        model, tok, _ = load_tatoeba_checkpoint()
    out = Path(out_dir)
    paths = export_graphs(model.cpu(), out)
    if quantize:
        for name in ("encoder", "decoder"):
            quantize_int8(paths[name])
    paths["spm"] = _write_json(out / SPM_FILE, spm_vocab(tok.model_proto))
    meta = tatoeba_meta(model)
    meta["int8"] = quantize
    meta["bytes"] = {p.name: p.stat().st_size for p in paths.values()}
    paths["meta"] = _write_json(out / META_FILE, meta)
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


# --- decoding over the graphs: the loops of static/translator.js -------------------


class GraphSession:
    """One source sentence over the two graphs: the encoder runs once; ``step`` runs
    the newest token of each live prefix with the KV cache, after moving the cache's
    rows to the prefixes' parents (``parents[i]``: the row of the previous step that
    prefix ``i`` extends; None at the first step). The page's ``graphStep``."""

    def __init__(self, encoder, decoder, src_ids: list[int]):
        import numpy as np

        self.decoder = decoder
        src = {"src": np.array([src_ids], dtype=np.int64)}
        self.memory_keys, self.memory_values, self.src_mask = encoder.run(None, src)
        L, _, H, _, Dh = self.memory_keys.shape
        empty = np.zeros((L, 1, H, 0, Dh), dtype=np.float32)  # no past yet
        self.past = (empty, empty)

    def step(self, prefixes: list[list[int]], parents: list[int] | None):
        """log_probs (K, V) and cross-attention (K, L, H, S) of K prefixes."""
        import numpy as np

        keys, values = self.past
        if parents is not None:  # each prefix continues its parent's keys and values
            keys, values = keys[:, parents], values[:, parents]
        log_probs, cross, keys, values = self.decoder.run(None, {
            "tokens": np.array([[y[-1]] for y in prefixes], dtype=np.int64),
            "past_keys": keys, "past_values": values,
            "memory_keys": self.memory_keys, "memory_values": self.memory_values,
            "src_mask": self.src_mask,
        })  # fmt: skip
        self.past = (keys, values)
        return log_probs, cross


def greedy_onnx(
    encoder, decoder, src_ids: list[int], meta: dict, max_output: int | None = None
) -> tuple[list[int], list[Tensor], list[Tensor]]:
    """Greedy decoding over two onnxruntime sessions (the loop the page runs).

    Returns the output ids (EOS included), each step's log-probabilities (V,) and
    cross-attention (L, H, S).
    """
    limit = max_output if max_output is not None else meta["max_output"]
    session = GraphSession(encoder, decoder, src_ids)
    ys, steps_logp, steps_attn = [meta["bos_id"]], [], []
    for n in range(limit):
        log_probs, cross = session.step([ys], None if n == 0 else [0])
        steps_logp.append(torch.from_numpy(log_probs[0]))
        steps_attn.append(torch.from_numpy(cross[0]))
        ys.append(int(log_probs[0].argmax()))
        if ys[-1] == meta["eos_id"]:
            break
    return ys[1:], steps_logp, steps_attn


def beam_onnx(
    encoder,
    decoder,
    src_ids: list[int],
    meta: dict,
    beam_size: int = 4,
    alpha: float = 0.0,
    max_len: int = 50,
) -> list[tuple[list[int], float]]:
    """``decoding.beam_search`` over two onnxruntime sessions, step for step the same
    rules (the loop the page runs): finished hypotheses (ids, EOS included) with their
    length-penalised score, best first."""
    import numpy as np

    session = GraphSession(encoder, decoder, src_ids)
    bos, eos = meta["bos_id"], meta["eos_id"]
    ys, scores, parents = [[bos]], [0.0], None
    finished: list[tuple[list[int], float]] = []
    best_done, lp_max = -math.inf, length_penalty(max_len, alpha)
    for _ in range(max_len):
        logp = session.step(ys, parents)[0].astype(np.float32)  # (k, V)
        total = (np.array(scores, dtype=np.float32)[:, None] + logp).ravel()
        # the 2K best, best first; ties by index, as torch.topk on the CPU
        idx = np.argsort(-total, kind="stable")[: min(2 * beam_size, total.size)]
        keep = []
        for i, j in enumerate(idx):
            r, tok, s = int(j) // logp.shape[1], int(j) % logp.shape[1], float(total[j])
            if tok == eos and i < beam_size:  # finished, if it made the top K
                hyp = ys[r][1:] + [tok]
                finished.append((hyp, s / length_penalty(len(hyp), alpha)))
                best_done = max(best_done, finished[-1][1])
            elif tok != eos and len(keep) < beam_size:
                keep.append((r, tok, s))
        keep = [kp for kp in keep if kp[2] / lp_max > best_done]  # can still win
        if not keep:
            break
        ys = [ys[r] + [tok] for r, tok, _ in keep]
        scores = [s for _, _, s in keep]
        parents = [r for r, _, _ in keep]
    else:
        finished += [
            (y[1:], s / length_penalty(len(y) - 1, alpha))
            for y, s in zip(ys, scores, strict=True)
        ]
    return sorted(finished, key=lambda h: -h[1])
