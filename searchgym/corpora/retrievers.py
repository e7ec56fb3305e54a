"""Retrievers by name, with one shared index per corpus in a process.

``make_retriever("bm25", corpus)`` is what environments call. Building an index is the
slow part of creating an environment (seconds for wiki-vital, about a minute for a
million passages), and vectorised or multi-agent setups create many environments over the
same corpus, so :func:`make_retriever` remembers what it built: the same name, the same
corpus content (``corpus.fingerprint``) and the same options give back the same object.
Retrievers are read-only once built and safe to share between environments and threads.

A user's own engine needs no subclass: any object with ``search(queries, k)``
(:class:`~searchgym.corpora.types.SearchEngine`) is taken as it is, ``"module:attr"``
names one (or its class or factory), and :func:`register_retriever` gives a builder a name.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import threading
import inspect
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path, PurePath
from typing import Any

from searchgym.corpora.indexes import index_meta, is_index_folder, load_index
from searchgym.corpora.sharded import ShardedRetriever, is_shard_spec
from searchgym.corpora.types import Corpus, Retriever, SearchEngine, is_search_engine
from searchgym.error import ConfigError, StorageError, UnknownNameError
from searchgym.plugins import is_object_spec, load_object

__all__ = [
    "RETRIEVERS", "build_user_retriever", "cached_retrievers", "clear_retriever_cache", "make_retriever",
    "check_retriever", "register_retriever", "retriever_names",
]


def _bm25(corpus: Corpus, **options: Any) -> Retriever:
    from searchgym.corpora.bm25 import BM25Retriever

    return BM25Retriever(corpus, backend="bm25s", **options)


def _rank_bm25(corpus: Corpus, **options: Any) -> Retriever:
    from searchgym.corpora.bm25 import BM25Retriever

    return BM25Retriever(corpus, backend="rank_bm25", **options)


def _dense(corpus: Corpus, index: str = "flat", **options: Any) -> Retriever:
    from searchgym.corpora.dense import DenseRetriever

    return DenseRetriever(corpus, index=index, **options)


def _dense_hnsw(corpus: Corpus, **options: Any) -> Retriever:
    from searchgym.corpora.dense import DenseRetriever

    return DenseRetriever(corpus, index="hnsw", **options)


#: name -> (builder, the option its name already fixes, if any). Options go to the class's constructor:
#: :class:`~searchgym.corpora.bm25.BM25Retriever` (k1, b, method, delta, n_threads, ...) or
#: :class:`~searchgym.corpora.dense.DenseRetriever` (model, cache_dir, batch_size, device, ...).
_BUILDERS: dict[str, tuple[Callable[..., Retriever], str | None]] = {
    "bm25": (_bm25, "backend"),
    "rank-bm25": (_rank_bm25, "backend"),
    "dense": (_dense, None),  # index="flat" by default, "torch-flat", or any faiss factory string ("IVF4096,PQ64")
    "dense-hnsw": (_dense_hnsw, "index"),
}

#: Retriever names accepted by :func:`make_retriever` and by environments' ``retriever=``.
RETRIEVERS: tuple[str, ...] = tuple(_BUILDERS)

#: Builders a user module registered (:func:`register_retriever`), by name.
_USER_BUILDERS: dict[str, Callable[..., Any]] = {}

_CACHE: dict[tuple, Retriever] = {}
_CACHE_LOCK = threading.Lock()


def _freeze(value: Any) -> Any:
    """A hashable stand-in for an option value; raises TypeError for values that have none."""
    if isinstance(value, Mapping):
        return ("mapping", tuple(sorted((str(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(_freeze(v)) for v in value)))
    if isinstance(value, PurePath):
        return ("path", str(value))
    hash(value)
    return value


def make_retriever(name: str | Retriever, corpus: Corpus, *, cache: bool = True, **options: Any) -> Retriever:
    """The retriever called ``name`` over ``corpus``, built with ``options``.

    Names: ``"bm25"`` (BM25 with the bm25s backend), ``"rank-bm25"`` (BM25 with the
    rank-bm25 backend), ``"dense"`` (sentence-transformers + exact faiss inner product, exact torch
    matrix products on GPUs with ``index="torch-flat"``, or the faiss index factory string given as ``index=``),
    ``"dense-hnsw"`` (same encoder, approximate HNSW index), or the URL of a server
    speaking Search-R1's ``/retrieve`` API (``"http://127.0.0.1:8000/retrieve"``,
    :class:`searchgym.corpora.http.HTTPRetriever`; options such as ``timeout``, ``token``
    go to it), the URLs of the shards of one index joined by ``,`` (replicas by ``|``;
    :class:`searchgym.corpora.sharded.ShardedRetriever`), or the path of an index folder built by ``searchgym index``
    (:func:`searchgym.corpora.indexes.load_index`: memory-mapped, refused for another corpus).
    A search engine object (anything with ``search(queries, k)``, no subclass needed) is
    returned as it is (``options`` must then be empty). ``"module:attr"`` names a user's
    engine: an instance, or a class or factory built as :func:`build_user_retriever` says;
    a name given to :func:`register_retriever` builds with its builder the same way.

    ``"bm25"`` over a corpus opened from a file (``load_corpus(path)``) is built once and kept
    in a ``bm25-<options>`` folder beside the corpus's passage store; every later process maps
    it instead of building it again.

    Sharing: with ``cache=True`` (default) the result is remembered per process under
    ``(name, corpus.fingerprint, options)``, and a later call with the same key returns the
    same object, built once, even for a different but equal :class:`Corpus` object (the
    returned retriever answers with the passages of the corpus it was built on, which are
    equal). Options must then be hashable, or lists / dicts / paths of such values;
    otherwise nothing is cached. :func:`clear_retriever_cache` forgets everything (the
    cache holds the indexes in memory until then).
    """
    if is_search_engine(name):
        if options:
            raise ConfigError(
                f"make_retriever got a {type(name).__name__} instance and options {sorted(options)}; options only "
                "apply when building a retriever by name. Configure the instance yourself or pass a name."
            )
        return name
    if isinstance(name, str) and name in _USER_BUILDERS:
        return _cached(_key(name, _corpus_key(corpus), options) if cache else None,
                       lambda: build_user_retriever(_USER_BUILDERS[name], corpus, options, what=f"retriever {name!r}"))
    if is_object_spec(name):
        target = load_object(name, what="retriever")
        if is_search_engine(target):  # an engine the module built itself
            if options:
                raise ConfigError(
                    f"The retriever {name!r} names a {type(target).__name__} instance, which takes no options, got "
                    f"{sorted(options)}; name its class or factory to build it with options."
                )
            return target
        return _cached(_key(name, _corpus_key(corpus), options) if cache else None,
                       lambda: build_user_retriever(target, corpus, options, what=f"retriever {name!r}"))
    from searchgym.corpora.http import HTTPRetriever, is_url

    if is_shard_spec(name):  # shards (and replicas) of one index on several servers
        return _cached(_key(name, None, options) if cache else None, lambda: ShardedRetriever.from_spec(name, corpus, **options))
    if is_url(name):  # a /retrieve server: one client (one connection pool) per URL, options and env corpus
        # The corpus is part of the key: each client checks the server's corpus against its own.
        return _cached(_key(name, _corpus_key(corpus), options) if cache else None, lambda: HTTPRetriever(name, corpus, **options))
    if is_index_folder(name):  # built once by `searchgym index`
        if not isinstance(corpus, Corpus):
            raise ConfigError(f"make_retriever expects a Corpus, got {type(corpus).__name__}; wrap passages in Corpus(...).")
        folder = str(Path(name).resolve())
        return _cached(_key(folder, corpus.fingerprint, options) if cache else None, lambda: load_index(folder, corpus, **options))
    if not isinstance(name, str) or name not in _BUILDERS:
        if isinstance(name, (str, PurePath)) and Path(name).is_dir():
            index_meta(name)  # NoIndexError: a folder that holds no index (an interrupted build?)
        raise UnknownNameError("retriever", name, [*retriever_names(), "http://HOST:PORT/retrieve"])
    if not isinstance(corpus, Corpus):
        raise ConfigError(f"make_retriever expects a Corpus, got {type(corpus).__name__}; wrap passages in Corpus(...).")
    builder, fixed = _BUILDERS[name]
    if fixed in options:
        others = ", ".join(repr(n) for n in RETRIEVERS if n != name)
        raise ConfigError(
            f"Retriever {name!r} fixes the option {fixed!r}, got {fixed}={options[fixed]!r}; choose it by name "
            f"instead (one of {others})."
        )
    if name == "bm25" and corpus.path is not None:
        # A corpus opened from a file keeps its BM25 index beside its passage store: built
        # once, memory-mapped by every later process.
        return _cached(_key(name, corpus.fingerprint, options) if cache else None, lambda: _stored_bm25(corpus, options))
    return _cached(_key(name, corpus.fingerprint, options) if cache else None, lambda: builder(corpus, **options))


#: BM25 options that change how an index is built or searched, not what it holds.
_RUNTIME_OPTIONS = ("n_threads", "query_threads", "workers", "shard_size", "show_progress")


def _stored_bm25(corpus: Corpus, options: dict[str, Any]) -> Retriever:
    """The BM25 index of a file corpus with these options, from its store folder (built there
    the first time)."""
    from searchgym.corpora.bm25 import BM25Retriever
    from searchgym.corpora.indexes import build_index
    from searchgym.corpora.mapped import store_folder

    content = {k: v for k, v in sorted(options.items()) if k not in _RUNTIME_OPTIONS}
    key = hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:12]
    folder = store_folder(corpus.path) / f"bm25-{key}"
    runtime = {key: options[key] for key in ("n_threads", "query_threads") if key in options}
    with open(folder.with_name(f".{folder.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; the others then map it
        if is_index_folder(folder):
            try:
                return BM25Retriever.load(folder, corpus, **runtime)
            except (ConfigError, StorageError) as e:  # built for an earlier version of the file, or of searchgym, or damaged
                if isinstance(e, StorageError):
                    warnings.warn(f"The BM25 index kept beside {corpus.path} is damaged and is not read: {e} Building it again.",
                                  stacklevel=4)
        return build_index(corpus, "bm25", folder, overwrite=True, **options)


def _corpus_key(corpus: Corpus | None) -> Any:
    """What tells corpora apart without opening one that is deferred (its name and options)."""
    if corpus is None:
        return None
    spec = getattr(corpus, "spec", None)
    if spec is not None and not getattr(corpus, "opened", True):
        return ("deferred", str(spec[0]), repr(sorted(spec[1].items())))
    return corpus.fingerprint


def _key(name: str, fingerprint: Any, options: dict[str, Any]) -> Any:
    """The cache key of a retriever; None when an option has no hashable form."""
    try:
        key = (name, fingerprint, _freeze(options))
        hash(key)
    except TypeError:
        return None
    return key


def _cached(key: Any, build: Callable[[], Retriever]) -> Retriever:
    """The retriever remembered under ``key``, built by ``build`` the first time (always
    built anew when ``key`` is None)."""
    if key is None:
        return build()
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    retriever = build()
    with _CACHE_LOCK:
        # Another thread may have built the same one meanwhile; keep the first.
        return _CACHE.setdefault(key, retriever)


def clear_retriever_cache() -> None:
    """Forget every retriever :func:`make_retriever` remembered (their memory is freed once unused)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def retriever_made_as(retriever: Retriever) -> tuple | None:
    """The key :func:`make_retriever` remembers ``retriever`` under (its name, URL or index
    folder, the corpus fingerprint and the options), or None for a retriever it did not
    make: what builds the same retriever in another process."""
    with _CACHE_LOCK:
        return next((key for key, r in _CACHE.items() if r is retriever), None)


def cached_retrievers() -> list[tuple[str, str, Retriever]]:
    """``(name, corpus fingerprint, retriever)`` of every remembered retriever."""
    with _CACHE_LOCK:
        return [(key[0], key[1], r) for key, r in _CACHE.items()]


def build_user_retriever(builder: Any, corpus: Any, options: Mapping[str, Any], *, what: str = "retriever") -> SearchEngine:
    """A user's search engine from its class or factory ``builder``.

    The convention: ``builder(corpus, **options)`` when its signature names a parameter
    ``corpus`` (or takes ``*args``), otherwise ``builder(**options)`` (an engine that needs
    no corpus, e.g. a simulated search engine). What it returns must have ``search(queries, k)``.
    """
    if not callable(builder):
        raise ConfigError(
            f"The {what} expects a search engine (an object with search(queries, k)), or a class or factory making one, "
            f"got {type(builder).__name__}."
        )
    try:
        parameters = inspect.signature(builder).parameters
    except (TypeError, ValueError):
        parameters = {}
    wants_corpus = "corpus" in parameters or any(p.kind is p.VAR_POSITIONAL for p in parameters.values())
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    accepted = [n for n, p in parameters.items() if n != "corpus" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    unknown = sorted(set(options) - set(accepted)) if parameters and not accepts_any else []
    if unknown:
        raise ConfigError(
            f"The {what} does not take {', '.join(map(repr, unknown))}; expected options among: {', '.join(accepted) or 'none'}."
        )
    engine = builder(corpus, **options) if wants_corpus else builder(**options)
    if not is_search_engine(engine):
        raise ConfigError(
            f"The {what} expects its builder to return a search engine (an object with search(queries, k)), "
            f"got {type(engine).__name__}."
        )
    return engine


def register_retriever(name: str, builder: Callable[..., Any]) -> None:
    """Give a user's search engine a name that envs, ``--retriever`` and ``make_retriever`` take.

    ``builder`` is a class or factory, built as :func:`build_user_retriever` says. A module
    named by ``--import`` calls this so that its name is known before any name is checked.
    Built-in names cannot be replaced; registering a user name again replaces its builder.
    """
    if not isinstance(name, str) or not name or ":" in name or "/" in name or "," in name:
        raise ConfigError(f"register_retriever expects a name without ':', '/' or ',' (e.g. 'my-engine'), got {name!r}.")
    if name in _BUILDERS:
        raise ConfigError(f"register_retriever cannot replace the built-in retriever {name!r}; pick another name.")
    if not callable(builder):
        raise ConfigError(f"register_retriever expects a class or factory for {name!r}, got {type(builder).__name__}.")
    _USER_BUILDERS[name] = builder
    with _CACHE_LOCK:  # what the name built before is not what it builds now
        for key in [key for key in _CACHE if key[0] == name]:
            del _CACHE[key]


def retriever_names() -> list[str]:
    """Every retriever name :func:`make_retriever` takes: the built-ins, then those registered."""
    return [*RETRIEVERS, *_USER_BUILDERS]


def check_retriever(spec: Any) -> None:
    """Refuse an unknown retriever name or a bad ``module:attr`` now, before any corpus or model loads.

    Names, URLs, shard lists and index folders pass (they are checked when built); an
    object with ``search`` passes; anything else is a :class:`ConfigError` or
    :class:`UnknownNameError`.
    """
    if spec is None or is_search_engine(spec):
        return
    if is_object_spec(spec):
        target = load_object(spec, what="retriever")
        if not is_search_engine(target) and not callable(target):
            raise ConfigError(
                f"The retriever {spec!r} expects a search engine (an object with search(queries, k)), or a class or "
                f"factory making one, got {type(target).__name__}."
            )
        return
    if isinstance(spec, (str, PurePath)):
        from searchgym.corpora.http import is_url

        text = str(spec)
        if text in _BUILDERS or text in _USER_BUILDERS or is_url(text) or is_shard_spec(text) or Path(text).is_dir():
            return
    raise UnknownNameError("retriever", spec, [*retriever_names(), "http://HOST:PORT/retrieve"])
