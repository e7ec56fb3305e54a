"""Exact inner-product search on torch: a flat index of passage vectors scanned by matrix
products, on the CPU or on GPUs, with no faiss-gpu build.

faiss's GPU wheels are tied to one CUDA major version and were conda-only for years, while any
machine with CUDA torch can multiply matrices. :class:`TorchFlatIndex` holds the vectors (float16
or bfloat16 on CUDA, float32 on the CPU), split into consecutive shards over several devices,
and answers a batch of queries with their exact top-k by inner product:

- **Memory stays bounded.** Queries go ``query_batch`` at a time, and each shard is scanned
  in blocks of rows so that one score block holds at most ``score_block`` scores
  (``query_batch x rows``): no ``[queries, passages]`` matrix of the whole corpus is ever made.
  Each block keeps its best ``k + 1`` and folds them into a running top-k.
- **Ties are ordered, not left to chance.** Hits come by score descending, passages with
  equal scores in corpus order (lowest row first), the order BM25 and sharded indexes use:
  the top-k is the first ``k`` rows of one total order, so the top-3 is the start of the top-10
  and the sharded answer equals the unsharded one. A block whose ``k``-th and ``(k + 1)``-th
  scores are equal may have cut a run of equal scores arbitrarily (``torch.topk`` picks any);
  the rows where that happened are scanned again with a selection that keeps the lowest rows.
- **Scores are float32.** On CUDA, half-precision products are accumulated and returned in
  float32 (``torch.mm(..., out_dtype=torch.float32)``, torch >= 2.8), else rounded to the
  half type and widened.

faiss's ``IndexFlatIP`` on the CPU returns the same ids in the same order wherever the scores
differ (real embeddings; tested against faiss on MiniLM embeddings and random vectors), with
scores equal to float rounding (faiss and torch call different matrix-product kernels, so two
passages whose scores differ by less than that rounding, about 1e-7, may come in either
order). Among exactly equal scores faiss lists the higher row first and keeps, at the k-th
place, whichever of the tied rows its heap met, which follows no rule a caller could name.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from searchgym.error import ConfigError, UnknownNameError, require

__all__ = ["INDEX_DTYPES", "TORCH_FLAT", "TorchFlatIndex", "default_index_dtype"]

#: The ``index=`` name of :class:`TorchFlatIndex` in :class:`~searchgym.corpora.dense.DenseRetriever`.
TORCH_FLAT = "torch-flat"
#: Types the vectors can be held in on the devices.
INDEX_DTYPES = ("float32", "float16", "bfloat16")
_LOAD_ROWS_BYTES = 64 << 20  # host bytes converted and copied to a device at a time while loading
_CUDA_HEADROOM = 1 << 30  # bytes left free on a GPU beside its shard: score blocks, top-k buffers


def _torch():
    return require("torch", extra="dense", feature=f"The {TORCH_FLAT} dense index")


def default_index_dtype(devices: Sequence[str]) -> str:
    """``"float16"`` when every device is a GPU (half the memory and traffic of float32; the
    retrieval servers of FlashRAG and Search-R1 shard their flat index over the GPUs in float16
    too, faiss's ``useFloat16``), else ``"float32"``."""
    return "float16" if devices and all(str(d).startswith("cuda") for d in devices) else "float32"


class _Shard:
    """Rows ``[offset, offset + len(vectors))`` of the index, on one device."""

    def __init__(self, device: Any, vectors: Any, offset: int, *, wide_products: bool = False, view: bool = False):
        self.device = device
        self.vectors = vectors  # [rows, d] in the index's dtype
        self.offset = offset
        self.wide_products = wide_products  # torch.mm(..., out_dtype=float32) works here
        self.view = view  # the caller's array itself, not a copy

    def __len__(self) -> int:
        return int(self.vectors.shape[0])


class TorchFlatIndex:
    """Exact top-k by inner product over ``vectors`` with torch matrix products.

    Args:
        vectors: ``[passages, dim]`` real array, row ``i`` passage ``i``; typically the
            memory-mapped embedding cache or a faiss flat file's vectors
            (:func:`~searchgym.corpora.faiss_index.read_flat_file`). On the CPU in float32 the
            shards are views of it (nothing is copied: a mapped file stays in the page cache);
            otherwise each shard is converted and copied to its device 64 MB at a time.
        devices: torch device names, ``"cpu"``, ``"cuda"`` or ``"cuda:N"``. The rows are split
            into consecutive shards of equal size, one per device; each shard returns its own
            top-k and these are merged exactly. A device named twice holds two shards.
        dtype: ``"float16"``, ``"bfloat16"`` or ``"float32"``; ``None``: float16 on GPUs,
            float32 on the CPU (:func:`default_index_dtype`). Half types halve the memory and
            the bytes read per query batch, at about 3 (float16) or 2 (bfloat16) significant
            digits per vector component.
        query_batch: queries scored together; more amortise each read of the vectors.
        score_block: scores one block may hold (``queries x rows``, float32): the working
            memory of a search beside the vectors, 4 bytes each (default 2^25: 128 MiB).

    Raises :class:`~searchgym.error.ConfigError` for a CUDA device when torch has no CUDA or
    the GPU is not there, a dtype the device cannot multiply in, a shard that does not fit in
    its GPU's free memory, and :class:`~searchgym.error.UnknownNameError` for an unknown dtype.
    """

    def __init__(
        self,
        vectors: np.ndarray,
        devices: Sequence[str] = ("cpu",),
        dtype: str | None = None,
        *,
        query_batch: int = 512,
        score_block: int = 1 << 25,
    ):
        torch = _torch()
        if not isinstance(vectors, np.ndarray) or vectors.ndim != 2 or not np.issubdtype(vectors.dtype, np.floating):
            got = f"an array of shape {vectors.shape} and type {vectors.dtype}" if isinstance(vectors, np.ndarray) else type(vectors).__name__
            raise ConfigError(f"TorchFlatIndex expects a 2-D float array [passages, dim], got {got}.")
        if vectors.shape[0] < 1 or vectors.shape[1] < 1:
            raise ConfigError(f"TorchFlatIndex expects at least one vector of at least one dimension, got shape {vectors.shape}.")
        if isinstance(devices, str) or not devices or not all(isinstance(d, str) for d in devices):
            raise ConfigError(f"TorchFlatIndex expects devices to be a non-empty list of torch device names such as ['cuda:0', 'cuda:1'], got {devices!r}.")
        for name, value in (("query_batch", query_batch), ("score_block", score_block)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"TorchFlatIndex expects {name} to be a positive integer, got {value!r}.")
        dtype = default_index_dtype(devices) if dtype is None else dtype
        if dtype not in INDEX_DTYPES:
            raise UnknownNameError(f"{TORCH_FLAT} index dtype", dtype, INDEX_DTYPES)
        self.vectors = vectors
        self.ntotal, self.d = int(vectors.shape[0]), int(vectors.shape[1])
        self.dtype = dtype
        self.devices = [_check_device(torch, name, dtype) for name in devices]
        self.query_batch = query_batch
        self.score_block = score_block
        bounds = [round(i * self.ntotal / len(devices)) for i in range(len(devices) + 1)]
        self._shards: list[_Shard] = []
        for device, start, end in zip(self.devices, bounds, bounds[1:]):
            if end > start:
                self._shards.append(self._load_shard(torch, device, start, end))

    # ------------------------------------------------------------------ loading
    def _load_shard(self, torch: Any, device: Any, start: int, end: int) -> _Shard:
        target = getattr(torch, self.dtype)
        rows = self.vectors[start:end]
        if device.type == "cpu" and self.dtype == "float32" and rows.dtype == np.float32 and rows.flags.c_contiguous:
            with warnings.catch_warnings():  # a read-only memory map: torch warns that writes would be undefined; none are made
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                return _Shard(device, torch.from_numpy(rows), start, view=True)
        itemsize = torch.finfo(target).bits // 8
        if device.type == "cuda":
            free, _total = torch.cuda.mem_get_info(device)
            need = (end - start) * self.d * itemsize
            if need + _CUDA_HEADROOM > free:
                raise ConfigError(
                    f"The {TORCH_FLAT} index needs {need / 2**30:.1f} GiB on {device} for its shard of {end - start:,} "
                    f"{self.d}-dimensional {self.dtype} vectors, plus about {_CUDA_HEADROOM / 2**30:.0f} GiB to search, but "
                    f"{free / 2**30:.1f} GiB is free there. Spread it over more GPUs (device=['cuda:0', 'cuda:1', ...]), "
                    "use a half dtype (index_dtype='float16'), or free the GPU."
                )
        out = torch.empty((end - start, self.d), dtype=target, device=device)
        step = max(1, _LOAD_ROWS_BYTES // (4 * self.d))
        for a in range(0, end - start, step):
            chunk = np.ascontiguousarray(rows[a : a + step], dtype=np.float32)
            out[a : a + len(chunk)] = torch.from_numpy(chunk).to(device).to(target)
        return _Shard(device, out, start, wide_products=_wide_products(torch, device, target))

    # ------------------------------------------------------------------ what it is
    @property
    def storage(self) -> str:
        """``"cuda"`` when the vectors are on GPUs, ``"mmap"`` when the CPU shards are views of a
        memory-mapped file, else ``"memory"`` (copied into this process)."""
        if any(s.device.type == "cuda" for s in self._shards):
            return "cuda"
        mapped = isinstance(self.vectors, np.memmap) or isinstance(getattr(self.vectors, "base", None), np.memmap)
        return "mmap" if mapped and all(s.view for s in self._shards) else "memory"

    @property
    def shards(self) -> list[tuple[str, int, int]]:
        """``(device, first row, rows)`` of each shard, in row order."""
        return [(str(s.device), s.offset, len(s)) for s in self._shards]

    @property
    def device_bytes(self) -> int:
        """Bytes the shards hold on their devices (views of the caller's array count too)."""
        return sum(s.vectors.numel() * s.vectors.element_size() for s in self._shards)

    @property
    def description(self) -> str:
        """``TorchFlatIndex(float16, cuda:0 + cuda:1)``: the dtype and the devices of the shards."""
        return f"TorchFlatIndex({self.dtype}, {' + '.join(str(s.device) for s in self._shards)})"

    def __repr__(self) -> str:
        return f"{self.description[:-1]}, ntotal={self.ntotal}, d={self.d})"

    # ------------------------------------------------------------------ searching
    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores, ids)``, each ``[queries, min(k, ntotal)]``: float32 scores descending and
        the int64 rows, ties in row order (see the module docstring)."""
        torch = _torch()
        queries = np.asarray(queries)
        if queries.ndim != 2 or queries.shape[1] != self.d:
            raise ConfigError(
                f"TorchFlatIndex.search expects queries of shape [n, {self.d}] (the index's dimension), got shape {queries.shape}."
            )
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise ConfigError(f"TorchFlatIndex.search expects k to be a positive integer, got {k!r}.")
        n = min(int(k), self.ntotal)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        scores = np.empty((len(queries), n), dtype=np.float32)
        ids = np.empty((len(queries), n), dtype=np.int64)
        batch = max(1, min(self.query_batch, self.score_block // (n + 1)))
        with torch.inference_mode():
            for a in range(0, len(queries), batch):
                q = torch.from_numpy(queries[a : a + batch])
                # Every shard's scan is queued before any result is waited for: GPUs scan at once.
                running = [self._scan(torch, shard, q, n) for shard in self._shards]
                parts = [self._settle_ties(torch, shard, q, n, *found) for shard, found in zip(self._shards, running)]
                top_scores, top_ids = _merge(torch, [p[0].cpu() for p in parts], [p[1].cpu() for p in parts], n)
                scores[a : a + len(q)] = top_scores.numpy()
                ids[a : a + len(q)] = top_ids.numpy()
        return scores, ids

    def _products(self, torch: Any, shard: _Shard, q: Any, block: Any) -> Any:
        """Float32 scores ``[queries, rows]`` of ``q`` (in the shard's dtype) against ``block``."""
        if shard.wide_products:
            return torch.mm(q, block.T, out_dtype=torch.float32)
        products = q @ block.T
        return products if products.dtype == torch.float32 else products.float()

    def _blocks(self, shard: _Shard, queries: int, n: int):
        """``(first row, rows)`` of the shard's blocks for ``queries`` queries: at most
        ``score_block`` scores each, and at least ``n + 1`` rows."""
        rows = max(n + 1, self.score_block // max(1, queries))
        for start in range(0, len(shard), rows):
            yield start, shard.vectors[start : start + rows]

    def _scan(self, torch: Any, shard: _Shard, q: Any, n: int) -> tuple[Any, Any, Any]:
        """The shard's top ``n`` of each query (no wait on the device), and which queries had
        a run of equal scores cut at a block's ``n``-th place."""
        q = q.to(shard.device).to(shard.vectors.dtype)
        cut = torch.zeros(len(q), dtype=torch.bool, device=shard.device)
        best = None
        for start, block in self._blocks(shard, len(q), n):
            scores = self._products(torch, shard, q, block)  # [Q, rows]
            values, rows = scores.topk(min(n + 1, len(block)), dim=1)  # [Q, n + 1], best first
            if values.shape[1] > n:
                cut |= values[:, n] == values[:, n - 1]
                values, rows = values[:, :n], rows[:, :n]
            found = (values, rows + (shard.offset + start))
            best = found if best is None else _merge(torch, [best[0], found[0]], [best[1], found[1]], n)
        best = _merge(torch, [best[0]], [best[1]], n)  # ties in row order, also for a single block
        return best[0], best[1], cut

    def _settle_ties(self, torch: Any, shard: _Shard, q: Any, n: int, scores: Any, ids: Any, cut: Any) -> tuple[Any, Any]:
        """The scan's answer, with the queries whose equal scores a block cut scanned again
        keeping the lowest rows of each run (rare with real embeddings: duplicate passages)."""
        again = cut.nonzero().flatten()
        if len(again) == 0:
            return scores, ids
        qa = q[again.cpu()].to(shard.device).to(shard.vectors.dtype)  # [F, d]
        best = None
        for start, block in self._blocks(shard, len(qa), n):
            s = self._products(torch, shard, qa, block)  # [F, rows]
            if s.shape[1] <= n:
                rows = torch.arange(s.shape[1], device=s.device).expand(len(s), -1)
            else:
                kth = s.topk(n, dim=1).values[:, -1:]  # [F, 1]
                above = s > kth
                tied = s == kth
                keep = above | (tied & (tied.cumsum(1) <= n - above.sum(1, keepdim=True)))  # exactly n per query
                earlier_first = torch.arange(s.shape[1], 0, -1, device=s.device)  # larger for lower rows
                rows = torch.where(keep, earlier_first, 0).topk(n, dim=1).indices  # [F, n]
            found = (s.gather(1, rows), rows + (shard.offset + start))
            best = found if best is None else _merge(torch, [best[0], found[0]], [best[1], found[1]], n)
        best = _merge(torch, [best[0]], [best[1]], n)
        scores, ids = scores.clone(), ids.clone()
        scores[again], ids[again] = best[0], best[1]
        return scores, ids


def _merge(torch: Any, scores: list[Any], ids: list[Any], n: int) -> tuple[Any, Any]:
    """The best ``n`` of the candidates, by score descending and row ascending among equal
    scores (two sorts of a few columns: by row, then stably by score)."""
    scores = torch.cat(scores, dim=1) if len(scores) > 1 else scores[0]  # [Q, candidates]
    ids = torch.cat(ids, dim=1) if len(ids) > 1 else ids[0]
    by_row = ids.argsort(dim=1)
    scores, ids = scores.gather(1, by_row), ids.gather(1, by_row)
    by_score = scores.argsort(dim=1, descending=True, stable=True)[:, :n]
    return scores.gather(1, by_score), ids.gather(1, by_score)


def _check_device(torch: Any, name: str, dtype: str) -> Any:
    """``torch.device(name)``, checked: it exists here and multiplies ``dtype`` matrices."""
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise ConfigError(f"The {TORCH_FLAT} index expects torch device names such as 'cpu', 'cuda' or 'cuda:1', got {name!r} ({e}).") from None
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"The {TORCH_FLAT} index runs on 'cpu' and 'cuda' devices, got {name!r}.")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            built = "torch was built without CUDA" if torch.version.cuda is None else "no GPU is visible (CUDA_VISIBLE_DEVICES, drivers)"
            raise ConfigError(
                f"The {TORCH_FLAT} index was asked for device {name!r}, but CUDA is not available: {built} "
                f"(torch {torch.__version__}). Use device='cpu', or install a CUDA build of torch."
            )
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise ConfigError(f"The {TORCH_FLAT} index was asked for device {name!r}, but only {count} GPU(s) are visible: cuda:0 .. cuda:{count - 1}.")
        if dtype == "bfloat16" and not _bf16_on(torch, device):
            raise ConfigError(
                f"The {TORCH_FLAT} index was asked for bfloat16 on {name!r} ({torch.cuda.get_device_name(device)}), which has no "
                "bfloat16 matrix units (they start with compute capability 8.0). Use index_dtype='float16'."
            )
    target = getattr(torch, dtype)
    try:
        probe = torch.ones((2, 3), dtype=target, device=device)
        (probe @ probe.T).float().sum().item()
    except RuntimeError as e:
        raise ConfigError(
            f"The {TORCH_FLAT} index cannot multiply {dtype} matrices on {name!r} with torch {torch.__version__} "
            f"({str(e).splitlines()[0]}). Use index_dtype='float32' there."
        ) from None
    return device


def _bf16_on(torch: Any, device: Any) -> bool:
    major, _minor = torch.cuda.get_device_capability(device)
    return major >= 8


def _wide_products(torch: Any, device: Any, dtype: Any) -> bool:
    """Whether ``torch.mm(a, b, out_dtype=torch.float32)`` multiplies ``dtype`` matrices on
    ``device`` into float32 (CUDA, torch >= 2.8): half-precision products without rounding the scores."""
    if dtype == torch.float32 or device.type != "cuda":
        return False
    try:
        a = torch.ones((2, 3), dtype=dtype, device=device)
        return torch.mm(a, a.T, out_dtype=torch.float32).dtype == torch.float32
    except (TypeError, RuntimeError):
        return False
