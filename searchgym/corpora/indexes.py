"""Index folders: a retriever built once (``searchgym index``), loaded in seconds everywhere.

An index folder holds one retriever's arrays and a JSON file saying what it is: the retriever
and its parameters, and the corpus it was built for (name, fingerprint, passage count, file).
``BM25Retriever.save`` writes ``searchgym_bm25.json``, ``DenseRetriever.save``
``searchgym_dense.json``. :func:`load_index` maps either back for the same corpus (and refuses
another one with a clear error); ``gym.make(..., retriever=DIR)``, ``make_retriever(DIR,
corpus)`` and ``searchgym serve --index DIR`` all go through it.

Storage fails safe (:mod:`searchgym.corpora.building`, :mod:`searchgym.corpora.checksum`): a
build is all or nothing, every file's size and checksum are recorded while it is written,
every load checks sizes, dtypes and shapes, and :func:`searchgym.corpora.verify.verify_index`
reads every byte against the checksums.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from searchgym.corpora.building import building, remove_dead_builds
from searchgym.corpora.index_folder import INDEX_RETRIEVERS, index_meta, is_index_folder, shard_folders, write_meta
from searchgym.corpora.types import Corpus, Retriever
from searchgym.error import ConfigError, UnknownNameError

__all__ = ["INDEX_RETRIEVERS", "build_index", "index_meta", "is_index_folder", "load_index"]

def open_index_corpus(path: str | os.PathLike) -> Corpus:
    """The corpus an index folder was built for, opened from the file it records."""
    from searchgym.corpora.registry import load_corpus

    meta = index_meta(path)
    corpus_path = meta.get("corpus_path")
    if not corpus_path:
        raise ConfigError(
            f"The index at {str(path)!r} was built for corpus {meta.get('corpus_name')!r}, which was not read from a file; "
            "pass the corpus as well (--corpus NAME, or corpus= to gym.make)."
        )
    return load_corpus(corpus_path)


def load_index(path: str | os.PathLike, corpus: Corpus | None = None, **options: Any) -> Retriever:
    """The retriever saved in the folder ``path``, for ``corpus`` (default: the corpus file the
    index records). ``options`` go to the loader (``n_threads``, ``query_threads`` and ``in_memory`` for BM25; ``model``,
    ``device``, ``nprobe``... for dense). Raises :class:`ConfigError` for an index built for
    another corpus, :class:`~searchgym.error.NoIndexError` for a folder that holds no index and
    :class:`~searchgym.error.DamagedFileError` for a file whose size, dtype or shape is not the
    one recorded when it was written. What a dead build of ``path`` left beside it is removed."""
    remove_dead_builds(path)
    meta = index_meta(path)
    if corpus is None:
        corpus = open_index_corpus(path)
    if meta["kind"] == "shards":  # every shard in this process (each is usually served by its own machine)
        from searchgym.corpora.sharded import ShardedRetriever

        return ShardedRetriever([load_index(folder, corpus, **options) for folder in shard_folders(path, meta)], corpus)
    if meta["kind"] == "bm25":
        from searchgym.corpora.bm25 import BM25Retriever

        return BM25Retriever.load(path, corpus, **options)
    from searchgym.corpora.dense import DenseRetriever

    if options.get("in_memory"):
        raise ConfigError(
            f"in_memory=True reads a BM25 index's arrays into memory; the index at {str(path)!r} is a dense one "
            "(its faiss index is already in memory). Drop the option."
        )
    if options.get("query_threads", 1) != 1:
        raise ConfigError(
            f"query_threads splits one BM25 query across threads; the index at {str(path)!r} is a dense one. Drop the option."
        )
    options.pop("in_memory", None)
    options.pop("query_threads", None)
    options.setdefault("model", meta.get("model", "all-MiniLM-L6-v2"))
    return DenseRetriever.load(path, corpus, **options)


def build_index(
    corpus: Corpus, retriever: str, out: str | os.PathLike, *, overwrite: bool = False, shards: int = 1, **options: Any
) -> Retriever:
    """Build ``retriever`` over ``corpus`` into the folder ``out`` and return it loaded from there.

    ``shards > 1`` (BM25): the index is split into ``out/shard-0`` ... of consecutive passages,
    each served by its own ``searchgym serve --index out/shard-i``, whose merged answers equal
    the whole index's (:mod:`searchgym.corpora.sharded`); ``out`` itself loads them all.

    All or nothing (:func:`~searchgym.corpora.building.building`): the index is written to a
    hidden folder beside ``out`` and swapped into place in one step when complete and synced to
    disk, so an error, a full disk (:class:`~searchgym.error.OutOfSpaceError`, saying what the
    build needed and had), Ctrl-C or a kill leaves ``out`` as it was; what a dead build left is
    removed by the next build or open. An existing non-empty ``out`` is refused unless
    ``overwrite``.
    """
    if retriever not in INDEX_RETRIEVERS:
        raise UnknownNameError("retriever to index", retriever, INDEX_RETRIEVERS)
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ConfigError(f"searchgym index expects --shards to be a positive integer, got {shards!r}.")
    if shards > 1 and retriever != "bm25":
        raise ConfigError(f"searchgym index --shards splits BM25 indexes (retriever bm25), got retriever {retriever!r}.")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not overwrite:
            raise ConfigError(
                f"searchgym index expects --out to be a new or empty folder, got {str(out)!r}, which holds files; "
                "pass --overwrite to replace it, or choose another folder."
            )
    with building(out) as tmp:
        if retriever == "bm25" and shards > 1:
            from searchgym.corpora.bm25 import BM25Retriever

            whole = BM25Retriever.build(corpus, tmp / "whole", backend="bm25s", **options)
            folders = whole.save_shards(tmp, shards)
            del whole
            shutil.rmtree(tmp / "whole")
            meta = {key: index_meta(folders[0]).get(key) for key in ("corpus_name", "corpus_fingerprint", "corpus_path", "num_passages")}
            write_meta(tmp, "searchgym_shards.json", {**meta, "retriever": "bm25", "shards": [f.name for f in folders]})
        elif retriever == "bm25":
            from searchgym.corpora.bm25 import BM25Retriever

            BM25Retriever.build(corpus, tmp, backend="bm25s", **options)
        elif retriever == "rank-bm25":
            from searchgym.corpora.bm25 import BM25Retriever

            BM25Retriever(corpus, backend="rank_bm25", **options).save(tmp)
        else:
            from searchgym.corpora.dense import DenseRetriever

            index = "hnsw" if retriever == "dense-hnsw" else options.pop("index", "flat")
            DenseRetriever(corpus, index=index, **options).save(tmp)
    load_options = {key: options[key] for key in ("n_threads", "query_threads") if key in options} if retriever == "bm25" else {}
    return load_index(out, corpus, **load_options)
