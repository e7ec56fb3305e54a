"""Drawing the questions of a synthwiki world, with their evidence and splits.

The number of questions is one per passage, at least 400 and at most
:data:`MAX_QUESTIONS`, shared between the groups 30% single-hop, 30% two-hop bridge,
20% three-hop bridge and 20% comparison; within a group the kinds of
:mod:`~searchgym.corpora.synthwiki.kinds` take turns, each drawing entities in a random
order, so the questions spread over the whole world.

For every hop the metadata records the passage id, the evidence sentence and an oracle
query: the entity's name followed by the word the evidence sentence uses for the fact
(``"Ilvar Odrenko born"``, ``"Kelvaro Shipyards founded"``), which BM25 ranks first; and,
per hop in one place (``hop_facts``), those with the hop's own answer, which a step-wise
reward reads (did this search find the passage of the next hop?).

Splits: within each (type, hops) group, questions are ordered by a stable hash of their
id (BLAKE2b); the first 10% form ``dev``, the next 10% ``test`` and the rest ``train``,
so every split holds every type in every world, however small.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator

import numpy as np

from searchgym.corpora.synthwiki.kinds import Answers, Draft, Hop, bridge_kinds, comparison_kinds, single_kinds
from searchgym.corpora.synthwiki.prose import Sentence, write
from searchgym.corpora.synthwiki.world import World, passage_id
from searchgym.corpora.types import QAExample

__all__ = ["MAX_QUESTIONS", "SPLITS", "assign_splits", "make_questions"]

SPLITS = ("train", "dev", "test")
#: The number of questions grows with the world (one per passage) up to this cap.
MAX_QUESTIONS = 20_000
_MIN_QUESTIONS = 400
_GROUP_SHARES = {("single", 1): 0.3, ("bridge", 2): 0.3, ("bridge", 3): 0.2, ("comparison", 2): 0.2}
# A kind gives up after this many entities in a row that do not fit it (or repeat a question).
_MAX_MISSES = 200


def _words(text: str) -> str:
    """Lowercase words separated by single spaces, padded, for whole-word containment tests."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def _mentions(question: str, answer: str) -> bool:
    return _words(answer) in _words(question)


class _Evidence:
    """Finds the sentence (and its passage) that states a fact, re-writing passages on demand."""

    def __init__(self, world: World):
        self.world = world
        self._cache: dict[tuple[str, int], list[list[Sentence]]] = {}

    def locate(self, hop: Hop) -> tuple[str, str, str]:
        """``(passage id, evidence sentence, oracle query)`` of one hop."""
        key = (hop.kind, hop.index)
        if key not in self._cache:
            self._cache[key] = write(self.world, hop.kind, hop.index)
        first = self.world.first[hop.kind][hop.index]
        name = self.world.entities(hop.kind)[hop.index].name
        for part, sentences in enumerate(self._cache[key]):
            for text, facts in sentences:
                if facts and hop.fact in facts:
                    return passage_id(first + part, self.world.num_passages), text, f"{name} {facts[hop.fact]}"
        raise AssertionError(f"No sentence states {hop.fact!r} of {name!r}")  # a bug in prose.py


def _candidates(rng: np.random.Generator, size: int, pairs: bool) -> Iterator[tuple[int, ...]]:
    """Entities (or pairs of distinct entities) of one kind in a random order."""
    if not pairs:
        for i in rng.permutation(size):
            yield (int(i),)
        return
    seen: set[tuple[int, int]] = set()
    limit = size * (size - 1) // 2
    while len(seen) < limit:
        i, j = (int(x) for x in rng.choice(size, size=2, replace=False))
        if (min(i, j), max(i, j)) not in seen:
            seen.add((min(i, j), max(i, j)))
            yield (i, j)


def _draw(world: World, rng: np.random.Generator, wording: random.Random) -> list[tuple[str, str, Draft]]:
    """``(type, kind, draft)`` for every question of the world, group by group."""
    total = min(MAX_QUESTIONS, max(_MIN_QUESTIONS, world.num_passages))
    answers = Answers(world)
    groups = {
        ("single", 1): {name: (kind, builder) for name, (kind, builder) in single_kinds().items()},
        ("bridge", 2): {name: (kind, builder) for name, (h, kind, builder) in bridge_kinds().items() if h == 2},
        ("bridge", 3): {name: (kind, builder) for name, (h, kind, builder) in bridge_kinds().items() if h == 3},
        ("comparison", 2): comparison_kinds(),
    }
    drafts: list[tuple[str, str, Draft]] = []
    asked: set[str] = set()
    for (qtype, hops), kinds in groups.items():
        quota = round(total * _GROUP_SHARES[(qtype, hops)])
        streams = {
            name: _candidates(rng, len(world.entities(kind)), pairs=qtype == "comparison")
            for name, (kind, _) in kinds.items()
        }
        made, active = 0, list(kinds)
        while made < quota and active:
            for name in list(active):
                draft = _next_draft(world, answers, wording, kinds[name][1], streams[name], asked, qtype)
                if draft is None:
                    active.remove(name)
                    continue
                asked.add(draft.question)
                drafts.append((qtype, name, draft))
                made += 1
                if made == quota:
                    break
    return drafts


def _next_draft(world, answers, wording, builder, stream, asked: set[str], qtype: str) -> Draft | None:
    misses = 0
    for picked in stream:
        draft = builder(world, answers, wording, *picked)
        if draft is not None and draft.question not in asked and _is_clean(draft, qtype):
            return draft
        misses += 1
        if misses >= _MAX_MISSES:
            return None
    return None


def _is_clean(draft: Draft, qtype: str) -> bool:
    """The question names neither its answer (except comparisons, by design) nor a bridge answer."""
    hidden = list(draft.bridge_answers) + ([] if qtype == "comparison" else list(draft.answers))
    return not any(_mentions(draft.question, text) for text in hidden)


def make_questions(world: World) -> list[QAExample]:
    """Every question of the world, in a shuffled order, with ids ``"swq-00000"``..."""
    rng = np.random.default_rng(np.random.SeedSequence([world.seed, world.num_passages, 1]))
    wording = random.Random(int(rng.integers(1 << 62)))
    drafts = _draw(world, rng, wording)
    evidence = _Evidence(world)
    examples = []
    for number, k in enumerate(rng.permutation(len(drafts)).tolist()):
        qtype, kind, draft = drafts[k]
        located = [evidence.locate(hop) for hop in draft.hops]
        # Each hop's own answer: a bridge's intermediate answers, then the final one; a
        # comparison's hops give the two compared values (its bridge answers).
        sub_answers = list(draft.bridge_answers) if qtype == "comparison" else [*draft.bridge_answers, draft.answers[0]]
        metadata = {
            "type": qtype,
            "hops": len(draft.hops),
            "kind": kind,
            "supporting_ids": [pid for pid, _, _ in located],
            "oracle_queries": [query for _, _, query in located],
            "bridge_answers": list(draft.bridge_answers),
            "evidence": [sentence for _, sentence, _ in located],
            "answer_passage_id": located[draft.answer_hop][0],
            "hop_facts": [
                {"passage_id": pid, "answer": answer, "evidence": sentence, "query": query}
                for (pid, sentence, query), answer in zip(located, sub_answers, strict=True)
            ],
        }
        examples.append(QAExample(f"swq-{number:05d}", draft.question, draft.answers, metadata, draft.candidates))
    return examples


def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def assign_splits(examples: list[QAExample]) -> dict[str, list[QAExample]]:
    """Split 80/10/10 within each (type, hops) group by a stable hash of the question id."""
    groups: dict[tuple[str, int], list[QAExample]] = {}
    for example in examples:
        groups.setdefault((example.metadata["type"], example.metadata["hops"]), []).append(example)
    chosen: dict[str, str] = {}
    for group in groups.values():
        ranked = sorted(group, key=lambda e: _stable_hash(e.id))
        held_out = max(1, round(len(ranked) / 10)) if len(ranked) >= 3 else 0
        for rank, example in enumerate(ranked):
            chosen[example.id] = "dev" if rank < held_out else "test" if rank < 2 * held_out else "train"
    splits: dict[str, list[QAExample]] = {name: [] for name in SPLITS}
    for example in examples:
        splits[chosen[example.id]].append(example)
    return splits
