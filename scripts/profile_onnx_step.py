"""The page's decoder-step graph, timed in onnxruntime (Python), and where its time
goes: milliseconds a step and each operator's share, for one or more folders of
graphs measured side by side in one run (in turns, so the machine's load falls on all).

    python -m transformer_edu export-onnx --corpus tatoeba --out /tmp/graphs
    python scripts/profile_onnx_step.py /tmp/graphs [_build/html/_static/tatoeba ...]
        [--beam 1] [--prefix 10] [--source 16] [--steps 200]

One thread (the page's WASM runs single-threaded). The inputs are a step as the page
sends it: ``--beam`` hypotheses with a cached prefix of ``--prefix`` positions, a
source of ``--source`` pieces. Reported, not asserted (the figures move with the
machine); the machine is named in the output.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path


def session(folder: Path, profile_prefix: str | None = None):
    """A one-thread session on the folder's step graph; with ``profile_prefix``,
    onnxruntime writes its profile there (not into the working directory)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return ort.InferenceSession(str(folder / "decoder_step.onnx"), options,
                                providers=["CPUExecutionProvider"])  # fmt: skip


def feeds(sess, beam: int, prefix: int, source: int) -> dict:
    import numpy as np

    shapes = {"K": beam, "P": prefix, "S": source}
    out = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else shapes[d] for d in i.shape]
        dtype = {"tensor(int64)": np.int64, "tensor(bool)": bool}.get(
            i.type, np.float32
        )
        out[i.name] = (np.ones(shape, dtype) if dtype is not np.float32
                       else np.zeros(shape, np.float32))  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    from transformer_edu.devices import describe_machine

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--prefix", type=int, default=10)
    parser.add_argument("--source", type=int, default=16)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    import onnxruntime as ort

    print(f"{describe_machine()}; onnxruntime {ort.__version__}, one thread")
    runs = {f: session(f) for f in args.folders}
    inputs = {f: feeds(s, args.beam, args.prefix, args.source) for f, s in runs.items()}
    times = collections.defaultdict(list)
    for f, s in runs.items():
        for _ in range(20):  # warm-up
            s.run(None, inputs[f])
    per_round = max(1, args.steps // args.rounds)
    for _ in range(args.rounds):
        for f, s in runs.items():
            t0 = time.perf_counter()
            for _ in range(per_round):
                s.run(None, inputs[f])
            times[f].append((time.perf_counter() - t0) / per_round * 1e3)
    first = args.folders[0]
    median = {f: sorted(t)[len(t) // 2] for f, t in times.items()}
    for f in args.folders:
        ms, ratio = median[f], median[f] / median[first]
        print(f"{f}: {ms:.2f} ms a step (median of {args.rounds} rounds of {per_round}; "
              f"beam {args.beam}, prefix {args.prefix}, source {args.source}), "
              f"{ratio:.2f} of {first.name or first}'s")  # fmt: skip
        with tempfile.TemporaryDirectory() as tmp:
            prof = session(f, str(Path(tmp) / "step"))
            for _ in range(50):
                prof.run(None, inputs[f])
            trace = Path(prof.end_profiling())  # onnxruntime's profile, a JSON file
            events = json.loads(trace.read_text())
        by_op = collections.Counter()
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                by_op[e["args"]["op_name"]] += e["dur"]
        total = sum(by_op.values())
        top = ", ".join(f"{op} {us / total:.0%}" for op, us in by_op.most_common(4))
        print(f"  operators' shares of the kernel time: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
