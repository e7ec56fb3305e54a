"""BrowseComp-style questions: several clauses that together pick out exactly one person.

Each question is *planted*: an answer person is drawn, then ``constraints`` clauses of the
chosen ``hops`` that no person of the world so far meets all together, then ``distractors``
hard negatives, each a copy of the answer (same profession, city, decade, university...)
with a near-namesake's name (same surname and another given name, or the same given name
and a surname one syllable away) that fails exactly one clause, a different one in turn.
So no single clause identifies the answer, and reading one article never settles it.

Uniqueness holds by construction when the question is planted, and is checked again over
the finished world (:func:`matching_people`), since people planted later could meet an
earlier question by chance; such a question is dropped (a few spare ones are planted).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from searchgym.corpora.deepwiki.kinds import KINDS, ONE_HOP, TWO_HOP, Mentors, break_kind, clause, kind_values, related_kind
from searchgym.corpora.deepwiki.prose import fact_sentence
from searchgym.corpora.deepwiki.world import LAST_BIRTH, PERSON_COLUMNS, World, draw_facts
from searchgym.corpora.synthwiki.names import BLOCKED, ENDINGS
from searchgym.error import ConfigError

__all__ = ["ALL_KINDS", "Plan", "matching_people", "metadata", "plant_questions", "question_text", "spare_questions"]

ALL_KINDS = ONE_HOP + TWO_HOP
_ATTEMPTS = 200  # draws of an answer and its clauses before a question is given up
_FIRST_ANSWER_BIRTH = 1720  # late enough to have a mentor in the background


@dataclass
class Plan:
    """One planted question: ``clauses`` are ``(kind, value)`` in the order the question
    says them; ``breaks[j]`` is the clause negative ``j`` fails."""

    answer: int
    negatives: list[int]
    breaks: list[int]
    clauses: list[tuple[str, int]]


def spare_questions(count: int) -> int:
    """Questions planted beyond ``count``, to stand in for any the final check drops."""
    return max(2, count // 20)


def matching_people(world: World, clauses: list[tuple[str, int]], values: np.ndarray | None = None) -> np.ndarray:
    """Indices of every person who meets all ``clauses`` (``values``: :func:`kind_values`
    of every person under :data:`ALL_KINDS`, when the caller already has them)."""
    columns = [ALL_KINDS.index(name) for name, _ in clauses]
    if values is None:
        values = kind_values(world, [name for name, _ in clauses])
        columns = list(range(len(clauses)))
    hits = np.flatnonzero(values[:, columns[0]] == clauses[0][1])
    for column, (_, value) in zip(columns[1:], clauses[1:]):
        hits = hits[values[hits, column] == value]
    return hits


def _choose_kinds(rng: np.random.Generator, available: list[str], count: int) -> list[str] | None:
    """``count`` kinds, one per relation first (a city, a university...), then any."""
    if len(available) < count:
        return None
    shuffled = [available[k] for k in rng.permutation(len(available))]
    first, seen = [], set()
    for name in shuffled:
        if KINDS[name].relation not in seen:
            seen.add(KINDS[name].relation)
            first.append(name)
    rest = [name for name in shuffled if name not in first]
    return (first + rest)[:count]


class _Namer:
    """Unique full names: random ones for answers, near-namesakes for their negatives."""

    def __init__(self, rng: np.random.Generator, world: World):
        self.rng, self.world = rng, world
        self.taken = {world.person_name(i) for i in range(world.background)}
        self.endings = sorted(ENDINGS["surname"], key=len, reverse=True)

    def _given(self, female: bool, avoid: str) -> str:
        names = self.world.given[female]
        while True:
            name = names[int(self.rng.integers(len(names)))]
            if not (name.endswith(avoid) or avoid.endswith(name)):  # "Tova" vs "Stova": no name inside another
                return name

    def answer(self, female: bool) -> tuple[str, str]:
        while True:
            given = self._given(female, "\0")
            surname = self.world.surnames[int(self.rng.integers(len(self.world.surnames)))]
            if f"{given} {surname}" not in self.taken:
                self.taken.add(f"{given} {surname}")
                return given, surname

    def namesake(self, female: bool, given: str, surname: str, j: int) -> tuple[str, str]:
        """Same surname and another given name (even ``j``), or the same given name and a
        surname with another ending (odd ``j``, when one is free)."""
        if j % 2:
            lower = surname.lower()
            for ending in self.endings:
                if lower.endswith(ending) and len(lower) - len(ending) >= 2:
                    stem = surname[: len(surname) - len(ending)]
                    others = [e for e in ENDINGS["surname"] if e != ending]
                    for k in self.rng.permutation(len(others)).tolist():
                        variant = stem + others[k]
                        if variant.lower() not in BLOCKED and f"{given} {variant}" not in self.taken:
                            self.taken.add(f"{given} {variant}")
                            return given, variant
                    break
        for _ in range(1000):
            other = self._given(female, given)
            if f"{other} {surname}" not in self.taken:
                self.taken.add(f"{other} {surname}")
                return other, surname
        return self.answer(female)


def _person(world: World, slot: int, facts: dict[str, int], female: bool, name: tuple[str, str]) -> None:
    for column in PERSON_COLUMNS:
        world.people[column][slot] = facts[column]
    world.person_female[slot] = female
    world.person_given[slot], world.person_surname[slot] = name


def plant_questions(rng: np.random.Generator, world: World, count: int, constraints: int, hops: int,
                    distractors: int) -> list[Plan]:
    """Plant ``count`` questions (and their negatives) into the free person slots of
    ``world``; raises :class:`ConfigError` when the world is too small for them."""
    mentors = Mentors(world)
    namer = _Namer(rng, world)
    pool = list(ONE_HOP if hops == 1 else TWO_HOP)
    values = np.full((world.size("person"), len(ALL_KINDS)), -2, dtype=np.int64)  # -2: an empty slot matches nothing
    values[: world.background] = kind_values(world, list(ALL_KINDS))[: world.background]
    background_births = world.people["birth"][: world.background]
    slot = world.background
    plans = []
    for _ in range(count):
        for _ in range(_ATTEMPTS):
            birth = int(_FIRST_ANSWER_BIRTH + (LAST_BIRTH - _FIRST_ANSWER_BIRTH) * np.sqrt(rng.random()))
            drawn = draw_facts(rng, world, np.array([birth]), mentors_from=background_births)
            facts = {column: int(v[0]) for column, v in drawn.items()}
            own = kind_values(world, pool, {c: np.array([v]) for c, v in facts.items()})[0]
            chosen = _choose_kinds(rng, [k for k, v in zip(pool, own.tolist()) if v >= 0], constraints)
            if chosen is None:
                continue
            clauses = [(name, int(own[pool.index(name)])) for name in chosen]
            if len(matching_people(world, clauses, values[:slot])):
                continue  # somebody already meets them all: draw again
            negatives, breaks, ok = [], [], True
            offset = int(rng.integers(constraints))
            for j in range(distractors):
                broken = (offset + j) % constraints
                copy = dict(facts)
                if not break_kind(rng, world, mentors, copy, clauses[broken][0], clauses):
                    ok = False
                    break
                negatives.append(copy)
                breaks.append(broken)
            if ok:
                break
        else:
            raise ConfigError(
                f"deepwiki expects a world large enough for its questions, got one where a question with {constraints} "
                f"constraints of {hops} hops could not be planted in {_ATTEMPTS} tries; ask for more documents, "
                "fewer constraints or fewer questions."
            )
        female = bool(rng.random() < 0.5)
        given, surname = namer.answer(female)
        members = [facts, *negatives]
        names = [(given, surname)] + [namer.namesake(female, given, surname, j) for j in range(len(negatives))]
        for member, name in zip(members, names):
            _person(world, slot, member, female, name)
            values[slot] = kind_values(world, list(ALL_KINDS), {c: np.array([v]) for c, v in member.items()})[0]
            slot += 1
        answer = slot - len(members)
        plans.append(Plan(answer, list(range(answer + 1, slot)), breaks, clauses))
    return plans


def check_plan(world: World, plan: Plan, values: np.ndarray) -> bool:
    """Whether exactly the answer meets all clauses and each negative fails exactly the
    clause it was made to fail (``values``: :func:`kind_values` under :data:`ALL_KINDS`)."""
    if matching_people(world, plan.clauses, values).tolist() != [plan.answer]:
        return False
    columns = [ALL_KINDS.index(name) for name, _ in plan.clauses]
    targets = np.array([value for _, value in plan.clauses])
    for negative, broken in zip(plan.negatives, plan.breaks):
        failed = np.flatnonzero(values[negative, columns] != targets).tolist()
        if failed != [broken]:
            return False
    return True


def question_text(world: World, clauses: list[tuple[str, int]]) -> str:
    """``"What is the full name of the person who was born in ..., studied at ..., and ...?"``
    (it ends with its question mark: prompts such as Search-R1's add one otherwise)."""
    parts = [clause(world, name, value) for name, value in clauses]
    said = parts[0] if len(parts) == 1 else (
        f"{parts[0]} and {parts[1]}" if len(parts) == 2 else ", ".join(parts[:-1]) + f", and {parts[-1]}")
    return f"What is the full name of the person who {said}?"


def metadata(world: World, plan: Plan, hops: int) -> dict:
    """The question's JSON-able metadata (see :class:`searchgym.corpora.deepwiki.DeepWiki`)."""
    target = world.doc("person", plan.answer)
    constraints, evidence = [], [target]
    for name, value in plan.clauses:
        kind = KINDS[name]
        doc_ids = [target]
        facts = [fact_sentence(world, "person", plan.answer, kind.relation)]
        if kind.attr is not None:
            related = int(world.people[kind.relation][plan.answer])
            other = related_kind(kind.relation)
            doc_ids.append(world.doc(other, related))
            facts.append(fact_sentence(world, other, related, kind.attr))
        evidence += [d for d in doc_ids if d not in evidence]
        constraints.append({"text": clause(world, name, value), "kind": name, "doc_ids": doc_ids, "facts": facts})
    return {
        "kind": "browse",
        "hops": hops,
        "target_id": target,
        "evidence_ids": evidence,
        "gold_ids": [target],
        "negative_ids": [world.doc("person", n) for n in plan.negatives],
        "negative_fails": [plan.clauses[b][0] for b in plan.breaks],
        "constraints": constraints,
    }
