"""The kinds of synthwiki questions: what each asks, its answer and its chain of hops.

A question is a chain of *hops*; each hop reads one fact of one entity from the one
sentence of its passages that states it. The question names only the first entity of
the chain (two entities for a comparison), never the bridge entities nor the answer.
Because every fact is stated once, by its own entity's passage, and names are unique,
each question has exactly one correct answer given the corpus.

:func:`single_kinds`, :func:`bridge_kinds` and :func:`comparison_kinds` map a kind name
to the entity kind it is drawn from and a builder; a builder gets the world, the
:class:`Answers` helper, a ``random.Random`` for wording and the drawn entity index (two
for a comparison) and returns a :class:`Draft`, or ``None`` when the entity does not fit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from searchgym.corpora.synthwiki.prose import format_date, mention
from searchgym.corpora.synthwiki.entities import MONTHS, Date
from searchgym.corpora.synthwiki.world import World

__all__ = ["Answers", "Draft", "Hop", "bridge_kinds", "comparison_kinds", "date_answers", "single_kinds"]


@dataclass(frozen=True, slots=True)
class Hop:
    kind: str  # "country", "city", "org" or "person"
    index: int
    fact: str  # a fact key of prose (e.g. "birth", "hq")


@dataclass(slots=True)
class Draft:
    question: str
    answers: tuple[str, ...]
    hops: list[Hop]
    bridge_answers: list[str]
    answer_hop: int = -1  # which hop's passage holds the answer
    candidates: tuple[str, ...] = ()  # the options a comparison offers (canonical names)


# --------------------------------------------------------------------------- answers


def date_answers(date: Date) -> tuple[str, ...]:
    """``"14 March 1872"`` (as the passages write it) and ``"March 14, 1872"``."""
    return (format_date(date), f"{MONTHS[date[1] - 1]} {date[2]}, {date[0]}")


class Answers:
    """Answer strings with their unambiguous aliases."""

    def __init__(self, world: World):
        self.world = world
        self._surnames = Counter(p.surname for p in world.people)

    def person(self, i: int) -> tuple[str, ...]:
        p = self.world.people[i]
        # A bare surname is an alias only when no one else in the world bears it.
        return (p.name, p.surname) if self._surnames[p.surname] == 1 else (p.name,)

    def org(self, i: int) -> tuple[str, ...]:
        org = self.world.orgs[i]
        return (org.name, org.core)

    def city(self, i: int) -> tuple[str, ...]:
        return (self.world.cities[i].name,)

    def country(self, i: int) -> tuple[str, ...]:
        return (self.world.countries[i].name,)


# --------------------------------------------------------------------------- question kinds

_Builder = Callable[..., "Draft | None"]
# How a question says where an organisation is, by kind (the passages use the same verbs).
_WHERE = {"company": ("is", "headquartered"), "university": ("is", "located"), "newspaper": ("is", "published"),
          "band": ("was", "formed"), "club": ("is", "based")}


def _founded(kind: str) -> str:
    return "formed" if kind == "band" else "founded"


def single_kinds() -> dict[str, tuple[str, _Builder]]:
    """One fact of one entity."""

    def birth_date(w, a, r, i):
        p = w.people[i]
        q = r.choice(("When was {} born?", "What is the date of birth of {}?"))
        return Draft(q.format(p.name), date_answers(p.birth), [Hop("person", i, "birth")], [])

    def birthplace(w, a, r, i):
        p = w.people[i]
        q = r.choice(("Where was {} born?", "In which city was {} born?"))
        return Draft(q.format(p.name), a.city(p.birthplace), [Hop("person", i, "birth")], [])

    def death_date(w, a, r, i):
        p = w.people[i]
        if p.death is None:
            return None
        return Draft(f"When did {p.name} die?", date_answers(p.death), [Hop("person", i, "death")], [])

    def alma_mater(w, a, r, i):
        p = w.people[i]
        if p.university is None:
            return None
        q = r.choice(("Which university did {} attend?", "At which university did {} study?"))
        return Draft(q.format(p.name), a.org(p.university), [Hop("person", i, "alma")], [])

    def founder(w, a, r, i):
        o = w.orgs[i]
        q = f"Who {_founded(o.kind)} {mention(o.name)}?"
        return Draft(q, a.person(o.founder), [Hop("org", i, "founder")], [])

    def founding_year(w, a, r, i):
        o = w.orgs[i]
        q = f"In which year was {mention(o.name)} {_founded(o.kind)}?"
        return Draft(q, (str(o.founded),), [Hop("org", i, "year")], [])

    def headquarters(w, a, r, i):
        o = w.orgs[i]
        verb, participle = _WHERE[o.kind]
        q = f"In which city {verb} {mention(o.name)} {participle}?"
        return Draft(q, a.city(o.city), [Hop("org", i, "hq")], [])

    def city_country(w, a, r, i):
        q = r.choice(("In which country is {}?", "{} is a city in which country?"))
        return Draft(q.format(w.cities[i].name), a.country(w.cities[i].country), [Hop("city", i, "country")], [])

    def settled(w, a, r, i):
        c = w.cities[i]
        return Draft(f"In which year was {c.name} first settled?", (str(c.settled),), [Hop("city", i, "settled")], [])

    def population(w, a, r, i):
        c = w.cities[i]
        q = f"What was the population of {c.name} at its latest census?"
        return Draft(q, (f"{c.population:,}", str(c.population)), [Hop("city", i, "population")], [])

    def capital(w, a, r, i):
        k = w.countries[i]
        return Draft(f"What is the capital of {k.name}?", a.city(k.capital), [Hop("country", i, "capital")], [])

    def independence(w, a, r, i):
        k = w.countries[i]
        q = f"In which year did {k.name} gain independence?"
        return Draft(q, (str(k.independence),), [Hop("country", i, "independence")], [])

    def first_president(w, a, r, i):
        k = w.countries[i]
        q = f"Who was the first president of {k.name}?"
        return Draft(q, a.person(k.leader), [Hop("country", i, "leader")], [])

    return {
        "birth_date": ("person", birth_date), "birthplace": ("person", birthplace),
        "death_date": ("person", death_date), "alma_mater": ("person", alma_mater),
        "founder": ("org", founder), "founding_year": ("org", founding_year), "headquarters": ("org", headquarters),
        "city_country": ("city", city_country), "settled": ("city", settled), "population": ("city", population),
        "capital": ("country", capital), "independence": ("country", independence),
        "first_president": ("country", first_president),
    }


def bridge_kinds() -> dict[str, tuple[int, str, _Builder]]:
    """Chains of two or three facts: the answer of one hop is the entity of the next."""

    def founder_birthplace(w, a, r, i):
        o, f = w.orgs[i], w.people[w.orgs[i].founder]
        q = r.choice(("Where was the founder of {} born?", "In which city was the founder of {} born?"))
        hops = [Hop("org", i, "founder"), Hop("person", o.founder, "birth")]
        return Draft(q.format(mention(o.name)), a.city(f.birthplace), hops, [f.name])

    def founder_birth_date(w, a, r, i):
        o, f = w.orgs[i], w.people[w.orgs[i].founder]
        hops = [Hop("org", i, "founder"), Hop("person", o.founder, "birth")]
        return Draft(f"When was the founder of {mention(o.name)} born?", date_answers(f.birth), hops, [f.name])

    def headquarters_country(w, a, r, i):
        o, city = w.orgs[i], w.cities[w.orgs[i].city]
        verb, participle = _WHERE[o.kind]
        q = f"In which country {verb} {mention(o.name)} {participle}?"
        return Draft(q, a.country(city.country), [Hop("org", i, "hq"), Hop("city", o.city, "country")], [city.name])

    def birth_country(w, a, r, i):
        p, city = w.people[i], w.cities[w.people[i].birthplace]
        hops = [Hop("person", i, "birth"), Hop("city", p.birthplace, "country")]
        return Draft(f"In which country was {p.name} born?", a.country(city.country), hops, [city.name])

    def alma_mater_founding_year(w, a, r, i):
        p = w.people[i]
        if p.university is None:
            return None
        u = w.orgs[p.university]
        q = f"In which year was the university attended by {p.name} founded?"
        return Draft(q, (str(u.founded),), [Hop("person", i, "alma"), Hop("org", p.university, "year")], [u.name])

    def alma_mater_founder(w, a, r, i):
        p = w.people[i]
        if p.university is None:
            return None
        u = w.orgs[p.university]
        q = f"Who founded the university that {p.name} attended?"
        return Draft(q, a.person(u.founder), [Hop("person", i, "alma"), Hop("org", p.university, "founder")], [u.name])

    def alma_mater_city(w, a, r, i):
        p = w.people[i]
        if p.university is None:
            return None
        u = w.orgs[p.university]
        q = f"In which city is the university attended by {p.name} located?"
        return Draft(q, a.city(u.city), [Hop("person", i, "alma"), Hop("org", p.university, "hq")], [u.name])

    def city_capital(w, a, r, i):
        c, k = w.cities[i], w.countries[w.cities[i].country]
        q = f"What is the capital of the country in which {c.name} lies?"
        return Draft(q, a.city(k.capital), [Hop("city", i, "country"), Hop("country", c.country, "capital")], [k.name])

    def city_first_president(w, a, r, i):
        c, k = w.cities[i], w.countries[w.cities[i].country]
        q = f"Who was the first president of the country in which {c.name} lies?"
        return Draft(q, a.person(k.leader), [Hop("city", i, "country"), Hop("country", c.country, "leader")], [k.name])

    def president_birthplace(w, a, r, i):
        k, p = w.countries[i], w.people[w.countries[i].leader]
        hops = [Hop("country", i, "leader"), Hop("person", k.leader, "birth")]
        return Draft(f"Where was the first president of {k.name} born?", a.city(p.birthplace), hops, [p.name])

    # ---- three hops
    def founder_birth_country(w, a, r, i):
        o, f = w.orgs[i], w.people[w.orgs[i].founder]
        city = w.cities[f.birthplace]
        q = f"In which country was the founder of {mention(o.name)} born?"
        hops = [Hop("org", i, "founder"), Hop("person", o.founder, "birth"), Hop("city", f.birthplace, "country")]
        return Draft(q, a.country(city.country), hops, [f.name, city.name])

    def alma_mater_country(w, a, r, i):
        p = w.people[i]
        if p.university is None:
            return None
        u = w.orgs[p.university]
        city = w.cities[u.city]
        q = f"In which country is the university attended by {p.name} located?"
        hops = [Hop("person", i, "alma"), Hop("org", p.university, "hq"), Hop("city", u.city, "country")]
        return Draft(q, a.country(city.country), hops, [u.name, city.name])

    def alma_mater_founder_birthplace(w, a, r, i):
        p = w.people[i]
        if p.university is None:
            return None
        u = w.orgs[p.university]
        f = w.people[u.founder]
        q = f"Where was the founder of the university attended by {p.name} born?"
        hops = [Hop("person", i, "alma"), Hop("org", p.university, "founder"), Hop("person", u.founder, "birth")]
        return Draft(q, a.city(f.birthplace), hops, [u.name, f.name])

    def birth_country_capital(w, a, r, i):
        p = w.people[i]
        city = w.cities[p.birthplace]
        k = w.countries[city.country]
        if k.capital == p.birthplace:  # the answer would be a bridge entity
            return None
        q = f"What is the capital of the country in which {p.name} was born?"
        hops = [Hop("person", i, "birth"), Hop("city", p.birthplace, "country"),
                Hop("country", city.country, "capital")]
        return Draft(q, a.city(k.capital), hops, [city.name, k.name])

    def city_first_president_birthplace(w, a, r, i):
        c, k = w.cities[i], w.countries[w.cities[i].country]
        p = w.people[k.leader]
        q = f"Where was the first president of the country in which {c.name} lies born?"
        hops = [Hop("city", i, "country"), Hop("country", c.country, "leader"), Hop("person", k.leader, "birth")]
        return Draft(q, a.city(p.birthplace), hops, [k.name, p.name])

    def founder_alma_mater_city(w, a, r, i):
        o, f = w.orgs[i], w.people[w.orgs[i].founder]
        if f.university is None:
            return None
        u = w.orgs[f.university]
        q = f"In which city is the university attended by the founder of {mention(o.name)} located?"
        hops = [Hop("org", i, "founder"), Hop("person", o.founder, "alma"), Hop("org", f.university, "hq")]
        return Draft(q, a.city(u.city), hops, [f.name, u.name])

    def headquarters_country_capital(w, a, r, i):
        o = w.orgs[i]
        city = w.cities[o.city]
        k = w.countries[city.country]
        if k.capital == o.city:  # the answer would be a bridge entity
            return None
        verb, participle = _WHERE[o.kind]
        q = f"What is the capital of the country in which {mention(o.name)} {verb} {participle}?"
        hops = [Hop("org", i, "hq"), Hop("city", o.city, "country"), Hop("country", city.country, "capital")]
        return Draft(q, a.city(k.capital), hops, [city.name, k.name])

    return {
        "founder_birthplace": (2, "org", founder_birthplace),
        "founder_birth_date": (2, "org", founder_birth_date),
        "headquarters_country": (2, "org", headquarters_country),
        "birth_country": (2, "person", birth_country),
        "alma_mater_founding_year": (2, "person", alma_mater_founding_year),
        "alma_mater_founder": (2, "person", alma_mater_founder),
        "alma_mater_city": (2, "person", alma_mater_city),
        "city_capital": (2, "city", city_capital),
        "city_first_president": (2, "city", city_first_president),
        "president_birthplace": (2, "country", president_birthplace),
        "founder_birth_country": (3, "org", founder_birth_country),
        "alma_mater_country": (3, "person", alma_mater_country),
        "alma_mater_founder_birthplace": (3, "person", alma_mater_founder_birthplace),
        "birth_country_capital": (3, "person", birth_country_capital),
        "city_first_president_birthplace": (3, "city", city_first_president_birthplace),
        "founder_alma_mater_city": (3, "org", founder_alma_mater_city),
        "headquarters_country_capital": (3, "org", headquarters_country_capital),
    }


def comparison_kinds() -> dict[str, tuple[str, _Builder]]:
    """Two entities of one kind compared on one fact; the values always differ."""

    def compare(question, first, second, values, answers, hop_kind, i, j, fact, earlier=True):
        if values[0] == values[1]:
            return None
        hop = 0 if (values[0] < values[1]) == earlier else 1
        hops = [Hop(hop_kind, i, fact), Hop(hop_kind, j, fact)]
        shown = [format_date(v) if isinstance(v, tuple) else f"{v:,}" if v >= 10_000 else str(v) for v in values]
        options = (answers(i)[0], answers(j)[0])
        return Draft(question.format(first, second), answers((i, j)[hop]), hops, shown, hop, options)

    def born_first(w, a, r, i, j):
        p, q = w.people[i], w.people[j]
        question = r.choice(("Who was born first, {} or {}?", "Which of {} and {} was born earlier?"))
        return compare(question, p.name, q.name, (p.birth, q.birth), a.person, "person", i, j, "birth")

    def founded_earlier(w, a, r, i, j):
        o, u = w.orgs[i], w.orgs[j]
        question = "Which was founded earlier, {} or {}?"
        return compare(question, mention(o.name), mention(u.name), (o.founded, u.founded), a.org, "org", i, j, "year")

    def settled_earlier(w, a, r, i, j):
        c, d = w.cities[i], w.cities[j]
        question = "Which city was settled first, {} or {}?"
        return compare(question, c.name, d.name, (c.settled, d.settled), a.city, "city", i, j, "settled")

    def larger_population(w, a, r, i, j):
        c, d = w.cities[i], w.cities[j]
        question = "Which city had the larger population at its latest census, {} or {}?"
        values = (c.population, d.population)
        return compare(question, c.name, d.name, values, a.city, "city", i, j, "population", earlier=False)

    def independent_earlier(w, a, r, i, j):
        k, m = w.countries[i], w.countries[j]
        question = "Which country gained independence earlier, {} or {}?"
        values = (k.independence, m.independence)
        return compare(question, k.name, m.name, values, a.country, "country", i, j, "independence")

    return {
        "born_first": ("person", born_first), "founded_earlier": ("org", founded_earlier),
        "settled_earlier": ("city", settled_earlier), "larger_population": ("city", larger_population),
        "independent_earlier": ("country", independent_earlier),
    }
