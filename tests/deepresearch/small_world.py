"""A small hand-made deep-research world for tests: long documents (about 1,500 words, three
pages of 512 words), each question's clues in other documents, the fact of each clue on a page
past the first, and the answer a person's name (the title of the target document).

``world(tmp_path)`` writes its corpus as JSONL and returns ``(corpus path, questions)``;
``make_env(tmp_path, **options)`` is ``gym.make("searchgym/DeepResearch-v0")`` over it;
``env_options(tmp_path)`` are the env options of a bench over it (the questions as a file).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import gymnasium as gym

from searchgym.corpora.datasets import write_qa
from searchgym.corpora.types import QAExample

FILLER = (
    "archive ledger harbor meadow lantern orchard quarry granite willow copper beacon valley river summit timber "
    "canal market bridge tower garden station chapel mill forge tavern cellar pasture grove ridge hollow "
    "marsh delta island cape fjord plateau basin gorge terrace courtyard gallery library theatre museum"
).split()

PEOPLE = ["Ilsa Marrowgate", "Tobin Quell", "Orla Fenwright", "Dario Vantrell", "Mina Castellane", "Piet Harrowby"]
TOWNS = ["Velmora", "Ostrand", "Kirrowby", "Thessaly Cove", "Brannock", "Duvale"]
GUILDS = ["Amber Compass Society", "Lantern Guild", "Order of the Grey Quill", "Tidewater League", "Halcyon Circle", "Meridian Lodge"]


def _filler(rng: random.Random, words: int) -> list[str]:
    out = []
    while len(out) < words:
        sentence = [rng.choice(FILLER) for _ in range(rng.randint(8, 14))]
        sentence[0] = sentence[0].capitalize()
        sentence[-1] += "."
        out.extend(sentence)
    return out[:words]


def _document(rng: random.Random, facts: list[str], words: int = 1500) -> str:
    """About ``words`` words of filler with each fact sentence placed past the first page."""
    body = _filler(rng, words)
    for fact in facts:
        at = rng.randint(600, words - 50)
        while not body[at - 1].endswith("."):  # a fact starts a sentence
            at += 1
        body[at:at] = fact.split()
    return " ".join(body)


def world(tmp_path: Path, *, seed: int = 3) -> tuple[Path, list[QAExample]]:
    """Six questions over 18 long documents (per question: the person, their town, their guild)."""
    rng = random.Random(seed)
    docs: list[dict[str, Any]] = []
    questions = []
    for i, (person, town, guild) in enumerate(zip(PEOPLE, TOWNS, GUILDS)):
        person_id, town_id, guild_id = f"p{i}", f"t{i}", f"g{i}"
        born = f"The chronicler {person} was born in {town} in the year {1800 + 7 * i}."
        founded = f"In {1830 + 5 * i} the {guild} was founded by {person}."
        lives = f"{town} is remembered as the birthplace of a chronicler who later founded a society."
        docs += [
            {"id": person_id, "title": person, "text": _document(rng, [born])},
            {"id": town_id, "title": town, "text": _document(rng, [lives])},
            {"id": guild_id, "title": guild, "text": _document(rng, [founded])},
        ]
        question = (f"Which chronicler was born in {town} in {1800 + 7 * i} and founded the {guild} in {1830 + 5 * i}?")
        questions.append(QAExample(f"q{i}", question, (person,), {
            "evidence_ids": [town_id, guild_id], "gold_ids": [person_id], "target_id": person_id,
            "constraints": [
                {"text": f"born in {town}", "doc_ids": [town_id, person_id], "facts": [lives, born]},
                {"text": f"founded the {guild}", "doc_ids": [guild_id], "facts": [founded]},
            ],
        }))
    path = tmp_path / "deep_world.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path, questions


def make_env(tmp_path: Path, **options: Any) -> Any:
    corpus, questions = world(tmp_path)
    return gym.make("searchgym/DeepResearch-v0", corpus=str(corpus), dataset=questions, **options)


def env_options(tmp_path: Path) -> dict[str, str]:
    """``corpus`` and ``dataset`` paths of the world, for ``BenchConfig.env_options``."""
    corpus, questions = world(tmp_path)
    dataset = write_qa(questions, tmp_path / "deep_questions.jsonl")
    return {"corpus": str(corpus), "dataset": str(dataset)}
