"""Tests for transformer_edu.model.seq2seq: GRU encoder-decoders with/without attention."""

import pytest
import torch
import torch.nn.functional as F

from transformer_edu.model.seq2seq import (
    SCORE_FUNCTIONS,
    AdditiveScore,
    Attention,
    GeneralScore,
    GRUEncoder,
    Seq2Seq,
)

PAD, BOS, EOS = 0, 1, 2
VARIANTS = [None, "dot", "general", "additive"]
SCORES = ["dot", "general", "additive"]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models gain nothing from threads and slow down a lot on a busy CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def toy_batch(seed=0, B=4, src_vocab=11, tgt_vocab=13):
    """Right-padded src (B, S) with lengths 5, 3, 1, 4 and tgt_in (B, T) from BOS."""
    g = torch.Generator().manual_seed(seed)
    lengths = [5, 3, 1, 4][:B]
    src = torch.zeros(B, max(lengths), dtype=torch.long)
    for i, n in enumerate(lengths):
        src[i, :n] = torch.randint(3, src_vocab, (n,), generator=g)
    tgt_in = torch.randint(3, tgt_vocab, (B, 6), generator=g)
    tgt_in[:, 0] = BOS
    tgt_in[1, 4:] = PAD
    return src, tgt_in


def model(attention, seed=0, **kw):
    torch.manual_seed(seed)
    kw = {"emb_dim": 16, "hidden_dim": 24, **kw}
    return Seq2Seq(11, 13, attention=attention, **kw)


def reverse_task(n=32, vocab=12, seed=0):
    """n random sequences of 3-6 ids; the target is the source reversed, then EOS."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, 7, (n,), generator=g).tolist()
    S = max(lengths)
    src = torch.zeros(n, S, dtype=torch.long)
    tgt = torch.zeros(n, S + 2, dtype=torch.long)  # BOS + S + EOS
    for i, n_i in enumerate(lengths):
        s = torch.randint(4, vocab, (n_i,), generator=g)
        src[i, :n_i] = s
        tgt[i, 0], tgt[i, 1 : n_i + 1], tgt[i, n_i + 1] = BOS, s.flip(0), EOS
    return src, tgt[:, :-1], tgt[:, 1:]


def train(m, src, tgt_in, tgt_out, steps=100, lr=1e-2):
    opt = torch.optim.Adam(m.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        logits = m(src, tgt_in)  # (B, T, V)
        loss = F.cross_entropy(
            logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


# --- shapes and gradients ---------------------------------------------------------


def test_encoder_shapes_and_zero_states_at_pad():
    src, _ = toy_batch()
    enc = GRUEncoder(11, 16, 24)
    states, final = enc(src)
    assert states.shape == (4, 5, 24)
    assert final.shape == (1, 4, 24)
    assert torch.all(states[src == PAD] == 0)


@pytest.mark.parametrize("attention", VARIANTS)
def test_forward_shapes(attention):
    src, tgt_in = toy_batch()
    m = model(attention)
    logits = m(src, tgt_in)
    assert logits.shape == (4, 6, 13)
    if attention is None:
        assert m.last_attention is None
    else:
        assert m.last_attention.shape == (4, 6, 5)


@pytest.mark.parametrize("attention", VARIANTS)
def test_every_parameter_gets_a_gradient(attention):
    src, tgt_in = toy_batch()
    m = model(attention)
    m(src, tgt_in).square().mean().backward()
    missing = [
        name
        for name, p in m.named_parameters()
        if p.grad is None or p.grad.abs().sum() == 0
    ]
    assert not missing, f"no gradient for {missing}"


def test_attention_model_has_score_parameters():
    sizes = {a: sum(p.numel() for p in model(a).parameters()) for a in VARIANTS}
    H = 24
    assert sizes["general"] - sizes["dot"] == H * H  # W
    assert sizes["additive"] - sizes["dot"] == 2 * H * H + H  # W1, W2, v
    assert sizes["dot"] - sizes[None] == 2 * H * H + H  # W_c


# --- attention weights ------------------------------------------------------------


@pytest.mark.parametrize("score", SCORES)
def test_attention_weights_sum_to_one_and_are_zero_on_pad(score):
    torch.manual_seed(0)
    att = Attention(8, score)
    keys = torch.randn(3, 5, 8)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]]).bool()
    for query in (torch.randn(3, 8), torch.randn(3, 4, 8)):
        context, weights = att(query, keys, mask)
        assert context.shape == query.shape
        assert weights.shape == query.shape[:-1] + (5,)
        w = weights if weights.dim() == 3 else weights[:, None]  # (B, T, S)
        torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:2]))
        assert torch.all(w.masked_select(~mask[:, None, :]) == 0)
        assert torch.all(w.masked_select(mask[:, None, :]) > 0)
    # a single real token takes all the weight and the context is that key
    torch.testing.assert_close(context[2], keys[2, :1].expand(4, 8))


@pytest.mark.parametrize("attention", SCORES)
def test_model_attention_is_zero_on_source_pad(attention):
    src, tgt_in = toy_batch()
    m = model(attention)
    m(src, tgt_in)
    w = m.last_attention  # (B, T, S)
    torch.testing.assert_close(w.sum(-1), torch.ones(4, 6))
    assert torch.all(w.masked_select((src == PAD)[:, None, :]) == 0)


def test_dot_attention_equals_torch_sdpa_unscaled():
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]).bool()
    context, weights = Attention(8, "dot")(q, k, mask)
    expected = F.scaled_dot_product_attention(
        q, k, k, attn_mask=mask[:, None], scale=1.0
    )
    torch.testing.assert_close(context, expected)


def test_general_score_is_dot_with_transformed_query():
    torch.manual_seed(0)
    att = Attention(8, "general")
    q, k = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    context, _ = att(q, k)
    W = att.score.W.weight  # (H, H); hᵀ W s = (Wᵀh)ᵀ s
    expected = F.scaled_dot_product_attention(q @ W, k, k, scale=1.0)
    torch.testing.assert_close(context, expected)
    assert isinstance(att.score, GeneralScore)


def test_additive_score_matches_formula_written_per_pair():
    torch.manual_seed(0)
    score = AdditiveScore(8)
    q, k = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    W1, W2, v = score.W1.weight, score.W2.weight, score.v.weight[0]
    expected = torch.empty(2, 3, 5)
    for b in range(2):
        for i in range(3):
            for j in range(5):
                expected[b, i, j] = v @ torch.tanh(W1 @ q[b, i] + W2 @ k[b, j])
    torch.testing.assert_close(score(q, k), expected)


# --- padding: the final state is at the last real token ----------------------------


@pytest.mark.parametrize("attention", VARIANTS)
def test_trailing_source_pads_do_not_change_logits(attention):
    src, tgt_in = toy_batch()
    m = model(attention)
    padded = F.pad(src, (0, 3), value=PAD)  # (B, S + 3)
    torch.testing.assert_close(m(padded, tgt_in), m(src, tgt_in))
    if attention is not None:
        torch.testing.assert_close(m.last_attention[..., :5].sum(-1), torch.ones(4, 6))


def test_encoder_final_state_equals_running_each_sentence_alone():
    src, _ = toy_batch()
    enc = GRUEncoder(11, 16, 24)
    states, final = enc(src)
    for i, n in enumerate((src != PAD).sum(1).tolist()):
        alone, h = enc.gru(enc.embedding(src[i : i + 1, :n]))
        torch.testing.assert_close(final[:, i], h[:, 0])
        torch.testing.assert_close(states[i, :n], alone[0])
    # the naive h_n (after the PADs) differs, so the test above can fail
    _, naive = enc.gru(enc.embedding(src))
    assert not torch.allclose(naive[:, 1], final[:, 1], atol=1e-4)


# --- greedy decoding --------------------------------------------------------------


def force_token(m, token_id):
    """Make the output layer always prefer token_id."""
    with torch.no_grad():
        m.decoder.out.weight.zero_()
        m.decoder.out.bias.zero_()
        m.decoder.out.bias[token_id] = 10.0


@pytest.mark.parametrize("attention", VARIANTS)
def test_greedy_decode_stops_when_all_rows_emit_eos(attention):
    src, _ = toy_batch()
    m = model(attention)
    force_token(m, EOS)
    tokens, attn = m.greedy_decode(src, BOS, EOS, max_len=10)
    assert tokens.tolist() == [[EOS]] * 4
    assert (attn is None) == (attention is None)
    if attn is not None:
        assert attn.shape == (4, 1, 5)


@pytest.mark.parametrize("attention", VARIANTS)
def test_greedy_decode_runs_to_max_len_without_eos(attention):
    src, _ = toy_batch()
    m = model(attention)
    force_token(m, 7)
    tokens, attn = m.greedy_decode(src, BOS, EOS, max_len=9)
    assert tokens.shape == (4, 9)
    assert torch.all(tokens == 7)
    if attn is not None:
        assert attn.shape == (4, 9, 5)


@pytest.mark.parametrize("attention", VARIANTS)
def test_greedy_decode_agrees_with_teacher_forced_forward(attention):
    src, _ = toy_batch()
    m = model(attention, seed=3)
    tokens, attn = m.greedy_decode(src, BOS, EOS, max_len=7)
    tgt_in = torch.cat([torch.full((4, 1), BOS), tokens[:, :-1]], dim=1)
    # step-by-step decoding and the batched forward must compute the same thing
    is_eos = (tokens == EOS).long()
    real = (is_eos.cumsum(1) - is_eos) == 0  # steps up to and including EOS
    pred = m(src, tgt_in).argmax(-1)
    assert torch.equal(pred[real], tokens[real])
    if attention is not None:
        torch.testing.assert_close(attn[real], m.last_attention[real])


@pytest.mark.parametrize("attention", VARIANTS)
def test_overfits_reverse_task_and_decodes_it(attention):
    torch.manual_seed(0)
    src, tgt_in, tgt_out = reverse_task()
    m = Seq2Seq(12, 12, emb_dim=32, hidden_dim=64, attention=attention)
    losses = train(m, src, tgt_in, tgt_out)
    # a decoder that ignores the source plateaus near 0.64 (see the test below)
    assert losses[0] > 2.0 and losses[-1] < 0.05, (losses[0], losses[-1])
    tokens, attn = m.greedy_decode(src, BOS, EOS, max_len=20)
    assert tokens.shape == tgt_out.shape  # stopped after the longest row's EOS
    exact = (tokens == tgt_out).all(dim=1).float().mean().item()
    assert exact >= 0.9, exact
    if attention is not None:
        assert attn.shape == (32, tgt_out.size(1), src.size(1))


def test_source_blind_decoder_cannot_pass_the_overfit_test():
    torch.manual_seed(0)
    src, tgt_in, tgt_out = reverse_task()
    m = Seq2Seq(12, 12, emb_dim=32, hidden_dim=64)
    encode = m.encode

    def blind(s):
        memory, final, mask = encode(s)
        return memory, torch.zeros_like(final), mask

    m.encode = blind
    losses = train(m, src, tgt_in, tgt_out)
    assert losses[-1] > 0.3


# --- errors -----------------------------------------------------------------------


def test_unknown_score_name_lists_the_valid_ones():
    for make in (lambda: Attention(8, "cosine"), lambda: model("cosine")):
        with pytest.raises(ValueError, match="'cosine'") as err:
            make()
        for name in SCORE_FUNCTIONS:
            assert repr(name) in str(err.value)


def test_out_of_range_source_id_names_id_and_vocab_size():
    src, tgt_in = toy_batch()
    src[0, 0] = 11
    with pytest.raises(ValueError, match=r"token id 11 .*vocab_size=11"):
        model("dot")(src, tgt_in)


def test_out_of_range_target_id_names_id_and_vocab_size():
    src, tgt_in = toy_batch()
    tgt_in[2, 3] = 40
    with pytest.raises(
        ValueError, match=r"tgt_in contains token id 40 .*vocab_size=13"
    ):
        model(None)(src, tgt_in)


def test_negative_id_is_rejected():
    src, tgt_in = toy_batch()
    src[1, 0] = -1
    with pytest.raises(ValueError, match="token id -1"):
        model(None)(src, tgt_in)


def test_empty_batch_is_rejected():
    empty = torch.zeros(0, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="empty batch"):
        model("dot")(empty, empty)


def test_zero_length_source_is_rejected():
    src, tgt_in = toy_batch()
    with pytest.raises(ValueError, match="length 0"):
        model("dot")(src[:, :0], tgt_in)
    src[2] = PAD
    with pytest.raises(ValueError, match=r"src rows \[2\] are zero-length"):
        model("dot")(src, tgt_in)


def test_pad_before_real_token_is_rejected():
    src, tgt_in = toy_batch()
    src[0, 1] = PAD
    with pytest.raises(ValueError, match=r"rows \[0\].*trailing"):
        model(None)(src, tgt_in)


def test_float_tokens_and_wrong_rank_are_rejected():
    src, tgt_in = toy_batch()
    with pytest.raises(ValueError, match="dtype=torch.float32"):
        model(None)(src.float(), tgt_in)
    with pytest.raises(ValueError, match=r"shape \(B, L\), got \(20,\)"):
        model(None)(src.flatten(), tgt_in)


def test_batch_size_mismatch_is_rejected():
    src, tgt_in = toy_batch()
    with pytest.raises(ValueError, match="src has B=4, tgt_in has B=3"):
        model("general")(src, tgt_in[:3])


def test_greedy_decode_argument_errors():
    src, _ = toy_batch()
    m = model("dot")
    with pytest.raises(ValueError, match=r"eos_id=13 .*tgt_vocab_size=13"):
        m.greedy_decode(src, BOS, 13, max_len=5)
    with pytest.raises(ValueError, match="max_len=0"):
        m.greedy_decode(src, BOS, EOS, max_len=0)


def test_attention_mask_errors():
    att = Attention(8, "dot")
    q, k = torch.randn(2, 8), torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match=r"mask shape \(2, 4\)"):
        att(q, k, torch.ones(2, 4, dtype=torch.bool))
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match=r"mask rows \[1\]"):
        att(q, k, mask)
