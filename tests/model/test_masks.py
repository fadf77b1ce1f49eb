import pytest
import torch

from transformer_edu.model.masks import (
    causal_mask,
    check_mask,
    combine_masks,
    from_torch_mask,
    key_padding_from_torch,
    padding_mask,
    target_mask,
    to_torch_mask,
)


def test_padding_mask_marks_real_tokens_true():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]])
    m = padding_mask(tokens)
    assert m.shape == (2, 1, 1, 4) and m.dtype == torch.bool
    assert m[0, 0, 0].tolist() == [True, True, False, False]
    assert m[1, 0, 0].tolist() == [True, False, False, False]


def test_causal_mask_allows_past_and_present_only():
    m = causal_mask(4)[0, 0]
    assert m.shape == (4, 4)
    for t in range(4):
        for s in range(4):
            assert m[t, s].item() == (s <= t)


def test_causal_mask_rectangular_for_incremental_decoding():
    # the last 2 of 5 positions are queries: query 0 is position 3, query 1 is position 4
    m = causal_mask(2, key_size=5)[0, 0]
    assert m.tolist() == [[True, True, True, True, False], [True] * 5]
    with pytest.raises(ValueError, match="size=3, key_size=2"):
        causal_mask(3, key_size=2)


def test_target_mask_combines_padding_and_look_ahead():
    tgt = torch.tensor([[1, 4, 5, 0]])
    m = target_mask(tgt)[0, 0]
    assert m.shape == (4, 4)
    assert m[2].tolist() == [True, True, True, False]
    assert m[3].tolist() == [True, True, True, False]  # PAD key never visible
    assert m[0].tolist() == [True, False, False, False]


def test_combine_masks_is_logical_and_and_skips_none():
    a = torch.tensor([True, True, False])
    b = torch.tensor([True, False, False])
    assert combine_masks(a, None, b).tolist() == [True, False, False]
    assert combine_masks(None, None) is None


def test_polarity_conversion_round_trip_and_float_masks():
    ours = torch.tensor([[True, False], [True, True]])
    assert to_torch_mask(ours).tolist() == [[False, True], [False, False]]
    assert torch.equal(from_torch_mask(to_torch_mask(ours)), ours)
    additive = torch.nn.Transformer.generate_square_subsequent_mask(3)
    assert torch.equal(from_torch_mask(additive), causal_mask(3)[0, 0])
    kpm = torch.tensor([[False, False, True]])  # nn.Transformer: True = pad
    assert key_padding_from_torch(kpm).tolist() == [[[[True, True, False]]]]


def test_check_mask_names_the_shapes():
    check_mask(torch.ones(2, 1, 1, 5, dtype=torch.bool), 2, 4, 3, 5)
    with pytest.raises(ValueError, match=r"\(2, 1, 1, 6\).*\(2, 4, 3, 5\)"):
        check_mask(torch.ones(2, 1, 1, 6, dtype=torch.bool), 2, 4, 3, 5)
    with pytest.raises(ValueError, match="4 dimensions"):
        check_mask(torch.ones(5, 5, dtype=torch.bool), 5, 4, 3, 5)  # (B, S) with B == T
    with pytest.raises(ValueError, match="boolean"):
        check_mask(torch.zeros(2, 1, 1, 5), 2, 4, 3, 5)
