"""Corpus and dataset names, and the functions that turn a name or a path into data.

Built-in corpora: ``"wiki-vital"`` (10,033 real Wikipedia lead summaries) and
``"synthwiki"`` (a generated fictional world; options ``seed`` and ``num_passages``) and
``"deepwiki"`` (a generated world of long articles for deep-research games; options in
:data:`searchgym.corpora.deepwiki.OPTIONS`).
Built-in datasets: ``"wiki-vital"``, ``"wiki-vital-answerable"``, ``"synthwiki"`` and ``"deepwiki"``.
Anything else is read from a JSON-lines file (see :mod:`searchgym.corpora.store` and
:mod:`searchgym.corpora.datasets` for the layouts; :mod:`searchgym.corpora.browsecomp` for
BrowseComp-Plus's files and its qrels).
"""

from __future__ import annotations

import functools
import numbers
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from searchgym.corpora.browsecomp import load_queries
from searchgym.corpora.datasets import read_qa
from searchgym.corpora.mapped import read_passages
from searchgym.corpora.store import BUILT_IN_NAMES, check_data_file
from searchgym.corpora.types import Corpus, Passage, QAExample
from searchgym.error import ConfigError, UnknownNameError, check_name

__all__ = ["CORPORA", "DATASETS", "DeferredCorpus", "check_data_name", "default_dataset_for", "load_corpus", "load_dataset"]

CORPORA = BUILT_IN_NAMES["passage"]
DATASETS = BUILT_IN_NAMES["QA dataset"]

_SYNTHWIKI_OPTIONS = ("seed", "num_passages")
_WIKI_VITAL_SPLITS = ("dev", "all")  # FanOutQA's dev set is the only one with public answers.
_SYNTHWIKI_SPLITS = ("train", "dev", "test")
_DEFAULT_DATASET = {"wiki-vital": "wiki-vital-answerable", "synthwiki": "synthwiki", "deepwiki": "deepwiki"}
_PATH_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".gz")
_QA_FILE_OPTIONS = ("qrels_evidence", "qrels_gold")  # TREC qrels that set the questions' evidence / gold doc ids


@functools.lru_cache(maxsize=8)
def _generate_synthwiki(seed: int, num_passages: int):
    from searchgym.corpora import synthwiki

    return synthwiki.generate(seed=seed, num_passages=num_passages)


def _synthwiki(kind: str, options: Mapping[str, Any]):
    """One generated world per ``(seed, num_passages)``, shared by its corpus and its questions."""
    _check_options(kind, "synthwiki", options, _SYNTHWIKI_OPTIONS)
    seed, num_passages = options.get("seed", 0), options.get("num_passages", 1000)
    for key, value in (("seed", seed), ("num_passages", num_passages)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(f"synthwiki expects {key} to be an integer, got {value!r}.")
    return _generate_synthwiki(int(seed), int(num_passages))


@functools.lru_cache(maxsize=8)
def _generate_deepwiki(knobs: tuple[tuple[str, Any], ...]):
    from searchgym.corpora import deepwiki

    return deepwiki.generate(**dict(knobs))


def _deepwiki(kind: str, options: Mapping[str, Any]):
    """One generated world per resolved set of knobs, shared by its corpus and its questions
    (written to the cache once; later processes open the files)."""
    from searchgym.corpora import deepwiki

    _check_options(kind, "deepwiki", options, deepwiki.OPTIONS)
    knobs = deepwiki.resolve_options(**options)
    return _generate_deepwiki(tuple(sorted(knobs.items())))


def _check_options(kind: str, name: str, options: Mapping[str, Any], accepted: Sequence[str]) -> None:
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        expected = f"only {', '.join(accepted)}" if accepted else "no options"
        raise ConfigError(
            f"The {kind} {name!r} does not take the option(s) {', '.join(unknown)}; expected {expected}."
        )


def _looks_like_path(name: str | os.PathLike) -> bool:
    if isinstance(name, os.PathLike):
        return True
    return "/" in name or os.sep in name or name.endswith(_PATH_SUFFIXES)


def load_corpus(name_or_path: str | os.PathLike | Corpus, **options: Any) -> Corpus:
    """A built-in corpus by name, a passage file by path, or a :class:`Corpus` unchanged.

    Options: ``seed`` and ``num_passages`` for ``"synthwiki"`` (defaults 0 and 1000), the
    knobs of :func:`searchgym.corpora.deepwiki.generate` for ``"deepwiki"``, ``name`` for a
    file. Raises :class:`UnknownNameError` (with a "Did you mean" suggestion) for an unknown
    name, ``FileNotFoundError`` for a path that does not exist and :class:`ConfigError` for
    an option the corpus does not take (or, for deepwiki, a knob out of its range).
    """
    if isinstance(name_or_path, Corpus):
        _check_options("corpus object", name_or_path.name, options, ())
        return name_or_path
    if isinstance(name_or_path, str) and name_or_path in CORPORA:
        if name_or_path == "wiki-vital":
            _check_options("corpus", name_or_path, options, ())
            from searchgym.corpora import wikivital

            return wikivital.load_corpus()
        if name_or_path == "deepwiki":
            return _deepwiki("corpus", options).corpus
        return _synthwiki("corpus", options).corpus
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ConfigError(
            f"load_corpus expects a corpus name, a path or a Corpus, got {type(name_or_path).__name__}."
        )
    path = Path(name_or_path)
    if path.exists() or _looks_like_path(name_or_path):  # read_passages says what is wrong with it
        _check_options("passage file", str(path), options, ("name",))
        return read_passages(path, **options)
    raise UnknownNameError("corpus", name_or_path, CORPORA)


def check_data_name(kind: str, name: Any) -> None:
    """Fail as :func:`load_corpus` (``kind="corpus"``) or :func:`load_dataset` (``kind="dataset"``)
    would for an unknown name or a missing file, without reading anything: for checks that must
    come before slow work (a benchmark's resume check, model loading). Objects pass unchecked."""
    names = {"corpus": CORPORA, "dataset": DATASETS}[kind]
    if not isinstance(name, (str, os.PathLike)) or (isinstance(name, str) and name in names) or Path(name).is_file():
        return
    if Path(name).exists() or _looks_like_path(name):  # the loader's own error: a folder, a pipe, no file
        check_data_file(Path(name), "passage" if kind == "corpus" else "QA dataset")
    raise UnknownNameError(kind, name, names)


class DeferredCorpus(Corpus):
    """A corpus opened the first time anything asks for it (its length, a passage, its name).

    Envs whose retriever is a ``/retrieve`` server hold one: the server returns the documents,
    so the corpus file need not even exist where the env runs until some code reads it.
    """

    def __init__(self, name_or_path: str | os.PathLike, options: Mapping[str, Any]):  # noqa: D107 -- nothing is opened yet
        self._spec = (name_or_path, dict(options))
        self._opened: Corpus | None = None

    def _corpus(self) -> Corpus:
        if self._opened is None:
            self._opened = load_corpus(self._spec[0], **self._spec[1])
        return self._opened

    @property
    def opened(self) -> bool:
        """Whether the corpus has been opened yet."""
        return self._opened is not None

    @property
    def spec(self) -> tuple[str | os.PathLike, dict[str, Any]]:
        """``(name_or_path, options)``: what :func:`load_corpus` will open."""
        return self._spec[0], dict(self._spec[1])

    def known_fingerprint(self) -> str | None:
        """The fingerprint when it costs no open of a large corpus: the opened corpus's; a built-in
        corpus's (opened: an env reads its questions from the same generated world anyway); a
        passage file's whose passage store is current (its ``meta.json`` records it). ``None`` for a
        file without a current store or one that does not exist here."""
        name = self._spec[0]
        if self._opened is not None or (isinstance(name, str) and name in CORPORA):
            return self._corpus().fingerprint
        if isinstance(name, (str, os.PathLike)) and Path(name).is_file():
            from searchgym.corpora.mapped import stored_fingerprint

            return stored_fingerprint(name)
        return None

    name = property(lambda self: self._corpus().name)
    path = property(lambda self: self._corpus().path)
    fingerprint = property(lambda self: self._corpus().fingerprint)

    def __len__(self) -> int:
        return len(self._corpus())

    def __getitem__(self, i):
        return self._corpus()[i]

    def __iter__(self) -> Iterator[Passage]:
        return iter(self._corpus())

    def __contains__(self, item: object) -> bool:
        return item in self._corpus()

    def get(self, passage_id: str) -> Passage:
        return self._corpus().get(passage_id)

    def index_of(self, passage_id: str) -> int:
        return self._corpus().index_of(passage_id)

    def __repr__(self) -> str:
        return repr(self._opened) if self._opened is not None else f"Corpus({self._spec[0]!r}, not opened yet)"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return DeferredCorpus, self._spec


def load_dataset(
    name_or_path: str | os.PathLike | Sequence[QAExample], split: str = "dev", **options: Any
) -> list[QAExample]:
    """A built-in dataset by name, a QA file by path, or a list of examples unchanged.

    Splits: ``"wiki-vital"`` and ``"wiki-vital-answerable"`` take ``"dev"`` (FanOutQA's dev
    set) or its synonym ``"all"``; ``"synthwiki"`` takes ``"train"``, ``"dev"`` or ``"test"``
    and the same ``seed``/``num_passages`` options as its corpus (so the questions are about
    that very corpus); ``"deepwiki"`` takes the same splits and its corpus's knobs. A file is
    one split by itself, so ``split`` is not used for it; it takes the options
    ``qrels_evidence`` and ``qrels_gold``: TREC qrels files (BrowseComp-Plus's
    ``topics-qrels/qrel_evidence.txt`` and ``qrel_golds.txt``) whose relevant doc ids replace
    the questions' ``metadata["evidence_ids"]`` / ``["gold_ids"]`` (see
    :func:`searchgym.corpora.browsecomp.apply_qrels`). Always returns a new list.
    """
    if isinstance(name_or_path, Sequence) and not isinstance(name_or_path, str):
        bad = [type(e).__name__ for e in name_or_path if not isinstance(e, QAExample)]
        if bad:
            raise ConfigError(f"load_dataset expects a list of QAExample, got one containing {bad[0]}.")
        _check_options("list of examples", "<list>", options, ())
        return list(name_or_path)
    if isinstance(name_or_path, str) and name_or_path in DATASETS:
        qrels = sorted(set(options) & set(_QA_FILE_OPTIONS))
        if qrels:
            raise ConfigError(
                f"The dataset {name_or_path!r} does not take the option(s) {', '.join(qrels)}: qrels set the evidence and "
                "gold doc ids of a QA file's questions (BrowseComp-Plus's decrypted queries); pass that file's path as the dataset."
            )
        if name_or_path == "synthwiki":
            check_name("synthwiki split", split, _SYNTHWIKI_SPLITS)
            return list(_synthwiki("dataset", options).questions(split))
        if name_or_path == "deepwiki":
            check_name("deepwiki split", split, _SYNTHWIKI_SPLITS)
            return list(_deepwiki("dataset", options).questions(split))
        _check_options("dataset", name_or_path, options, ())
        check_name(f"{name_or_path} split", split, _WIKI_VITAL_SPLITS)
        from searchgym.corpora import wikivital

        return wikivital.load_questions("answerable" if name_or_path == "wiki-vital-answerable" else "all")
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ConfigError(
            f"load_dataset expects a dataset name, a path or a list of QAExample, got {type(name_or_path).__name__}."
        )
    path = Path(name_or_path)
    if path.exists() or _looks_like_path(name_or_path):  # read_qa says what is wrong with it
        _check_options("QA file", str(path), options, _QA_FILE_OPTIONS)
        return load_queries(path, **options) if options else read_qa(path)
    raise UnknownNameError("dataset", name_or_path, DATASETS)


def default_dataset_for(corpus: str | Corpus) -> str:
    """The built-in dataset whose questions are about the built-in corpus ``corpus``.

    A generated synthwiki corpus is named after its world (``"synthwiki-s0-n1000"``), so
    any name starting with ``"synthwiki-"`` counts as synthwiki (``"deepwiki-"``: deepwiki).
    """
    name = corpus.name if isinstance(corpus, Corpus) else corpus
    if isinstance(name, str) and name.startswith(("synthwiki-", "deepwiki-")):
        name = name.split("-", 1)[0]
    if name not in _DEFAULT_DATASET:
        raise UnknownNameError("built-in corpus", name, CORPORA)
    return _DEFAULT_DATASET[name]
