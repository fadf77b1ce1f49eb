"""The package as Colab and `pip install` get it: the wheel built from this checkout,
installed into a fresh virtual environment, run from a folder outside the checkout.

What a wheel can lose that the checkout still has: a data file that
``package-data`` does not name (the shipped model, its records, the corpora, the
SentencePiece model, the widgets' JavaScript), a subpackage that the ``find`` rule
misses, an import that only works from the repository's root. The fresh environment
sees the dependencies of this one (torch, sentencepiece, ...: nothing is downloaded)
but not its editable install of the package, so ``transformer_edu`` can only come
from the wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = ["私は太郎です。", "猫が好きです。"]

RUN = """
import json, sys
import transformer_edu
from transformer_edu.tatoeba.checkpoint import load_tatoeba_checkpoint
from transformer_edu.tatoeba.translate import translate_batch
from transformer_edu.toy.data import load_corpus

model, tok, meta = load_tatoeba_checkpoint()  # the shipped model, from the wheel
english = translate_batch(model, tok, sys.argv[1:])
print(json.dumps({"file": transformer_edu.__file__, "english": english,
                  "toy_pairs": len(load_corpus()), "steps": meta.get("steps"),
                  "public": sorted(transformer_edu.__all__),
                  "missing": [n for n in transformer_edu.__all__
                              if not hasattr(transformer_edu, n)]}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("wheel")
    # what the build reads, copied: building in the checkout would leave build/ there,
    # and a later build would take the files it holds whatever package-data says
    source = tmp / "source"
    shutil.copytree(ROOT / "transformer_edu", source / "transformer_edu",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(tmp / "dist"), str(source)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = (tmp / "dist").glob("transformer_edu-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=120)  # fmt: skip
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    # the dependencies: this environment's site-packages as a plain path (its .pth
    # files, the editable install's finder among them, are not run)
    ours = sysconfig.get_paths()["purelib"]
    (purelib / "dependencies.pth").write_text(ours + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", str(wheel)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    outside = tmp / "elsewhere"  # not the checkout: nothing importable from the cwd
    outside.mkdir()
    ran = subprocess.run([python, "-c", RUN, *SENTENCES], cwd=outside, env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    cli = subprocess.run(
        [venv / "bin" / "transformer-edu", "translate", "--corpus", "tatoeba",
         "--device", "cpu", SENTENCES[0]],
        cwd=outside, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return {"wheel": wheel, "purelib": purelib, "cli": cli,
            "out": json.loads(ran.stdout.strip().splitlines()[-1])}  # fmt: skip


@pytest.fixture(scope="module")
def checkout_model():
    """The shipped model as this checkout loads it (what the wheel must reproduce)."""
    from transformer_edu.tatoeba.checkpoint import load_tatoeba_checkpoint

    model, tok, _ = load_tatoeba_checkpoint()
    return model, tok


def test_the_wheel_holds_the_data_the_package_reads(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    package = ROOT / "transformer_edu"
    wanted = [p for p in package.rglob("*") if p.is_file()
              and p.suffix in (".pt", ".json", ".tsv", ".xz", ".model", ".js", ".css")
              and "__pycache__" not in p.parts]  # fmt: skip
    assert wanted, "no data files found in the checkout"
    missing = [str(p.relative_to(ROOT)) for p in wanted
               if str(p.relative_to(ROOT)) not in names]  # fmt: skip
    assert not missing, f"the wheel leaves out {missing}"
    modules = {str(p.relative_to(ROOT)) for p in package.rglob("*.py")
               if "__pycache__" not in p.parts}  # fmt: skip
    assert modules <= names, sorted(modules - names)


def test_the_installed_package_loads_the_shipped_model_and_translates(
    installed, checkout_model
):
    out = installed["out"]
    assert Path(out["file"]).resolve().is_relative_to(installed["purelib"].resolve())
    assert out["toy_pairs"] > 0 and out["steps"] > 0
    import transformer_edu  # every public name, as from the checkout

    assert out["public"] == sorted(transformer_edu.__all__) and not out["missing"]
    # the installed model translates as the checkout's does
    from transformer_edu.tatoeba.translate import translate_batch

    assert out["english"] == translate_batch(*checkout_model, SENTENCES)
    assert all(e.strip() for e in out["english"])


def test_the_installed_command_translates(installed, checkout_model):
    """``transformer-edu translate`` (the console script) with its default decoding,
    the one chosen on dev."""
    from transformer_edu.tatoeba.translate import (
        DEFAULT_ALPHA,
        DEFAULT_BEAM,
        translate_batch,
    )

    cli = installed["cli"]
    assert cli.returncode == 0, cli.stderr
    (want,) = translate_batch(
        *checkout_model, SENTENCES[:1], DEFAULT_BEAM, DEFAULT_ALPHA
    )
    assert want in cli.stdout
