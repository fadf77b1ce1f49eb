import pytest
import torch
from _toy import tiny_trained

from transformer_edu.model.transformer import make_model
from transformer_edu.toy.checkpoint import (
    VERSION,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
)


def test_round_trip_keeps_config_vocab_and_weights(tmp_path):
    model, sv, tv, _, pairs = tiny_trained()
    path = save_checkpoint(tmp_path / "m.pt", model, sv, tv, meta={"note": "x"})
    loaded, sv2, tv2, meta = load_checkpoint(path)
    assert sv2 == sv and tv2 == tv and meta["note"] == "x" and "corpus" in meta
    assert loaded.config == model.config and not loaded.training
    src = torch.tensor([sv.encode(pairs[0].src)])
    tgt = torch.tensor([[1, 5, 6]])
    torch.testing.assert_close(loaded(src, tgt), model.eval()(src, tgt))


def test_missing_corrupt_and_foreign_files_are_named(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "nope.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"this is not a checkpoint")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(bad)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(CheckpointError, match="not a transformer_edu checkpoint"):
        load_checkpoint(other)


def test_truncated_file_is_reported(tmp_path):
    model, sv, tv, _, _ = tiny_trained()
    path = save_checkpoint(tmp_path / "m.pt", model, sv, tv)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(path)


def _rewrite(path, **changes):
    blob = torch.load(path, weights_only=True)
    blob.update(changes)
    torch.save(blob, path)


def test_other_version_is_refused(tmp_path):
    model, sv, tv, _, _ = tiny_trained()
    path = save_checkpoint(tmp_path / "m.pt", model, sv, tv)
    _rewrite(path, version=VERSION + 1)
    with pytest.raises(
        CheckpointError, match=f"version {VERSION + 1}.*reads version {VERSION}"
    ):
        load_checkpoint(path)


def test_weights_that_do_not_fit_the_config_are_named(tmp_path):
    model, sv, tv, _, _ = tiny_trained()
    path = save_checkpoint(tmp_path / "m.pt", model, sv, tv)
    other = make_model(len(sv), len(tv), n_layers=1, d_model=64, n_heads=4, d_ff=64)
    _rewrite(path, state_dict=other.state_dict())
    with pytest.raises(
        CheckpointError, match=r"weights do not fit the config: .*shape"
    ):
        load_checkpoint(path)
    blob = torch.load(path, weights_only=True)
    state = dict(model.state_dict())
    state.pop("generator.proj.bias")
    _rewrite(path, state_dict=state)
    with pytest.raises(CheckpointError, match="missing generator.proj.bias"):
        load_checkpoint(path)
    del blob


def test_an_older_default_toy_model_in_the_cache_is_retrained(tmp_path, monkeypatch):
    """A checkpoint of the right corpus but not of today's TOY_MODEL is stale."""
    from transformer_edu.toy import checkpoint
    from transformer_edu.toy.data import build_vocabs, load_corpus
    from transformer_edu.toy.training import TOY_MODEL

    sv, tv = build_vocabs(load_corpus("train"))
    older = make_model(len(sv), len(tv), **{**TOY_MODEL, "n_layers": 2, "d_ff": 256})
    current = make_model(len(sv), len(tv), **TOY_MODEL)
    retrained = []

    def fake_training(path, **kwargs):  # records the call instead of training
        retrained.append(path)
        return current, sv, tv, None

    monkeypatch.setattr(checkpoint, "train_and_save_toy_model", fake_training)
    for model, stale in ((older, True), (current, False)):
        path = save_checkpoint(tmp_path / f"{stale}.pt", model, sv, tv)
        got, _, _ = checkpoint.toy_model(path, progress=False, device="cpu")
        assert (retrained[-1:] == [path]) is stale
        assert got.config == current.config
        kept, _, _ = checkpoint.toy_model(path, train_if_missing=False, device="cpu")
        assert kept.config == model.config  # no training allowed: what is there
