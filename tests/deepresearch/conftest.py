"""A small in-memory deep-research world shared by the tests of this folder.

``deep_world()`` builds (once per process) a :class:`~searchgym.corpora.Corpus` of 16 long
documents (1,500 to 3,000 words, six ``== Section ==`` parts each) and four questions. Per
question: a person (the gold document, which holds the answer: its title), the town they
were born in and the society they founded (the two evidence documents, each holding one clue
in a section past the first page); four distractor documents (``negative_ids``) repeat the
question's words without its facts. Every fact is a sentence of its own, so ``find`` locates it.

Fixtures: ``dr_world`` -> ``(corpus, examples)``; ``make_dr_env(**options)`` ->
``gym.make("searchgym/DeepResearch-v0", corpus=corpus, dataset=examples, **options)``.
"""

from __future__ import annotations

import functools
import random
from typing import Any

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.corpora import Corpus, Passage
from searchgym.corpora.types import QAExample

FILLER = (
    "archive ledger harbor meadow lantern orchard quarry granite willow copper beacon valley river summit timber "
    "canal market bridge tower garden station chapel mill forge tavern cellar pasture grove ridge hollow marsh"
).split()
PEOPLE = ["Ilsa Marrowgate", "Tobin Quell", "Orla Fenwright", "Dario Vantrell"]
TOWNS = ["Velmora", "Ostrand", "Kirrowby", "Brannock"]
GUILDS = ["Amber Compass Society", "Lantern Guild", "Order of the Grey Quill", "Tidewater League"]
DISTRACTORS = ["Chronicle of the North", "Societies of the Coast", "Founders and Their Towns", "Registry of Births"]
SECTIONS = ("Overview", "History", "Geography", "Culture", "Legacy", "Notes")
#: A wrong but plausible answer for each question (another question's person).
WRONG = {f"q{i}": PEOPLE[(i + 1) % len(PEOPLE)] for i in range(len(PEOPLE))}


def _text(rng: random.Random, title: str, facts: list[str], words: int) -> str:
    """``words`` words of filler in six sections, the facts (one sentence each) appended to the
    third section onwards (past the first page of 512 words)."""
    parts, per = [], words // len(SECTIONS)
    for section in SECTIONS:
        body: list[str] = []
        while len(body) < per:
            sentence = [rng.choice(FILLER) for _ in range(rng.randint(8, 14))]
            sentence[0] = sentence[0].capitalize()
            sentence[-1] += "."
            body += sentence
        parts.append(f"== {section} ==\n" + " ".join(body[:per]))
    for i, fact in enumerate(facts):
        parts[2 + i % 4] += " " + fact
    return f"{title} is described in this article.\n\n" + "\n\n".join(parts)


@functools.lru_cache(maxsize=None)
def deep_world(seed: int = 5) -> tuple[Corpus, tuple[QAExample, ...]]:
    rng = random.Random(seed)
    docs: list[Passage] = []
    examples: list[QAExample] = []
    for i, (person, town, guild) in enumerate(zip(PEOPLE, TOWNS, GUILDS)):
        words = 1500 + 500 * i
        born = f"The chronicler {person} was born in {town} in the year {1800 + 7 * i}."
        founded = f"In {1830 + 5 * i} the {guild} was founded by {person}."
        lives = f"{town} is the birthplace of a chronicler who later founded a society."
        docs += [
            Passage(f"p{i}", person, _text(rng, person, [born], words)),
            Passage(f"t{i}", town, _text(rng, town, [lives, f"A chronicler born in {1800 + 7 * i} came from here."], words)),
            Passage(f"g{i}", guild, _text(rng, guild, [f"The {guild} was founded in {1830 + 5 * i} by a chronicler.", founded], words)),
        ]
        examples.append(QAExample(
            f"q{i}", f"Which chronicler was born in {town} in {1800 + 7 * i} and founded the {guild}?", (person,),
            {"evidence_ids": [f"t{i}", f"g{i}"], "gold_ids": [f"p{i}"], "negative_ids": [f"n{i}"]},
        ))
    for i, title in enumerate(DISTRACTORS):
        docs.append(Passage(f"n{i}", title, _text(rng, title, ["Chroniclers were born in towns and founded societies."], 1800)))
    return Corpus(docs, name="deep-fixture"), tuple(examples)


@pytest.fixture
def dr_world() -> tuple[Corpus, list[QAExample]]:
    corpus, examples = deep_world()
    return corpus, list(examples)


@pytest.fixture
def make_dr_env(dr_world):
    corpus, examples = dr_world

    def make(**options: Any) -> Any:
        options.setdefault("dataset", examples)
        return gym.make("searchgym/DeepResearch-v0", corpus=options.pop("corpus", corpus), **options)

    return make
