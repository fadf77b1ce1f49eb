"""The machine: which device the book trains on, what its CPU and GPU can do, and how
a measurement names where it was taken. The one home of these probes (``doctor``
reports them; training, benchmarks and the chapters ask them).

``pick_device``: CUDA, then Apple's MPS, then the CPU. ``native_bf16``: whether a
device multiplies bfloat16 natively. ``wide_float``: float64 where the device has it
(MPS has none). ``describe_machine`` / ``describe_device``: where a figure was measured.
"""

from __future__ import annotations

import functools
import os
import platform
import re
from pathlib import Path

import torch

DEVICE_TYPES = ("cpu", "cuda", "mps")  # what --device and the chapters' DEVICE accept


def mps_available() -> bool:
    """Whether Apple's Metal backend (MPS) is built into this torch and usable here."""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps and mps.is_available())


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The device asked for, else CUDA when present, else MPS (Apple Silicon) when
    present, else the CPU."""
    if device is not None:
        if str(device).split(":")[0] not in DEVICE_TYPES:
            raise ValueError(f"device {str(device)!r}: expected one of "
                             f"{', '.join(DEVICE_TYPES)}")  # fmt: skip
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def wide_float(device: str | torch.device) -> torch.dtype:
    """float64 for sums that want the extra precision, except on MPS, which has no
    float64 (there float32)."""
    return torch.float32 if torch.device(device).type == "mps" else torch.float64


def cpu_name() -> str:
    """The CPU's model name as the OS gives it (/proc/cpuinfo), else the platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    if platform.system() == "Darwin":  # macOS: no /proc; sysctl names the chip
        import subprocess

        try:
            said = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"],
                                  capture_output=True, text=True, timeout=5)  # fmt: skip
            if said.stdout.strip():
                return said.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown CPU"


# the CPU flags that choose torch's kernels (x86-64's vector units, aarch64's)
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "asimd",
                "bf16", "sve")  # fmt: skip


def cpu_flags() -> list[str]:
    """Which of ``KERNEL_FLAGS`` the OS lists for this CPU (/proc/cpuinfo's ``flags``
    on x86-64, ``Features`` on aarch64); empty where it lists none (macOS)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):
                have = set(value.split())
                return [flag for flag in KERNEL_FLAGS if flag in have]
    except OSError:
        pass
    return []


def _cpu_flag(name: str) -> bool:
    check = getattr(torch.cpu, name, None)  # private helpers of torch >= 2.3
    return bool(check()) if check else False


@functools.cache
def cpu_bf16_report() -> dict[str, str | bool]:
    """What torch says about this CPU and bfloat16: its kernels' capability
    (``AVX2``, ``AVX512``, ...), oneDNN's bf16 support (it respects
    ``ONEDNN_MAX_CPU_ISA``) and, on x86-64, the AVX-512 BF16 and AMX instructions."""
    report: dict[str, str | bool] = {
        "capability": torch.backends.cpu.get_cpu_capability(),
        "oneDNN bf16": torch.backends.mkldnn.is_available()
        and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()),
    }
    if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686"):
        report["AVX-512 BF16"] = _cpu_flag("_is_avx512_bf16_supported")
        report["AMX"] = _cpu_flag("_is_amx_tile_supported")
    return report


def native_bf16(device_type: str = "cpu") -> tuple[bool, str]:
    """Whether ``device_type`` multiplies bfloat16 natively, and what torch said.

    CPU: oneDNN (which runs the matmuls) must support bf16 and, on x86-64, the CPU
    must have the AVX-512 BF16 or AMX instructions (oneDNN emulates bf16 with plain
    AVX-512); on other CPUs (aarch64) oneDNN's answer is the CPU's BF16 extension.
    CUDA: an Ampere or later GPU. MPS: never claimed (nothing here has measured bf16
    on Apple's GPUs, so ``autocast="auto"`` stays in float32 there).
    """
    if device_type == "cuda":
        ok = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
        return ok, f"CUDA bf16 {'supported' if ok else 'not supported'}"
    if device_type == "mps":
        return False, "MPS: bf16 not measured by this project, float32 kept"
    report = cpu_bf16_report()
    ok = bool(report["oneDNN bf16"])
    if "AVX-512 BF16" in report:
        ok = ok and bool(report["AVX-512 BF16"] or report["AMX"])
    said = [f"torch's CPU capability {report['capability']}"] + [
        f"{name} {_yes(bool(value))}"
        for name, value in report.items()
        if name != "capability"
    ]
    return ok, ", ".join(said)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def describe_machine(threads: int | None = None) -> str:
    """Where a figure was measured: the CPU's name, architecture, cores, torch threads
    and what its vector units do (torch's CPU capability, native bf16)."""
    threads = threads or torch.get_num_threads()
    bf16 = "native bf16" if native_bf16("cpu")[0] else "no native bf16"
    return (
        f"{cpu_name()} ({platform.machine()}, {os.cpu_count()} cores, {threads} torch "
        f"thread{'s' if threads != 1 else ''}; {torch.backends.cpu.get_cpu_capability()}"
        f", {bf16})"
    )


_DESCRIBED = re.compile(
    r"(?P<name>.*) \((?P<arch>[^,]+), (?P<cores>\d+) cores, (?P<threads>\d+) torch "
    r"threads?; (?P<capability>[^,]+), (?P<no>no )?native bf16\)"
)


def describe_machine_ja(described: str) -> str:
    """``describe_machine()``'s text in Japanese, for the Japanese edition; a text in
    another form (an older record's) with only its words translated."""
    m = _DESCRIBED.fullmatch(described)
    if m is None:
        return (described.replace(", ", "、").replace(" cores", " コア")
                .replace(" torch threads", " torch スレッド"))  # fmt: skip
    bf16 = "bf16 はエミュレーション" if m["no"] else "bf16 をネイティブに演算"
    return (f"{m['name']}（{m['arch']}、{m['cores']} コア、torch スレッド "
            f"{m['threads']}、{m['capability']}、{bf16}）")  # fmt: skip


def describe_device(device: str | torch.device) -> str:
    """``describe_machine()`` for the CPU; a GPU's name and CUDA version for CUDA;
    the Mac's chip for MPS."""
    device = torch.device(device)
    if device.type == "cuda":
        return (f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda}, "
                f"{torch.cuda.device_count()} visible)")  # fmt: skip
    if device.type == "mps":
        return f"{cpu_name()} (Apple GPU through MPS, macOS {platform.mac_ver()[0]})"
    return describe_machine()
