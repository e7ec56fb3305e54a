"""synthwiki: a procedurally generated fictional encyclopedia with questions about it.

``generate(seed, num_passages)`` invents a world of countries, cities, organisations
(companies, universities, newspapers, bands, sports clubs) and people, writes one or two
encyclopedia passages about each entity, and asks single-hop, bridge (2 and 3 hops) and
comparison questions about it. Every name is invented (see :mod:`.names`), so no model
can answer from memory: the answers exist only in the corpus, and each question has
exactly one correct answer given the corpus.

The world is a pure function of ``(seed, num_passages)``: the same arguments give the
same passages and questions in every process. The corpus has exactly ``num_passages``
passages (at least :data:`MIN_PASSAGES`); passages run 60-90 words. There is one question
per passage, at least 400 and at most :data:`MAX_QUESTIONS`. A million passages take
about 40 seconds and 1.6 GB on one core; nothing is cached on disk.

Modules: :mod:`.names` (the name grammar), :mod:`.entities`, :mod:`.world` and
:mod:`.orgs` (entities and their facts), :mod:`.phrases` and :mod:`.prose` (passages),
:mod:`.kinds` and :mod:`.questions` (questions, evidence, splits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from searchgym.corpora.synthwiki.prose import passage_text, write
from searchgym.corpora.synthwiki.questions import MAX_QUESTIONS, SPLITS, assign_splits, make_questions
from searchgym.corpora.synthwiki.world import MIN_PASSAGES, World, build_world, passage_id
from searchgym.corpora.types import Corpus, Passage, QAExample
from searchgym.error import UnknownNameError

__all__ = ["MAX_QUESTIONS", "MIN_PASSAGES", "SPLITS", "SynthWiki", "generate", "write_corpus"]


@dataclass
class SynthWiki:
    """A generated world: its corpus and its questions, split into train/dev/test.

    ``QAExample.metadata`` of every question holds ``type`` ("single", "bridge" or
    "comparison"), ``hops``, ``kind`` (the question template), ``supporting_ids`` (one
    passage per hop, in order), ``oracle_queries`` (one BM25 query per hop that ranks that
    passage first), ``bridge_answers`` (the intermediate answers; for a comparison, the two
    compared values), ``evidence`` (the sentence of each supporting passage that states
    the fact, verbatim), ``answer_passage_id``, and ``hop_facts``: per hop, in order, a dict
    of its ``passage_id``, ``answer`` (the hop's own answer: a bridge's intermediate answer,
    the final answer at the last hop; a comparison's compared value), ``evidence`` and
    ``query`` (the oracle query), the same facts as the lists above read hop by hop (a
    reward recipe finds them in ``Episode.metadata``). ``answers`` holds the canonical answer
    first, then unambiguous aliases. ``candidates`` of a comparison holds the canonical
    names of the two entities it compares (empty for the other types).
    """

    corpus: Corpus
    seed: int
    num_passages: int
    _splits: dict[str, list[QAExample]] = field(repr=False)

    def questions(self, split: str) -> list[QAExample]:
        """The questions of ``split`` ("train", "dev" or "test"), as a new list."""
        if split not in self._splits:
            raise UnknownNameError("split", split, SPLITS)
        return list(self._splits[split])

    @property
    def all_questions(self) -> list[QAExample]:
        """Every question, ordered by id."""
        return sorted((q for split in SPLITS for q in self._splits[split]), key=lambda q: q.id)


def write_corpus(world: World) -> Corpus:
    """Every passage of the world, in passage-id order."""
    passages = []
    kinds = World.KINDS
    entities = [world.entities(kind) for kind in kinds]
    for code, index in zip(world.order_kind.tolist(), world.order_index.tolist()):
        kind = kinds[code]
        title = entities[code][index].name
        for sentences in write(world, kind, index):
            passages.append(Passage(passage_id(len(passages), world.num_passages), title, passage_text(sentences)))
    return Corpus(passages, name=f"synthwiki-s{world.seed}-n{world.num_passages}")


def generate(seed: int = 0, num_passages: int = 1000) -> SynthWiki:
    """The synthwiki world for ``(seed, num_passages)``: exactly ``num_passages`` passages.

    Raises :class:`~searchgym.error.ConfigError` for a negative seed or fewer than
    :data:`MIN_PASSAGES` passages.
    """
    world = build_world(seed, num_passages)
    corpus = write_corpus(world)
    splits = assign_splits(make_questions(world))
    return SynthWiki(corpus, world.seed, world.num_passages, splits)
