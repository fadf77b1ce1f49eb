import pytest
import torch

from transformer_edu.model.embeddings import sinusoidal_table
from transformer_edu.modern.rope import apply_rotary, rotary_angles


def test_rotation_keeps_lengths_and_position_zero_is_identity():
    x = torch.randn(2, 3, 7, 16)
    y = apply_rotary(x, torch.arange(7))
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(y[:, :, 0], x[:, :, 0])


def test_the_dot_product_depends_only_on_the_offset():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 32).double(), torch.randn(1, 1, 1, 32).double()

    def score(m, n):  # query at position m, key at position n
        qm = apply_rotary(q.float(), torch.tensor([m])).double()
        kn = apply_rotary(k.float(), torch.tensor([n])).double()
        return float((qm * kn).sum())

    for offset in (0, 1, 5, -3):
        scores = [score(m, m + offset) for m in (0, 3, 10, 40)]
        assert max(scores) - min(scores) < 1e-4, (offset, scores)
    assert abs(score(0, 1) - score(0, 4)) > 1e-3  # but it does depend on the offset


def test_the_angles_are_the_sinusoids_frequencies():
    angles = rotary_angles(torch.arange(10), 16)  # (10, 8)
    table = sinusoidal_table(10, 16)  # sin at even features, cos at odd
    torch.testing.assert_close(angles.sin(), table[:, 0::2], atol=1e-6, rtol=0)
    torch.testing.assert_close(angles.cos(), table[:, 1::2], atol=1e-6, rtol=0)


def test_per_row_positions_and_odd_sizes():
    x = torch.randn(2, 1, 3, 8)
    pos = torch.tensor([[0, 1, 2], [5, 6, 7]])
    y = apply_rotary(x, pos)
    torch.testing.assert_close(y[1], apply_rotary(x[1:], torch.tensor([5, 6, 7]))[0])
    with pytest.raises(ValueError, match="odd"):
        apply_rotary(torch.randn(1, 1, 2, 5), torch.arange(2))
