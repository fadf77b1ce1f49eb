"""`python -m transformer_edu doctor` through the command (this machine, a missing
module, a capped CPU), its checks fed faults one by one, and the device rules it
reports (CUDA, then MPS, then the CPU; float32 where MPS has no float64)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import transformer_edu.decoding as decoding_module
import transformer_edu.devices as devices
import transformer_edu.modern.rope as rope_module
from transformer_edu import doctor
from transformer_edu.doctor import FAIL, OK, WARN, Check
from transformer_edu.tatoeba.recipe import resolve_autocast

ROOT = Path(__file__).resolve().parent.parent
GROUPS = ("Python and torch:", "where the chapters compute:", "what the chapters import:",
          "what ships with the package:", "where you run:", "only for make test:")  # fmt: skip


def run_doctor(env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "transformer_edu", "doctor"], capture_output=True,
        text=True, cwd=ROOT, timeout=120, env={**os.environ, **(env or {})}, **kw,
    )  # fmt: skip


def lines_with(out: str, status: str) -> list[str]:
    return [line.strip() for line in out.splitlines() if line.strip().startswith(f"[{status}]")]  # fmt: skip


def test_doctor_on_this_machine_says_the_chapters_can_run():
    done = run_doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert [line for line in out.splitlines() if line in GROUPS] == list(GROUPS)
    assert not lines_with(out, FAIL)
    assert out.rstrip().splitlines()[-1].startswith("the book's chapters can run here")
    for what in ("Python", "torch", "CPU", "bf16 on the CPU", "device", "sentencepiece",
                 "sacrebleu", "onnxruntime", "Japanese font", "Colab", "shipped data"):  # fmt: skip
        assert re.search(rf"^\s*\[\w+\] +{re.escape(what)}: ", out, re.M), what
    # the CPU line names what torch runs on; the device line what the chapters use
    cpu = next(line for line in out.splitlines() if re.search(r"\] +CPU: ", line))
    assert torch.backends.cpu.get_cpu_capability() in cpu
    device = next(line for line in out.splitlines() if re.search(r"\] +device: ", line))
    expected = devices.pick_device().type
    assert {"cuda": "device: CUDA: ", "mps": "device: MPS", "cpu": "device: the CPU"}[
        expected
    ] in device


def test_doctor_names_a_missing_module_and_fails(tmp_path):
    """A module that will not import (simulated: a sentencepiece.py first on the path
    that raises) is a FAIL with the fix, and the exit status says a chapter cannot run."""
    (tmp_path / "sentencepiece.py").write_text('raise ImportError("simulated")\n')
    done = run_doctor({"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1, done.stdout + done.stderr
    failed = lines_with(done.stdout, FAIL)
    assert len(failed) == 1 and failed[0].startswith(
        "[FAIL] sentencepiece: not importable"
    )
    assert "simulated" in failed[0] and "real-Japanese model" in failed[0]
    after = done.stdout.split(failed[0])[1].splitlines()[1].strip()
    assert after.startswith("fix: pip install -r requirements.txt")
    assert done.stdout.rstrip().endswith(
        "a chapter cannot run until each FAIL is fixed."
    )


def test_doctor_warns_about_a_capped_cpu_and_says_what_capped_it():
    """torch's kernels capped (ATEN_CPU_CAPABILITY=default: no vector kernels) and
    oneDNN capped below bf16: WARNs that name the variables to unset, exit status 0."""
    done = run_doctor({"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert done.returncode == 0, done.stdout + done.stderr
    warned = "\n".join(lines_with(done.stdout, WARN))
    assert (
        "[WARN] CPU: " in warned.replace("]  ", "] ")
        and "torch's kernels: DEFAULT" in warned
    )
    assert "fix: unset ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA" in done.stdout
    assert "[WARN] bf16 on the CPU: emulated" in warned
    report = devices.cpu_bf16_report()
    if report.get("AVX-512 BF16") or report.get("AMX"):  # this CPU has them: capped
        assert "fix: unset ONEDNN_MAX_CPU_ISA" in done.stdout


def test_torch_and_python_versions_against_the_package_range():
    assert doctor.check_torch("2.0.1", minimum="2.1")[0].status == FAIL
    recorded = doctor.check_torch(doctor.RECORDED_TORCH + "+cpu", minimum="2.1")[0]
    assert recorded.status == OK
    colab = doctor.check_torch("2.11.0+cu128", minimum="2.1")[0]
    assert colab.status == WARN and "recorded" in colab.said and "2.11.0" in colab.said
    assert doctor.check_python((3, 9, 18))[0].status == FAIL
    assert doctor.check_python((3, 12, 1))[0].status == OK
    # the minimum is the installed package's own requirement, not a copy
    assert doctor._torch_minimum() == "2.1"


def test_each_check_reports_its_fault():
    missing = doctor.check_module("no_such_module_here", "nope", FAIL, "a test")
    assert missing.status == FAIL and missing.fix
    optional = doctor.check_module("no_such_module_here", "nope", WARN, "a test")
    assert optional.status == WARN
    tools = doctor.check_test_tools(chromium="/nonexistent/chromium")
    assert tools[0].status == WARN and "/nonexistent/chromium" in tools[0].said
    assert doctor.check_module("torch", "torch", FAIL, "x").status == OK


def test_a_check_that_breaks_is_a_fail_and_the_run_goes_on():
    def broken() -> list[Check]:
        raise RuntimeError("boom")

    printed: list[str] = []
    status = doctor.run_checks(
        [("fine", lambda: [Check(OK, "a", "b")]), ("broken", broken),
         ("after", lambda: [Check(WARN, "c", "d", "e")])], printed.append,
    )  # fmt: skip
    assert status == 1
    text = "\n".join(printed)
    assert "[FAIL] broken: the check itself failed: RuntimeError: boom" in text
    assert "[WARN] c: d" in text and "fix: e" in text  # the checks after it ran
    assert doctor.run_checks([("ok", lambda: [Check(WARN, "c", "d", "e")])],
                             printed.append) == 0  # fmt: skip


def test_pick_device_prefers_cuda_then_mps_then_the_cpu(monkeypatch):
    for cuda, mps, expected in ((True, True, "cuda"), (False, True, "mps"),
                                (False, False, "cpu")):  # fmt: skip
        monkeypatch.setattr(torch.cuda, "is_available", lambda c=cuda: c)
        monkeypatch.setattr(devices, "mps_available", lambda m=mps: m)
        assert devices.pick_device().type == expected
    assert devices.pick_device("mps").type == "mps"  # asked for: taken as asked
    assert devices.pick_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(ValueError, match="expected one of cpu, cuda, mps"):
        devices.pick_device("tpu")


def test_the_command_line_refuses_an_unknown_device():
    done = subprocess.run(
        [sys.executable, "-m", "transformer_edu", "translate", "--device", "tpu", "私は"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip() == "error: device 'tpu': expected one of cpu, cuda, mps"


def test_mps_gets_float32_where_others_get_float64_and_no_automatic_bf16():
    assert devices.wide_float("mps") == torch.float32
    assert devices.wide_float("cpu") == devices.wide_float("cuda") == torch.float64
    assert devices.native_bf16("mps")[0] is False
    assert resolve_autocast("auto", torch.device("mps")) is None
    assert resolve_autocast("bf16", torch.device("mps")) == "bf16"  # asked for: kept
    assert "MPS" in devices.describe_device("mps")


def test_the_float32_path_mps_takes_gives_the_same_answers(monkeypatch):
    """What runs on MPS, run here: rotary angles and the beam search's bookkeeping in
    float32 instead of float64 (``wide_float``) give the same angles to float32's
    precision and the same beams."""
    positions = torch.arange(128)
    wide = rope_module.rotary_angles(positions, 64)
    monkeypatch.setattr(rope_module, "wide_float", lambda device: torch.float32)
    narrow = rope_module.rotary_angles(positions, 64)
    torch.testing.assert_close(narrow, wide, rtol=1e-6, atol=2e-5)

    from transformer_edu.toy.checkpoint import toy_model
    from transformer_edu.toy.data import load_corpus, make_batch

    model, sv, tv = toy_model(progress=False, device="cpu")
    src = make_batch(load_corpus("test")[:12], sv, tv).src
    search = decoding_module.beam_search_batch
    before = search(model, src, beam_size=4, max_len=20, alpha=0.6)
    monkeypatch.setattr(decoding_module, "wide_float", lambda device: torch.float32)
    after = search(model, src, beam_size=4, max_len=20, alpha=0.6)
    assert [[h for h, _ in hyps] for hyps in after] == [
        [h for h, _ in hyps] for hyps in before
    ]
    for hyps_a, hyps_b in zip(after, before, strict=True):
        assert [s for _, s in hyps_a] == pytest.approx([s for _, s in hyps_b], rel=1e-6)
