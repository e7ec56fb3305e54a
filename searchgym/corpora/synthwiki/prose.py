"""Encyclopedia passages written from the synthwiki world.

Each entity gets one or two passages (:func:`write`). A passage is a list of
:data:`Sentence` pairs ``(text, facts)``: ``facts`` maps each fact the sentence states
(``"birth"``, ``"hq"``, ``"capital"``...) to the word an oracle query pairs with the
entity's name to find it (``"born"``, ``"headquartered"``, ``"capital"``...), and is
``None`` for sentences that state nothing a question asks about.

Rules that keep retrieval and questions sound:

* each fact a question asks about is stated by exactly one sentence, in the passage of
  the entity it belongs to; other passages that mention the entity avoid the words of
  its oracle queries (:data:`~searchgym.corpora.synthwiki.phrases.QUERY_STEMS`);
* a second passage names its entity once (in its first sentence) and then uses pronouns,
  while the first passage names it at least twice, so ``"<name> <attribute>"`` finds the
  passage that states the attribute;
* filler sentences are dropped, in a drawn order, while the passage stays at least
  :data:`TARGET_WORDS` long.

Wording is a pure function of the world and of the entity's random integer
(``World.wording``), so a passage can be written again on demand, which is how the
questions find their evidence sentences without keeping every sentence in memory.
"""

from __future__ import annotations

import hashlib
import itertools

from searchgym.corpora.synthwiki import phrases as ph
from searchgym.corpora.synthwiki.entities import MONTHS, PRESENT_YEAR, Date, Person
from searchgym.corpora.synthwiki.orgs import company_industry
from searchgym.corpora.synthwiki.world import World

__all__ = ["TARGET_WORDS", "Sentence", "format_date", "mention", "passage_text", "write"]

Sentence = tuple[str, "dict[str, str] | None"]
#: Filler sentences are dropped only while a passage keeps at least this many words.
TARGET_WORDS = 70


class _Dice:
    """Draws choices from one big random integer (cheap, and replayable).

    Each draw consumes ``log2(n)`` bits; when fewer than 24 bits remain beyond the next
    draw, the integer is refilled from a hash of the original one, so long passages keep
    varying instead of always taking the first option.
    """

    __slots__ = ("r", "_seed", "_refills")

    def __init__(self, r: int):
        self.r = self._seed = r
        self._refills = 0

    def below(self, n: int) -> int:
        if self.r < n << 24:
            self._refills += 1
            digest = hashlib.blake2b(f"{self._seed}/{self._refills}".encode(), digest_size=16).digest()
            self.r = int.from_bytes(digest, "big")
        self.r, i = divmod(self.r, n)
        return i

    def pick(self, options):
        return options[self.below(len(options))]

    def shuffled(self, options) -> list:
        """``options`` in a drawn order: any order for up to six items, a rotation beyond."""
        n = len(options)
        if n <= len(_PERMUTATIONS):
            return [options[k] for k in self.pick(_PERMUTATIONS[n - 1])]
        start = self.below(n)
        return list(options[start:]) + list(options[:start])


# Every order of up to six items, so that a shuffle costs one draw.
_PERMUTATIONS = [tuple(itertools.permutations(range(n))) for n in range(1, 7)]


def format_date(date: Date) -> str:
    """``(1872, 3, 14)`` -> ``"14 March 1872"`` (the form the passages use)."""
    return f"{date[2]} {MONTHS[date[1] - 1]} {date[0]}"


def mention(name: str, start: bool = False) -> str:
    """An organisation's name as running text writes it: ``"the University of Kelvaro"``."""
    if name.startswith("University of "):
        return ("The " if start else "the ") + name
    return name


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _plural(noun: str) -> str:
    return noun + ("es" if noun.endswith(("ch", "sh", "s")) else "s")


def _fill(templates, ctx: dict[str, object]) -> list[tuple[str, None, bool]]:
    return [(t.format(**ctx), None, True) for t in templates]


def _assemble(items: list[tuple[str, dict[str, str] | None, bool]], dice: _Dice) -> list[Sentence]:
    """Drop optional sentences (third field) in a drawn order while the passage stays long enough."""
    words = [text.count(" ") + 1 for text, _, _ in items]
    total = sum(words)
    keep = [True] * len(items)
    for k in dice.shuffled([k for k, item in enumerate(items) if item[2]]):
        if total - words[k] >= TARGET_WORDS:
            keep[k] = False
            total -= words[k]
    return [(text, facts) for (text, facts, _), kept in zip(items, keep) if kept]


def passage_text(sentences: list[Sentence]) -> str:
    return " ".join(text for text, _ in sentences)


# --------------------------------------------------------------------------- organisations


def _write_org(world: World, i: int) -> list[list[Sentence]]:
    org = world.orgs[i]
    dice = _Dice(world.wording["org"][i])
    two = world.parts["org"][i] == 2
    founder = world.people[org.founder]
    city = world.cities[org.city].name
    name, year, who = org.name, org.founded, founder.name
    Name, name_ = mention(name, start=True), mention(name)
    ctx: dict[str, object] = dict(
        Org=Name, size=f"{(dice.below(90) + 5) * 100:,}", topic=dice.pick(ph.TOPICS["public"]),
        subject=dice.pick(ph.SUBJECTS[:6]), subject2=dice.pick(ph.SUBJECTS[6:]), song=dice.pick(ph.SONG_TOPICS),
        albums=dice.pick(("three", "four", "five", "seven", "nine", "eleven")),
        titles=dice.pick(("two", "three", "four", "six", "eight")),
    )
    founded = {"founder": "founded", "year": "founded"}
    by_name = ((f"{Name} was founded by {who} in {year}.", founded), (f"{who} founded {name_} in {year}.", founded))
    # With a second passage, the first one must name the organisation twice (see module doc).
    by_pronoun = ((f"It was founded in {year} by the {founder.occupation} {who}.", founded),)
    founded_by = dice.pick(by_name if two else by_name + by_pronoun)
    if org.kind == "company":
        industry, _, products, _ = company_industry(org)
        ctx["products"] = products
        verb, keyword = dice.pick((("headquartered in", "headquartered"), ("based in", "based")))
        lead = [(f"{Name} is {_a(industry)} company {verb} {city}.", {"hq": keyword}), founded_by]
        fillers = ph.COMPANY_FILLERS
    elif org.kind == "university":
        kind = dice.pick(("public", "private", "public research"))
        lead = [(f"{Name} is a {kind} university located in {city}.", {"hq": "located"}), founded_by]
        fillers = ph.UNIVERSITY_FILLERS
    elif org.kind == "newspaper":
        every = dice.pick(("daily", "weekly"))
        lead = [(f"{Name} is a {every} newspaper published in {city}.", {"hq": "published"}), founded_by]
        fillers = ph.NEWSPAPER_FILLERS
    elif org.kind == "band":
        genre = ph.GENRES[org.style % len(ph.GENRES)]
        role = f"who {'was' if founder.death else 'is'} its {founder.occupation}"
        lead = [
            (f"{Name} is a {genre} band formed in {city} in {year}.", {"hq": "formed", "year": "formed"}),
            (dice.pick((f"The band was founded by the {founder.occupation} {who}.",
                        f"It was founded by {who}, {role}.")), {"founder": "founded"}),
        ]
        fillers = ph.BAND_FILLERS
    else:
        sport = ph.SPORTS[org.style % len(ph.SPORTS)]
        lead = [(f"{Name} is a {sport} club based in {city}.", {"hq": "based"}), founded_by]
        fillers = ph.CLUB_FILLERS
    first = _assemble([(text, facts, False) for text, facts in lead] + _fill(dice.shuffled(fillers), ctx), dice)
    if not two:
        return [first]
    opener, rest = ph.HISTORY[org.kind]
    end = founder.death[0] if founder.death else PRESENT_YEAR
    later = min(year + 10 + dice.below(40), PRESENT_YEAR)
    ctx.update(Founder=who, until=min(end, year + 15 + dice.below(30)), decade=min(year + 20, PRESENT_YEAR) // 10 * 10,
               later=later, later2=min(later + 5 + dice.below(20), PRESENT_YEAR),
               place=world.cities[dice.below(len(world.cities))].name)
    history = _assemble([(opener.format(**ctx), None, False)] + _fill(rest, ctx), dice)
    return [first, history]


# --------------------------------------------------------------------------- places


def _write_city(world: World, i: int) -> list[list[Sentence]]:
    city = world.cities[i]
    country = world.countries[city.country]
    dice = _Dice(world.wording["city"][i])
    name = city.name
    if city.is_capital:
        lead = f"{name} is the largest city of {country.name} and the seat of its government."
        items = [(lead, {"country": "city"}, False)]
    else:
        size = "small" if city.population < 20_000 else "mid-sized" if city.population < 150_000 else "large"
        where = f"in {city.direction} {country.name}" if city.direction != "central" else f"in central {country.name}"
        items = [(f"{name} is a {size} city {where}.", {"country": "city"}, False)]
    origin = dice.pick(ph.ORIGINS)
    settled = dice.pick((f"It was first settled in {city.settled} as {origin}.",
                         f"The site of {name} was first settled in {city.settled}, when it was {origin}."))
    items.append((settled, {"settled": "settled"}, False))
    census = 2011 + dice.below(12)
    population = dice.pick((f"As of the {census} census, {name} had a population of {city.population:,}.",
                            f"The city had a population of {city.population:,} at the {census} census."))
    items.append((population, {"population": "population"}, False))
    if city.river:
        items.append((f"It lies on the {city.river} river.", None, False))
    ctx = dict(City=name, Country=country.name, economy=dice.pick(ph.ECONOMIES),
               century=dice.pick(("sixteenth", "seventeenth", "eighteenth", "nineteenth")))
    items.append((f"{name} is known for {dice.pick(ph.FEATURES)}.", None, False))
    first = _assemble(items + _fill(dice.shuffled(ph.CITY_FILLERS), ctx), dice)
    if world.parts["city"][i] == 1:
        return [first]
    ctx["feature"] = dice.pick(ph.FEATURES)
    ctx["century2"] = dice.pick(("eighteenth", "nineteenth", "twentieth"))
    opener = f"{name} has been the seat of government of {country.name} since {country.independence}."
    return [first, _assemble([(opener, None, False)] + _fill(ph.CAPITAL_HISTORY, ctx), dice)]


def _write_country(world: World, i: int) -> list[list[Sentence]]:
    country = world.countries[i]
    dice = _Dice(world.wording["country"][i])
    name, capital = country.name, world.cities[country.capital].name
    items = [
        (f"{name} is a country in {country.part} {country.continent}.", None, False),
        dice.pick(((f"Its capital is {capital}.", {"capital": "capital"}, False),
                   (f"The capital of {name} is {capital}.", {"capital": "capital"}, False))),
        (f"It is home to about {country.population_m} million people and covers {country.area:,} square "
         "kilometres.", None, False),
        (f"The longest river of {name} is the {country.rivers[0]}.", None, False),
    ]
    ctx = dict(Country=name, economy=dice.pick(ph.ECONOMIES), seats=50 + dice.below(300),
               flag=min(country.independence + dice.below(60), PRESENT_YEAR),
               suffrage=min(country.independence + 10 + dice.below(60), PRESENT_YEAR))
    lead = _assemble(items + _fill(dice.shuffled(ph.COUNTRY_FILLERS), ctx), dice)
    leader = world.people[country.leader].name
    opener = dice.pick((
        (f"{name} gained independence in {country.independence}, and {leader} became its first president.",
         {"independence": "independence", "leader": "president"}, False),
        (f"{name} became independent in {country.independence}, with {leader} as its first president.",
         {"independence": "independent", "leader": "president"}, False),
    ))
    return [lead, _assemble([opener] + _fill(ph.COUNTRY_HISTORY, ctx), dice)]


# --------------------------------------------------------------------------- people


def _write_person(world: World, i: int) -> list[list[Sentence]]:
    p = world.people[i]
    dice = _Dice(world.wording["person"][i])
    two = world.parts["person"][i] == 2
    field = ph.FIELD_OF[p.occupation]
    he, his, him = ("she", "her", "her") if p.female else ("he", "his", "him")
    name, surname, He = p.name, p.surname, he.capitalize()
    cities = world.cities
    ctx = dict(
        Name=name, Surname=surname, He=He, he=he, His=his.capitalize(), his=his, him=him,
        topic=dice.pick(ph.TOPICS[field]), topic2=dice.pick(ph.TOPICS[field]),
        place=cities[dice.below(len(cities))].name, place2=cities[dice.below(len(cities))].name,
        year=min(p.birth[0] + 25 + dice.below(20), p.death[0] if p.death else PRESENT_YEAR),
        occupations=_plural(p.occupation), occupation_a=_a(p.occupation),
    )
    years, verb = (f"born {p.birth[0]}", "is") if p.death is None else (f"{p.birth[0]}–{p.death[0]}", "was")
    birthplace, date = cities[p.birthplace].name, format_date(p.birth)
    born = (f"{surname} was born in {birthplace} on {date}.",)
    if not two:  # a first passage followed by a second one names its subject twice
        born += (f"{He} was born on {date} in {birthplace}.",
                 f"{He} was born on {date} in {birthplace}, where {his} {dice.pick(('father', 'mother'))} "
                 f"worked as {_a(dice.pick(ph.TRADES))}.")
    lead = [
        (f"{name} ({years}) {verb} {_a(dice.pick(ph.ADJECTIVES) + p.occupation)}.", None, False),
        (dice.pick(born), {"birth": "born"}, False),
    ] + _fill(dice.shuffled(ph.CHILDHOOD)[: 3 if two else 1], ctx)
    if p.university is not None:
        uni, subject = mention(world.orgs[p.university].name), dice.pick(ph.SUBJECTS)
        lead.append(dice.pick((
            (f"{He} studied {subject} at {uni}, graduating in {p.graduated}.", {"alma": "studied"}, False),
            (f"{surname} was educated at {uni}, where {he} read {subject}.", {"alma": "educated"}, False),
            (f"{He} attended {uni} and took a degree in {subject} in {p.graduated}.", {"alma": "attended"}, False),
        )))
    later = _fill(ph.LATER_LIFE if p.death is None else ph.LEGACY, ctx)
    death = []
    if p.death is not None:
        died, where = format_date(p.death), cities[p.deathplace].name
        death.append(dice.pick((
            (f"{He} died on {died} in {where}.", {"death": "died"}, False),
            (f"{surname} died in {where} on {died}, at the age of {_age(p.birth, p.death)}.", {"death": "died"}, False),
        )))
    if not two:
        work = _fill(dice.shuffled(ph.WORK[field]), ctx)
        return [_assemble(lead + work + _deeds(world, p, dice, ctx) + death + later, dice)]
    # The career passage: named once in its opener, pronouns afterwards.
    pronoun_ctx = dict(ctx, Surname=He)
    opener = (dice.pick(ph.CAREER_OPENERS).format(**ctx), None, False)
    work = _fill(dice.shuffled(ph.WORK[field]), pronoun_ctx)
    later = _fill(ph.LEGACY if p.death else ph.LATER_LIFE, pronoun_ctx)
    career = [opener] + work + _deeds(world, p, dice, pronoun_ctx) + later
    return [_assemble(lead + death, dice), _assemble(career, dice)]


def _deeds(world: World, p: Person, dice: _Dice, ctx: dict[str, object]) -> list[tuple[str, None, bool]]:
    """Sentences on the organisations a person founded and the country they led.

    They avoid the words "founded" and "president", which the oracle queries of the
    organisation and of the country use.
    """
    out = []
    for j in p.founded:
        org = world.orgs[j]
        org_name_ = mention(org.name)
        out.append((dice.pick((
            f"In {org.founded}, {ctx['he']} set up {org_name_}.",
            f"{ctx['He']} established {org_name_} in {org.founded}.",
            f"{ctx['Surname']} started {org_name_} in {org.founded}.",
        )), None, False))
    if p.leads is not None:
        country = world.countries[p.leads]
        out.append((f"{ctx['He']} became the head of state of {country.name} in {country.independence}.", None, False))
    return out


def _age(birth: Date, death: Date) -> int:
    return death[0] - birth[0] - ((death[1], death[2]) < (birth[1], birth[2]))


# --------------------------------------------------------------------------- dispatch

_WRITERS = {"country": _write_country, "city": _write_city, "org": _write_org, "person": _write_person}


def write(world: World, kind: str, i: int) -> list[list[Sentence]]:
    """The passages of entity ``i`` of ``kind`` ("country", "city", "org" or "person")."""
    return _WRITERS[kind](world, i)
