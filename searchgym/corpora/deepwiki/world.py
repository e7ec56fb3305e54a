"""The deepwiki world: cities, universities, companies and people, as columns of numbers.

Every entity gets one article. Facts are integer codes in NumPy arrays (a city's founding
year, a person's birthplace as a city index...), so that checking a question against every
person of a 100,000-article world is a handful of vectorised comparisons, and the world of
the largest size stays a few megabytes.

The world is consistent by construction: a person is born after their city was settled,
studies at a university that existed when they were 18, works for a company founded before
they were 35, studies under a mentor born 20 to 60 years before them, and publishes their
book between the ages of 22 and 75.

People come in two groups: the *background* (drawn here, at random) and the *planted*
clusters of :mod:`.questions` (an answer and its near-identical hard negatives), which fill
the slots after the background.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from searchgym.corpora.deepwiki import phrases as ph
from searchgym.corpora.synthwiki.names import NameForge

__all__ = ["ENTITY_KINDS", "PERSON_COLUMNS", "World", "build_world", "counts", "doc_id"]

ENTITY_KINDS = ("person", "city", "university", "company")
#: One integer column per person fact; -1 where a person has none (no mentor).
PERSON_COLUMNS = ("birth", "occupation", "book_topic", "book_year", "birthplace", "university", "employer", "mentor")
PRESENT_YEAR = 2023
FIRST_BIRTH, LAST_BIRTH = 1650, 1990
MENTOR_GAP = (20, 60)  # a mentor is born this many years before the pupil
UNIVERSITY_AGE, EMPLOYER_AGE = 18, 35


@dataclass
class World:
    """Every entity's facts; ``order`` lays the articles out (doc number -> entity)."""

    seed: int
    num_documents: int
    countries: list[str]
    rivers: list[str]
    city_names: list[str]
    city_country: np.ndarray
    city_settled: np.ndarray
    city_river: np.ndarray  # -1: on no river
    univ_names: list[str]
    univ_founded: np.ndarray
    univ_founder: np.ndarray  # index into FOUNDER_OCCUPATIONS
    univ_city: np.ndarray
    comp_names: list[str]
    comp_founded: np.ndarray
    comp_hq: np.ndarray
    given: dict[bool, list[str]]  # given names by sex (True: female)
    surnames: list[str]
    person_given: list[str]
    person_surname: list[str]
    person_female: np.ndarray
    people: dict[str, np.ndarray]  # PERSON_COLUMNS
    background: int  # people [0, background) are drawn at random; the rest are planted
    # Article layout: doc number -> (kind code, entity index), and back.
    order_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    order_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    doc_of: dict[str, np.ndarray] = field(default_factory=dict)
    # One random integer per entity that picks its fact wordings.
    wording: dict[str, np.ndarray] = field(default_factory=dict)

    def names(self, kind: str) -> list[str]:
        if kind == "person":
            return [f"{g} {s}" for g, s in zip(self.person_given, self.person_surname)]
        return {"city": self.city_names, "university": self.univ_names, "company": self.comp_names}[kind]

    def person_name(self, i: int) -> str:
        return f"{self.person_given[i]} {self.person_surname[i]}"

    def size(self, kind: str) -> int:
        return {"person": len(self.person_given), "city": len(self.city_names), "university": len(self.univ_names),
                "company": len(self.comp_names)}[kind]

    def doc(self, kind: str, i: int) -> str:
        """The doc id of entity ``i`` of ``kind``."""
        return doc_id(int(self.doc_of[kind][i]), self.num_documents)


def doc_id(number: int, num_documents: int) -> str:
    """``"dw-000123"``: six digits, more for a world of a million documents or more."""
    return f"dw-{number:0{max(6, len(str(num_documents - 1)))}d}"


def counts(num_documents: int) -> dict[str, int]:
    """How many entities of each kind a world of ``num_documents`` articles has."""
    n = num_documents
    cities = max(round(0.12 * n), 12)
    universities = max(round(0.04 * n), 6)
    companies = max(round(0.08 * n), 10)
    return {"city": cities, "university": universities, "company": companies,
            "person": n - cities - universities - companies}


def build_world(rng: np.random.Generator, seed: int, num_documents: int, planted: int) -> World:
    """The background of the world; ``planted`` person slots are left for :mod:`.questions`."""
    forge = NameForge(rng)
    n = counts(num_documents)
    countries = forge.take(max(num_documents // 300, 3), "place")
    rivers = forge.take(max(n["city"] // 6, 3), "river")
    city_names = forge.take(n["city"], "place")
    city_country = rng.integers(len(countries), size=n["city"])
    city_settled = rng.integers(700, 1641, size=n["city"])
    on_river = rng.random(n["city"]) < 0.7
    city_river = np.where(on_river, rng.integers(len(rivers), size=n["city"]), -1)

    cores = forge.take(n["university"] + n["company"], "core")
    pattern = rng.integers(len(ph.UNIVERSITY_PATTERNS), size=n["university"]).tolist()
    univ_names = [ph.UNIVERSITY_PATTERNS[p].format(core=c) for p, c in zip(pattern, cores[: n["university"]])]
    # Sorted founding years with the oldest early enough for the first-born people.
    univ_founded = np.sort(rng.integers(1150, 1951, size=n["university"]))
    univ_founded[: max(1, n["university"] // 10)] = np.sort(rng.integers(1150, 1600, size=max(1, n["university"] // 10)))
    univ_founder = rng.integers(len(ph.FOUNDER_OCCUPATIONS), size=n["university"])
    univ_city = rng.integers(n["city"], size=n["university"])
    industry = rng.integers(len(ph.INDUSTRIES), size=n["company"]).tolist()
    comp_names = [f"{c} {ph.INDUSTRIES[k]}" for c, k in zip(cores[n["university"]:], industry)]
    comp_founded = np.sort(rng.integers(1550, 1991, size=n["company"]))
    comp_founded[: max(1, n["company"] // 10)] = np.sort(rng.integers(1550, 1680, size=max(1, n["company"] // 10)))
    comp_hq = rng.integers(n["city"], size=n["company"])

    people_count = n["person"]
    pool = min(max(people_count // 6, 30), 4000)
    given = {True: forge.take(pool, "given_female"), False: forge.take(pool, "given_male")}
    surnames = forge.take(max(round(people_count * 0.6), 20), "surname")
    world = World(
        seed, num_documents, countries, rivers, city_names, city_country, city_settled, city_river,
        univ_names, univ_founded, univ_founder, univ_city, comp_names, comp_founded, comp_hq,
        given, surnames, [""] * people_count, [""] * people_count, np.zeros(people_count, dtype=bool),
        {c: np.full(people_count, -1, dtype=np.int64) for c in PERSON_COLUMNS}, people_count - planted,
    )
    _draw_background(rng, world)
    _lay_out(rng, world)
    return world


def _draw_background(rng: np.random.Generator, world: World) -> None:
    """Random people for slots ``[0, background)``, with unique full names."""
    b = world.background
    births = (FIRST_BIRTH + (LAST_BIRTH - FIRST_BIRTH) * np.sqrt(rng.random(b))).astype(np.int64)
    columns = draw_facts(rng, world, births, mentors_from=births)
    for name, values in columns.items():
        world.people[name][:b] = values
    female = rng.random(b) < 0.5
    world.person_female[:b] = female
    pool = len(world.given[True])
    given_pick = rng.integers(pool, size=b).tolist()
    surname_pick = rng.integers(len(world.surnames), size=b).tolist()
    taken: set[str] = set()
    for i in range(b):
        first, last = world.given[bool(female[i])][given_pick[i]], world.surnames[surname_pick[i]]
        while f"{first} {last}" in taken:
            first = world.given[bool(female[i])][int(rng.integers(pool))]
        taken.add(f"{first} {last}")
        world.person_given[i], world.person_surname[i] = first, last


def draw_facts(rng: np.random.Generator, world: World, births: np.ndarray, mentors_from: np.ndarray) -> dict[str, np.ndarray]:
    """Consistent facts for people born in ``births``; mentors are drawn among the background
    people whose birth years are ``mentors_from`` (the first ``len(mentors_from)`` people)."""
    count = len(births)
    u = rng.random((4, count))
    # A university founded by the year the person turned 18 (years are sorted, the first is early).
    open_univ = np.maximum(np.searchsorted(world.univ_founded, births + UNIVERSITY_AGE, side="right"), 1)
    open_comp = np.maximum(np.searchsorted(world.comp_founded, births + EMPLOYER_AGE, side="right"), 1)
    order = np.argsort(mentors_from, kind="stable")
    sorted_births = mentors_from[order]
    lo = np.searchsorted(sorted_births, births - MENTOR_GAP[1], side="left")
    hi = np.searchsorted(sorted_births, births - MENTOR_GAP[0], side="right")
    has_mentor = hi > lo
    mentor_at = np.minimum(lo + (u[2] * (hi - lo)).astype(np.int64), len(order) - 1)
    last_book = np.minimum(births + 75, PRESENT_YEAR)
    first_book = births + 22
    return {
        "birth": births,
        "occupation": rng.integers(len(ph.OCCUPATIONS), size=count),
        "book_topic": rng.integers(len(ph.BOOK_TOPICS), size=count),
        "book_year": first_book + (u[3] * (last_book - first_book + 1)).astype(np.int64),
        "birthplace": rng.integers(len(world.city_names), size=count),
        "university": (u[0] * open_univ).astype(np.int64),
        "employer": (u[1] * open_comp).astype(np.int64),
        "mentor": np.where(has_mentor, order[mentor_at] if len(order) else -1, -1),
    }


def _lay_out(rng: np.random.Generator, world: World) -> None:
    """Shuffle every entity into doc order, so that an id says nothing about a cluster."""
    sizes = [world.size(kind) for kind in ENTITY_KINDS]
    kind_code = np.repeat(np.arange(len(sizes), dtype=np.int8), sizes)
    index = np.concatenate([np.arange(s) for s in sizes])
    shuffle = rng.permutation(len(index))
    world.order_kind, world.order_index = kind_code[shuffle], index[shuffle]
    for code, kind in enumerate(ENTITY_KINDS):
        where = np.empty(sizes[code], dtype=np.int64)
        mask = world.order_kind == code
        where[world.order_index[mask]] = np.flatnonzero(mask)
        world.doc_of[kind] = where
        world.wording[kind] = rng.integers(0, 1 << 62, size=sizes[code], dtype=np.int64)
