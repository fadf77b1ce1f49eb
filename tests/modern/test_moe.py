import pytest
import torch

from transformer_edu import MixtureOfExperts, PositionwiseFeedForward


def test_each_token_gets_its_top_k_experts_weighted_by_the_router():
    torch.manual_seed(0)
    moe = MixtureOfExperts(8, 16, n_experts=4, top_k=2).eval()
    x = torch.randn(2, 5, 8)
    got = moe(x)
    for b in range(2):
        for t in range(5):
            token = x[b, t]
            probs = (moe.router.weight @ token).softmax(-1)  # (E,)
            top = probs.topk(2).indices.tolist()
            expected = sum(probs[e] * moe.experts[e](token) for e in top)
            torch.testing.assert_close(got[b, t], expected, atol=1e-6, rtol=1e-5)


def test_one_expert_is_the_dense_network_and_all_experts_the_soft_mixture():
    torch.manual_seed(1)
    one = MixtureOfExperts(8, 16, n_experts=1).eval()
    dense = PositionwiseFeedForward(8, 16).eval()
    dense.load_state_dict(one.experts[0].state_dict())
    x = torch.randn(3, 4, 8)
    torch.testing.assert_close(one(x), dense(x))  # the gate of a single expert is 1
    soft = MixtureOfExperts(8, 16, n_experts=3, top_k=3).eval()
    probs = soft.router(x).softmax(-1)  # (B, L, E)
    mixture = sum(probs[..., e, None] * soft.experts[e](x) for e in range(3))
    torch.testing.assert_close(soft(x), mixture, atol=1e-6, rtol=1e-5)


def test_load_and_the_balancing_loss():
    torch.manual_seed(2)
    moe = MixtureOfExperts(8, 16, n_experts=4)
    x = torch.randn(4, 6, 8)
    moe(x)
    probs = moe.router(x.reshape(-1, 8)).softmax(-1)  # (N, E)
    first = torch.bincount(probs.argmax(-1), minlength=4) / probs.size(0)  # f_e
    torch.testing.assert_close(moe.load, first)
    torch.testing.assert_close(moe.aux_loss, 4 * (first * probs.mean(0)).sum())
    moe.aux_loss.backward()  # the router learns from it
    assert moe.router.weight.grad is not None
    with pytest.raises(ValueError, match="top_k=5"):
        MixtureOfExperts(8, 16, n_experts=4, top_k=5)
