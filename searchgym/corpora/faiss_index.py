"""faiss indexes for :class:`~searchgym.corpora.dense.DenseRetriever`: building one from a
name or a factory string, training it on a sample, its search-time knobs, what it really
is and weighs, memory-mapped reading and moving it to GPUs; and the file layout of a flat
inner-product index, read and written without faiss (:func:`read_flat_file`,
:func:`write_flat_file`) for the torch flat index.

Plain functions over a faiss index; the retriever wires them.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.error import ConfigError, DataFormatError

__all__ = [
    "NAMED_INDEXES",
    "default_train_size",
    "describe",
    "flat_file_size",
    "index_parts",
    "new_index",
    "read_flat_file",
    "read_index",
    "serialized_size",
    "set_search_parameter",
    "to_gpus",
    "train_and_add",
    "write_flat_file",
    "write_flat_vectors",
]

#: Names that are not faiss factory strings: ``"flat"`` (``IndexFlatIP``) and ``"hnsw"`` (``IndexHNSWFlat``).
NAMED_INDEXES = ("flat", "hnsw")
_EXAMPLES = "'IVF4096,PQ64', 'HNSW32,SQ8' or 'IVF256,Flat'"
_ADD_CHUNK = 65536  # vectors per faiss add: bounds the copy made of a memory-mapped array
_TRAIN_SEED = 0


def faiss_message(error: BaseException) -> str:
    """faiss's own words from a RuntimeError, without the C++ signature and source line."""
    text = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    text = re.sub(r"^Error in .*? at \S+:\d+: ", "", text)
    return re.sub(r"^Error: '.*?' failed: ", "", text)


def new_index(faiss: Any, spec: str, dim: int, *, hnsw_m: int = 32, ef_construction: int = 200) -> Any:
    """An empty inner-product index: ``"flat"``, ``"hnsw"`` or any faiss factory string
    (``faiss.index_factory(dim, spec, METRIC_INNER_PRODUCT)``)."""
    if spec == "flat":
        return faiss.IndexFlatIP(dim)
    if spec == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        return index
    try:
        return faiss.index_factory(dim, spec, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        raise ConfigError(
            f"DenseRetriever expects index to be 'flat', 'hnsw' or a faiss index factory string for {dim}-dimensional "
            f"vectors such as {_EXAMPLES}, got {spec!r}: {faiss_message(e)}."
        ) from None


def index_parts(faiss: Any, index: Any):
    """The index and every index nested in it (pre-transforms, id maps, refinement, IVF quantizers, HNSW storage)."""
    index = faiss.downcast_index(index)
    yield index
    for name in ("index", "base_index", "refine_index", "quantizer", "storage"):
        inner = getattr(index, name, None)
        if inner is not None and hasattr(inner, "ntotal"):
            yield from index_parts(faiss, inner)


def default_train_size(faiss: Any, index: Any, num_vectors: int) -> int:
    """faiss's recommended sample for k-means (about 40 vectors per centroid of the largest
    clustering: the IVF lists or a product quantizer's 2^nbits codes), capped at the corpus."""
    centroids = [1]
    for part in index_parts(faiss, index):
        if hasattr(part, "nlist"):
            centroids.append(int(part.nlist))
        pq = getattr(part, "pq", None)
        if pq is not None:
            centroids.append(int(pq.ksub))
    return min(num_vectors, 40 * max(max(centroids), 256))


def train_and_add(faiss: Any, index: Any, vectors: np.ndarray, *, spec: str, train_size: int | None = None) -> int:
    """Train ``index`` (when it needs it) on a seeded sample of ``vectors``, then add them
    all in chunks. ``vectors`` may be memory-mapped: only the sample and one chunk are
    copied at a time. Returns the number of training vectors (0 when none were needed)."""
    n = len(vectors)
    used = 0
    if not index.is_trained:
        used = default_train_size(faiss, index, n) if train_size is None else min(train_size, n)
        rows = np.sort(np.random.default_rng(_TRAIN_SEED).choice(n, size=used, replace=False))
        sample = np.ascontiguousarray(vectors[rows], dtype=np.float32)
        try:
            index.train(sample)
        except RuntimeError as e:
            message = faiss_message(e)
            short = re.search(r"Number of training points \((\d+)\) should be at least as large as number of clusters \((\d+)\)", message)
            if short:
                raise ConfigError(
                    f"The faiss index {spec!r} needs at least {short.group(2)} training vectors (one per cluster), got "
                    f"{used} ({n} passages, train_size={train_size!r}). Use fewer clusters (e.g. IVF lists near "
                    f"sqrt(passages): 'IVF{max(1, int(n ** 0.5))},Flat'), pass a larger train_size, or use index='flat'."
                ) from None
            raise ConfigError(f"Training the faiss index {spec!r} on {used} vectors failed: {message}.") from None
    for start in range(0, n, _ADD_CHUNK):
        index.add(np.ascontiguousarray(vectors[start : start + _ADD_CHUNK], dtype=np.float32))
    return used


def set_search_parameter(faiss: Any, index: Any, name: str, value: int) -> bool:
    """Set ``nprobe`` or ``efSearch`` wherever it applies in ``index`` (nested indexes and
    GPU ones included); False when no part of the index has it."""
    space = faiss.GpuParameterSpace() if _on_gpu(index) else faiss.ParameterSpace()
    try:
        space.set_index_parameter(index, name, value)
    except RuntimeError:
        return False
    return True


def _on_gpu(index: Any) -> bool:
    return "Gpu" in type(index).__name__ or type(index).__name__ in ("IndexShards", "IndexReplicas")


def _describe_transform(faiss: Any, transform: Any) -> str:
    transform = faiss.downcast_VectorTransform(transform)
    return f"{type(transform).__name__}({transform.d_in}->{transform.d_out})"


def describe(faiss: Any, index: Any) -> str:
    """What ``index`` is, from its faiss class chain: ``IndexIVFPQ(nlist=4096, M=64)``,
    ``IndexHNSWFlat(M=32)``, ``IndexPreTransform(OPQMatrix(768->768), IndexIVFPQ(...))``."""
    index = faiss.downcast_index(index)
    name = type(index).__name__
    params: list[str] = []
    if isinstance(index, faiss.IndexPreTransform):
        steps = [_describe_transform(faiss, index.chain.at(i)) for i in range(index.chain.size())]
        params = [*steps, describe(faiss, index.index)]
    elif hasattr(index, "base_index") and hasattr(index, "refine_index"):
        params = [describe(faiss, index.base_index), f"refine={describe(faiss, index.refine_index)}"]
    elif isinstance(index, (faiss.IndexIDMap, faiss.IndexIDMap2)):
        params = [describe(faiss, index.index)]
    else:
        if hasattr(index, "nlist"):
            params.append(f"nlist={index.nlist}")
            quantizer = faiss.downcast_index(index.quantizer)
            if not isinstance(quantizer, faiss.IndexFlat):
                params.append(f"quantizer={describe(faiss, quantizer)}")
        if getattr(index, "hnsw", None) is not None:
            params.append(f"M={index.hnsw.nb_neighbors(1)}")
        storage = faiss.downcast_index(index.storage) if getattr(index, "storage", None) is not None else index
        if getattr(storage, "pq", None) is not None:
            params.append(f"M={storage.pq.M}" if index is storage else f"PQ M={storage.pq.M}")
            if storage.pq.nbits != 8:
                params.append(f"nbits={storage.pq.nbits}")
        if getattr(storage, "sq", None) is not None:
            qtypes = {getattr(faiss.ScalarQuantizer, n): n[3:] for n in dir(faiss.ScalarQuantizer) if n.startswith("QT_")}
            params.append(f"sq={qtypes.get(storage.sq.qtype, storage.sq.qtype)}")
    return f"{name}({', '.join(params)})" if params else name


def serialized_size(faiss: Any, index: Any) -> int:
    """Bytes ``faiss.write_index`` writes for ``index``, counted without keeping a copy."""
    total = 0

    def count(chunk: bytes) -> int:
        nonlocal total
        total += len(chunk)
        return len(chunk)

    faiss.write_index(index, faiss.PyCallbackIOWriter(count))
    return total


def _is_mapped(path: Path) -> bool:
    """Whether ``path`` is memory-mapped into this process (Linux's /proc/self/maps;
    elsewhere assumed, since faiss accepted the flag)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return True
    return os.path.realpath(path) in maps


def read_index(faiss: Any, path: str | os.PathLike, *, mmap: bool = True) -> tuple[Any, str]:
    """``(index, storage)``: the faiss file read memory-mapped and read-only where faiss
    supports it for that index type (``storage="mmap"``: its vectors stay in the page
    cache, shared and evictable), else read into memory (``storage="memory"``)."""
    path = Path(path)
    if mmap:
        flag = getattr(faiss, "IO_FLAG_MMAP_IFC", 0) or faiss.IO_FLAG_MMAP  # IFC: flat codes too (faiss >= 1.11)
        try:
            index = faiss.read_index(str(path), flag | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError:
            pass  # this index type cannot be mapped: read it whole below
        else:
            return index, "mmap" if _is_mapped(path) else "memory"
    return faiss.read_index(str(path)), "memory"


def to_gpus(faiss: Any, index: Any) -> tuple[Any, list[Any] | None]:
    """``(index, keep)``: a flat or IVF index moved onto every visible GPU (sharded when
    there are several) and the GPU resources to keep alive with it; ``(index, None)``
    unchanged when faiss has no GPU support, sees no GPU or has no GPU version of the type."""
    if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
        return index, None
    base = faiss.downcast_index(index)
    if not isinstance(base, (faiss.IndexFlat, faiss.IndexIVF)):
        return index, None  # HNSW and the rest have no GPU version: searched on the CPU
    try:
        if faiss.get_num_gpus() > 1:
            options = faiss.GpuMultipleClonerOptions()
            options.shard = True  # each GPU holds 1/n of the vectors: a 64 GB flat index fits on several cards
            return faiss.index_cpu_to_all_gpus(index, options), []
        options = faiss.GpuClonerOptions()
        options.useFloat16 = isinstance(base, faiss.IndexIVFPQ)  # float16 lookup tables, which a large PQ M needs
        resources = faiss.StandardGpuResources()
        return faiss.index_cpu_to_gpu(resources, 0, index, options), [resources]
    except RuntimeError:
        return index, None  # e.g. out of GPU memory: stay on the CPU


# ---------------------------------------------------------------------------- flat files without faiss
# faiss.write_index of an IndexFlatIP (Search-R1's e5_Flat.index, index_factory(d, "Flat",
# METRIC_INNER_PRODUCT) alike; faiss/impl/index_write.cpp): the four bytes "IxFI", the index
# header (d int32, ntotal int64, two int64 fields faiss ignores, is_trained bool, metric
# int32), then the vectors as a counted float array (uint64 count, then ntotal x d float32),
# all little-endian: 45 bytes before the vectors. A metric other than inner product or L2
# writes a float metric argument after the metric and the fourcc "IxFl".
_FLAT_HEADER = struct.Struct("<4siqqq?iQ")
_METRIC_INNER_PRODUCT = 0
#: Other faiss fourccs a user may hand in, named in the error.
_OTHER_FOURCCS = {
    b"IxF2": "a flat L2 index (IndexFlatL2)", b"IxFl": "a flat index with another metric", b"IHNf": "an HNSW index (IndexHNSWFlat)",
    b"IwFl": "an IVF index (IndexIVFFlat)", b"IwPQ": "an IVF-PQ index (IndexIVFPQ)", b"IwSq": "an IVF scalar-quantizer index",
    b"IxPq": "a PQ index (IndexPQ)", b"IxSQ": "a scalar-quantizer index", b"IxMp": "an id-mapped index (IndexIDMap)",
    b"IxM2": "an id-mapped index (IndexIDMap2)", b"IxPT": "an index with a pre-transform (IndexPreTransform)",
    b"IxRF": "a refined index (IndexRefineFlat)", b"IxFh": "a half-precision flat index",
}


def flat_file_size(ntotal: int, d: int) -> int:
    """Bytes of a faiss ``IndexFlatIP`` file of ``ntotal`` vectors of dimension ``d``."""
    return _FLAT_HEADER.size + 4 * ntotal * d


def read_flat_file(path: str | os.PathLike) -> np.ndarray:
    """The vectors of a faiss ``IndexFlatIP`` file, ``[ntotal, d]`` float32, memory-mapped
    read-only from the file (faiss is not needed; nothing is copied).

    Raises :class:`~searchgym.error.ConfigError` for a faiss file of another index type or
    metric (naming it) and :class:`~searchgym.error.DataFormatError` for a file whose header
    or length is not a flat index's."""
    path = Path(path)
    expected = "a faiss IndexFlatIP file (faiss.write_index of IndexFlatIP or index_factory(d, 'Flat', METRIC_INNER_PRODUCT))"
    with open(path, "rb") as f:
        head = f.read(_FLAT_HEADER.size)
    if head[:4] != b"IxFI":
        if head[:4] in _OTHER_FOURCCS:
            raise ConfigError(
                f"{str(path)!r} holds {_OTHER_FOURCCS[head[:4]]}, not a flat inner-product index; the torch flat index reads "
                "faiss IndexFlatIP files. Serve this one with faiss (leave index= unset), or save its vectors as a flat "
                "inner-product index."
            )
        raise DataFormatError(path, None, expected, f"a file starting with {head[:4]!r}")
    if len(head) < _FLAT_HEADER.size:
        raise DataFormatError(path, None, expected, f"a file of {len(head)} bytes (a header is {_FLAT_HEADER.size})")
    _fourcc, d, ntotal, _, _, _trained, metric, count = _FLAT_HEADER.unpack(head)
    if metric != _METRIC_INNER_PRODUCT:
        raise DataFormatError(path, None, expected, f"metric type {metric} (inner product is {_METRIC_INNER_PRODUCT})")
    if d < 1 or ntotal < 0 or count != ntotal * d:
        raise DataFormatError(path, None, expected, f"a header saying d={d}, ntotal={ntotal} and {count} floats")
    size = path.stat().st_size
    if size != flat_file_size(ntotal, d):
        raise DataFormatError(
            path, None, f"{flat_file_size(ntotal, d):,} bytes for {ntotal:,} x {d} float32 vectors", f"{size:,} bytes (cut short or padded)"
        )
    if ntotal == 0:
        return np.zeros((0, d), dtype=np.float32)
    return np.memmap(path, dtype="<f4", mode="r", offset=_FLAT_HEADER.size, shape=(ntotal, d))


def write_flat_file(path: str | os.PathLike, vectors: np.ndarray) -> None:
    """Write ``vectors`` ``[ntotal, d]`` as faiss writes an ``IndexFlatIP`` (``faiss.read_index``
    reads it back), in float32, 64 MB at a time: a memory-mapped array is never copied whole."""
    with open(path, "wb") as f:
        write_flat_vectors(f.write, vectors)


def write_flat_vectors(write, vectors: np.ndarray) -> None:
    """Hand the bytes of :func:`write_flat_file` to ``write`` (a file's ``write``, or one that
    also checksums them), 64 MB at a time."""
    ntotal, d = vectors.shape
    step = max(1, (64 << 20) // (4 * d))
    write(_FLAT_HEADER.pack(b"IxFI", d, ntotal, 1 << 20, 1 << 20, True, _METRIC_INNER_PRODUCT, ntotal * d))
    for start in range(0, ntotal, step):
        write(np.ascontiguousarray(vectors[start : start + step], dtype="<f4").tobytes())
