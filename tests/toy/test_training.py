import math

import pytest
import torch
import torch.nn.functional as F
from _toy import tiny_trained
from torch import nn

from transformer_edu.model.attention import MultiHeadAttention
from transformer_edu.toy.data import Vocab
from transformer_edu.toy.training import (
    TrainConfig,
    noam_lr,
    pick_device,
    sequence_loss,
    smoothed_targets,
)


def test_warmup_schedule_rises_linearly_then_decays_as_inverse_sqrt():
    d, w = 128, 100
    lrs = [noam_lr(s, d, w) for s in range(1, 1001)]
    assert max(range(1000), key=lrs.__getitem__) + 1 == w  # peak at step = warmup
    assert lrs[49] == pytest.approx(lrs[99] / 2)  # linear warm-up
    assert lrs[399] == pytest.approx(lrs[99] * math.sqrt(100 / 400))  # 1/sqrt decay
    assert noam_lr(100, d, w, factor=2.0) == pytest.approx(2 * lrs[99])


def test_label_smoothing_is_cross_entropy_against_the_smoothed_distribution():
    torch.manual_seed(0)
    logits, target = torch.randn(6, 10), torch.tensor([1, 4, 5, 9, 2, 3])
    q = smoothed_targets(target, 10, 0.1)
    torch.testing.assert_close(q.sum(-1), torch.ones(6))
    assert q[0, 1].item() == pytest.approx(0.9 + 0.01)
    expected = -(q * logits.log_softmax(-1)).sum(-1).mean()
    torch.testing.assert_close(
        F.cross_entropy(logits, target, label_smoothing=0.1), expected
    )


def test_sequence_loss_ignores_padding():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 7)
    tgt = torch.tensor([[4, 5, Vocab.PAD], [6, Vocab.PAD, Vocab.PAD]])
    real = F.cross_entropy(logits[tgt != 0], tgt[tgt != 0])
    torch.testing.assert_close(sequence_loss(logits, tgt), real)


def test_pick_device():
    assert pick_device("cpu").type == "cpu"
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device().type == expected


def test_a_short_run_learns():
    _, _, _, hist, _ = tiny_trained()
    assert hist.epoch_loss[-1] < 0.5 * hist.epoch_loss[0], hist.epoch_loss
    assert hist.epoch_token_acc[-1] > 0.8, hist.epoch_token_acc
    assert hist.train_exact[-1] > 0.5, hist.train_exact
    assert len(hist.step_loss) == 25 * 5 and len(hist.step_lr) == len(hist.step_loss)


def test_training_is_deterministic_on_cpu():
    from transformer_edu.model.transformer import make_model
    from transformer_edu.toy.data import build_vocabs, load_corpus
    from transformer_edu.toy.training import train

    pairs = load_corpus("train")[:64]
    sv, tv = build_vocabs(pairs)
    losses = []
    for _ in range(2):
        torch.manual_seed(3)
        model = make_model(len(sv), len(tv), n_layers=1, d_model=16, n_heads=2, d_ff=32)
        cfg = TrainConfig(epochs=2, batch_size=16, seed=3, device="cpu")
        losses.append(train(model, pairs, sv, tv, cfg, progress=False).step_loss)
    assert losses[0] == losses[1]


def test_cooldown_falls_linearly_to_the_floor_over_the_last_steps():
    from transformer_edu.toy.training import cooldown_factor

    assert cooldown_factor(70, 100, 0.3) == 1.0
    assert cooldown_factor(85, 100, 0.3) == pytest.approx(1 - 0.95 * 0.5)
    assert cooldown_factor(100, 100, 0.3) == pytest.approx(0.05)
    assert cooldown_factor(100, 100, 0.0) == 1.0


def test_history_records_the_learning_rate_each_step_used():
    from transformer_edu.model.transformer import make_model
    from transformer_edu.toy.data import build_vocabs, load_corpus
    from transformer_edu.toy.training import train

    pairs = load_corpus("train")[:48]
    sv, tv = build_vocabs(pairs)
    model = make_model(len(sv), len(tv), n_layers=1, d_model=16, n_heads=2, d_ff=32)
    cfg = TrainConfig(epochs=1, batch_size=16, warmup=10, cooldown=0.0, device="cpu")
    hist = train(model, pairs, sv, tv, cfg, progress=False)
    expected = [noam_lr(s, 16, 10, cfg.lr_factor) for s in (1, 2, 3)]
    assert hist.step_lr == pytest.approx(expected)


def test_the_toy_recipe_drops_out_where_the_paper_does():
    from transformer_edu.model.transformer import make_model
    from transformer_edu.toy.training import TOY_MODEL

    model = make_model(20, 20, **TOY_MODEL).train()
    p_of = {name: m.p for name, m in model.named_modules() if isinstance(m, nn.Dropout)}
    attn = [m.dropout for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert attn and set(attn) == {0.0}  # no dropout on attention weights
    assert {p for n, p in p_of.items() if n.endswith("ffn.dropout")} == {0.0}
    rest = {p for n, p in p_of.items() if not n.endswith("ffn.dropout")}
    assert rest == {TOY_MODEL["dropout"]}  # sub-layer outputs, embeddings + PE
