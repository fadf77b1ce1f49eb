"""Tests for transformer_edu/browser/onnx_export.py: onnxruntime on the exported graphs
equals PyTorch on the whole held-out split (greedy and beam search), the Tatoeba
model's int8 export, and the CLI's bad inputs."""

from __future__ import annotations

import json
import math

import pytest
import torch

from transformer_edu.browser.onnx_export import (
    DECODER_FILE,
    ENCODER_FILE,
    META_FILE,
    SPM_FILE,
    beam_onnx,
    greedy_onnx,
)
from transformer_edu.cli import main
from transformer_edu.decoding import beam_search, greedy_decode, translate
from transformer_edu.toy.checkpoint import toy_model
from transformer_edu.toy.data import Vocab, load_corpus

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The trained toy model, exported by the CLI; its two sessions and JSON."""
    out = tmp_path_factory.mktemp("translator")
    assert main(["export-onnx", "--out", str(out)]) == 0
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    enc = ort.InferenceSession(str(out / ENCODER_FILE), opts)
    dec = ort.InferenceSession(str(out / DECODER_FILE), opts)
    meta = json.loads((out / META_FILE).read_text(encoding="utf8"))
    return out, enc, dec, meta


def test_the_json_holds_what_the_page_needs(exported):
    out, _, _, meta = exported
    model, sv, tv = toy_model(progress=False)
    assert meta["src_itos"] == sv.itos and meta["tgt_itos"] == tv.itos
    assert meta["lexicon"] == sv.itos  # what translate() segments over
    assert meta["max_len"] == model.config.max_len
    ids = (meta["pad_id"], meta["bos_id"], meta["eos_id"], meta["unk_id"])
    assert ids == (Vocab.PAD, Vocab.BOS, Vocab.EOS, Vocab.UNK)
    assert meta["n_layers"] == model.config.n_decoder_layers  # cross-attention layers
    assert meta["n_heads"] == model.config.n_heads
    sizes = {p.name: p.stat().st_size for p in out.iterdir()}
    assert sum(sizes.values()) < 4_000_000, sizes  # fp32 weights, stored once


def test_onnxruntime_equals_pytorch_on_the_held_out_split(exported):
    _, enc, dec, meta = exported
    model, sv, tv = toy_model(progress=False)
    model = model.cpu().eval()
    pairs = load_corpus("test")
    worst_logp = worst_attn = 0.0
    for pair in pairs:
        src_ids = sv.encode(pair.src)
        want = greedy_decode(model, torch.tensor([src_ids])).tokens[0]
        got, logps, attns = greedy_onnx(enc, dec, src_ids, meta)
        assert got == want, (
            f"{pair.ja}: onnx {tv.decode(got)} != torch {tv.decode(want)}"
        )
        # every step's distribution and cross-attention, from one teacher-forced pass
        model.record_attention(True)
        with torch.no_grad():
            logits = model(
                torch.tensor([src_ids]), torch.tensor([[Vocab.BOS, *want[:-1]]])
            )
        cross = torch.stack([w[0] for w in model.attention_weights()["cross"]])
        model.record_attention(False)
        ref_logp = logits[0].log_softmax(-1)  # (T, V)
        worst_logp = max(worst_logp, (torch.stack(logps) - ref_logp).abs().max().item())
        ref_attn = cross.permute(2, 0, 1, 3)  # (L, H, T, S) -> (T, L, H, S)
        worst_attn = max(worst_attn, (torch.stack(attns) - ref_attn).abs().max().item())
    assert worst_logp < 1e-4 and worst_attn < 1e-5, (worst_logp, worst_attn)


def test_the_graphs_give_translate_trace_views(exported):
    _, enc, dec, meta = exported
    model, sv, tv = toy_model(progress=False)
    tr = translate(model, "私は太郎です", sv, tv, trace=True)
    got, logps, attns = greedy_onnx(enc, dec, sv.encode(tr.tokens), meta)
    assert tv.decode(got[:-1]) == ["I", "am", "Taro"]
    for step, logp, attn in zip(tr.steps, logps, attns, strict=True):
        probs, ids = logp.exp().topk(meta["top_k"])
        assert ids.tolist() == step.top_ids
        torch.testing.assert_close(
            probs, torch.tensor(step.top_probs), atol=1e-4, rtol=0
        )
        torch.testing.assert_close(attn, step.cross_attention, atol=1e-5, rtol=0)


def test_export_cli_bad_inputs_exit_2_with_one_line(capsys, tmp_path):
    a_file = tmp_path / "not_a_folder"
    a_file.write_text("x")
    cases = [
        (["--out", str(a_file)], "is a file, not a folder"),
        (["--checkpoint", str(tmp_path / "missing.pt")], "no checkpoint at"),
    ]
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint")
    cases.append((["--checkpoint", str(corrupt)], "not a readable checkpoint"))
    for argv, message in cases:
        code = main(["export-onnx", "--out", str(tmp_path / "out"), *argv])
        out, err = capsys.readouterr()
        assert code == 2 and out == "", argv
        assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_over_the_graphs_is_beam_search(exported, alpha):
    """The loop the page runs (beam_onnx, as static/translator.js: the KV cache
    reordered by the surviving parents, 2K candidates a step, the alpha-aware bound)
    gives decoding.beam_search's hypotheses and scores on float32 graphs."""
    _, enc, dec, meta = exported
    model, sv, _ = toy_model(progress=False)
    model = model.cpu().eval()
    pairs = load_corpus("test")
    for pair in pairs[:: max(1, len(pairs) // 40)]:
        src_ids = sv.encode(pair.src)
        want = beam_search(model, torch.tensor([src_ids]), 4, alpha=alpha, max_len=40)
        got = beam_onnx(enc, dec, src_ids, meta, 4, alpha, max_len=40)
        assert got[0][0] == want[0][0], pair.ja
        # every finished hypothesis, each with its score
        got_scores, want_scores = dict(map(_key, got)), dict(map(_key, want))
        assert got_scores.keys() == want_scores.keys(), pair.ja
        torch.testing.assert_close(
            torch.tensor([got_scores[h] for h in want_scores]),
            torch.tensor(list(want_scores.values())), atol=1e-4, rtol=0,
        )  # fmt: skip


def _key(hyp: tuple[list[int], float]) -> tuple[tuple[int, ...], float]:
    return tuple(hyp[0]), hyp[1]


@pytest.fixture(scope="module")
def tatoeba_exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("tatoeba")
    assert main(["export-onnx", "--corpus", "tatoeba", "--out", str(out)]) == 0
    return out


def test_the_tatoeba_model_exports_to_int8_graphs_that_translate(tatoeba_exported):
    import onnx

    from transformer_edu.tatoeba.data import default_tokenizer, load_tatoeba

    out = tatoeba_exported
    meta = json.loads((out / META_FILE).read_text(encoding="utf8"))
    assert meta["kind"] == "tatoeba" and meta["int8"] and meta["spm"] == SPM_FILE
    graphs = meta["bytes"][ENCODER_FILE] + meta["bytes"][DECODER_FILE]
    assert graphs <= 13_000_000, graphs  # the budget for both graphs
    for name in (ENCODER_FILE, DECODER_FILE):
        proto = onnx.load(str(out / name))
        ops = {n.op_type for n in proto.graph.node}
        # weight-only int8: 8-bit MatMul weights, int8 embedding tables; no run-time
        # quantisation of activations (which the page and Python round differently)
        assert "DequantizeLinear" in ops, ops  # the embedding tables'
        assert not ops & {"DynamicQuantizeLinear", "MatMulInteger", "MatMulNBits"}, ops
        sizes = {
            i.name: (i.data_type, math.prod(i.dims)) for i in proto.graph.initializer
        }
        plain = [n.name for n in proto.graph.node
                 if n.op_type in ("MatMul", "Gemm") and set(n.input) & set(sizes)]  # fmt: skip
        assert not plain, plain  # every weight matrix stored as int8 blocks
        int8s = sum(n for t, n in sizes.values() if t == onnx.TensorProto.INT8)
        floats = sum(n for t, n in sizes.values() if t == onnx.TensorProto.FLOAT)
        assert floats < 0.05 * int8s, (floats, int8s)  # scales, biases, norms
        # the session dequantises the matrices once, when it loads them: in its
        # optimised graph no node computes on an int8 matrix but the embedding lookup
        opts = ort.SessionOptions()
        opts.optimized_model_filepath = str(out / f"{name}.optimised")
        ort.InferenceSession(str(out / name), opts)
        optimised = onnx.load(opts.optimized_model_filepath)
        int8 = {i.name for i in optimised.graph.initializer
                if i.data_type == onnx.TensorProto.INT8}  # fmt: skip
        at_run_time = {n.op_type for n in optimised.graph.node if set(n.input) & int8}
        assert at_run_time <= {"Gather", "DequantizeLinear"}, at_run_time
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    enc = ort.InferenceSession(str(out / ENCODER_FILE), opts)
    dec = ort.InferenceSession(str(out / DECODER_FILE), opts)
    tok = default_tokenizer()
    for pair in load_tatoeba("dev")[:5]:
        ids = tok.encode(pair.ja)
        got, _, _ = greedy_onnx(enc, dec, ids, meta, len(ids) + meta["extra_output"])
        assert got[-1] == meta["eos_id"] and tok.decode(got).strip(), pair.ja
        best = beam_onnx(enc, dec, ids, meta, 4, 0.6, len(ids) + meta["extra_output"])
        assert best and best[0][0][-1] == meta["eos_id"]
