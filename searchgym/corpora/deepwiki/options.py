"""The knobs of a deepwiki world: defaults, valid ranges, and the folder they name."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

from searchgym.corpora.deepwiki.questions import spare_questions
from searchgym.corpora.deepwiki.world import counts
from searchgym.error import ConfigError

__all__ = ["DEFAULTS", "OPTIONS", "RANGES", "folder_name", "max_questions", "resolve_options"]

#: Bumped whenever the same knobs would write different files.
FORMAT_VERSION = 1
OPTIONS = ("seed", "num_documents", "constraints", "hops", "distractors", "words_per_document", "num_questions")
DEFAULTS: dict[str, Any] = {"seed": 0, "num_documents": 1000, "constraints": 3, "hops": 2, "distractors": 4,
                            "words_per_document": 2000, "num_questions": None}
#: Inclusive ranges; ``num_questions``'s upper end also depends on the world (:func:`max_questions`).
RANGES = {"seed": (0, 2**63 - 1), "num_documents": (200, 100_000), "constraints": (2, 6), "hops": (1, 2),
          "distractors": (0, 10), "words_per_document": (1000, 10_000), "num_questions": (10, 5000)}
#: Planted people (answers and negatives) fill at most this share of a world's people.
_PLANTED_SHARE = 0.5


def max_questions(num_documents: int, distractors: int) -> int:
    """The most questions a world of this size holds with this many negatives each."""
    room = int(counts(num_documents)["person"] * _PLANTED_SHARE) // (1 + distractors)
    best = 0
    for count in range(min(room, RANGES["num_questions"][1]) + 1):
        if count + spare_questions(count) <= room:
            best = count
    return best


def resolve_options(**options: Any) -> dict[str, Any]:
    """Every knob, checked and with its default; ``num_questions`` resolved to a number
    (by default one per ten documents, at most what the world holds and 5,000).

    Raises :class:`ConfigError` for an unknown knob, a value that is not an integer, or one
    out of its range (the message gives the range).
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(f"deepwiki does not take the option(s) {', '.join(unknown)}; expected only {', '.join(OPTIONS)}.")
    knobs = {**DEFAULTS, **{k: v for k, v in options.items() if not (k == "num_questions" and v is None)}}
    for key in OPTIONS:
        value = knobs[key]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ConfigError(f"deepwiki expects {key} to be an integer, got {value!r}.")
        lo, hi = RANGES[key]
        if not lo <= value <= hi:
            raise ConfigError(f"deepwiki expects {key} between {lo} and {hi}, got {value}.")
        knobs[key] = int(value)
    room = max_questions(knobs["num_documents"], knobs["distractors"])
    lo = RANGES["num_questions"][0]
    if room < lo:
        raise ConfigError(
            f"deepwiki expects a world that holds at least {lo} questions, got num_documents={knobs['num_documents']} "
            f"with distractors={knobs['distractors']}, which holds {room}; ask for more documents or fewer distractors."
        )
    if knobs["num_questions"] is None:
        knobs["num_questions"] = min(max(knobs["num_documents"] // 10, lo), room)
    elif knobs["num_questions"] > room:
        raise ConfigError(
            f"deepwiki expects num_questions between {lo} and {room} for num_documents={knobs['num_documents']} "
            f"and distractors={knobs['distractors']}, got {knobs['num_questions']}."
        )
    return knobs


def folder_name(knobs: Mapping[str, Any]) -> str:
    """``"v1-s0-n1000-c3-h2-d4-w2000-q100"``: every knob, so no two worlds share a folder."""
    k = knobs
    return (f"v{FORMAT_VERSION}-s{k['seed']}-n{k['num_documents']}-c{k['constraints']}-h{k['hops']}-d{k['distractors']}"
            f"-w{k['words_per_document']}-q{k['num_questions']}")
