import math

import pytest
import torch
import torch.nn.functional as F

from transformer_edu import (
    GroupedQueryAttention,
    MultiHeadAttention,
    scaled_dot_product_attention,
)
from transformer_edu.model.masks import causal_mask, padding_mask
from transformer_edu.modern.alibi import alibi_bias
from transformer_edu.modern.rope import apply_rotary


def _masks(B, T, S, lengths):
    keys = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
    return keys[:, None, None, :]  # (B, 1, 1, S) True = may attend


def test_reference_is_softmax_qk_over_sqrt_dk_times_v():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 5)
    out, w = scaled_dot_product_attention(q, k, v)
    expected_w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1)
    torch.testing.assert_close(w, expected_w)
    torch.testing.assert_close(out, expected_w @ v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v))


def test_masked_keys_get_zero_weight_and_rows_sum_to_one():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 1, 4, 8), torch.randn(2, 1, 5, 8), torch.randn(2, 1, 5, 8)
    mask = _masks(2, 4, 5, [5, 2])
    out, w = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(w[1, :, :, 2:] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 1, 4))
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fast", [False, True])
def test_fully_masked_rows_stay_finite(dtype, fast):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, fast=fast).to(dtype)
    x = torch.randn(2, 3, 16, dtype=dtype, requires_grad=True)
    mask = torch.ones(2, 1, 3, 3, dtype=torch.bool)
    mask[0, :, 1, :] = False  # query 1 of sentence 0 may attend to nothing
    mask[1] = False  # sentence 1: nothing at all
    out = mha(x, attn_mask=mask)
    assert torch.isfinite(out).all()
    out.float().sum().backward()
    assert torch.isfinite(x.grad).all()
    # a query with no key gets no value: only the output projection's bias remains
    torch.testing.assert_close(out[1], mha.out_proj.bias.expand(3, 16))


def test_fast_path_equals_reference_path():
    torch.manual_seed(0)
    ref = MultiHeadAttention(32, 4, fast=False).eval()
    fast = MultiHeadAttention(32, 4, fast=True).eval()
    fast.load_state_dict(ref.state_dict())
    x, mem = torch.randn(3, 5, 32), torch.randn(3, 7, 32)
    self_mask = padding_mask(torch.tensor([[1] * 5, [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]]))
    self_mask = self_mask & causal_mask(5)
    cross_mask = _masks(3, 5, 7, [7, 4, 1])
    torch.testing.assert_close(
        fast(x, attn_mask=self_mask), ref(x, attn_mask=self_mask)
    )
    torch.testing.assert_close(
        fast(x, mem, mem, cross_mask), ref(x, mem, mem, cross_mask)
    )
    torch.testing.assert_close(fast(x, is_causal=True), ref(x, is_causal=True))


def test_split_and_combine_heads_are_inverse_and_slice_features():
    mha = MultiHeadAttention(12, 3)
    x = torch.arange(2 * 4 * 12, dtype=torch.float32).view(2, 4, 12)
    heads = mha.split_heads(x)
    assert heads.shape == (2, 3, 4, 4)
    torch.testing.assert_close(heads[1, 2, 3], x[1, 3, 8:12])  # head 2 = features 8..11
    torch.testing.assert_close(mha.combine_heads(heads), x)


def _torch_masks(B, T, S, lengths, causal):
    kpm = torch.arange(S)[None, :] >= torch.tensor(lengths)[:, None]  # True = pad
    attn = torch.triu(torch.ones(T, S, dtype=torch.bool), 1) if causal else None
    return kpm, attn


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_from_torch_equals_nn_multihead_attention(cross, seed):
    g = torch.Generator().manual_seed(seed)
    B, T = (int(x) for x in torch.randint(1, 6, (2,), generator=g))
    S = int(torch.randint(1, 8, (1,), generator=g)) if cross else T
    H = int(torch.randint(1, 5, (1,), generator=g))
    D = H * int(torch.randint(2, 9, (1,), generator=g))
    torch.manual_seed(seed)
    theirs = torch.nn.MultiheadAttention(D, H, batch_first=True).eval()
    ours = MultiHeadAttention.from_torch(theirs).eval()
    x = torch.randn(B, T, D)
    mem = torch.randn(B, S, D) if cross else x
    lengths = torch.randint(1, S + 1, (B,), generator=g).tolist()
    kpm, attn = _torch_masks(B, T, S, lengths, causal=not cross)
    expected, _ = theirs(x, mem, mem, key_padding_mask=kpm, attn_mask=attn)
    mask = ~kpm[:, None, None, :]
    if attn is not None:
        mask = mask & ~attn
    # rows whose keys are all masked are NaN in nn.MultiheadAttention; compare the rest
    valid = mask.expand(B, 1, T, S).any(-1)[:, 0]  # (B, T)
    got = ours(x, mem, mem, attn_mask=mask)
    diff = (got - expected)[valid].abs().max() if valid.any() else torch.tensor(0.0)
    assert diff <= 1e-5, f"max abs difference {diff.item():.2e}"


def test_recording_weights_is_off_by_default_and_returns_all_heads():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    mha(x)
    assert mha.attn_weights is None
    mha.record_weights = True
    out = mha(x, is_causal=True)
    w = mha.attn_weights
    assert w.shape == (2, 4, 5, 5)
    assert torch.all(w.triu(1) == 0)
    mha.record_weights = False
    torch.testing.assert_close(mha(x, is_causal=True), out)


def test_bad_inputs_give_clear_errors():
    with pytest.raises(ValueError, match="d_model=100 is not divisible by n_heads=8"):
        MultiHeadAttention(100, 8)
    mha = MultiHeadAttention(16, 4)
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 1, 1, 4\)"):
        mha(x, attn_mask=torch.ones(2, 1, 1, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="d_model=16"):
        mha(torch.randn(2, 5, 12))
    with pytest.raises(ValueError, match="key must be"):
        mha(x, torch.randn(3, 5, 16), torch.randn(3, 5, 16))
    with pytest.raises(ValueError, match="empty sequence"):
        mha(torch.randn(2, 0, 16))


# --- grouped-query attention, RoPE and ALiBi inside it (chapter 13) ------------------


def test_gqa_runs_the_one_forward_of_multi_head_attention():
    assert GroupedQueryAttention.forward is MultiHeadAttention.forward
    gqa = GroupedQueryAttention(16, 4, n_kv_heads=2, position="rope")
    x = torch.randn(2, 5, 16)
    with pytest.raises(ValueError, match="key must be"):
        gqa(x, torch.randn(3, 5, 16), torch.randn(3, 5, 16))
    with pytest.raises(ValueError, match="empty sequence"):
        gqa(torch.randn(2, 0, 16))


@pytest.mark.parametrize("fast", [False, True])
def test_gqa_with_h_groups_is_multi_head_attention(fast):
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4, fast=fast).eval()
    gqa = GroupedQueryAttention(16, 4, fast=fast, n_kv_heads=4).eval()
    gqa.load_state_dict(mha.state_dict())
    x, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    mask = padding_mask(torch.tensor([[1] * 7, [1] * 4 + [0] * 3]))
    assert torch.equal(gqa(x), mha(x))
    assert torch.equal(gqa(x, memory, memory, mask), mha(x, memory, memory, mask))
    assert torch.equal(gqa(x, is_causal=True), mha(x, is_causal=True))


@pytest.mark.parametrize("fast", [False, True])
def test_gqa_with_one_group_is_multi_query_attention(fast):
    torch.manual_seed(1)
    H, D = 4, 16
    mqa = GroupedQueryAttention(D, H, fast=fast, n_kv_heads=1).eval()
    assert mqa.k_proj.weight.shape == (D // H, D)  # one key head for all query heads
    x = torch.randn(2, 6, D)
    # Shazeer (2019), written out: per-head queries, one shared key and value
    q = mqa.q_proj(x).view(2, 6, H, D // H).transpose(1, 2)  # (B, H, T, Dh)
    k, v = mqa.k_proj(x), mqa.v_proj(x)  # (B, T, Dh): no head axis at all
    weights = (q @ k[:, None].transpose(-2, -1) / math.sqrt(D // H)).softmax(-1)
    out = (weights @ v[:, None]).transpose(1, 2).reshape(2, 6, D)
    torch.testing.assert_close(mqa(x), mqa.out_proj(out), atol=1e-6, rtol=1e-5)


def test_gqa_groups_share_keys_in_a_row():
    torch.manual_seed(2)
    gqa = GroupedQueryAttention(24, 6, n_kv_heads=2, fast=False).eval()
    gqa.record_weights = True
    x = torch.randn(1, 5, 24)
    gqa(x)
    k = gqa.k_proj(x).view(1, 5, 2, 4).transpose(1, 2)  # (B, G, S, Dh)
    q = gqa.q_proj(x).view(1, 5, 6, 4).transpose(1, 2)  # (B, H, T, Dh)
    for h in range(6):  # heads 0-2 use key head 0, heads 3-5 key head 1
        scores = q[:, h] @ k[:, h // 3].transpose(-2, -1) / 2.0
        torch.testing.assert_close(gqa.attn_weights[:, h], scores.softmax(-1))
    kc, vc = gqa.project_kv(x, x)
    assert kc.shape == vc.shape == (1, 2, 5, 4)  # the cache holds G heads, not H
    with pytest.raises(ValueError, match="n_kv_heads=4"):
        GroupedQueryAttention(24, 6, n_kv_heads=4)


def test_alibi_weights_are_the_softmax_of_the_distance_penalty():
    gqa = GroupedQueryAttention(8, 2, position="alibi", fast=False).eval()
    with torch.no_grad():
        gqa.q_proj.weight.zero_()  # every score q·k is 0: only the penalty is left
        gqa.q_proj.bias.zero_()
    gqa.record_weights = True
    gqa(torch.randn(1, 4, 8))
    expected = alibi_bias(2, torch.arange(4), torch.arange(4)).softmax(-1)
    torch.testing.assert_close(gqa.attn_weights[0], expected)


def test_rope_attention_rotates_queries_and_keys_by_their_positions():
    torch.manual_seed(3)
    gqa = GroupedQueryAttention(8, 2, position="rope", fast=False).eval()
    gqa.record_weights = True
    x = torch.randn(1, 5, 8)
    gqa(x)
    q = apply_rotary(gqa.project_q(x), torch.arange(5))
    k = apply_rotary(gqa.project_kv(x, x)[0], torch.arange(5))
    expected = (q @ k.transpose(-2, -1) / 2.0).softmax(-1)
    torch.testing.assert_close(gqa.attn_weights, expected)


@pytest.mark.parametrize("position", [None, "rope", "alibi"])
def test_gqa_fast_path_equals_reference_path(position):
    torch.manual_seed(4)
    ref = GroupedQueryAttention(16, 4, n_kv_heads=2, position=position, fast=False)
    fast = GroupedQueryAttention(16, 4, n_kv_heads=2, position=position, fast=True)
    fast.load_state_dict(ref.state_dict())
    x = torch.randn(2, 5, 16)
    mask = causal_mask(5) & padding_mask(torch.tensor([[1] * 5, [1] * 3 + [0] * 2]))
    mask = mask.clone()
    mask[1, :, 0] = False  # a query with every key blocked
    torch.testing.assert_close(
        fast.eval()(x, attn_mask=mask), ref.eval()(x, attn_mask=mask)
    )
