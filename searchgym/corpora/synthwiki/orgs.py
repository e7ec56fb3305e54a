"""Organisations: their kinds, names, founders and students.

Every organisation has exactly one founder, who founds it during their lifetime at an
age that suits its kind (17-32 for a band, 35-70 for a university...) and not before the
kind existed (bands from 1900, sports clubs from 1840). Each person founds at most one
organisation while enough candidates remain. About 80% of people studied at one
university, which existed when they were 18.
"""

from __future__ import annotations

import numpy as np

from searchgym.corpora.synthwiki import phrases as ph
from searchgym.corpora.synthwiki.entities import PRESENT_YEAR, City, Org, Person
from searchgym.corpora.synthwiki.names import NameForge
from searchgym.error import ConfigError

__all__ = [
    "FOUNDER_OCCUPATIONS", "ORG_KINDS", "assign_universities", "company_industry", "latest_age", "make_orgs", "org_name",
]

# Organisation kinds: (share of organisations, youngest and oldest founder age, earliest year).
ORG_KINDS: dict[str, tuple[float, int, int, int]] = {
    "company": (0.35, 25, 60, 1650),
    "university": (0.15, 35, 70, 1650),
    "newspaper": (0.15, 25, 60, 1680),
    "band": (0.15, 17, 32, 1900),
    "club": (0.20, 20, 55, 1840),
}
FOUNDER_OCCUPATIONS = {
    "company": ("industrialist", "merchant", "engineer", "banker", "inventor"),
    "university": ("scholar", "philosopher", "theologian", "mathematician", "educator"),
    "newspaper": ("journalist", "publisher", "writer"),
    "band": ("singer", "guitarist", "pianist", "drummer"),
    "club": ("athlete", "coach"),
}


def latest_age(person: Person) -> int:
    """The oldest age at which this person can still do something (alive or not)."""
    end = person.death[0] - 1 if person.death else PRESENT_YEAR
    return end - person.birth[0]


def company_industry(org: Org) -> tuple[str, str, str, int]:
    """The industry of a company: one that existed in its founding year."""
    eligible = [row for row in ph.INDUSTRIES if row[3] <= org.founded]
    return eligible[org.style % len(eligible)]


def org_name(org: Org) -> str:
    """The full name of an organisation, e.g. ``"Kelvaro Shipyards"`` or ``"The Kelvaro Herald"``."""
    core, style = org.core, org.style >> 4
    if org.kind == "company":
        return f"{core} {company_industry(org)[1]}"
    if org.kind == "university":
        patterns = ["University of {core}", "{core} University", "{core} College"]
        if org.founded >= 1850:
            patterns.append("{core} Institute of Technology")
        return patterns[style % len(patterns)].format(core=core)
    if org.kind == "newspaper":
        return f"The {core} {ph.NEWSPAPER_TITLES[style % len(ph.NEWSPAPER_TITLES)]}"
    patterns = ph.BAND_PATTERNS if org.kind == "band" else ph.CLUB_PATTERNS
    return patterns[style % len(patterns)].format(core=core)


def make_orgs(
    rng: np.random.Generator, forge: NameForge, cities: list[City], people: list[Person], count: int
) -> list[Org]:
    kinds = list(ORG_KINDS)
    shares = np.array([ORG_KINDS[k][0] for k in kinds])
    exact = shares * count
    per_kind = np.floor(exact).astype(int)
    per_kind[np.argsort(per_kind - exact)[: count - per_kind.sum()]] += 1  # largest remainders
    kind_of = np.repeat(np.arange(len(kinds)), per_kind)
    rng.shuffle(kind_of)
    cores = forge.take(count, "core")
    city = rng.integers(len(cities), size=count).tolist()
    style = rng.integers(1 << 30, size=count).tolist()
    ages = rng.random(count).tolist()
    founders = _pick_founders(rng, people, [kinds[k] for k in kind_of.tolist()])
    orgs = []
    for i, k in enumerate(kind_of.tolist()):
        kind = kinds[k]
        _, young, old, earliest = ORG_KINDS[kind]
        person = people[founders[i]]
        lo = max(young, earliest - person.birth[0])
        hi = min(old, latest_age(person))
        founded = person.birth[0] + lo + int(ages[i] * (hi - lo + 1))
        orgs.append(Org("", cores[i], kind, founders[i], founded, city[i], style[i]))
        person.founded.append(i)
        if len(person.founded) == 1:
            occupations = FOUNDER_OCCUPATIONS[kind]
            person.occupation = occupations[style[i] % len(occupations)]
    for org in orgs:  # named last: a company's industry depends on its founding year
        org.name = org_name(org)
    return orgs


def _pick_founders(rng: np.random.Generator, people: list[Person], kinds: list[str]) -> list[int]:
    """A founder for every organisation: someone alive and of age in an allowed year.

    Each person founds at most one organisation while enough candidates remain; past that
    (only in the smallest worlds) a founder may found a second one.
    """
    births = np.array([p.birth[0] for p in people])
    latest = np.array([latest_age(p) for p in people])
    order = rng.permutation(len(people))
    used = np.zeros(len(people), dtype=bool)
    cursor = {k: 0 for k in ORG_KINDS}
    candidates = {}
    for kind, (_, young, old, earliest) in ORG_KINDS.items():
        lo = np.maximum(young, earliest - births)
        ok = (lo <= np.minimum(old, latest)) & (births + lo <= PRESENT_YEAR)
        candidates[kind] = order[ok[order]].tolist()
        if not candidates[kind]:
            raise ConfigError(f"No one in the world can found a {kind}; expected a larger world.")
    founders = []
    for kind in kinds:
        pool = candidates[kind]
        while cursor[kind] < len(pool) and used[pool[cursor[kind]]]:
            cursor[kind] += 1
        if cursor[kind] < len(pool):
            chosen = pool[cursor[kind]]
        else:
            chosen = pool[int(rng.integers(len(pool)))]
        used[chosen] = True
        founders.append(chosen)
    return founders


def assign_universities(rng: np.random.Generator, orgs: list[Org], people: list[Person]) -> None:
    """About 80% of people studied at a university that existed when they were 18."""
    unis = [i for i, o in enumerate(orgs) if o.kind == "university"]
    years = np.array([orgs[i].founded for i in unis])
    order = np.argsort(years, kind="stable")
    years, unis = years[order], np.array(unis)[order]
    births = np.array([p.birth[0] for p in people])
    eligible = np.searchsorted(years, births + 18, side="right")
    attends = rng.random(len(people)) < 0.8
    pick = (rng.random(len(people)) * eligible).astype(np.int64)
    grad_age = rng.integers(21, 26, size=len(people))
    for i, person in enumerate(people):
        if attends[i] and eligible[i] > 0:
            graduated = min(person.birth[0] + int(grad_age[i]), person.birth[0] + latest_age(person))
            if graduated - person.birth[0] >= 19:
                person.university = int(unis[pick[i]])
                person.graduated = graduated
