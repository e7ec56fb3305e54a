"""Long articles written from the deepwiki world, fast.

An article is a lead paragraph, then sections (``## Heading`` and paragraphs separated by
blank lines). Nearly all of it is filler drawn from *pools*: every filler template of
:mod:`.phrases` rendered many times with random words, once per world, so writing an
article is picking pool indices and joining strings (no formatting per sentence). Filler
names nobody; only the lead and the fact sentences name the entity.

Every fact of the entity (:func:`entity_facts`) is written exactly once, as one sentence,
and only after the first :data:`FACTS_AFTER_WORDS` words of the article, so the first 512
words (a search snippet) never show one. A fact sentence is a pure function of the world
(:func:`fact_sentence`), which is how question metadata quotes it without keeping any
article in memory.
"""

from __future__ import annotations

import numpy as np

from searchgym.corpora.deepwiki import phrases as ph
from searchgym.corpora.deepwiki.kinds import ONE_HOP, a
from searchgym.corpora.deepwiki.world import World
from searchgym.corpora.synthwiki.prose import mention

__all__ = ["FACTS_AFTER_WORDS", "FACT_NAMES", "Pools", "entity_facts", "fact_sentence", "write_article"]

#: No fact sentence starts before this word of its article (a snippet is 512 words).
FACTS_AFTER_WORDS = 620
FACT_NAMES: dict[str, tuple[str, ...]] = {
    "person": ONE_HOP,
    "city": ("settled", "river"),
    "university": ("founded", "founder", "city"),
    "company": ("founded", "hq"),
}
_VARIANTS_PER_TEMPLATE = 120
_SUBJECTS = {  # (S, s, o, P, p) choices per pool
    "person_m": (("He", "he", "him", "His", "his"),),
    "person_f": (("She", "she", "her", "Her", "her"),),
    "city": (("The city", "the city", "the city", "Its", "its"), ("The town", "the town", "the town", "Its", "its")),
    "university": (("The university", "the university", "the university", "Its", "its"),
                   ("The institution", "the institution", "the institution", "Its", "its")),
    "company": (("The company", "the company", "the company", "Its", "its"), ("The firm", "the firm", "the firm", "Its", "its")),
}


def _slots(rng: np.random.Generator) -> dict[str, str]:
    ctx = {name: words[int(rng.integers(len(words)))] for name, words in ph.SLOTS.items()}
    for name in ("feeling", "quality"):
        words = ph.SLOTS[name]
        ctx[name + "2"] = words[(words.index(ctx[name]) + 1 + int(rng.integers(len(words) - 1))) % len(words)]
    return ctx


class Pools:
    """Rendered filler sentences and their word counts, per pool (``person_m``, ``city``...)."""

    def __init__(self, rng: np.random.Generator):
        self.sentences: dict[str, list[str]] = {}
        self.words: dict[str, list[int]] = {}
        for pool, subjects in _SUBJECTS.items():
            templates = ph.FILLER[pool.split("_")[0]]
            out = []
            for template in templates:
                for _ in range(_VARIANTS_PER_TEMPLATE):
                    S, s, o, P, p = subjects[int(rng.integers(len(subjects)))]
                    out.append(template.format(S=S, s=s, o=o, P=P, p=p, **_slots(rng)))
            # A template with few words to vary would repeat itself: keep each sentence once.
            self.sentences[pool] = list(dict.fromkeys(out))
            self.words[pool] = [len(t.split()) for t in self.sentences[pool]]


def _person_values(world: World, i: int) -> dict[str, object]:
    people = world.people
    mentor = int(people["mentor"][i])
    return {
        "birth_year": int(people["birth"][i]),
        "occupation": a(ph.OCCUPATIONS[people["occupation"][i]]),
        "birthplace": world.city_names[people["birthplace"][i]],
        "university": mention(world.univ_names[people["university"][i]]),
        "employer": world.comp_names[people["employer"][i]],
        "mentor": world.person_name(mentor) if mentor >= 0 else None,
    }


def fact_sentence(world: World, kind: str, i: int, fact: str) -> str:
    """The one sentence of entity ``i``'s article that states ``fact`` (a name of
    :data:`FACT_NAMES`), e.g. ``"Kelvaro was first settled in 1357."``."""
    names = FACT_NAMES[kind]
    templates = ph.FACTS[kind, fact]
    template = templates[(int(world.wording[kind][i]) >> (2 * names.index(fact))) % len(templates)]
    if kind == "person":
        name = world.person_name(i)
        p = "her" if world.person_female[i] else "his"
        if fact == "book":
            people = world.people
            return template.format(name=name, p=p, year=int(people["book_year"][i]), topic=ph.BOOK_TOPICS[people["book_topic"][i]])
        return template.format(name=name, p=p, value=_person_values(world, i)[fact])
    if kind == "city":
        value = int(world.city_settled[i]) if fact == "settled" else world.rivers[world.city_river[i]]
        return template.format(name=world.city_names[i], value=value)
    if kind == "university":
        name = world.univ_names[i]
        value = {"founded": lambda: int(world.univ_founded[i]), "founder": lambda: a(ph.FOUNDER_OCCUPATIONS[world.univ_founder[i]]),
                 "city": lambda: world.city_names[world.univ_city[i]]}[fact]()
        return template.format(The_name=mention(name, start=True), the_name=mention(name), value=value)
    value = int(world.comp_founded[i]) if fact == "founded" else world.city_names[world.comp_hq[i]]
    return template.format(name=world.comp_names[i], value=value)


def entity_facts(world: World, kind: str, i: int) -> list[str]:
    """Every fact sentence of entity ``i``'s article (a person without a mentor, a city on
    no river: that fact is not written)."""
    skip = set()
    if kind == "person" and world.people["mentor"][i] < 0:
        skip.add("mentor")
    if kind == "city" and world.city_river[i] < 0:
        skip.add("river")
    return [fact_sentence(world, kind, i, fact) for fact in FACT_NAMES[kind] if fact not in skip]


def _lead(world: World, kind: str, i: int, rng: np.random.Generator) -> list[str]:
    ctx = _slots(rng)
    if kind == "person":
        ctx.update(name=world.person_name(i), p="her" if world.person_female[i] else "his")
    else:
        name = world.names(kind)[i]
        ctx.update(name=mention(name, start=True), the_name=mention(name), p="its")
        if kind == "city":
            ctx["country"] = world.countries[world.city_country[i]]
    templates = ph.LEADS[kind]
    first = templates[0].format(**ctx)
    rest = [templates[k].format(**ctx) for k in rng.permutation(len(templates) - 1)[: int(rng.integers(1, 3))] + 1]
    return [first, *rest]


def write_article(world: World, kind: str, i: int, rng: np.random.Generator, pools: Pools, target_words: int) -> str:
    """Entity ``i``'s article, about ``target_words`` words long (at least that many, and at
    most one sentence more, unless its facts need more room)."""
    pool = kind if kind != "person" else ("person_f" if world.person_female[i] else "person_m")
    sentences, counts = pools.sentences[pool], pools.words[pool]
    headings = ph.HEADINGS[kind]
    facts = entity_facts(world, kind, i)
    facts = [facts[k] for k in rng.permutation(len(facts))]
    fact_words = [len(f.split()) for f in facts]
    # Enough random draws for the longest article this target can need.
    budget = target_words // 6 + 40
    picks = rng.integers(len(sentences), size=budget).tolist()
    sizes = rng.integers(3, 8, size=budget // 3 + 8).tolist()  # sentences per paragraph
    section_sizes = rng.integers(1, 5, size=len(headings) + 1).tolist()  # paragraphs per section
    fact_slots = rng.random(budget).tolist()  # where in a paragraph a fact goes, how many per paragraph

    lead = _lead(world, kind, i, rng)
    lead += [sentences[picks.pop()] for _ in range(2)]
    words = sum(len(s.split()) for s in lead)
    blocks = [" ".join(lead)]
    heading_order = rng.permutation(len(headings)).tolist()
    section = 0
    while True:
        if section >= len(heading_order):  # very long articles: headings come round again
            heading_order += heading_order
        heading = headings[heading_order[section]]
        blocks.append("## " + heading)
        words += 1 + heading.count(" ") + 1
        for _ in range(section_sizes[section % len(section_sizes)]):
            start = words
            paragraph: list[str] = []
            for _ in range(sizes.pop() if sizes else 5):
                k = picks.pop() if picks else int(rng.integers(len(sentences)))
                paragraph.append(sentences[k])
                words += counts[k]
                if words >= target_words:
                    break
            if facts and start >= FACTS_AFTER_WORDS:
                # This paragraph starts past the snippet: it takes one fact or two, or every
                # fact left once the article is long enough.
                take = len(facts) if words >= target_words else 2 if fact_slots and fact_slots.pop() < 0.4 else 1
                for _ in range(min(take, len(facts))):
                    at = int((fact_slots.pop() if fact_slots else 0.5) * (len(paragraph) + 1))
                    paragraph.insert(at, facts.pop())
                    words += fact_words.pop()
            blocks.append(" ".join(paragraph))
            if words >= target_words and not facts:
                return "\n\n".join(blocks)
        section += 1

