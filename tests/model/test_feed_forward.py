import pytest
import torch
import torch.nn.functional as F

from transformer_edu import PositionwiseFeedForward
from transformer_edu.model.feed_forward import GatedFeedForward, feed_forward


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


# --- gated feed-forward networks (chapter 13) -----------------------------------------


@pytest.mark.parametrize(("gate", "act"), [("swiglu", F.silu), ("geglu", F.gelu)])
def test_gated_network_is_its_formula(gate, act):
    torch.manual_seed(0)
    ffn = GatedFeedForward(8, 12, gate=gate).eval()
    x = torch.randn(2, 5, 8)
    W1, V, W2 = ffn.linear1.weight, ffn.linear_v.weight, ffn.linear2.weight
    expected = (act(x @ W1.T) * (x @ V.T)) @ W2.T  # Shazeer (2020): no biases
    torch.testing.assert_close(ffn(x), expected)
    assert all(m.bias is None for m in (ffn.linear1, ffn.linear_v, ffn.linear2))


def test_swish_is_silu_and_two_thirds_of_d_ff_keep_the_parameter_count():
    x = torch.randn(50)
    torch.testing.assert_close(F.silu(x), x * torch.sigmoid(x))  # Swish with β = 1
    relu = sum(p.numel() for p in PositionwiseFeedForward(64, 384).parameters())
    gated = sum(p.numel() for p in GatedFeedForward(64, 256).parameters())
    assert abs(gated / relu - 1) < 0.01


def test_the_factory_names_each_network_and_refuses_others():
    assert isinstance(feed_forward("relu", 4, 8), PositionwiseFeedForward)
    assert feed_forward("geglu", 4, 8).gate == "geglu"
    with pytest.raises(ValueError, match="ffn='glu'"):
        feed_forward("glu", 4, 8)
