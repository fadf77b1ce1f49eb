"""Two CPU ranks under torchrun compute what one process computes on the same global
batch, and only rank 0 writes (the worker: tests/helpers/ddp_worker.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import ddp_worker
import pytest

from transformer_edu.tatoeba.checkpoint import load_tatoeba_checkpoint
from transformer_edu.tatoeba.data import default_tokenizer
from transformer_edu.tatoeba.train import build_tatoeba_model, train_tatoeba

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--standalone", str(ROOT / "tests" / "helpers" / "ddp_worker.py"), str(out)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, cwd=out, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return out


def _single(**overrides):
    tok = default_tokenizer()
    train, _ = ddp_worker.pairs()
    model = build_tatoeba_model(tok, seed=0, **ddp_worker.DDP_MODEL)
    return train_tatoeba(model, ddp_worker.config(**overrides), tok, train, [],
                         progress=False, log=lambda s: None)[1]  # fmt: skip


def test_two_ranks_give_the_loss_of_one_process_on_the_same_global_batch(ddp_run):
    """Rank r trains on batches r, r + 2, ...; one process with batches_per_step=2
    trains on batches 2k and 2k + 1 together at step k: the same global batch."""
    ddp = json.loads((ddp_run / "ddp.json").read_text())
    one = _single(batches_per_step=2)
    assert ddp["world_size"] == 2 and one.world_size == 1
    assert len(ddp["step_loss"]) == len(one.step_loss) == ddp_worker.STEPS
    for step, (a, b) in enumerate(zip(ddp["step_loss"], one.step_loss, strict=True)):
        assert abs(a - b) < 1e-5, (step, a, b)
    assert ddp["tokens"] == one.tokens  # both ranks' tokens counted
    # the comparison can fail: one rank's batch alone has another loss
    half = _single(max_steps=1)
    assert abs(half.step_loss[0] - ddp["step_loss"][0]) > 1e-3
    assert ddp["step_loss"][-1] < ddp["step_loss"][0]  # it trained


def test_only_rank_0_writes_the_checkpoint_and_the_log(ddp_run):
    assert (ddp_run / "saved_by_rank0").exists()
    assert not (ddp_run / "saved_by_rank1").exists()
    assert "saved" in (ddp_run / "stdout0.txt").read_text()
    assert (ddp_run / "stdout1.txt").read_text() == ""
    meta = json.loads((ddp_run / "cli.json").read_text())
    assert meta["world_size"] == 2 and meta["history"]["steps"] == 2
    _, _, stored = load_tatoeba_checkpoint(ddp_run / "cli.pt")
    assert stored["world_size"] == 2
    assert sorted(p.name for p in ddp_run.iterdir() if p.suffix in (".pt", ".tmp")) == [
        "cli.pt"
    ]
