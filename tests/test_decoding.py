import pytest
import torch
from _toy import tiny_trained

from transformer_edu.decoding import (
    beam_search,
    beam_search_batch,
    greedy_decode,
    reorder_cache,
    translate,
)
from transformer_edu.model.transformer import make_model
from transformer_edu.toy.data import Vocab


def _src(sv, pairs, n):
    from transformer_edu.toy.data import make_batch

    return make_batch(pairs[:n], sv, Vocab(["<pad>", "<bos>", "<eos>", "<unk>"])).src


def test_greedy_with_cache_equals_greedy_without():
    model, sv, tv, _, pairs = tiny_trained()
    src = _src(sv, pairs, 16)
    cached = greedy_decode(model, src, use_cache=True, max_len=12)
    plain = greedy_decode(model, src, use_cache=False, max_len=12)
    assert cached.tokens == plain.tokens
    assert cached.log_probs == pytest.approx(plain.log_probs, abs=1e-4)


def test_cache_equals_plain_on_an_untrained_model_for_64_steps():
    torch.manual_seed(0)
    model = make_model(30, 30, n_layers=2, d_model=32, n_heads=4, d_ff=64, max_len=80)
    src = torch.randint(4, 30, (2, 9))
    kw = dict(max_len=64, stop_at_eos=False)
    a = greedy_decode(model, src, use_cache=True, **kw)
    b = greedy_decode(model, src, use_cache=False, **kw)
    assert a.tokens == b.tokens and len(a.tokens[0]) == 64


def test_greedy_stops_at_eos_and_scores_are_log_probs():
    model, sv, tv, _, pairs = tiny_trained()
    out = greedy_decode(model, _src(sv, pairs, 4), max_len=20)
    for ids, lp in zip(out.tokens, out.log_probs, strict=True):
        assert ids[-1] == Vocab.EOS and Vocab.EOS not in ids[:-1]
        assert lp <= 0


def test_trace_records_each_step():
    model, sv, tv, _, pairs = tiny_trained()
    out = greedy_decode(model, _src(sv, pairs, 1), trace=True, top_k=3, max_len=20)
    assert len(out.steps) == len(out.tokens[0])
    first = out.steps[0]
    assert first.prefix == [Vocab.BOS] and first.chosen == first.top_ids[0]
    assert len(first.top_ids) == 3 and first.top_probs == sorted(first.top_probs)[::-1]
    L, H = len(model.decoder.layers), model.config.n_heads
    assert first.cross_attention.shape == (L, H, len(pairs[0].src))
    torch.testing.assert_close(first.cross_attention.sum(-1), torch.ones(L, H))
    assert out.steps[1].prefix == [Vocab.BOS, out.tokens[0][0]]
    with pytest.raises(ValueError, match="one sentence"):
        greedy_decode(model, _src(sv, pairs, 2), trace=True)


def test_beam_search_is_at_least_as_probable_as_greedy():
    model, sv, tv, _, pairs = tiny_trained()
    for p in pairs[:12]:
        src = torch.tensor([sv.encode(p.src)])
        greedy = greedy_decode(model, src, max_len=20)
        beams = beam_search(model, src, beam_size=4, max_len=20)
        assert beams[0][1] >= greedy.log_probs[0] - 1e-4, p.ja
        assert [s for _, s in beams] == sorted((s for _, s in beams), reverse=True)
        one = beam_search(model, src, beam_size=1, max_len=20)[0]
        assert one[0] == greedy.tokens[0]  # a beam of one is greedy decoding


def test_translate_reports_unknown_words_and_rejects_bad_input():
    model, sv, tv, _, pairs = tiny_trained()
    out = translate(model, "私はピカチュウです", sv, tv)
    assert out.unknown == ["ピカチュウ"] and out.tokens == [
        "私",
        "は",
        "ピカチュウ",
        "です",
    ]
    with pytest.raises(ValueError, match="empty"):
        translate(model, "  。", sv, tv)
    with pytest.raises(ValueError, match="every word is unknown"):
        translate(model, "ピカチュウ", sv, tv)
    with pytest.raises(ValueError, match="more than the model's max_len=32"):
        translate(model, "私は" * 20 + "太郎です", sv, tv)


@pytest.mark.parametrize("space", [" ", "\u3000"])
def test_translate_accepts_spaces_between_words(space):
    model, sv, tv, _, _ = tiny_trained()
    spaced = translate(model, f"私は{space}太郎です", sv, tv)
    plain = translate(model, "私は太郎です", sv, tv)
    assert spaced.tokens == ["私", "は", "太郎", "です"] and spaced.unknown == []
    assert spaced.text == plain.text


# --- the length penalty (issue 12) -------------------------------------------------


def test_length_penalty_against_hand_computed_values():
    from transformer_edu.decoding import length_penalty

    # ((5 + |Y|) / 6) ** 0.6: |Y| = 1 -> 1; 7 -> 2 ** 0.6; 10 -> 2.5 ** 0.6
    assert length_penalty(1, 0.6) == pytest.approx(1.0)
    assert length_penalty(7, 0.6) == pytest.approx(1.5157166, abs=1e-7)
    assert length_penalty(10, 0.6) == pytest.approx(1.7328621, abs=1e-7)
    assert length_penalty(5, 0.6) == pytest.approx(1.3586552, abs=1e-7)
    assert length_penalty(37, 0.0) == 1.0


class _ScriptedModel(torch.nn.Module):
    """A stand-in for Transformer whose next-token probabilities are a fixed table of
    the prefix, so a beam search can be worked out by hand. Ids: 2 EOS, 3 a, 4 b, 5 c.

    After BOS: EOS .35, a .29, b .36. a a a a EOS has P = .29 x .99^4 (a then a with
    .99 each, EOS after four a's with .99); b... never ends (b or c, .5 each).
    """

    V = 6

    @staticmethod
    def table(prefix: tuple[int, ...]) -> dict[int, float]:
        if not prefix:
            return {Vocab.EOS: 0.35, 3: 0.29, 4: 0.36}
        if set(prefix) == {3}:
            if len(prefix) < 4:
                return {3: 0.99, Vocab.EOS: 0.005, 4: 0.005}
            return {Vocab.EOS: 0.99, 3: 0.01}
        return {4: 0.5, 5: 0.5}

    def encode(self, src):
        return torch.zeros(1, src.size(1), 1), torch.ones(1, 1, 1, src.size(1)).bool()

    def decode(self, ys, memory, src_mask):
        probs = torch.full((ys.size(0), ys.size(1), self.V), 1e-12)
        for k, row in enumerate(ys.tolist()):
            for tok, p in self.table(tuple(row[1:])).items():
                probs[k, -1, tok] = p
        return probs.log()  # the generator below is the identity: these are logits

    def generator(self, x):
        return x


def test_beam_search_length_penalty_prefers_the_longer_hypothesis():
    """Without a penalty the one-token output (P .35) beats a a a a EOS
    (P .29 x .99^4 = .2786); with α = 0.6 the scores are log P / lp:
    log .35 / 1 = -1.0498 against log .2786 / (10/6) ** .6 = -1.2781 / 1.3586 = -0.9407.
    """
    src = torch.zeros(1, 3, dtype=torch.long)
    kw = dict(beam_size=3, max_len=10, use_cache=False)  # the table reads the prefix
    plain = beam_search(_ScriptedModel(), src, alpha=0.0, **kw)
    assert plain[0][0] == [Vocab.EOS]
    assert plain[0][1] == pytest.approx(-1.049822, abs=1e-5)
    assert [3, 3, 3, 3, Vocab.EOS] not in [h for h, _ in plain]
    pen = beam_search(_ScriptedModel(), src, alpha=0.6, **kw)
    assert pen[0][0] == [3, 3, 3, 3, Vocab.EOS]
    assert pen[0][1] == pytest.approx(-0.940692, abs=1e-5)
    assert pen[1] == ([Vocab.EOS], pytest.approx(-1.049822, abs=1e-5))


# --- beam search with the KV cache (issue 30) -------------------------------------


def _same_hyps(a, b):
    """The same hypotheses in the same order, scores equal to float32 rounding (the
    paths sum the same log-probabilities computed by different kernels)."""
    assert [h for h, _ in a] == [h for h, _ in b]
    assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=1e-4)


@pytest.mark.parametrize(("K", "alpha"), [(4, 0.0), (4, 0.6), (16, 0.0)])
def test_cached_and_batched_beam_search_equal_the_uncached_on_the_toy_test_set(
    K, alpha
):
    """The readable reference (no cache, one sentence), the same with the cache, and
    the batched fast path find the same hypotheses, in the same order, on every
    sentence of the toy model's test split."""
    from transformer_edu.toy.checkpoint import toy_model
    from transformer_edu.toy.data import load_corpus, make_batch

    model, sv, tv = toy_model(progress=False)
    pairs = load_corpus("test")
    batched = beam_search_batch(model, make_batch(pairs, sv, tv).src, K,
                                alpha=alpha, max_len=40)  # fmt: skip
    for p, fast in zip(pairs, batched, strict=True):
        src = torch.tensor([sv.encode(p.src)])
        ref = beam_search(model, src, K, alpha=alpha, max_len=40, use_cache=False)
        cached = beam_search(model, src, K, alpha=alpha, max_len=40)
        _same_hyps(cached, ref)
        _same_hyps(fast, ref)


def test_batched_beam_search_on_a_tatoeba_sample_equals_the_uncached():
    """The shipped model, 20 dev sentences of every length, beam 4 with α = 0.6 and
    α = 0: translate_batch's fast path (two batches, per-sentence length limits)
    gives the reference's translation of each."""
    from transformer_edu.tatoeba.checkpoint import load_tatoeba_checkpoint
    from transformer_edu.tatoeba.data import load_tatoeba, normalise
    from transformer_edu.tatoeba.translate import translate_batch

    model, tok, _ = load_tatoeba_checkpoint()
    dev = sorted(load_tatoeba("dev"), key=lambda p: len(p.ja))
    ja = [p.ja for p in dev[:: len(dev) // 20][:20]]
    for alpha in (0.6, 0.0):
        fast = translate_batch(model, tok, ja, 4, alpha, beam_rows=40)
        for s, out in zip(ja, fast, strict=True):
            src = torch.tensor([tok.encode(normalise(s))])
            ref = beam_search(model, src, 4, alpha=alpha, max_len=src.size(1) + 50,
                              use_cache=False)  # fmt: skip
            assert out == tok.decode(ref[0][0]), (alpha, s)


def test_reorder_cache_takes_each_row_from_its_parent():
    k = torch.arange(3.0)[:, None, None, None].expand(3, 2, 4, 5)  # row r holds r
    cache = [{"self_kv": (k, -k), "memory_kv": (k + 10, k + 20)}]
    reorder_cache(cache, torch.tensor([2, 2, 0]))
    assert cache[0]["self_kv"][0][:, 0, 0, 0].tolist() == [2, 2, 0]
    assert cache[0]["self_kv"][1][:, 0, 0, 0].tolist() == [-2, -2, 0]
    assert cache[0]["memory_kv"][0][:, 0, 0, 0].tolist() == [12, 12, 10]
    reorder_cache(cache, torch.tensor([1, 0, 2]), memory=False)
    assert cache[0]["self_kv"][0][:, 0, 0, 0].tolist() == [2, 2, 0]
    assert cache[0]["memory_kv"][0][:, 0, 0, 0].tolist() == [12, 12, 10]


def test_a_cache_not_reordered_after_reselection_changes_the_search():
    """Without the reorder, each row keeps the keys/values of the prefix that used to
    sit there: the cached search then differs from the reference (the classic bug)."""
    import transformer_edu.decoding as decoding

    model, sv, tv, _, pairs = tiny_trained()
    srcs = [torch.tensor([sv.encode(p.src)]) for p in pairs[:30]]
    kw = dict(beam_size=4, max_len=20)
    right = [beam_search(model, s, **kw) for s in srcs]
    real = decoding.reorder_cache

    def forgetful(cache, order, memory=True):  # the bug: each row stays where it was
        rows = cache[0]["self_kv"][0].size(0)  # (only the first step's one is copied)
        return real(cache, torch.arange(len(order)).clamp(max=rows - 1))

    decoding.reorder_cache = forgetful
    try:
        wrong = [beam_search(model, s, **kw) for s in srcs]
    finally:
        decoding.reorder_cache = real

    def differ(a, b):
        return [h for h, _ in a] != [h for h, _ in b] or any(
            abs(x - y) > 1e-3 for (_, x), (_, y) in zip(a, b, strict=True)
        )

    assert sum(differ(w, r) for w, r in zip(wrong, right, strict=True)) >= 3


def test_the_beam_keeps_k_live_prefixes_when_some_candidates_end():
    """2K candidates: an EOS among the first K finishes, and the beam is still filled
    with K prefixes that did not end. After BOS the best are b (.36), EOS (.35) and
    a (.29): with K = 2, EOS finishes and b and a stay live (with only the K best
    candidates, b alone would)."""
    src = torch.zeros(1, 3, dtype=torch.long)
    model = _ScriptedModel()
    seen = []
    decode = model.decode

    def spy(ys, memory, src_mask):
        seen.append(ys.size(0))
        return decode(ys, memory, src_mask)

    model.decode = spy
    found = beam_search(model, src, beam_size=2, alpha=0.6, max_len=10,
                        use_cache=False)  # fmt: skip
    assert seen[:2] == [1, 2] and [Vocab.EOS] in [h for h, _ in found]


def test_beam_search_batch_checks_its_arguments():
    model, sv, tv, _, pairs = tiny_trained()
    src = _src(sv, pairs, 2)
    with pytest.raises(ValueError, match="max_len has 3 limits for 2 sentences"):
        beam_search_batch(model, src, 4, max_len=[10, 10, 10])
    with pytest.raises(ValueError, match="beam_size=0 must be at least 1"):
        beam_search_batch(model, src, 0)


# --- the meta device: tensors made on the wrong device (issue 12) ------------------


@torch.no_grad()
def test_decoding_steps_run_on_the_meta_device():
    """A tensor made on the CPU by mistake (a mask, positions, the cache) raises when
    it meets meta tensors, so this catches it without a GPU. A whole decode cannot run
    on meta: it reads the chosen ids back into Python (.tolist(), bool()) and a meta
    tensor has no values. So: the steps, with and without the cache, and beam search's
    batch of prefixes; greedy_decode runs its loop and fails only when reading back."""
    from transformer_edu.decoding import _next_log_probs

    torch.manual_seed(0)
    model = make_model(30, 30, n_layers=2, d_model=32, n_heads=4, d_ff=64)
    model = model.to("meta").eval()
    src = torch.randint(4, 30, (2, 7)).to("meta")
    memory, src_mask = model.encode(src)
    assert memory.is_meta and src_mask.is_meta
    ys = torch.full((2, 1), Vocab.BOS, device="meta")
    cache = model.decoder.new_cache()
    for _ in range(3):
        cached = _next_log_probs(model, ys, memory, src_mask, cache)
        plain = _next_log_probs(model, ys, memory, src_mask, None)
        ys = torch.cat([ys, cached.argmax(dim=-1)[:, None]], dim=1)
    assert cached.is_meta and plain.shape == cached.shape == (2, 30)
    one, one_mask = model.encode(src[:1])
    K = ys.size(0)
    logp = _next_log_probs(model, ys, one.expand(K, -1, -1),
                           one_mask.expand(K, -1, -1, -1), None)  # fmt: skip
    top, idx = logp.flatten().topk(3)
    assert top.is_meta and idx.shape == (3,)
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        greedy_decode(model, src, max_len=3, stop_at_eos=False)
