"""``python -m transformer_edu doctor``: is this set-up ready for the book?

One line per requirement, ``[OK]``, ``[WARN]`` or ``[FAIL]``, and for anything not OK
the fix. FAIL: a chapter cannot run (exit status 1). WARN: the chapters run, but
something is slower, drawn differently or untested (exit status 0). The last group
is only what ``make test`` needs (Chromium, npm); its absence is a WARN.

Each check is a small function returning ``Check``s, so a test can feed it a fault
(an old torch, a missing module) without breaking this machine.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import re
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

OK, WARN, FAIL = "OK", "WARN", "FAIL"
PYTHON_MIN = (3, 10)  # pyproject.toml's requires-python
# the torch the book's figures were recorded with (requirements.txt's pin)
RECORDED_TORCH = "2.13.0"
REINSTALL = "pip install -r requirements.txt (or in Colab: re-run the first cell)"


@dataclass(frozen=True)
class Check:
    status: str  # OK, WARN or FAIL
    what: str  # the requirement
    said: str  # what was found
    fix: str = ""  # what to do, for WARN and FAIL

    def line(self) -> str:
        text = f"[{self.status}]".ljust(7) + f"{self.what}: {self.said}"
        return text + (
            f"\n       fix: {self.fix}" if self.fix and self.status != OK else ""
        )


def _version_tuple(version: str) -> tuple[int, ...]:
    """'2.13.0+cpu' -> (2, 13, 0); '2.6.0.dev20250101' -> (2, 6, 0)."""
    return tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:3])


def check_python(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> list[Check]:
    said = ".".join(map(str, version))
    if version[:2] < PYTHON_MIN:
        need = ".".join(map(str, PYTHON_MIN))
        return [Check(FAIL, "Python", f"{said} (the package needs {need} or newer)",
                      f"use Python {need} or newer, e.g. a new venv")]  # fmt: skip
    return [Check(OK, "Python", said)]


def _torch_minimum() -> str:
    """The lowest torch the installed package accepts (its own metadata), else 2.1."""
    try:
        for req in importlib.metadata.requires("transformer_edu") or []:
            m = re.match(r"torch\s*>=\s*([\d.]+)", req)
            if m:
                return m.group(1)
    except importlib.metadata.PackageNotFoundError:
        pass
    return "2.1"


def check_torch(version: str | None = None, minimum: str | None = None) -> list[Check]:
    """torch's version against the package's range and the version the book's
    figures were recorded with."""
    if version is None:
        try:
            import torch
        except ImportError as e:
            return [Check(FAIL, "torch", f"not importable ({e})", REINSTALL)]
        version = torch.__version__
    minimum = minimum or _torch_minimum()
    if _version_tuple(version) < _version_tuple(minimum):
        return [Check(FAIL, "torch", f"{version} (the package needs >= {minimum})",
                      f'pip install "torch>={minimum}" (Colab: a newer runtime)')]  # fmt: skip
    if _version_tuple(version) != _version_tuple(RECORDED_TORCH):
        return [Check(WARN, "torch", f"{version}; the book's numbers were recorded "
                      f"with {RECORDED_TORCH}, so yours may differ in the last digits",
                      "nothing to do for reading; for the exact figures: "
                      f"pip install torch=={RECORDED_TORCH}")]  # fmt: skip
    return [Check(OK, "torch", version)]


def check_cpu() -> list[Check]:
    """The CPU torch computes on: its kernels' capability, native bf16, threads."""
    import torch

    from .devices import cpu_bf16_report, cpu_flags, cpu_name, native_bf16

    capability = torch.backends.cpu.get_cpu_capability()
    flags = ", ".join(cpu_flags()) or "no flags listed"
    name = f"{cpu_name()} ({platform.machine()}; {flags})"
    out = []
    vectorised = capability.upper() not in ("DEFAULT", "NO AVX", "")
    if vectorised:
        out.append(Check(OK, "CPU", f"{name}; torch's kernels: {capability}"))
    else:
        capped = [k for k in ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA",
                              "MKL_ENABLE_INSTRUCTIONS") if k in os.environ]  # fmt: skip
        fix = (f"unset {', '.join(capped)}" if capped else
               "nothing to do: the chapters run, several times slower")  # fmt: skip
        out.append(Check(WARN, "CPU", f"{name}; torch's kernels: {capability} "
                         "(no vector kernels: training runs slowly)", fix))  # fmt: skip
    native, said = native_bf16("cpu")
    if native:
        out.append(Check(OK, "bf16 on the CPU", f"native ({said})"))
    else:
        report = cpu_bf16_report()
        has = report.get("AVX-512 BF16") or report.get("AMX")
        capped = (
            has and not report["oneDNN bf16"] and "ONEDNN_MAX_CPU_ISA" in os.environ
        )
        fix = ("unset ONEDNN_MAX_CPU_ISA: it keeps oneDNN below this CPU's bf16 "
               "instructions" if capped else "nothing to do: chapter 12's training "
               "stays in float32 here (autocast 'auto'), slower than on a CPU with "
               "AVX-512 BF16 or AMX")  # fmt: skip
        out.append(Check(WARN, "bf16 on the CPU", f"emulated ({said})", fix))
    threads, cores = torch.get_num_threads(), os.cpu_count() or 1
    said = f"{threads} torch thread{'s' if threads != 1 else ''} on {cores} cores"
    if threads < cores and "OMP_NUM_THREADS" in os.environ:
        out.append(Check(WARN, "threads", f"{said} (OMP_NUM_THREADS="
                         f"{os.environ['OMP_NUM_THREADS']})",
                         "unset OMP_NUM_THREADS for the chapters' full speed "
                         "(make test sets it to 1 on purpose)"))  # fmt: skip
    else:
        out.append(Check(OK, "threads", said))
    return out


def check_device() -> list[Check]:
    """The device the chapters will train on (``pick_device``) and what it does."""
    import torch

    from .devices import pick_device

    device = pick_device()
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        bf16 = "bf16" if torch.cuda.is_bf16_supported() else "no bf16"
        return [Check(OK, "device", f"CUDA: {torch.cuda.get_device_name(device)} "
                      f"(compute capability {major}.{minor}, {bf16}; CUDA "
                      f"{torch.version.cuda})")]  # fmt: skip
    if device.type == "mps":
        return [Check(WARN, "device", "MPS (Apple Silicon): chosen, but this project's "
                      "tests and recorded margins ran on CPUs and CUDA only",
                      "if a chapter's assert fails on MPS, run it with DEVICE = 'cpu' "
                      "and tell us (the issue tracker)")]  # fmt: skip
    built = torch.backends.cuda.is_built()
    return [Check(OK, "device", "the CPU (no CUDA GPU" + ("" if built else
                  ", a CPU-only torch") + "; each chapter runs in minutes on it)")]  # fmt: skip


# the modules the chapters import, with what each is for; (module, distribution, need)
MODULES = [
    ("sentencepiece", "sentencepiece", FAIL, "the real-Japanese model's subwords"),
    ("sacrebleu", "sacrebleu", FAIL, "BLEU and chrF, the real-Japanese scores"),
    ("plotly", "plotly", FAIL, "the interactive figures"),
    ("matplotlib", "matplotlib", FAIL, "the static figures"),
    ("myst_nb", "myst-nb", FAIL, "glue(), which hands measured numbers to the prose"),
    ("ipywidgets", "ipywidgets", FAIL, "the in-page widgets in Jupyter"),
    ("anywidget", "anywidget", FAIL, "the translator and sampler widgets"),
    # no chapter imports these two: make book and make test do
    ("onnxruntime", "onnxruntime", WARN, "running an exported model (make test)"),
    (
        "onnxscript",
        "onnxscript",
        WARN,
        "torch's ONNX exporter (export-onnx, make book)",
    ),
]


def check_module(module: str, dist: str, need: str, purpose: str) -> Check:
    try:
        mod = importlib.import_module(module)
    except Exception as e:  # ImportError, or a broken install raising anything
        return Check(need, module, f"not importable ({type(e).__name__}: {e}); "
                     f"needed for {purpose}", REINSTALL)  # fmt: skip
    version = getattr(mod, "__version__", None)
    if version is None:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = "version unknown"
    return Check(OK, module, f"{version}, for {purpose}")


def check_modules() -> list[Check]:
    return [check_module(*row) for row in MODULES]


def check_data() -> list[Check]:
    """The data and the model that ship with the package (nothing is downloaded)."""
    here = Path(__file__).parent
    files = [here / "toy" / "corpus" / "ja_en.tsv",
             here / "tatoeba" / "corpus" / "tatoeba.tsv.xz",
             here / "tatoeba" / "corpus" / "tatoeba_spm.model",
             here / "tatoeba" / "weights" / "tatoeba_ja_en.pt"]  # fmt: skip
    missing = [str(f.relative_to(here)) for f in files if not f.is_file()]
    if missing:
        return [Check(FAIL, "shipped data", f"missing: {', '.join(missing)}",
                      "reinstall the package from a full clone (git lfs is not "
                      "used; the files are in the repository)")]  # fmt: skip
    size = sum(f.stat().st_size for f in files) / 2**20
    return [Check(OK, "shipped data", f"the toy corpus, Tatoeba, its subword model "
                  f"and the trained model ({size:.1f} MiB)")]  # fmt: skip


def check_japanese_font() -> list[Check]:
    """The figures' Japanese labels need a font with Japanese glyphs (IPAexGothic,
    from matplotlib-fontja; the book's pages ship the same font)."""
    try:
        import matplotlib_fontja  # noqa: F401  (registers IPAexGothic)
        from matplotlib import font_manager

        font = font_manager.findfont("IPAexGothic", fallback_to_default=False)
    except Exception as e:
        return [Check(WARN, "Japanese font", f"IPAexGothic not found ({e}): "
                      "Japanese in the figures shows as empty boxes",
                      "pip install matplotlib-fontja")]  # fmt: skip
    return [Check(OK, "Japanese font", f"IPAexGothic ({Path(font).name})")]


def check_colab() -> list[Check]:
    if "google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ:
        return [Check(OK, "Colab", "detected: the first cell of each chapter installs "
                      "the package; Runtime > Change runtime type > GPU speeds up "
                      "chapters 9 and 12")]  # fmt: skip
    return [Check(OK, "Colab", "not detected (a local set-up)")]


def check_test_tools(chromium: str | None = None) -> list[Check]:
    """What ``make test`` needs besides Python (``make test`` installs both on
    Debian and Ubuntu; elsewhere install them yourself)."""
    chromium = chromium or os.environ.get("CHROMIUM", "/usr/bin/chromium")
    out = []
    found = shutil.which(chromium) or (chromium if Path(chromium).is_file() else None)
    if found:
        out.append(Check(OK, "Chromium (make test)", found))
    else:
        out.append(Check(WARN, "Chromium (make test)", f"not at {chromium}; the browser "
                         "checks of make test need it (reading the book does not)",
                         "make test installs it on Debian/Ubuntu (apt); elsewhere set "
                         "CHROMIUM=/path/to/chromium"))  # fmt: skip
    npm = shutil.which("npm")
    if npm:
        out.append(Check(OK, "npm (make book, make test)", npm))
    else:
        out.append(Check(WARN, "npm (make book, make test)", "not found: the book's "
                         "vendored JavaScript is installed with it",
                         "make book installs it on Debian/Ubuntu (apt); elsewhere "
                         "install Node.js"))  # fmt: skip
    return out


GROUPS: list[tuple[str, Callable[[], list[Check]]]] = [
    ("Python and torch", lambda: check_python() + check_torch()),
    ("where the chapters compute", lambda: check_cpu() + check_device()),
    ("what the chapters import", check_modules),
    ("what ships with the package", lambda: check_data() + check_japanese_font()),
    ("where you run", check_colab),
    ("only for make test", check_test_tools),
]


def run_checks(groups: Iterable[tuple[str, Callable[[], list[Check]]]] = GROUPS,
               print_fn: Callable[[str], None] = print) -> int:  # fmt: skip
    """Print every check, grouped; 1 if any FAILed (a chapter cannot run), else 0."""
    failed = warned = 0
    for title, checks in groups:
        print_fn(f"{title}:")
        try:
            found = checks()
        except Exception as e:  # a check that breaks is itself a finding
            found = [Check(FAIL, title, f"the check itself failed: "
                           f"{type(e).__name__}: {e}", REINSTALL)]  # fmt: skip
        for check in found:
            print_fn("  " + check.line().replace("\n", "\n  "))
            failed += check.status == FAIL
            warned += check.status == WARN
    if failed:
        print_fn(f"{failed} FAIL, {warned} WARN: a chapter cannot run until each FAIL "
                 "is fixed.")  # fmt: skip
        return 1
    print_fn("the book's chapters can run here" +
             (f" ({warned} WARN above: read them)." if warned else "."))  # fmt: skip
    return 0
