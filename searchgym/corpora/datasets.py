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

__all__ = ["read_qa", "write_qa"]

QA_LINE_FORMAT = (
    'a JSON object with "question" (a string), "golden_answers" (a list of strings or a string) '
    'and optionally "id" and "candidates" (a list of strings)'
)


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


def _example_from(obj: dict[str, Any], path: Path, line_number: int) -> QAExample:
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
    """Read a FlashRAG-layout QA file (see the module docstring) into a list of examples.

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
