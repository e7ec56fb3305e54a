"""QA datasets in the FlashRAG JSON-lines layout.

One object per line (plain or gzip-compressed, blank lines ignored)::

    {"id": "test_0", "question": "who wrote ...?", "golden_answers": ["Jane Austen"], "metadata": {...}}

* ``question``: a non-empty string.
* ``golden_answers``: a non-empty list of strings (integers are converted to their decimal
  form) or a single string; the first is the canonical answer. At least one must keep a
  word after answer normalization: golds such as ``"The"``, ``"An"`` or ``"?"`` alone
  would let any answer (``"the"``) match, so such a line is refused.
* ``candidates`` (optional): a list of strings, the options the question offers (the two
  entities of a comparison); read into :attr:`QAExample.candidates`, where strict scoring
  uses it to refuse credit to an answer that names more than one of them.
* ``id``: a string or integer, unique in the file. When absent the id is
  ``"line-<n>"`` with ``n`` the 1-based line number, so it points back into the file and
  cannot collide with another line's generated id.
* ``metadata``: an object merged into :attr:`QAExample.metadata`; every other key is
  kept there too under its own name (e.g. FlashRAG's ``"choices"``).

The decrypted BrowseComp-Plus queries (``scripts_build_index/decrypt_dataset.py`` of its
repository writes them) are read too, detected per line by their keys (``query_id`` or
``query``, and neither ``question`` nor ``golden_answers``)::

    {"query_id": "769", "query": "...", "answer": "...", "gold_docs": [{"docid": "5412", "text": "...", "url": "..."}],
     "negative_docs": [...], "evidence_docs": [...]}

Such a line is ``QAExample(id=query_id, question=query, answers=(answer,))`` with metadata
``evidence_ids``, ``gold_ids`` and ``negative_ids`` (the doc ids of ``evidence_docs``,
``gold_docs`` and ``negative_docs``, whose elements may be objects with a ``docid`` or plain
ids; an absent list is empty; the documents' texts are not kept) and ``source:
"browsecomp-plus"``. See :mod:`searchgym.corpora.browsecomp`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from searchgym.corpora.store import check_new_id, describe_value, iter_jsonl_objects, read_id, write_jsonl
from searchgym.corpora.types import QAExample
from searchgym.error import DataFormatError
from searchgym.rewards.normalize import is_blank_answer

__all__ = ["BROWSECOMP_DOC_LISTS", "BROWSECOMP_LINE_FORMAT", "BROWSECOMP_SOURCE", "read_qa", "write_qa"]

QA_LINE_FORMAT = (
    'a JSON object with "question" (a string), "golden_answers" (a list of strings or a string) '
    'and optionally "id" and "candidates" (a list of strings)'
)

#: What a line of the decrypted BrowseComp-Plus queries must hold.
BROWSECOMP_LINE_FORMAT = (
    'a JSON object with "query_id" (a string or an integer), "query" and "answer" (strings) and optionally '
    '"evidence_docs", "gold_docs" and "negative_docs" (lists of objects with a "docid", or of ids): the decrypted '
    "BrowseComp-Plus layout"
)

#: The document lists of a BrowseComp-Plus query line and the metadata key of their ids.
BROWSECOMP_DOC_LISTS = (("evidence_docs", "evidence_ids"), ("gold_docs", "gold_ids"), ("negative_docs", "negative_ids"))

#: ``QAExample.metadata["source"]`` of a BrowseComp-Plus question.
BROWSECOMP_SOURCE = "browsecomp-plus"


def _answers(value: Any, path: Path, line_number: int) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise DataFormatError(path, line_number, QA_LINE_FORMAT, f"'golden_answers' = {describe_value(value)}")
    answers = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise DataFormatError(
                path, line_number, QA_LINE_FORMAT, f"'golden_answers' containing {describe_value(item)}"
            )
        answers.append(str(item))
    if all(is_blank_answer(a) for a in answers):
        raise DataFormatError(
            path,
            line_number,
            "'golden_answers' with at least one answer that keeps a word after normalization "
            "(lowercased, punctuation and the articles a/an/the removed)",
            f"'golden_answers' = {describe_value(value)}, which every metric would match to an empty answer; "
            "fix or drop this example",
        )
    return tuple(answers)


def _candidates(value: Any, path: Path, line_number: int) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise DataFormatError(path, line_number, QA_LINE_FORMAT, f"'candidates' = {describe_value(value)}")
    return tuple(value)


def _doc_ids(obj: dict[str, Any], key: str, path: Path, line_number: int) -> list[str]:
    """The doc ids of a BrowseComp-Plus document list (objects with a ``docid``, or plain ids)."""
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DataFormatError(path, line_number, BROWSECOMP_LINE_FORMAT, f"{key!r} = {describe_value(value)}")
    ids = []
    for item in value:
        doc_id = item.get("docid") if isinstance(item, dict) else item
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
            raise DataFormatError(path, line_number, BROWSECOMP_LINE_FORMAT, f"{key!r} containing {describe_value(item)}")
        ids.append(str(doc_id))
    return ids


def _browsecomp_example(obj: dict[str, Any], path: Path, line_number: int) -> QAExample:
    """A line of the decrypted BrowseComp-Plus queries (see the module docstring)."""
    missing = [key for key in ("query_id", "query", "answer") if key not in obj]
    if missing:
        raise DataFormatError(
            path, line_number, BROWSECOMP_LINE_FORMAT, f"{describe_value(obj)} (no {', '.join(map(repr, missing))})"
        )
    example_id = read_id(obj, path, line_number, BROWSECOMP_LINE_FORMAT, key="query_id")
    question = obj["query"]
    if not isinstance(question, str) or not question.strip():
        raise DataFormatError(path, line_number, BROWSECOMP_LINE_FORMAT, f"'query' = {describe_value(question)}")
    answer = obj["answer"]
    if isinstance(answer, bool) or not isinstance(answer, (str, int)):
        raise DataFormatError(path, line_number, BROWSECOMP_LINE_FORMAT, f"'answer' = {describe_value(answer)}")
    if is_blank_answer(str(answer)):
        raise DataFormatError(
            path, line_number,
            "an 'answer' that keeps a word after normalization (lowercased, punctuation and the articles a/an/the removed)",
            f"'answer' = {describe_value(answer)}, which every metric would match to an empty answer; fix or drop this example",
        )
    metadata: dict[str, Any] = {meta: _doc_ids(obj, key, path, line_number) for key, meta in BROWSECOMP_DOC_LISTS}
    metadata["source"] = BROWSECOMP_SOURCE
    return QAExample(example_id, question, (str(answer),), metadata)


def _is_browsecomp(obj: dict[str, Any]) -> bool:
    return ("query_id" in obj or "query" in obj) and "question" not in obj and "golden_answers" not in obj


def _example_from(obj: dict[str, Any], path: Path, line_number: int) -> QAExample:
    if _is_browsecomp(obj):
        return _browsecomp_example(obj, path, line_number)
    missing = [key for key in ("question", "golden_answers") if key not in obj]
    if missing:
        raise DataFormatError(
            path, line_number, QA_LINE_FORMAT, f"{describe_value(obj)} (no {', '.join(map(repr, missing))})"
        )
    question = obj["question"]
    if not isinstance(question, str) or not question.strip():
        raise DataFormatError(path, line_number, QA_LINE_FORMAT, f"'question' = {describe_value(question)}")
    example_id = read_id(obj, path, line_number, QA_LINE_FORMAT) if "id" in obj else f"line-{line_number}"
    metadata: dict[str, Any] = {}
    extra = obj.get("metadata")
    if isinstance(extra, dict):
        metadata.update(extra)
    elif "metadata" in obj:
        metadata["metadata"] = extra
    own = ("id", "question", "golden_answers", "metadata", "candidates")
    metadata.update({k: v for k, v in obj.items() if k not in own})
    candidates = _candidates(obj["candidates"], path, line_number) if "candidates" in obj else ()
    return QAExample(example_id, question, _answers(obj["golden_answers"], path, line_number), metadata, candidates)


def read_qa(path: str | os.PathLike) -> list[QAExample]:
    """Read a QA file (FlashRAG or decrypted BrowseComp-Plus lines, see the module docstring)
    into a list of examples.

    Raises :class:`DataFormatError` naming the file and line for a malformed line or a
    repeated id, and ``FileNotFoundError`` if the file does not exist.
    """
    path = Path(path)
    examples: list[QAExample] = []
    first_line: dict[str, int] = {}
    for line_number, obj in iter_jsonl_objects(path, expected=QA_LINE_FORMAT, what="QA dataset"):
        example = _example_from(obj, path, line_number)
        check_new_id(first_line, example.id, path, line_number, "example")
        examples.append(example)
    return examples


def write_qa(examples: Iterable[QAExample], path: str | os.PathLike) -> Path:
    """Write examples as FlashRAG JSON lines that :func:`read_qa` reads back unchanged.

    Metadata is written under ``"metadata"``; it must be JSON-serialisable. Candidates are
    written under ``"candidates"`` when there are any. A path ending in ``.gz`` is
    gzip-compressed.
    """

    def record(e: QAExample) -> dict[str, Any]:
        out = {"id": e.id, "question": e.question, "golden_answers": list(e.answers), "metadata": dict(e.metadata)}
        if e.candidates:
            out["candidates"] = list(e.candidates)
        return out

    return write_jsonl((record(e) for e in examples), path)
