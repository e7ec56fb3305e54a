"""What every env over a corpus shares: its questions and corpus, the choice of a
question at reset, its argument and action checks and its word counter."""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.corpora.http import is_url
from searchgym.corpora.registry import CORPORA, DeferredCorpus, default_dataset_for, load_corpus, load_dataset
from searchgym.corpora.types import Corpus, QAExample
from searchgym.error import ConfigError, SearchGymError, check_name

#: Keys of ``reset(options=...)`` that choose the question.
EXAMPLE_OPTIONS = frozenset({"example_index", "example_id", "example"})


#: ASCII bytes to b" " (what ``str.split()`` splits on) or b"a" (a word's character).
_WORD_BYTES = bytes(32 if chr(code).isspace() else 97 for code in range(128)) + b"a" * 128


def count_tokens(text: str) -> int:
    """Whitespace-separated words: the token count used when no ``token_counter`` is given.

    It is cheap on purpose (it runs on every observation); pass a tokenizer's length as
    ``token_counter`` for model tokens. It is ``len(text.split())``, without building the
    words where the text is ASCII (about 0.87x the time of ``split`` on wiki-vital's top-3
    observations, 0.5x on an ASCII passage).
    """
    if text.isascii():
        marks = text.encode().translate(_WORD_BYTES)
        return marks.count(b" a") + marks.startswith(b"a")
    return len(text.split())


def positive_int(name: str, value: Any, *, allow_none: bool = False, owner: str = "SearchEnv") -> Any:
    """``value`` when it is a positive ``int`` (or None with ``allow_none``); otherwise a
    :class:`~searchgym.error.ConfigError` naming ``owner`` and ``name``."""
    if value is None and allow_none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{owner} expects {name} to be a positive integer, got {value!r}.")
    return value


def finite_number(
    name: str, value: Any, *, low: float | None = None, high: float | None = None, owner: str = "SearchEnv"
) -> float:
    """``value`` as a float when it is a finite number within ``[low, high]`` (either bound
    optional); otherwise a :class:`~searchgym.error.ConfigError` naming ``owner`` and ``name``."""
    finite = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not finite or (low is not None and value < low) or (high is not None and value > high):
        bounds = " and ".join(f"{op} {bound:g}" for op, bound in ((">=", low), ("<=", high)) if bound is not None)
        raise ConfigError(f"{owner} expects {name} to be a finite number {bounds}, got {value!r}.")
    return float(value)


def check_arguments(
    positive: Mapping[str, Any], optional: Mapping[str, Any], names: Sequence[tuple[str, Any, Any]], owner: str = "SearchEnv"
) -> None:
    """An env's arguments checked before anything loads: ``positive`` must be positive
    integers, ``optional`` positive integers or None, and each ``(what, value, choices)`` of
    ``names`` None or one of its choices; each with its own clear error."""
    for name, value in positive.items():
        positive_int(name, value, owner=owner)
    for name, value in optional.items():
        positive_int(name, value, allow_none=True, owner=owner)
    for what, value, choices in names:
        if value is not None:
            check_name(what, value, choices)


def text_action(action: Any, max_chars: int, *, expected: str) -> tuple[str, bool]:
    """An agent's turn as text cut to ``max_chars`` (bytes are decoded as UTF-8), and whether
    it was cut; a :class:`~searchgym.error.SearchGymError` saying ``expected`` for anything else."""
    if isinstance(action, bytes):
        action = action.decode("utf-8", errors="replace")
    if not isinstance(action, str):
        raise SearchGymError(f"{expected}, got {type(action).__name__}.")
    return action[:max_chars], len(action) > max_chars


def bind_corpus(protocol: Any, corpus: Corpus) -> None:
    """Hand ``corpus`` to a protocol with a ``set_corpus`` method (one that reads documents itself,
    as the browse game's ``open`` and ``find`` do), as a recipe's ``set_corpus`` gets it."""
    set_corpus = getattr(protocol, "set_corpus", None)
    if callable(set_corpus):
        set_corpus(corpus)


def recorded_tools(record: Any, replay: Any, misses: str, retriever: Any, summarizer: Any, corpus: Corpus) -> tuple[Any, Any, Any]:
    """The env's retriever and summarizer through a tool record (``record=DIR`` keeps what they
    return, ``replay=DIR`` answers from it: :mod:`searchgym.envs.components.replay`), and what
    plays a protocol's own calls through it; unchanged and None without one."""
    from searchgym.envs.components.replay import RecordedProtocolCalls, RecordedRetriever, RecordedSummarizer, open_record

    tool_record = open_record(record, replay, misses)
    if tool_record is None:
        return retriever, summarizer, None
    summarizer = summarizer if getattr(summarizer, "passthrough", False) else RecordedSummarizer(summarizer, tool_record)
    return RecordedRetriever(retriever, tool_record), summarizer, RecordedProtocolCalls(tool_record, corpus)


def some_questions(kept: list[QAExample], examples: Sequence[QAExample], question_filter: Any, split: str) -> list[QAExample]:
    """``kept`` (the questions a filter kept), or a :class:`ConfigError` when it kept none."""
    if not kept:
        raise ConfigError(
            f"SearchEnv has no question left: question_filter={question_filter!r} kept none of the "
            f"{len(examples)} questions of split {split!r}; drop the filter or pick another split or dataset."
        )
    return kept


def load_task_data(
    corpus: Any,
    dataset: Any,
    *,
    split: str,
    corpus_options: Mapping[str, Any] | None,
    dataset_options: Mapping[str, Any] | None,
    owner: str = "SearchEnv",
    retriever: Any = None,
) -> tuple[Corpus, list[QAExample]]:
    """The corpus and the questions of an env's arguments (shared by every env over a corpus).

    ``dataset=None`` picks the built-in corpus's own questions; ``dataset_options=None``
    reuses ``corpus_options`` for a built-in dataset drawn from the same generated world.
    When ``retriever`` is the URL of a ``/retrieve`` server the corpus is not opened (the
    server returns the documents) until some code reads it.
    """
    if is_url(retriever) and not isinstance(corpus, Corpus):
        loaded: Corpus = DeferredCorpus(corpus, corpus_options or {})
    else:
        loaded = load_corpus(corpus, **dict(corpus_options or {}))
    examples = load_examples(corpus, dataset, split=split, corpus_options=corpus_options, dataset_options=dataset_options, owner=owner)
    return loaded, examples


def load_examples(
    corpus: Any,
    dataset: Any,
    *,
    split: str,
    corpus_options: Mapping[str, Any] | None,
    dataset_options: Mapping[str, Any] | None,
    owner: str = "SearchEnv",
) -> list[QAExample]:
    """The questions of an env's arguments (:func:`load_task_data` without the corpus)."""
    corpus_options = dict(corpus_options or {})
    if dataset is None:
        if not (isinstance(corpus, str) and corpus in CORPORA):
            raise ConfigError(
                f"{owner} expects a dataset= when the corpus is not a built-in name ({', '.join(CORPORA)}); "
                "pass a built-in dataset name, a FlashRAG jsonl path or a list of QAExample."
            )
        dataset = default_dataset_for(corpus)
    if dataset_options is None:
        # A built-in dataset drawn from the same generated world needs the same options.
        same_world = isinstance(corpus, str) and isinstance(dataset, str) and dataset.startswith(corpus)
        dataset_options = corpus_options if same_world else {}
    examples = list(load_dataset(dataset, split=split, **dataset_options))
    if not examples:
        raise ConfigError(f"{owner} expects a non-empty dataset, got 0 questions from {dataset!r} (split {split!r}).")
    return examples


def pick_example(examples: Sequence[QAExample], by_id: Mapping[str, int], options: Mapping[str, Any], rng: Any) -> QAExample:
    """The question ``options`` names (``example_index``, ``example_id`` or ``example``), else
    one drawn with ``rng``; keys outside :data:`EXAMPLE_OPTIONS` are the caller's to judge."""
    if "example" in options:
        ex = options["example"]
        if not isinstance(ex, QAExample):
            raise ConfigError(f"reset(options={{'example': ...}}) expects a QAExample, got {type(ex).__name__}.")
        return ex
    if "example_id" in options:
        try:
            return examples[by_id[options["example_id"]]]
        except (KeyError, TypeError):  # TypeError: an unhashable value, e.g. a list
            raise ConfigError(
                f"reset(options={{'example_id': ...}}) expects the id of a question in this env's dataset, got {options['example_id']!r}."
            ) from None
    if "example_index" in options:
        i = options["example_index"]
        if not isinstance(i, bool):
            try:
                i = operator.index(i)  # ints and NumPy integers
            except TypeError:
                pass
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(examples):
            raise ConfigError(
                f"reset(options={{'example_index': ...}}) expects an int in [0, {len(examples)}), got {i!r}."
            )
        return examples[i]
    return examples[int(rng.integers(len(examples)))]
