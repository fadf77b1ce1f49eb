import math

import torch

from transformer_edu.modern.alibi import alibi_bias, alibi_slopes


def test_slopes_are_the_papers():
    # 8 heads: 1/2, 1/4, ..., 1/256 (Press et al. 2022, section 3)
    torch.testing.assert_close(
        alibi_slopes(8), torch.tensor([2.0**-i for i in range(1, 9)])
    )
    # not a power of two: the 4 slopes of 4 heads, then every other one of 8
    six = alibi_slopes(6).tolist()
    assert six[:4] == alibi_slopes(4).tolist()
    assert six[4:] == alibi_slopes(8).tolist()[0::2][:2]
    assert all(math.isfinite(s) and 0 < s < 1 for s in alibi_slopes(12).tolist())


def test_bias_is_minus_slope_times_distance():
    bias = alibi_bias(4, torch.arange(5), torch.arange(5))  # (H, T, S)
    slopes = alibi_slopes(4)
    for h in range(4):
        for i in range(5):
            for j in range(5):
                assert abs(float(bias[h, i, j]) + float(slopes[h]) * abs(i - j)) < 1e-6
    # per-row positions broadcast to (B, H, T, S)
    rows = alibi_bias(4, torch.tensor([[0, 1], [3, 4]]), torch.tensor([[0, 1], [3, 4]]))
    assert rows.shape == (2, 4, 2, 2)
    torch.testing.assert_close(rows[0], rows[1])  # the same offsets
