"""scripts/record_toy_ablations.py: each variant of the ladder takes out what it says,
and only that."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from torch import nn

from transformer_edu.model.norm import LayerNorm
from transformer_edu.model.transformer import count_parameters
from transformer_edu.modern.experiments import heldout_loss, toy_data
from transformer_edu.toy.data import make_batch
from transformer_edu.toy.training import TOY_TRAINING, train

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "record_toy_ablations", ROOT / "scripts" / "record_toy_ablations.py"
)
ladder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ladder)
BASE = "the toy translator"


def _logits(model: nn.Module) -> torch.Tensor:
    pairs, _, sv, tv = toy_data()
    b = make_batch(pairs[:4], sv, tv)
    model.eval()
    with torch.no_grad():
        return model(b.src, b.tgt_in)


def test_every_variant_differs_from_the_translator_and_trains():
    base = _logits(ladder.build(BASE, 0)[0])
    for name in ladder.VARIANTS:
        model, recipe = ladder.build(name, 0)
        if name not in (BASE, "no label smoothing"):  # that one: another loss
            assert not torch.allclose(_logits(model), base), name
        pairs, held_out, sv, tv = toy_data()
        recipe.epochs = 1
        hist = train(model, pairs[:128], sv, tv, recipe, progress=False)
        assert len(hist.step_loss) == 2, name  # two batches of 64
        assert heldout_loss(model, held_out[:16]) < 100, name  # not NaN


def test_each_variant_takes_out_one_thing():
    params = {n: count_parameters(ladder.build(n, 0)[0]) for n in ladder.VARIANTS}
    assert params["1 head"] == params[BASE]  # four heads of 16 or one of 64
    assert params["no label smoothing"] == params[BASE]
    assert params["no feed-forward"] < params[BASE]
    assert params["no LayerNorm"] < params[BASE]  # their gains and biases
    norms = [m for m in ladder.build("no LayerNorm", 0)[0].modules()
             if isinstance(m, LayerNorm)]  # fmt: skip
    assert not norms
    assert ladder.build("no label smoothing", 0)[1].label_smoothing == 0.0
    assert ladder.build(BASE, 0)[1].label_smoothing == TOY_TRAINING.label_smoothing
    assert ladder.build(BASE, 7)[1].seed == 7


def test_without_residuals_a_layer_is_norm_of_its_sublayer():
    """The surgery's f(x) - x against the sum the layer keeps: norm1(f(x))."""
    model, _ = ladder.build("no residuals", 0)
    layer = model.encoder.layers[0].eval()
    x = torch.randn(2, 5, model.config.d_model)
    with torch.no_grad():
        attended = layer.self_attn(x, x, x, None)
        h = layer.norm1(attended)
        want = layer.norm2(layer.ffn(h))
        got = layer(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_same_seed_gives_every_variant_the_same_first_weights():
    a, _ = ladder.build(BASE, 3)
    b, _ = ladder.build("no label smoothing", 3)
    for (name, p), (_, q) in zip(
        a.named_parameters(), b.named_parameters(), strict=True
    ):
        assert torch.equal(p, q), name


@pytest.mark.parametrize("name", ["no residuals", "no feed-forward"])
def test_the_surgery_is_only_on_this_model(name):
    """Patched instances, never the classes: a translator built after is unchanged."""
    before = _logits(ladder.build(BASE, 0)[0])
    ladder.build(name, 0)
    torch.testing.assert_close(_logits(ladder.build(BASE, 0)[0]), before,
                               rtol=0, atol=0)  # fmt: skip
