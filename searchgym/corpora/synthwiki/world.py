"""The synthwiki world: countries, cities, organisations and people, with their facts.

:func:`build_world` draws everything from one seeded ``numpy.random.Generator`` and
returns a :class:`World`. The world is consistent by construction (a founder founds an
organisation during their lifetime, a student attends a university that already exists,
a capital is the largest city of its country...), so passages written from it never
contradict each other and questions about it have exactly one answer.

The entities themselves are in :mod:`.entities`, organisations are made by :mod:`.orgs`.

Sizes are fixed by the number of passages: every entity has one passage, and countries,
capital cities and some organisations and people get a second one, so the totals add up
to exactly ``num_passages``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from searchgym.corpora.synthwiki.entities import PRESENT_YEAR, City, Country, Date, Org, Person
from searchgym.corpora.synthwiki.names import NameForge
from searchgym.corpora.synthwiki.orgs import assign_universities, latest_age, make_orgs
from searchgym.error import ConfigError

__all__ = ["MIN_PASSAGES", "World", "build_world", "passage_id"]

#: Smallest world: four countries with their cities, organisations and people.
MIN_PASSAGES = 100
_MONTH_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])

LEADER_OCCUPATIONS = ("politician", "lawyer", "diplomat")
OTHER_OCCUPATIONS = ("painter", "poet", "novelist", "composer", "architect", "physician", "astronomer",
                     "mathematician", "botanist", "chemist", "historian", "philosopher", "sculptor",
                     "cartographer", "engineer", "lawyer", "actor", "photographer")


@dataclass
class World:
    """Every entity, plus the passage layout (which passages belong to which entity)."""

    seed: int
    num_passages: int
    countries: list[Country]
    cities: list[City]
    orgs: list[Org]
    people: list[Person]
    continents: list[str]
    # Passage layout, per kind of entity ("country", "city", "org", "person") and entity
    # index: entity i owns passages first[kind][i] ... first[kind][i] + parts[kind][i] - 1.
    first: dict[str, list[int]] = field(default_factory=dict)
    parts: dict[str, list[int]] = field(default_factory=dict)
    # One random 124-bit integer per entity that drives the wording of its passages.
    wording: dict[str, list[int]] = field(default_factory=dict)
    # Entities in passage order: kind codes (indices into KINDS) and entity indices.
    order_kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    order_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    KINDS = ("country", "city", "org", "person")

    def entities(self, kind: str) -> list:
        """The list of entities of one kind."""
        return {"country": self.countries, "city": self.cities, "org": self.orgs, "person": self.people}[kind]


def passage_id(number: int, num_passages: int) -> str:
    """``"sw-000123"``: six digits, more when the world has a million passages or more."""
    return f"sw-{number:0{max(6, len(str(num_passages - 1)))}d}"


def _counts(n: int) -> dict[str, int]:
    """Entity counts whose passages add up to exactly ``n``."""
    countries = min(max(n // 200, 4), 500)
    cities = max(2 * countries, round(0.16 * n))
    orgs = round(0.20 * n)
    orgs_two = round(0.25 * orgs)
    rest = n - (2 * countries + cities + countries + orgs + orgs_two)
    people_two = round(0.1 * rest)
    return dict(countries=countries, cities=cities, orgs=orgs, orgs_two=orgs_two,
                people=rest - people_two, people_two=people_two)  # people counts entities


def _dates(rng: np.random.Generator, years: np.ndarray) -> list[Date]:
    months = rng.integers(1, 13, size=len(years))
    days = (rng.random(len(years)) * _MONTH_DAYS[months - 1]).astype(np.int64) + 1
    return list(zip(years.tolist(), months.tolist(), days.tolist()))


def build_world(seed: int, num_passages: int) -> World:
    """Draw the whole world for ``(seed, num_passages)``; see the module docstring."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"synthwiki expects seed to be a non-negative integer, got {seed!r}.")
    if isinstance(num_passages, bool) or not isinstance(num_passages, (int, np.integer)):
        raise ConfigError(f"synthwiki expects num_passages to be an integer, got {num_passages!r}.")
    if num_passages < MIN_PASSAGES:
        raise ConfigError(
            f"synthwiki expects num_passages >= {MIN_PASSAGES} (the smallest complete world), "
            f"got {num_passages}. Ask for at least {MIN_PASSAGES} passages."
        )
    seed, num_passages = int(seed), int(num_passages)
    rng = np.random.default_rng(np.random.SeedSequence([seed, num_passages]))
    forge = NameForge(rng)
    n = _counts(num_passages)

    countries, continents = _make_countries(rng, forge, n["countries"])
    cities = _make_cities(rng, forge, countries, n["cities"])
    people = _make_people(rng, forge, cities, n["people"])
    orgs = make_orgs(rng, forge, cities, people, n["orgs"])
    assign_universities(rng, orgs, people)
    _assign_leaders(rng, countries, cities, people)

    world = World(seed, num_passages, countries, cities, orgs, people, continents)
    _lay_out_passages(rng, world, n)
    return world


# --------------------------------------------------------------------------- places


def _make_countries(rng: np.random.Generator, forge: NameForge, count: int) -> tuple[list[Country], list[str]]:
    continents = forge.take(min(max(count // 6, 2), 7), "continent")
    parts = ("northern", "southern", "eastern", "western", "central")
    names = forge.take(count, "place")
    cont = rng.integers(len(continents), size=count).tolist()
    part = rng.integers(len(parts), size=count).tolist()
    areas = (np.exp(rng.normal(11.5, 1.0, size=count)) // 100 * 100 + 1000).astype(np.int64).tolist()
    return [Country(names[i], continents[cont[i]], parts[part[i]], area=areas[i]) for i in range(count)], continents


def _make_cities(rng: np.random.Generator, forge: NameForge, countries: list[Country], count: int) -> list[City]:
    k = len(countries)
    # The first k cities are the capitals; the others spread unevenly over the countries.
    weights = rng.dirichlet(np.full(k, 2.0))
    country_of = np.concatenate([np.arange(k), rng.choice(k, size=count - k, p=weights)])
    per_country = np.bincount(country_of, minlength=k)
    for c, country in enumerate(countries):
        country.rivers = forge.take(int(min(max(per_country[c] // 8, 1), 4)), "river")
    names = forge.take(count, "place")
    settled = rng.integers(700, 1641, size=count).tolist()
    population = (np.exp(rng.normal(10.5, 1.1, size=count)) // 100 * 100 + 800).astype(np.int64)
    directions = ("the north of", "the south of", "the east of", "the west of", "the north-east of",
                  "the north-west of", "the south-east of", "the south-west of", "central")
    direction = rng.integers(len(directions), size=count).tolist()
    river_pick = rng.random(size=count).tolist()
    # A capital is the largest city of its country: make it 20-100% larger than the rest.
    largest = np.zeros(k, dtype=np.int64)
    np.maximum.at(largest, country_of[k:], population[k:])
    boost = rng.uniform(1.2, 2.0, size=k)
    population[:k] = np.maximum(population[:k], (largest * boost) // 100 * 100 + 100)
    population = population.tolist()
    country_of = country_of.tolist()
    cities = []
    for i in range(count):
        country = countries[country_of[i]]
        rivers = country.rivers
        river = rivers[int(river_pick[i] * 1.6 * len(rivers))] if river_pick[i] < 0.625 else None
        cities.append(City(names[i], country_of[i], settled[i], population[i], directions[direction[i]], river, i < k))
    for c, country in enumerate(countries):
        country.capital = c
    totals = np.zeros(k)
    np.add.at(totals, np.array(country_of), np.array(population, dtype=float))
    factor = rng.uniform(3.0, 12.0, size=k)
    for c, country in enumerate(countries):
        country.population_m = round(max(totals[c] * factor[c] / 1e6, 0.2), 1)
    return cities


# --------------------------------------------------------------------------- people


def _make_people(rng: np.random.Generator, forge: NameForge, cities: list[City], count: int) -> list[Person]:
    female = (rng.random(count) < 0.5).tolist()
    pool = min(max(count // 8, 20), 3000)
    given = {True: forge.take(pool, "given_female"), False: forge.take(pool, "given_male")}
    surnames = forge.take(max(round(count * 0.7), 10), "surname")
    # Births grow denser towards the present (density rising linearly from 1650 to 2000).
    birth_years = (1650 + 350 * np.sqrt(rng.random(count))).astype(np.int64)
    lifespan = np.clip(rng.normal(70, 13, size=count), 28, 99).astype(np.int64)
    births = _dates(rng, birth_years)
    deaths = _dates(rng, birth_years + lifespan)
    given_pick = rng.integers(pool, size=count).tolist()
    surname_pick = rng.integers(len(surnames), size=count).tolist()
    birthplace = rng.integers(len(cities), size=count).tolist()
    deathplace = rng.integers(len(cities), size=count).tolist()
    occupation = rng.integers(len(OTHER_OCCUPATIONS), size=count).tolist()
    seen: set[str] = set()
    people = []
    for i in range(count):
        first, last = given[female[i]][given_pick[i]], surnames[surname_pick[i]]
        while f"{first} {last}" in seen:  # names are unique: redraw the given name
            first = given[female[i]][int(rng.integers(pool))]
        seen.add(f"{first} {last}")
        death = deaths[i] if deaths[i][0] <= PRESENT_YEAR else None
        people.append(Person(first, last, female[i], births[i], death, birthplace[i], deathplace[i],
                             OTHER_OCCUPATIONS[occupation[i]]))
    return people



def _assign_leaders(
    rng: np.random.Generator, countries: list[Country], cities: list[City], people: list[Person]
) -> None:
    """Each country's first president, preferably born there; independence follows from them."""
    natives: dict[int, list[int]] = {}
    for i, p in enumerate(people):
        if p.leads is None and latest_age(p) >= 40 and p.birth[0] <= 1950:
            natives.setdefault(cities[p.birthplace].country, []).append(i)
    anyone = [i for group in natives.values() for i in group]
    taken: set[int] = set()
    for c, country in enumerate(countries):
        pool = [i for i in natives.get(c, []) if i not in taken and not people[i].founded]
        pool = pool or [i for i in natives.get(c, []) if i not in taken]
        pool = pool or [i for i in anyone if i not in taken] or anyone
        leader = pool[int(rng.integers(len(pool)))]
        taken.add(leader)
        person = people[leader]
        hi = min(70, latest_age(person), 1990 - person.birth[0])
        country.independence = person.birth[0] + int(rng.integers(35, max(hi, 35) + 1))
        country.leader = leader
        person.leads = c
        if not person.founded:
            person.occupation = LEADER_OCCUPATIONS[leader % len(LEADER_OCCUPATIONS)]


# --------------------------------------------------------------------------- passage layout


def _lay_out_passages(rng: np.random.Generator, world: World, n: dict[str, int]) -> None:
    """Shuffle the entities and give each its passage numbers (one or two passages)."""
    parts = {kind: [1] * len(world.entities(kind)) for kind in World.KINDS}
    parts["country"] = [2] * len(world.countries)
    for country in world.countries:
        parts["city"][country.capital] = 2
    # Second passages go to the organisations and people with the most to tell.
    # Only companies and universities (half of all organisations, more than the quarter
    # that get two passages) have a history passage; old ones first, they have more to tell.
    old = [i for i, o in enumerate(world.orgs) if o.kind in ("company", "university") and o.founded <= 1970]
    young = [i for i, o in enumerate(world.orgs) if o.kind in ("company", "university") and o.founded > 1970]
    for i in (rng.permutation(old).tolist() + rng.permutation(young).tolist())[: n["orgs_two"]]:
        parts["org"][i] = 2
    notable = [i for i, p in enumerate(world.people) if p.founded or p.leads is not None]
    others = [i for i, p in enumerate(world.people) if not (p.founded or p.leads is not None)]
    for i in (rng.permutation(notable).tolist() + rng.permutation(others).tolist())[: n["people_two"]]:
        parts["person"][i] = 2

    sizes = [len(world.entities(kind)) for kind in World.KINDS]
    kind_code = np.repeat(np.arange(len(sizes), dtype=np.int8), sizes)
    index = np.concatenate([np.arange(size) for size in sizes])
    shuffle = rng.permutation(len(index))
    world.order_kind, world.order_index = kind_code[shuffle], index[shuffle]
    count = np.concatenate([np.array(parts[kind], dtype=np.int64) for kind in World.KINDS])[shuffle]
    starts = np.concatenate([[0], np.cumsum(count)[:-1]])
    if int(count.sum()) != world.num_passages:  # _counts guarantees this; a bug otherwise
        raise AssertionError(f"synthwiki laid out {int(count.sum())} passages for {world.num_passages}")
    high, low = rng.integers(0, 1 << 62, size=(2, len(index)), dtype=np.int64)
    world.parts = parts
    world.first, world.wording = {}, {}
    offset = 0
    for kind, size in zip(World.KINDS, sizes):
        # Undo the shuffle: position of each entity of this kind in passage order.
        where = np.empty(size, dtype=np.int64)
        mask = world.order_kind == World.KINDS.index(kind)
        where[world.order_index[mask]] = np.flatnonzero(mask)
        world.first[kind] = starts[where].tolist()
        high_bits, low_bits = high[offset : offset + size].tolist(), low[offset : offset + size].tolist()
        world.wording[kind] = [(h << 62) | lo for h, lo in zip(high_bits, low_bits)]
        offset += size
