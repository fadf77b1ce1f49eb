import pytest
import torch

from transformer_edu import LayerNorm


@pytest.mark.parametrize("fast", [False, True])
def test_layer_norm_equals_torch(fast):
    torch.manual_seed(0)
    ref = torch.nn.LayerNorm(16, eps=1e-5)
    with torch.no_grad():
        ref.weight.normal_()
        ref.bias.normal_()
    ours = LayerNorm.from_torch(ref, fast=fast)
    x = torch.randn(3, 7, 16) * 5 + 2
    torch.testing.assert_close(ours(x), ref(x), atol=1e-5, rtol=1e-5)


def test_written_out_formula_normalises_each_token():
    x = torch.randn(4, 5, 32) * 3 + 7
    y = LayerNorm(32, fast=False)(x)
    torch.testing.assert_close(y.mean(-1), torch.zeros(4, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(
        y.var(-1, unbiased=False), torch.ones(4, 5), atol=1e-3, rtol=0
    )


def test_gradients_of_both_paths_agree():
    x = torch.randn(2, 3, 8, requires_grad=True)
    grads = []
    for fast in (False, True):
        torch.manual_seed(1)
        ln = LayerNorm(8, fast=fast)
        (ln(x) ** 3).sum().backward()
        grads.append(x.grad.clone())
        x.grad = None
    torch.testing.assert_close(grads[0], grads[1], atol=1e-5, rtol=1e-5)


# --- RMSNorm (chapter 13) -------------------------------------------------------------


@pytest.mark.parametrize("fast", [False, True])
def test_rms_norm_is_its_formula_and_equals_torch(fast):
    from transformer_edu import RMSNorm

    torch.manual_seed(0)
    x = torch.randn(3, 7, 16) * 4 + 3
    norm = RMSNorm(16, eps=1e-5, fast=fast)
    with torch.no_grad():
        norm.weight.normal_()
    expected = norm.weight * x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5)
    torch.testing.assert_close(norm(x), expected, atol=1e-5, rtol=1e-5)
    ref = torch.nn.RMSNorm(16, eps=1e-5)  # PyTorch's own
    with torch.no_grad():
        ref.weight.copy_(norm.weight)
    torch.testing.assert_close(norm(x), ref(x), atol=1e-5, rtol=1e-5)


def test_rms_norm_does_not_centre_but_equals_layer_norm_on_mean_zero_tokens():
    from transformer_edu import RMSNorm

    x = torch.randn(4, 5, 32) * 3 + 7  # far from mean 0
    rms, ln = RMSNorm(32, fast=False), LayerNorm(32, fast=False)
    assert rms(x).mean(-1).abs().min() > 0.5  # not centred: the mean survives
    torch.testing.assert_close(
        (rms(x) ** 2).mean(-1), torch.ones(4, 5), atol=1e-3, rtol=0
    )  # unit root mean square instead
    centred = x - x.mean(-1, keepdim=True)
    torch.testing.assert_close(rms(centred), ln(centred), atol=1e-5, rtol=1e-5)
    assert sum(p.numel() for p in rms.parameters()) == 32  # γ only, no β
