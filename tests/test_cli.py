import os
import re
import subprocess
import sys

import pytest
from _toy import tiny_trained

from transformer_edu.cli import main
from transformer_edu.toy.checkpoint import load_checkpoint, save_checkpoint


@pytest.fixture
def tiny_ckpt(tmp_path):
    model, sv, tv, _, _ = tiny_trained()
    return str(save_checkpoint(tmp_path / "tiny.pt", model, sv, tv))


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_translate_prints_the_translation_on_its_own_line(capsys, tiny_ckpt):
    code, out, err = _run(
        capsys, "translate", "私は太郎です", "--checkpoint", tiny_ckpt
    )
    assert code == 0 and out.endswith("\n") and len(out.splitlines()) == 1
    code, out, err = _run(capsys, "translate", "私は太郎です", "--checkpoint", tiny_ckpt,
                          "--trace")  # fmt: skip
    assert code == 0 and "encoder reads: 私 / は / 太郎 / です" in out
    assert "given '<bos>'" in out
    code, out2, _ = _run(capsys, "translate", "私は太郎です", "--checkpoint", tiny_ckpt,
                         "--beam", "3")  # fmt: skip
    assert code == 0 and len(out2.splitlines()) == 1


@pytest.mark.parametrize(
    "argv", [["私は 太郎です"], ["私は\u3000太郎です"], ["私は", "太郎です"]]
)
def test_translate_accepts_words_separated_by_spaces(capsys, tiny_ckpt, argv):
    code, plain, _ = _run(
        capsys, "translate", "私は太郎です", "--checkpoint", tiny_ckpt
    )
    code, out, err = _run(capsys, "translate", *argv, "--checkpoint", tiny_ckpt)
    assert code == 0 and out == plain and "unknown" not in err


def test_unknown_words_are_named_on_stderr(capsys, tiny_ckpt):
    code, out, err = _run(
        capsys, "translate", "私はピカチュウです", "--checkpoint", tiny_ckpt
    )
    assert code == 0 and "ピカチュウ" in err and len(out.splitlines()) == 1


@pytest.mark.parametrize(
    "sentence, message",
    [
        ("", "the sentence is empty"),
        ("ピカチュウ", "every word is unknown to the model: ピカチュウ"),
        ("私は" * 20 + "太郎です", "more than the model's max_len=32"),
    ],
)
def test_bad_sentences_exit_2_with_one_line(capsys, tiny_ckpt, sentence, message):
    code, out, err = _run(capsys, "translate", sentence, "--checkpoint", tiny_ckpt)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_missing_and_corrupt_checkpoints_exit_2(capsys, tmp_path):
    code, out, err = _run(capsys, "translate", "私は太郎です", "--checkpoint",
                          str(tmp_path / "none.pt"))  # fmt: skip
    assert code == 2 and "no checkpoint at" in err and err.count("\n") == 1
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"\x00garbage")
    code, out, err = _run(capsys, "translate", "私は太郎です", "--checkpoint", str(bad))
    assert code == 2 and "not a readable checkpoint" in err and err.count("\n") == 1


def test_bench_quick_prints_the_ratio_last(capsys):
    code, out, _ = _run(capsys, "bench", "--quick")
    lines = out.strip().splitlines()
    assert code == 0 and "speed-up" in out
    assert lines[-1].startswith("train-step ratio ours/torch: ")
    assert float(lines[-1].split(": ")[1]) > 0


def test_default_model_trains_once_meets_targets_and_translates(tmp_path):
    """End to end, as a user: no checkpoint yet -> translate trains one, then answers.

    This trains the real default toy model (about 15 s on 2 CPU cores).
    """
    env = {**os.environ, "TRANSFORMER_EDU_CHECKPOINT": str(tmp_path / "toy.pt")}
    cmd = [sys.executable, "-m", "transformer_edu", "translate", "私は太郎です"]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    assert first.stdout == "I am Taro\n"
    assert (
        "no checkpoint at" in first.stderr and "training the toy model" in first.stderr
    )
    _, _, _, meta = load_checkpoint(tmp_path / "toy.pt")
    assert meta["train_exact"] == 1.0, meta
    assert meta["eval_exact"] >= 0.90, meta
    expected = {
        "私は犬より猫が好きです": "I like cats more than dogs",
        "私は猫より犬が好きです": "I like dogs more than cats",
    }
    for ja, en in expected.items():
        again = subprocess.run(cmd[:-1] + [ja], env=env, capture_output=True, text=True,
                               timeout=300)  # fmt: skip
        assert again.returncode == 0 and again.stdout == en + "\n", again.stderr
        assert "training" not in again.stderr  # the checkpoint was reused


def test_bench_toy_quick_compares_the_recipes_and_prints_the_ratio_last(capsys):
    code, out, _ = _run(capsys, "bench", "--toy", "--quick")
    lines = out.strip().splitlines()
    assert code == 0
    assert [line.split(" seed")[0].strip() for line in lines[1:3]] == [
        "default", "previous"]  # fmt: skip
    assert lines[-1].startswith("toy training time ratio default/previous: ")
    assert float(lines[-1].split(": ")[1]) > 0


def _tatoeba(*argv, stdin=None):
    cmd = [sys.executable, "-m", "transformer_edu", "translate", "--corpus", "tatoeba",
           *argv]  # fmt: skip
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=600)


def test_tatoeba_translates_a_text_sentence_by_sentence_and_names_bad_input():
    """As a user runs it: a text longer than one sentence is split at 。！？, each
    sentence translated; text that is not Japanese, or a sentence still too long, is
    refused with one line on stderr and status 2."""
    one = _tatoeba("私は太郎です。")
    two = _tatoeba("今日は雨です。")
    both = _tatoeba("私は太郎です。今日は雨です。")
    assert one.returncode == two.returncode == both.returncode == 0, both.stderr
    assert both.stdout == one.stdout.strip() + " " + two.stdout
    # a paragraph over the 30 characters the model takes, in sentences it takes
    long = "私は毎朝七時に起きます。それから朝ご飯を食べます！学校まで歩きますか？"
    assert len(long) > 30
    result = _tatoeba(long)
    assert result.returncode == 0 and len(result.stdout.split(". ")) >= 2, result
    for text, message in (
        ("Hello world", "“Hello world” is not Japanese"),
        ("🙂🙂", "has nothing to translate"),
        ("。！", "has nothing to translate"),
        ("私は" * 16, "a sentence has 32 characters"),
    ):
        bad = _tatoeba(text)
        assert bad.returncode == 2 and bad.stdout == "", (text, bad.stdout)
        assert bad.stderr.count("\n") == 1 and message in bad.stderr, bad.stderr
    # stdin: one text a line, a bad line gives an empty line and a message
    lines = _tatoeba(stdin="私は太郎です\nHello\n猫が好きです。OK!\n")
    out = lines.stdout.splitlines()
    assert lines.returncode == 2 and len(out) == 3 and out[1] == ""
    assert out[2].endswith(" OK!") and "line 2:" in lines.stderr


def test_evaluate_prints_each_score_with_its_interval_and_signature():
    """As a user runs it: BLEU and chrF of the shipped model on 200 test pairs, each
    with sacreBLEU's 95 % bootstrap interval (the signature says bs:1000) around it."""
    cmd = [sys.executable, "-m", "transformer_edu", "evaluate", "--limit", "200",
           "--examples", "1"]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("test: 200 pairs, ")
    pattern = (
        r"(BLEU|chrF2) = ([\d.]+), 95 % interval ([\d.]+)–([\d.]+) "
        r"\(bootstrap: μ = [\d.]+ ± ([\d.]+)\)  \((nrefs:1\|bs:1000\|seed:12345\|.+)\)"
    )
    found = {}
    for line in lines[1:3]:
        m = re.fullmatch(pattern, line)
        assert m, line
        found[m[1]] = [float(m[i]) for i in (2, 3, 4, 5)]
    for name, (score, low, high, half) in found.items():
        assert low <= score <= high, (name, score, low, high)
        assert 0.1 < half < 10 and high - low == pytest.approx(2 * half, abs=0.11)
    assert set(found) == {"BLEU", "chrF2"}
    assert lines[3].startswith("length ratio ")
