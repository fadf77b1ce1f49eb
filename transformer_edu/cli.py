"""Command line: python -m transformer_edu {train,translate,evaluate,bench,demo,export-onnx,doctor}

``--corpus toy`` (default of train/translate) is the generated grammar; ``--corpus
tatoeba`` is real Japanese (Tatoeba, CC-BY 2.0 FR) and the shipped model.
Bad input (an empty sentence, only unknown words, a sentence too long, a missing or
corrupt checkpoint, an unknown corpus) prints one line to stderr and exits with
status 2; reading stdin, a bad line prints an empty line (status 2 at the end).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from .tatoeba.translate import DEFAULT_ALPHA, DEFAULT_BEAM
from .toy.checkpoint import (
    CheckpointError,
    default_checkpoint_path,
    load_checkpoint,
    toy_model,
    train_and_save_toy_model,
)

CORPORA = ("toy", "tatoeba")
DEVICE_HELP = "cpu, cuda or mps (default: CUDA, else MPS, else the CPU)"
SOURCE_SENTENCES = ["私は太郎です", "私は犬より猫が好きです", "私は猫より犬が好きです"]


def _err(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)


def cmd_train(args: argparse.Namespace) -> int:
    if args.corpus == "tatoeba":
        return _train_tatoeba(args)
    if args.minutes is not None or args.max_steps is not None or args.set:
        raise ValueError("--minutes, --max-steps and --set are for --corpus tatoeba")
    path = Path(args.checkpoint) if args.checkpoint else default_checkpoint_path()
    overrides = {} if args.epochs is None else {"epochs": args.epochs}
    _, _, _, hist = train_and_save_toy_model(
        path, progress=not args.quiet, device=args.device, seed=args.seed, **overrides
    )
    print(f"trained in {hist.seconds:.1f} s on {hist.device}; saved {path}")
    print(f"train exact match:    {hist.train_exact[-1]:.1%}")
    print(f"held-out exact match: {hist.eval_exact[-1]:.1%}")
    return 0


def _git_commit() -> str:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=Path(__file__).parent, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def _train_tatoeba(args: argparse.Namespace) -> int:
    import json

    from .tatoeba.checkpoint import (
        default_tatoeba_checkpoint_path,
        save_tatoeba_checkpoint,
    )
    from .tatoeba.train import _dist_info, tokens_per_second, train_tatoeba

    if args.epochs is not None:
        raise ValueError("--epochs is for the toy corpus; Tatoeba trains by --minutes")
    from .devices import describe_device, pick_device
    from .tatoeba.recipe import recipe_for

    # the device's recipe: on a GPU the paper's batch and warm-up (CUDA_RECIPE)
    cfg = recipe_for(pick_device(args.device), seed=args.seed)
    if args.minutes is not None:
        if args.minutes <= 0:
            raise ValueError(f"--minutes {args.minutes} must be positive")
        cfg.minutes = args.minutes
    cfg.max_steps = args.max_steps
    for assignment in args.set or []:
        cfg.set(assignment)
    path = (
        Path(args.checkpoint) if args.checkpoint else default_tatoeba_checkpoint_path()
    )
    commit = _git_commit()  # the code that trains, not what HEAD is an hour later
    model, hist = train_tatoeba(config=cfg, progress=not args.quiet)
    rank, world = _dist_info()
    if rank != 0:
        return 0
    command = "python -m transformer_edu " + " ".join(sys.argv[1:])
    meta = {
        "command": command, "seed": args.seed, "minutes": cfg.minutes,
        "max_steps": cfg.max_steps, "steps": hist.steps,
        "minutes_taken": round(hist.seconds / 60, 1),  # the budget or max_steps ends it
        "commit": commit, "world_size": world, "device": hist.device,
        "machine": describe_device(hist.device),
        "autocast": hist.autocast,
        "torch": str(torch.__version__), "history": hist.to_dict(),
    }  # fmt: skip
    save_tatoeba_checkpoint(path, model, _tok(), meta)
    path.with_suffix(".json").write_text(json.dumps(meta, indent=1))
    print(f"trained {hist.steps} steps ({hist.epochs:.2f} epochs) in "
          f"{hist.seconds / 60:.1f} min on {hist.device} x{world}; "
          f"{tokens_per_second(hist):,.0f} tokens/s; saved {path}")  # fmt: skip
    print(
        f"dev BLEU (first {cfg.eval_sentences} dev pairs, greedy): "
        f"{hist.final_bleu:.2f}{' (averaged checkpoints)' if hist.averaged else ''}"
    )
    return 0


def _tok():
    from .tatoeba.data import default_tokenizer

    return default_tokenizer()


def _load(args: argparse.Namespace):
    from .devices import pick_device

    device = pick_device(getattr(args, "device", None))  # demo has no --device
    if args.checkpoint:  # an explicit file must exist and be valid
        model, sv, tv, _ = load_checkpoint(args.checkpoint, device)
        return model, sv, tv
    path = default_checkpoint_path()
    if not path.is_file():
        print(f"no checkpoint at {path}; training the toy model first (seconds on a CPU)",
              file=sys.stderr)  # fmt: skip
    return toy_model(path, progress=sys.stderr.isatty(), device=str(device))


def _toy_translator(args: argparse.Namespace):
    """fn(sentence) -> English, with the toy model (unknown words noted on stderr)."""
    from .decoding import translate

    model, sv, tv = _load(args)

    def translate_one(sentence: str) -> str:
        out = translate(model, sentence, sv, tv, beam=args.beam or 1,
                        trace=args.trace)  # fmt: skip
        if out.unknown:
            print(f"unknown words (read as <unk>): {', '.join(out.unknown)}",
                  file=sys.stderr)  # fmt: skip
        if args.trace:
            _print_trace(out, tv)
        return out.text

    return translate_one


def _print_trace(out, tv) -> None:
    print("encoder reads: " + " / ".join(out.tokens))
    for step in out.steps:
        prefix = " ".join(tv.itos[i] for i in step.prefix)
        top = ", ".join(f"{tv.itos[i]} {p:.2f}" for i, p in
                        zip(step.top_ids, step.top_probs, strict=True))  # fmt: skip
        attn = step.cross_attention[-1].mean(0)  # last layer, heads averaged: (S,)
        focus = out.tokens[int(attn.argmax())] if len(out.tokens) else "?"
        print(f"given {prefix!r:<24} -> {tv.itos[step.chosen]!r:<8} "
              f"(top: {top}; looks at {focus})")  # fmt: skip


def _load_tatoeba(args: argparse.Namespace):
    from .devices import pick_device
    from .tatoeba.checkpoint import load_tatoeba_checkpoint

    return load_tatoeba_checkpoint(args.checkpoint, pick_device(args.device))


def cmd_translate(args: argparse.Namespace) -> int:
    """A text from the arguments, or one text a line from stdin (then one translation
    a line on stdout; a bad line gives an empty line and a stderr message). Tatoeba:
    a text of several sentences is split at 。！？ and each sentence translated."""
    texts = [" ".join(args.sentence).strip()] if args.sentence else None
    if texts == [""]:
        raise ValueError("the sentence is empty")
    if texts is None:
        texts = sys.stdin.read().splitlines()
        if not texts:
            raise ValueError("empty input: give a sentence, or sentences on stdin")
    if args.corpus == "tatoeba":
        if args.trace:
            raise ValueError("--trace is for the toy model")
        from .tatoeba.translate import translate_texts

        model, tok, _ = _load_tatoeba(args)
        beam = DEFAULT_BEAM if args.beam is None else args.beam
        alpha = DEFAULT_ALPHA if args.alpha is None else args.alpha
        results = translate_texts(model, tok, texts, beam, alpha)
    else:
        if args.alpha is not None:
            raise ValueError("--alpha is for --corpus tatoeba")
        translate_one = _toy_translator(args)
        results = []
        for text in texts:
            try:
                if not text.strip():
                    raise ValueError("the sentence is empty")
                results.append((translate_one(text.strip()), None))
            except ValueError as e:
                results.append((None, str(e)))
    if args.sentence:  # from the command line: an error ends the command
        english, why = results[0]
        if why:
            raise ValueError(why)
        print(english)
        return 0
    for n, (english, why) in enumerate(results):
        if why:
            _err(f"line {n + 1}: {why}")
        print(english or "")
    return 0 if all(why is None for _, why in results) else 2


def cmd_evaluate(args: argparse.Namespace) -> int:
    """BLEU and chrF of a split, each with sacreBLEU's 95 % bootstrap interval and
    signature, then a few examples."""
    from .metrics import N_BOOTSTRAP, bleu, chrf, length_ratio
    from .tatoeba.data import load_tatoeba
    from .tatoeba.translate import translate_batch

    if args.corpus != "tatoeba":
        raise ValueError(
            "evaluate scores --corpus tatoeba (train prints the toy's scores)"
        )
    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit {args.limit} must be at least 1")
    model, tok, meta = _load_tatoeba(args)
    pairs = load_tatoeba(args.split)[: args.limit]
    decoding = "greedy" if args.beam == 1 else f"beam {args.beam}, alpha {args.alpha}"
    print(f"{args.split}: {len(pairs)} pairs, {decoding}")
    hyps = translate_batch(model, tok, [p.ja for p in pairs], args.beam, args.alpha)
    refs = [p.en for p in pairs]
    print(bleu(hyps, refs, N_BOOTSTRAP))
    print(chrf(hyps, refs, N_BOOTSTRAP))
    print(f"length ratio {length_ratio(hyps, refs):.3f} (output words / reference "
          f"words); the intervals: {N_BOOTSTRAP:,} resampled test sets of "
          f"{len(pairs)} pairs, the middle 95 % of their scores")  # fmt: skip
    for p, h in list(zip(pairs, hyps, strict=True))[: args.examples]:
        print(f"\n  ja:  {p.ja}\n  ref: {p.en}\n  out: {h}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.tatoeba or args.ddp:
        return _bench_tatoeba(args)
    if args.decoding:
        return _bench_decoding(args)
    if args.limit is not None:
        raise ValueError("--limit is for --decoding")
    if args.steps is not None or args.device or args.nproc is not None:
        raise ValueError("--steps, --device and --nproc are for --tatoeba or --ddp")
    if args.toy:
        from .bench.model import toy_training

        seeds = (0,) if args.quick else tuple(range(args.reps or 3))
        toy_training(seeds, epochs=1 if args.quick else None)
        return 0
    from .bench.model import BenchConfig, run

    cfg = BenchConfig(reps=5 if args.reps is None else args.reps)
    if args.quick:  # a smoke run for tests: tiny sizes, same code path
        cfg = BenchConfig(vocab=50, d_model=32, n_heads=4, n_layers=2, d_ff=64,
                          batch=4, length=8, reps=2, decode_tokens=8)  # fmt: skip
    run(cfg)
    return 0


def _bench_decoding(args: argparse.Namespace) -> int:
    from .bench.decoding import DecodingBenchConfig, run_decoding

    if args.steps is not None or args.nproc is not None or args.reps is not None:
        raise ValueError("--decoding takes --limit and --threads")
    if args.device not in (None, "cpu"):
        raise ValueError(f"--device {args.device}: --decoding runs on the CPU")
    limit = 6 if args.quick and args.limit is None else args.limit
    if limit is not None and limit < 1:
        raise ValueError(f"--limit {limit} must be at least 1")
    cfg = DecodingBenchConfig(limit=limit, chunk=3 if args.quick else 128)
    run_decoding(cfg)
    return 0


def _bench_tatoeba(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from .bench.tatoeba import (
        TatoebaBenchConfig,
        loss_curves,
        run_ddp,
        run_recipes,
        run_tatoeba,
    )

    cfg = TatoebaBenchConfig.quick() if args.quick else TatoebaBenchConfig()
    if args.steps is not None:
        cfg = replace(cfg, steps=args.steps)
    if (args.recipes or args.curves) and not args.tatoeba:
        raise ValueError("--recipes and --curves go with --tatoeba")
    if args.tatoeba:
        if args.reps is not None or args.nproc is not None:
            raise ValueError(
                "--reps and --nproc are for --ddp; --tatoeba takes --steps"
            )
        cfg = replace(cfg, device=args.device or "cpu")
        if args.recipes:  # --quick: not torch.compile (its compile takes a minute)
            from .bench.tatoeba import RECIPES

            run_recipes(
                cfg, [n for n in RECIPES if not (args.quick and "compile" in n)]
            )
        elif args.curves:
            names = ["+ fused Adam", "+ bf16 autocast", "+ written-out attention"]
            loss_curves(replace(cfg, steps=args.curves), names)
        else:
            run_tatoeba(cfg)
        return 0
    if args.device not in (None, "cpu"):
        raise ValueError(f"--device {args.device}: --ddp runs on the CPU (gloo)")
    run_ddp(replace(cfg, threads=args.threads, nproc=args.nproc or cfg.nproc,
                    rounds=args.reps or cfg.rounds))  # fmt: skip
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .decoding import translate

    model, sv, tv = _load(args)
    for s in SOURCE_SENTENCES:
        print(f"{s} -> {translate(model, s, sv, tv).text}")
    return 0


def cmd_export_onnx(args: argparse.Namespace) -> int:
    from .browser.onnx_export import export_onnx, export_tatoeba

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder")
    if args.corpus == "tatoeba":
        model, tok, _ = _load_tatoeba(args)
        run = lambda: export_tatoeba(out, model.cpu(), tok, quantize=not args.fp32)  # noqa: E731
    else:
        if args.fp32:
            raise ValueError("--fp32 is for --corpus tatoeba (the toy is float32)")
        model, sv, tv = _load(args)
        run = lambda: export_onnx(model.cpu(), sv, tv, out)  # noqa: E731
    try:
        paths = run()
    except OSError as e:  # a folder we may not write to
        raise ValueError(f"cannot write to {out}: {e.strerror or e}") from e
    for path in paths.values():
        print(f"{path}  {path.stat().st_size:,} bytes")
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import run_checks

    return run_checks()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m transformer_edu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)
    ckpt = dict(help=f"checkpoint file (default: {default_checkpoint_path()}, "
                     "or $TRANSFORMER_EDU_CHECKPOINT)")  # fmt: skip

    t = sub.add_parser("train", help="train the toy ja->en model and save a checkpoint")
    t.add_argument("--checkpoint", **ckpt)
    t.add_argument("--corpus", choices=CORPORA, default="toy",
                   help="toy (the generated grammar) or tatoeba (real Japanese)")  # fmt: skip
    t.add_argument("--epochs", type=int, help="override the number of epochs (toy)")
    t.add_argument("--minutes", type=float, help="time budget (tatoeba; default 60)")
    t.add_argument("--max-steps", type=int, help="stop after this many steps (tatoeba)")
    t.add_argument("--device", help=DEVICE_HELP)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="tatoeba: a TatoebaTrainConfig field (max_tokens=3000), or "
                   "model.FIELD for a model size (model.d_model=384); repeatable")  # fmt: skip
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=cmd_train)

    tr = sub.add_parser(
        "translate", help='translate a Japanese sentence, e.g. "私は太郎です"'
    )
    tr.add_argument("sentence", nargs="*",
                    help="none: read one sentence a line from stdin")  # fmt: skip
    tr.add_argument("--corpus", choices=CORPORA, default="toy",
                    help="toy (default) or tatoeba (the shipped real-Japanese model)")  # fmt: skip
    tr.add_argument("--checkpoint", **ckpt)
    tr.add_argument(
        "--beam",
        type=_positive,
        help=f"beam size (1 = greedy; default: toy 1, tatoeba {DEFAULT_BEAM})",
    )
    tr.add_argument("--alpha", type=float,
                    help=f"length penalty (tatoeba; default {DEFAULT_ALPHA})")  # fmt: skip
    tr.add_argument("--device", help=DEVICE_HELP)
    tr.add_argument("--trace", action="store_true", help="print each greedy step (toy)")
    tr.set_defaults(func=cmd_translate)

    ev = sub.add_parser("evaluate", help="BLEU and chrF (sacreBLEU) on a Tatoeba split")
    ev.add_argument("--corpus", choices=CORPORA, default="tatoeba")
    ev.add_argument("--split", choices=("dev", "test"), default="test")
    ev.add_argument("--checkpoint", help="default: the shipped Tatoeba model")
    ev.add_argument(
        "--beam",
        type=_positive,
        default=DEFAULT_BEAM,
        help="beam size (1 = greedy; the default was chosen on dev)",
    )
    ev.add_argument("--alpha", type=float, default=DEFAULT_ALPHA,
                    help="length penalty (chosen on dev with the beam size)")  # fmt: skip
    ev.add_argument("--limit", type=int, help="only the first N pairs")
    ev.add_argument("--examples", type=int, default=5, help="examples to print")
    ev.add_argument("--device", help=DEVICE_HELP)
    ev.set_defaults(func=cmd_evaluate)

    b = sub.add_parser(
        "bench",
        help="ours vs nn.Transformer train step; KV-cache speed-up; --tatoeba, --ddp, "
        "--decoding",
    )
    which = b.add_mutually_exclusive_group()
    which.add_argument("--tatoeba", action="store_true",
                       help="training tokens/s of ours vs nn.Transformer in the Tatoeba "
                            "configuration, on real batches, side by side")  # fmt: skip
    which.add_argument("--ddp", action="store_true",
                       help="tokens/s of 1 rank vs --nproc ranks under "
                            "torch.distributed.run (gloo, CPU)")  # fmt: skip
    which.add_argument("--decoding", action="store_true",
                       help="the shipped Tatoeba model: beam 4 (alpha 0.6) over the "
                            "test split with the KV cache (batched) vs without (one "
                            "sentence at a time), and vs greedy, side by side")  # fmt: skip
    which.add_argument("--toy", action="store_true",
                       help="the default toy model's training time and exact match "
                            "against the previous recipe, alternating, seeds 0 to "
                            "--reps - 1 (default 3)")  # fmt: skip
    b.add_argument("--threads", type=int,
                   help="torch threads (default: torch's; with --ddp: per rank, "
                        "default the cores split among the ranks)")  # fmt: skip
    b.add_argument("--reps", type=int,
                   help="repetitions (default 5); with --ddp: launches of each size "
                        "(default 2)")  # fmt: skip
    b.add_argument(
        "--steps", type=int, help="timed steps (--tatoeba, --ddp; default 30)"
    )
    b.add_argument("--nproc", type=int, help="ranks compared with 1 (--ddp; default 2)")
    b.add_argument("--limit", type=int,
                   help="--decoding: only the first N test pairs")  # fmt: skip
    b.add_argument("--device", help="cpu, cuda or mps (--tatoeba; default cpu)")
    b.add_argument("--recipes", action="store_true",
                   help="--tatoeba: tokens/s of the training recipe change by change "
                        "(dropout places, fused Adam, bf16 autocast, written-out "
                        "attention, torch.compile), side by side")  # fmt: skip
    b.add_argument("--curves", type=int, metavar="STEPS",
                   help="--tatoeba: training loss of float32 and the bf16 recipes over "
                        "STEPS steps on the same batches")  # fmt: skip
    b.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    b.set_defaults(func=cmd_bench)

    e = sub.add_parser(
        "export-onnx", help="a model as ONNX graphs + JSON, for the browser"
    )
    e.add_argument("--out", default="translator", help="folder (default: translator)")
    e.add_argument("--checkpoint", **ckpt)
    e.add_argument("--corpus", choices=CORPORA, default="toy",
                   help="toy (float32) or tatoeba (the shipped model, int8)")  # fmt: skip
    e.add_argument("--fp32", action="store_true",
                   help="tatoeba: float32 weights (no quantisation)")  # fmt: skip
    e.add_argument("--device", help=argparse.SUPPRESS)
    e.set_defaults(func=cmd_export_onnx)

    d = sub.add_parser("demo", help="translate the source articles' three sentences")
    d.add_argument("--checkpoint", **ckpt)
    d.set_defaults(func=cmd_demo)

    doc = sub.add_parser("doctor", help="check this set-up: one line per requirement, "
                         "[OK] / [WARN] / [FAIL] and the fix; exit 1 on a FAIL")  # fmt: skip
    doc.set_defaults(func=cmd_doctor)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, CheckpointError) as e:
        _err(str(e))
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
