"""Linear layers of a decode step: ``nn.functional.linear`` versus RowLinear's ``W @ x.T``.

Times every linear layer of the model (SmolLM2 by default: 211 weight matrices, 540 MB
in float32, so each pass reads the weights from memory as a decode step does) on
inputs of a few rows, both ways, interleaved in one run, and prints the median
milliseconds of one pass over all layers and their ratio.

    python benchmarks/linear.py                  # rows 1, 2, 5, 16, 64, 256
    python benchmarks/linear.py --rows 1 5 --repeats 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
try:
    import searchgym  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from searchgym.lm.linear import RowLinear


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", help="model whose linear layers are timed (default: smollm2)")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 5, 16, 64, 256], help="rows per product (default: 1 2 5 16 64 256)")
    parser.add_argument("--repeats", type=int, default=10, help="timed passes per way and row count (default: 10)")
    args = parser.parse_args()
    if any(r < 1 or r > RowLinear.max_rows for r in args.rows):
        parser.error(f"--rows must be between 1 and {RowLinear.max_rows} (RowLinear.max_rows)")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    from searchgym.lm.hf import TransformersLM

    lm = TransformersLM(args.model, device="cpu", prefix_cache_mb=0, row_linear=False)
    layers = [m for m in lm.model.modules() if type(m) is torch.nn.Linear]
    for layer in layers:
        layer.__class__ = RowLinear  # both ways below call the same modules' weights
    weights = sum(m.weight.numel() for m in layers) * lm.model.dtype.itemsize
    print(f"{args.model}: {len(layers)} linear layers, {weights / 2**20:.0f} MiB of weights, {torch.get_num_threads()} threads")
    print()
    print("| rows | linear (ms) | W @ x.T (ms) | linear / W @ x.T |")
    print("|---:|---:|---:|---:|")
    with torch.inference_mode():
        for rows in args.rows:
            inputs = {m.in_features: torch.randn(rows, m.in_features) for m in layers}
            ways = {
                "linear": lambda: [torch.nn.functional.linear(inputs[m.in_features], m.weight, m.bias) for m in layers],
                "row": lambda: [m(inputs[m.in_features]) for m in layers],
            }
            times: dict[str, list[float]] = {name: [] for name in ways}
            for name, way in ways.items():
                way()  # warm-up
            for _ in range(args.repeats):
                for name, way in ways.items():  # interleaved, so drifts in machine speed hit both
                    start = time.perf_counter()
                    way()
                    times[name].append(time.perf_counter() - start)
            a, b = (statistics.median(times[name]) * 1000 for name in ways)
            print(f"| {rows} | {a:.1f} | {b:.1f} | {a / b:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
