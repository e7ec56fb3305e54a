"""deepwiki: a generated world of long encyclopedia articles for offline deep-research games.

``generate(seed, num_documents, ...)`` invents cities, universities, companies and people
(names from synthwiki's grammar, so no model knows any of them), writes one article of a few
thousand words per entity, and asks BrowseComp-style questions: several constraints that
together pick out exactly one person ("What is the full name of the person who was born in a
city first settled in 1357, studied at a university whose founder was a banker, and in 1921
published a book on river trade?").

Why it is hard in the way BrowseComp-Plus is:

* every fact a question needs is one sentence deep inside an article (after word 600), so a
  search snippet never shows it: the agent has to open documents and read them;
* with ``hops=2`` every constraint needs two documents (the person's, then the city's or
  the university's...);
* every question has ``distractors`` hard negatives: near-namesakes of the answer with the
  same profession, city and decade, each meeting every constraint but one, so no single
  constraint identifies the answer.

The world is written once to ``cache_dir()/deepwiki/<every knob>/`` (``corpus.jsonl``,
``questions.jsonl``, ``meta.json``; see :mod:`.build`) and the corpus is opened memory-mapped
(:func:`searchgym.corpora.mapped.open_corpus`), so a 100,000-article world costs a process
almost no memory. The same knobs give byte-identical files in every process.

Modules: :mod:`.options` (knobs), :mod:`.world` (entities), :mod:`.kinds` (constraint
kinds), :mod:`.questions` (planting and checking questions), :mod:`.phrases` and
:mod:`.prose` (articles), :mod:`.build` (the folder).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.cache import cache_dir
from searchgym.corpora.deepwiki.build import SPLITS, ensure_folder
from searchgym.corpora.deepwiki.options import DEFAULTS, OPTIONS, RANGES, folder_name, max_questions, resolve_options
from searchgym.corpora.mapped import MappedCorpus, open_corpus
from searchgym.corpora.types import QAExample
from searchgym.error import UnknownNameError

__all__ = ["DEFAULTS", "OPTIONS", "RANGES", "SPLITS", "DeepWiki", "generate", "max_questions", "resolve_options", "world_folder"]


@dataclass
class DeepWiki:
    """A generated world on disk: its memory-mapped corpus and its questions.

    ``QAExample.metadata`` of every question (plain JSON data) holds ``kind`` ("browse"),
    ``hops``, ``target_id`` (the answer's article), ``gold_ids`` (``[target_id]``: the article
    whose subject is the answer), ``evidence_ids`` (every article on every constraint's path,
    the answer's first), ``negative_ids`` (the hard negatives' articles), ``negative_fails``
    (the kind of the one constraint each negative fails, in the same order) and
    ``constraints``: per clause of the question, in order, a dict of ``text`` (the clause),
    ``kind`` (e.g. ``"birthplace.settled"``), ``doc_ids`` (the documents it needs, in hop
    order) and ``facts`` (the sentence of each of them that states the fact, verbatim; each
    occurs exactly once in the corpus, as a whole sentence, after the article's first 600
    words). ``answers`` is the answer's full name (people have no other name).
    """

    folder: Path
    knobs: dict[str, Any]
    corpus: MappedCorpus
    _splits: dict[str, list[QAExample]] | None = field(default=None, repr=False)

    def _read(self) -> dict[str, list[QAExample]]:
        if self._splits is None:
            splits: dict[str, list[QAExample]] = {split: [] for split in SPLITS}
            with open(self.folder / "questions.jsonl", encoding="utf-8") as f:
                for line in f:
                    obj = json.loads(line)
                    splits[obj["split"]].append(
                        QAExample(obj["id"], obj["question"], tuple(obj["golden_answers"]), obj["metadata"]))
            self._splits = splits
        return self._splits

    def questions(self, split: str) -> list[QAExample]:
        """The questions of ``split`` ("train", "dev" or "test"), ordered by id, as a new list."""
        splits = self._read()
        if split not in splits:
            raise UnknownNameError("split", split, SPLITS)
        return list(splits[split])

    @property
    def all_questions(self) -> list[QAExample]:
        """Every question, ordered by id."""
        return sorted((q for split in SPLITS for q in self._read()[split]), key=lambda q: q.id)


def world_folder(**options: Any) -> Path:
    """Where the world of these knobs is (or will be) written."""
    return cache_dir() / "deepwiki" / folder_name(resolve_options(**options))


def generate(
    seed: int = 0,
    num_documents: int = 1000,
    constraints: int = 3,
    hops: int = 2,
    distractors: int = 4,
    words_per_document: int = 2000,
    num_questions: int | None = None,
) -> DeepWiki:
    """The deepwiki world of these knobs, written on the first call and reused after.

    Args:
        seed: Any non-negative integer.
        num_documents: Articles in the corpus (200 to 100,000): 12% cities, 4% universities,
            8% companies, the rest people.
        constraints: Clauses per question (2 to 6).
        hops: Documents each clause needs (1: the person's own article; 2: it and the
            article of the city, university, company or mentor it goes through).
        distractors: Hard negatives per question (0 to 10), each failing one clause.
        words_per_document: Mean article length (1,000 to 10,000); each article is drawn
            between 0.75 and 1.2 times it (a sentence more at most).
        num_questions: Questions in all (at least 10; default one per ten documents, at
            most 5,000 and what the world holds, :func:`max_questions`), split 80/10/10
            into train/dev/test with at least three dev and three test questions.

    Raises :class:`~searchgym.error.ConfigError` for a knob out of range (the message says the range).
    """
    knobs = resolve_options(seed=seed, num_documents=num_documents, constraints=constraints, hops=hops,
                            distractors=distractors, words_per_document=words_per_document, num_questions=num_questions)
    folder = cache_dir() / "deepwiki" / folder_name(knobs)
    ensure_folder(folder, knobs)
    corpus = open_corpus(folder / "corpus.jsonl", name=f"deepwiki-{folder.name}")
    return DeepWiki(folder, knobs, corpus)
