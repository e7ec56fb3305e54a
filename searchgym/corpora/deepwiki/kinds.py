"""Constraint kinds: what a clause of a question says about the person it asks for.

A 1-hop kind is a fact of the person's own article ("was born in 1872", "studied at Kelvaro
University"). A 2-hop kind goes through a related entity: the person's article names it and
the related entity's article states the attribute ("was born in a city first settled in
1357": the person's birthplace, then the city's founding year). Each kind reduces a person
to one integer (:func:`kind_values`), -1 where the person has no such fact, so a question
is a list of ``(kind, value)`` pairs and checking it against every person is a comparison
of columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from searchgym.corpora.deepwiki import phrases as ph
from searchgym.corpora.deepwiki.world import MENTOR_GAP, PRESENT_YEAR, UNIVERSITY_AGE, EMPLOYER_AGE, World
from searchgym.corpora.synthwiki.prose import mention

__all__ = ["KINDS", "ONE_HOP", "TWO_HOP", "Kind", "Mentors", "a", "break_kind", "clause", "kind_values", "related_kind"]


@dataclass(frozen=True)
class Kind:
    """``relation``: the person column this kind reads (its own fact for a 1-hop kind, the
    related entity for a 2-hop one); ``attr``: the related entity's fact (2-hop only)."""

    name: str
    relation: str
    attr: str | None = None

    @property
    def hops(self) -> int:
        return 1 if self.attr is None else 2


ONE_HOP = ("birth_year", "occupation", "book", "birthplace", "university", "employer", "mentor")
TWO_HOP = ("birthplace.settled", "birthplace.river", "university.founded", "university.founder", "employer.founded",
           "employer.hq", "mentor.occupation", "mentor.birth_year")
_OWN_COLUMN = {"birth_year": "birth", "occupation": "occupation", "book": "book_topic"}
KINDS: dict[str, Kind] = {name: Kind(name, name) for name in ONE_HOP}
KINDS.update({name: Kind(name, *name.split(".")) for name in TWO_HOP})
_RELATED_KIND = {"birthplace": "city", "university": "university", "employer": "company", "mentor": "person"}


def related_kind(relation: str) -> str:
    """The kind of entity a person column points to (``"birthplace"`` -> ``"city"``)."""
    return _RELATED_KIND[relation]


def _attribute(world: World, relation: str, attr: str) -> np.ndarray:
    """One integer per related entity: the attribute a 2-hop kind compares."""
    return {
        ("birthplace", "settled"): world.city_settled, ("birthplace", "river"): world.city_river,
        ("university", "founded"): world.univ_founded, ("university", "founder"): world.univ_founder,
        ("employer", "founded"): world.comp_founded, ("employer", "hq"): world.comp_hq,
        ("mentor", "occupation"): world.people["occupation"], ("mentor", "birth_year"): world.people["birth"],
    }[relation, attr]


def _own_value(kind: Kind, columns: dict[str, np.ndarray]) -> np.ndarray:
    if kind.name == "book":
        return columns["book_topic"] * 10000 + columns["book_year"]
    return columns[_OWN_COLUMN.get(kind.name, kind.name)]


def kind_values(world: World, kinds: list[str], columns: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """``[people, len(kinds)]`` values of every person (or of the people whose facts are
    ``columns``, the same layout as ``world.people``) under each kind; -1: no such fact."""
    columns = world.people if columns is None else columns
    out = []
    for name in kinds:
        kind = KINDS[name]
        if kind.attr is None:
            out.append(_own_value(kind, columns))
        else:
            related = columns[kind.relation]
            values = _attribute(world, kind.relation, kind.attr)[np.maximum(related, 0)]
            out.append(np.where(related >= 0, values, -1))
    return np.stack(out, axis=1)


def a(noun: str) -> str:
    """``"an astronomer"``, ``"a banker"``."""
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def clause(world: World, name: str, value: int) -> str:
    """The question's clause for ``kind == value``, e.g. ``"was born in a city first settled in 1357"``."""
    v = int(value)
    texts = {
        "birth_year": lambda: f"was born in {v}",
        "occupation": lambda: f"worked as {a(ph.OCCUPATIONS[v])}",
        "book": lambda: f"in {v % 10000} published a book on {ph.BOOK_TOPICS[v // 10000]}",
        "birthplace": lambda: f"was born in {world.city_names[v]}",
        "university": lambda: f"studied at {mention(world.univ_names[v])}",
        "employer": lambda: f"worked for {world.comp_names[v]}",
        "mentor": lambda: f"was a pupil of {world.person_name(v)}",
        "birthplace.settled": lambda: f"was born in a city first settled in {v}",
        "birthplace.river": lambda: f"was born in a city on the river {world.rivers[v]}",
        "university.founded": lambda: f"studied at a university founded in {v}",
        "university.founder": lambda: f"studied at a university whose founder was {a(ph.FOUNDER_OCCUPATIONS[v])}",
        "employer.founded": lambda: f"worked for a company founded in {v}",
        "employer.hq": lambda: f"worked for a company headquartered in {world.city_names[v]}",
        "mentor.occupation": lambda: f"studied under {a(ph.OCCUPATIONS[v])}",
        "mentor.birth_year": lambda: f"studied under someone born in {v}",
    }
    return texts[name]()


class Mentors:
    """The background people sorted by birth year: who may mentor someone born in a year."""

    def __init__(self, world: World):
        births = world.people["birth"][: world.background]
        self.order = np.argsort(births, kind="stable")
        self.births = births[self.order]

    def eligible(self, birth: int) -> np.ndarray:
        lo = np.searchsorted(self.births, birth - MENTOR_GAP[1], side="left")
        hi = np.searchsorted(self.births, birth - MENTOR_GAP[0], side="right")
        return self.order[lo:hi]


def _eligible(world: World, mentors: Mentors, relation: str, birth: int) -> np.ndarray:
    """The entities a person born in ``birth`` may have under ``relation``."""
    if relation == "birthplace":
        return np.arange(len(world.city_names))
    if relation == "university":
        return np.arange(np.searchsorted(world.univ_founded, birth + UNIVERSITY_AGE, side="right"))
    if relation == "employer":
        return np.arange(np.searchsorted(world.comp_founded, birth + EMPLOYER_AGE, side="right"))
    return mentors.eligible(birth)


def _other(rng: np.random.Generator, options: np.ndarray) -> int | None:
    return int(options[rng.integers(len(options))]) if len(options) else None


def break_kind(rng: np.random.Generator, world: World, mentors: Mentors, facts: dict[str, int], name: str,
               question: list[tuple[str, int]]) -> bool:
    """Change ``facts`` (one person's, a copy of the answer's) so that it fails the clause
    ``name`` of ``question`` and still meets every other clause; False when the world holds
    no such change (then the caller draws another question)."""
    kind = KINDS[name]
    old = dict(question)[name]
    birth = facts["birth"]
    if name == "birth_year":
        facts["birth"] = birth + int(rng.integers(1, 5))
        return True
    if name == "occupation":
        facts["occupation"] = (facts["occupation"] + 1 + int(rng.integers(len(ph.OCCUPATIONS) - 1))) % len(ph.OCCUPATIONS)
        return True
    if name == "book":
        if rng.random() < 0.5:
            shift = int(rng.integers(1, 7)) * (1 if rng.random() < 0.5 else -1)
            year = facts["book_year"] + shift
            if birth + 22 <= year <= min(birth + 75, PRESENT_YEAR):
                facts["book_year"] = year
                return True
        facts["book_topic"] = (facts["book_topic"] + 1 + int(rng.integers(len(ph.BOOK_TOPICS) - 1))) % len(ph.BOOK_TOPICS)
        return True
    candidates = _eligible(world, mentors, kind.relation, birth)
    if kind.attr is None:  # another entity, any other one
        choice = _other(rng, candidates[candidates != old])
    else:
        keep = np.ones(len(candidates), dtype=bool)
        for other, value in question:
            o = KINDS[other]
            if o.relation == kind.relation and o.attr is not None:
                same = _attribute(world, o.relation, o.attr)[candidates] == value
                keep &= ~same if other == name else same
        choice = _other(rng, candidates[keep])
    if choice is None:
        return False
    facts[kind.relation] = choice
    return True
