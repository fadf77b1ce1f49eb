import torch

from transformer_edu import PositionwiseFeedForward


def test_same_network_on_every_position():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(8, 32).eval()
    x = torch.randn(2, 5, 8)
    y = ffn(x)
    assert y.shape == (2, 5, 8)
    for b in range(2):
        for t in range(5):
            torch.testing.assert_close(y[b, t], ffn(x[b, t][None, None])[0, 0])


def test_is_relu_between_two_linears():
    ffn = PositionwiseFeedForward(4, 6).eval()
    x = torch.randn(3, 4)[None]
    expected = ffn.linear2(torch.relu(ffn.linear1(x)))
    torch.testing.assert_close(ffn(x), expected)
