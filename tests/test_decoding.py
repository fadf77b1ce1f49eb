import pytest
import torch
from _toy import tiny_trained

from transformer_edu.data import Vocab
from transformer_edu.decoding import beam_search, greedy_decode, translate
from transformer_edu.model import make_model


def _src(sv, pairs, n):
    from transformer_edu.data import make_batch

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
