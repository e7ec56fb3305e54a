"""The torch flat index (``index="torch-flat"``) against the memory-bandwidth bound, and
against faiss's flat index on the same vectors and queries, side by side in one run.

    python benchmarks/torch_flat.py --quick                          # 100k x 384 on the CPU: ~1-2 min on 2 cores
    python benchmarks/torch_flat.py --vectors 1000000 --dim 384      # the CPU figure of RESULTS.md
    python benchmarks/torch_flat.py --vectors 5000000 --dim 768 --devices cuda    # a GPU: float16, faiss left out

The bound (issue 45): answering a batch of queries has to read every vector once, so at best
a batch takes ``vectors x dim x bytes per value / bandwidth`` seconds, and queries/s at most
``batch`` over that. The bandwidth is measured in the same run: on the CPU a numpy copy of a
large array, on a GPU a device-to-device copy (``dst.copy_(src)``), both counted as bytes read
plus bytes written, best of three; with several devices each shard's time at its own device's
bandwidth, the slowest shard bounding the batch. Printed: queries/s, the bound, their ratio.

Beside it, because at a batch of 512 the products, not the reads, bound a CPU: the compute
bound, ``2 x vectors x dim`` floating-point operations a query at the rate ``torch.mm`` reaches
on the index's own block shape (measured here too). And faiss's ``IndexFlatIP`` on the CPU
over the same vectors and queries (``--no-faiss`` leaves it out): its queries/s and how many
queries got the same ids in the same order.

Vectors and queries are random unit vectors (as normalised sentence embeddings), from a seed.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

try:
    import searchgym  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchgym.corpora.torch_index import (
    INDEX_DTYPES,
    TorchFlatIndex,
    default_index_dtype,
)

_COPY_BYTES = 1 << 30  # the array copied to measure bandwidth (at most the vectors' size)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def unit_vectors(rows: int, dim: int, seed: int) -> np.ndarray:
    """``[rows, dim]`` float32 random unit vectors, made in chunks (no float64 copy of the whole)."""
    rng = np.random.default_rng(seed)
    out = np.empty((rows, dim), dtype=np.float32)
    for start in range(0, rows, 65536):
        chunk = rng.standard_normal((min(65536, rows - start), dim), dtype=np.float32)
        chunk /= np.linalg.norm(chunk, axis=1, keepdims=True)
        out[start : start + len(chunk)] = chunk
    return out


def cpu_bandwidth(nbytes: int) -> float:
    """Bytes/s of a numpy copy of ``nbytes`` (read + written), best of three."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - start)
    return 2 * src.nbytes / best


def cuda_bandwidth(torch, device, nbytes: int) -> float:
    """Bytes/s of a device-to-device copy of ``nbytes`` on ``device`` (read + written), best of three."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize(device)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() * 4 / best


def mm_flops(torch, device, dtype, batch: int, dim: int, rows: int) -> float:
    """Floating-point operations/s of ``torch.mm`` on the index's block shape, best of three."""
    q = torch.randn(batch, dim, device=device).to(getattr(torch, dtype))
    block = torch.randn(rows, dim, device=device).to(getattr(torch, dtype))
    times = []
    for _ in range(4):
        start = time.perf_counter()
        (q @ block.T).float()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return 2 * batch * dim * rows / min(times[1:])  # the first warms up


def timed_batches(search, queries: np.ndarray, batch: int, repeats: int, sync) -> tuple[list[float], list[np.ndarray]]:
    """Seconds per batch of ``batch`` queries (after one untimed batch), and each batch's ids."""
    search(queries[:batch])
    sync()
    times, ids = [], []
    for r in range(repeats):
        chunk = queries[r * batch : (r + 1) * batch]
        start = time.perf_counter()
        found = search(chunk)
        sync()
        times.append(time.perf_counter() - start)
        ids.append(found)
    return times, ids


def machine(torch) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores visible, torch {torch.__version__} ({torch.get_num_threads()} threads)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", type=int, default=1_000_000, help="passages in the index (default 1,000,000)")
    parser.add_argument("--dim", type=int, default=384, help="their dimension (default 384: MiniLM; e5-base is 768)")
    parser.add_argument("--batch", type=int, default=512, help="queries per search call (default 512: Search-R1's batch)")
    parser.add_argument("--k", type=int, default=10, help="hits per query (default 10)")
    parser.add_argument("--repeats", type=int, default=3, help="timed batches, each of new queries (default 3)")
    parser.add_argument("--devices", default=None,
                        help="torch devices of the index, comma-separated (default: every visible GPU, else cpu)")
    parser.add_argument("--dtype", default=None, choices=INDEX_DTYPES, help="what the index holds (default: float16 on GPUs, float32 on the CPU)")
    parser.add_argument("--no-faiss", action="store_true", help="leave out faiss's flat index (on by default on the CPU, off on GPUs)")
    parser.add_argument("--quick", action="store_true", help="100,000 x 384, two timed batches: about a minute or two on 2 cores")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.vectors, args.dim, args.repeats = 100_000, 384, 2
    for name in ("vectors", "dim", "batch", "k", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} expects a positive integer, got {getattr(args, name)}")

    import torch

    if args.devices is None:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        devices = [f"cuda:{i}" for i in range(count)] or ["cpu"]
    else:
        devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    dtype = args.dtype or default_index_dtype(devices)
    on_gpu = any(d.startswith("cuda") for d in devices)
    with_faiss = not args.no_faiss and not on_gpu

    load = os.getloadavg()
    print(f"machine: {machine(torch)}; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    log(f"making {args.vectors:,} x {args.dim} unit vectors and {args.batch * (args.repeats + 1):,} queries")
    vectors = unit_vectors(args.vectors, args.dim, args.seed)
    queries = unit_vectors(args.batch * (args.repeats + 1), args.dim, args.seed + 1)
    queries = np.concatenate([queries[args.batch :], queries[: args.batch]])  # the untimed batch last: timed ones first

    log(f"placing the index on {', '.join(devices)} in {dtype}")
    start = time.perf_counter()
    index = TorchFlatIndex(vectors, devices, dtype, query_batch=args.batch)
    placed = time.perf_counter() - start
    print(f"index: {index!r}, placed in {placed:.1f} s, {index.device_bytes / 2**30:.2f} GiB on its devices ({index.storage})")

    itemsize = index.device_bytes // (args.vectors * args.dim)
    rows_on: dict[str, int] = {}  # shards on one device scan one after another; devices at once
    for device, _first, count in index.shards:
        rows_on[device] = rows_on.get(device, 0) + count
    size = min(_COPY_BYTES, max(64 << 20, args.vectors * args.dim * 4))
    bandwidths = {key: cuda_bandwidth(torch, torch.device(key), size) if key.startswith("cuda") else cpu_bandwidth(size) for key in rows_on}
    bandwidth_bound = args.batch / max(rows_on[key] * args.dim * itemsize / bandwidths[key] for key in rows_on)
    block_rows = min(max(args.k + 1, index.score_block // args.batch), max(count for _, _, count in index.shards))
    flops = {key: mm_flops(torch, torch.device(key), dtype, args.batch, args.dim, block_rows) for key in rows_on}
    compute_bound = args.batch / max(rows_on[key] * 2 * args.dim * args.batch / flops[key] for key in rows_on)
    for key in rows_on:
        print(f"{key}: copy bandwidth {bandwidths[key] / 1e9:.1f} GB/s (read + written), torch.mm {flops[key] / 1e9:.1f} GFLOP/s "
              f"on [{args.batch} x {args.dim}] x [{args.dim} x {block_rows}] {dtype}")

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize()

    log(f"torch flat: {args.repeats} timed batches of {args.batch}")
    torch_times, torch_ids = timed_batches(lambda q: index.search(q, args.k)[1], queries, args.batch, args.repeats, sync)
    qps = args.batch / statistics.median(torch_times)
    rows = [("torch-flat", dtype, qps, torch_times)]
    same = None
    if with_faiss:
        import faiss

        log("faiss IndexFlatIP over the same vectors")
        flat = faiss.IndexFlatIP(args.dim)
        flat.add(vectors)
        faiss_times, faiss_ids = timed_batches(lambda q: flat.search(q, args.k)[1], queries, args.batch, args.repeats, lambda: None)
        rows.append(("faiss IndexFlatIP", "float32", args.batch / statistics.median(faiss_times), faiss_times))
        same = sum(int((a == b).all(axis=1).sum()) for a, b in zip(torch_ids, faiss_ids))
        near_ties = 0  # queries whose ids differ only where the two passages' exact scores are within float32 rounding
        for r, (a, b) in enumerate(zip(torch_ids, faiss_ids)):
            chunk = queries[r * args.batch : (r + 1) * args.batch].astype(np.float64)
            for row in np.nonzero((a != b).any(axis=1))[0]:
                places = np.nonzero(a[row] != b[row])[0]
                exact_a = vectors[a[row, places]].astype(np.float64) @ chunk[row]
                exact_b = vectors[b[row, places]].astype(np.float64) @ chunk[row]
                near_ties += int(np.abs(exact_a - exact_b).max() < 1e-6)
    load = os.getloadavg()

    print()
    print(f"{args.vectors:,} vectors x {args.dim}, batch {args.batch}, k={args.k}, {args.repeats} timed batches (median)")
    print("| index | dtype | queries/s | s per batch |")
    print("|---|---|---:|---:|")
    for name, kind, rate, times in rows:
        print(f"| {name} | {kind} | {rate:,.0f} | {', '.join(f'{t:.3f}' for t in times)} |")
    print()
    print(f"memory-bandwidth bound (one read of {args.vectors:,} x {args.dim} {dtype} values per batch): "
          f"{bandwidth_bound:,.0f} queries/s; torch-flat reaches {qps / bandwidth_bound:.1%} of it")
    print(f"compute bound (2 x {args.vectors:,} x {args.dim} operations a query at torch.mm's measured rate): "
          f"{compute_bound:,.0f} queries/s; torch-flat reaches {qps / compute_bound:.1%} of it")
    if same is not None:
        print(f"torch-flat / faiss queries/s: {qps / rows[1][2]:.2f}x; same ids in the same order for {same} of "
              f"{args.batch * args.repeats} queries, and {near_ties} more where the passages in other places score "
              "within 1e-6 of each other (float rounding of the two libraries' products)")
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if not on_gpu:
        print("No GPU here: this is the CPU form. The GPU figure (float16 against the card's copy bandwidth) needs "
              "a CUDA machine: --devices cuda.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
