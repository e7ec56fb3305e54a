"""Scripted agents of the browse game: the oracle (the labels' upper bound) and the random floor.

Both play tags and tool calls (the env's ``action_format``), and are what the built-in agent
names ``oracle`` and ``random`` play on an env of :class:`DeepResearchProtocol`: the protocol
names them in :attr:`DeepResearchProtocol.scripted_agents`, which
:func:`searchgym.agents.make_agent` reads, so the agents layer imports nothing of this package.

- :class:`DeepResearchOracle` reads each question's labels (``QAExample.metadata``: its
  ``evidence_ids``, ``gold_ids`` and the ``facts`` of its ``constraints``): it searches the
  question once, opens the page of each evidence and gold document that holds its fact (page 1
  of one without a fact), up to :data:`MAX_PARALLEL` opens a turn as tool calls (one a turn in
  tags), then answers the gold answer citing the gold and evidence documents with confidence
  100. It checks that the game, its store and its metrics fit together: accuracy 1 and evidence
  recall 1 on every question whose documents fit the call and turn budgets.
- :class:`DeepResearchRandom` searches random words of the question, opens random pages and
  finds random words in documents it was shown, and answers a random title it saw, citing
  random ids it saw, with confidence 50. Seeded per episode and turn; LM-free.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.agents.base import Agent, turn_seed
from searchgym.corpora.types import QAExample
from searchgym.deepresearch.documents import MAX_PATTERN_CHARS, MAX_PATTERN_WORDS
from searchgym.deepresearch.protocol import CitedAnswer, DeepResearchProtocol, Find, Open
from searchgym.envs.access import search_env
from searchgym.envs.protocols import Action, Search
from searchgym.envs.tools.surface import ToolSurface
from searchgym.error import ConfigError

__all__ = ["MAX_PARALLEL", "DeepResearchOracle", "DeepResearchRandom", "fact_pattern"]

#: The most calls the oracle makes in one tool turn (parallel opens).
MAX_PARALLEL = 8


def fact_pattern(fact: str) -> str:
    """The longest start of ``fact`` that ``find`` takes as a pattern (whole words, at most
    :data:`MAX_PATTERN_WORDS` words and :data:`MAX_PATTERN_CHARS` characters)."""
    words: list[str] = []
    for word in fact.split()[:MAX_PATTERN_WORDS]:
        if len(" ".join([*words, word])) > MAX_PATTERN_CHARS:
            break
        words.append(word)
    return " ".join(words)


def _ids(metadata: Mapping[str, Any], key: str) -> list[str]:
    value = metadata.get(key) or ()
    return [value] if isinstance(value, str) else [str(v) for v in value]


class _BrowseAgent(Agent):
    """What both agents share: the env's protocol, budgets and surface (tags or tool calls)."""

    def __init__(self, protocol: DeepResearchProtocol, *, action_format: str = "tools", max_turns: int = 65,
                 max_calls: int | None = None):
        if not isinstance(protocol, DeepResearchProtocol):
            raise ConfigError(
                f"{type(self).__name__} plays the deep-research game and expects a DeepResearchProtocol, got "
                f"{type(protocol).__name__}; make its env with gym.make('searchgym/DeepResearch-v0')."
            )
        if action_format not in ("tags", "tools"):
            raise ConfigError(f"{type(self).__name__} expects action_format 'tags' or 'tools', got {action_format!r}.")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError(f"{type(self).__name__} expects max_turns to be a positive integer, got {max_turns!r}.")
        self.protocol, self.action_format = protocol, action_format
        self.max_turns, self.max_calls = max_turns, max_calls
        self.surface = ToolSurface(protocol) if action_format == "tools" else None

    @staticmethod
    def _env_settings(env: Any) -> dict[str, Any]:
        inner = search_env(env)
        return {"action_format": getattr(inner, "action_format", "tags"), "max_turns": inner.max_turns,
                "max_calls": getattr(inner, "max_calls", None)}

    def per_turn(self) -> int:
        """The most calls one turn holds: :data:`MAX_PARALLEL` as tool calls, one in tags."""
        return MAX_PARALLEL if self.surface is not None else 1

    def write(self, actions: Sequence[Action], thought: str | None, turn: int) -> Any:
        if self.surface is not None:
            return self.surface.write(actions, thought, turn=turn)
        return self.protocol.write(actions, thought=thought)


class DeepResearchOracle(_BrowseAgent):
    """Plays each question's labels: one search for the question, the fact's page of each
    evidence and gold document, then the gold answer citing them with confidence 100.

    Args:
        protocol: The env's :class:`DeepResearchProtocol` (its document store locates the facts).
        examples: The env's questions, whose ``metadata`` holds ``evidence_ids``, ``gold_ids``
            and optionally ``constraints`` (each with ``doc_ids`` and ``facts``).
        action_format: ``"tools"`` (one assistant message of calls a turn) or ``"tags"``.
        max_turns, max_calls: The env's budgets: the oracle leaves out the opens that would
            not fit them (it always searches once and answers).
    """

    name = "oracle"

    def __init__(self, protocol: DeepResearchProtocol, examples: Sequence[QAExample], *, action_format: str = "tools",
                 max_turns: int = 65, max_calls: int | None = None):
        super().__init__(protocol, action_format=action_format, max_turns=max_turns, max_calls=max_calls)
        if max_turns < 2:
            raise ConfigError(f"DeepResearchOracle needs max_turns >= 2 (a search and the answer), got {max_turns}.")
        self.examples = {ex.id: ex for ex in examples}
        self._plans: dict[str, list[list[Action]]] = {}

    @classmethod
    def for_env(cls, env: Any) -> DeepResearchOracle:
        """The oracle of ``env`` (wrapped or not): its protocol, questions, action format and budgets."""
        inner = search_env(env)
        return cls(inner.protocol, inner.examples, **cls._env_settings(env))

    def reads(self, example: QAExample) -> list[Open]:
        """The pages the oracle opens: per evidence then gold document (each once), the page of
        each of its facts the store finds, or page 1 when none is found."""
        store = self.protocol.store
        meta = example.metadata
        facts: dict[str, list[str]] = {}
        for constraint in meta.get("constraints") or ():
            for doc_id in _ids(constraint, "doc_ids"):
                facts.setdefault(doc_id, []).extend(str(f) for f in constraint.get("facts") or ())
        opens: list[Open] = []
        for doc_id in dict.fromkeys([*_ids(meta, "evidence_ids"), *_ids(meta, "gold_ids")]):
            if store is None or doc_id not in store:
                continue  # an id the corpus does not hold cannot be read (the metrics count it unseen)
            pages = []
            for fact in facts.get(doc_id, ()):
                pattern = fact_pattern(fact)
                found = store.find(doc_id, pattern) if pattern else None
                if found is not None and found.places:
                    pages.append(found.places[0][0])
            opens += [Open(doc_id, page) for page in dict.fromkeys(pages or [1])]
        return opens

    def plan(self, example: QAExample) -> list[list[Action]]:
        """The episode's turns: the search, the opens in turns of :meth:`per_turn` calls (within
        the call and turn budgets), the answer."""
        meta = example.metadata
        if not _ids(meta, "evidence_ids") and not _ids(meta, "gold_ids"):
            raise ConfigError(
                f"DeepResearchOracle expects questions whose metadata names evidence_ids or gold_ids; question "
                f"{example.id!r} has metadata keys {sorted(meta)}."
            )
        opens = self.reads(example)
        if self.max_calls is not None:
            opens = opens[: max(0, self.max_calls - 1)]
        step = self.per_turn()
        turns: list[list[Action]] = [[Search(example.question.strip())]]
        turns += [list(opens[i:i + step]) for i in range(0, len(opens), step)][: self.max_turns - 2]
        cited = tuple(dict.fromkeys([*_ids(meta, "gold_ids"), *_ids(meta, "evidence_ids")]))[: self.protocol.max_citations]
        turns.append([CitedAnswer(example.answers[0], cited, 100.0)])
        return turns

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[Any]:
        self._check_batch(observations, infos)
        return [self._turn(info) for info in infos]

    def _turn(self, info: Mapping[str, Any]) -> Any:
        example = self.examples.get(info.get("example_id"))
        if example is None:
            raise ConfigError(
                f"DeepResearchOracle knows no question with id {info.get('example_id')!r}; build it with DeepResearchOracle.for_env(env)."
            )
        plan = self._plans.get(example.id)
        if plan is None:
            plan = self._plans[example.id] = self.plan(example)
        turn = int(info.get("turn", 0))
        actions = plan[min(turn, len(plan) - 1)]
        kind = actions[0].kind
        thought = {"search": "I search the question.", "open": "I read the pages that hold the clues.",
                   "answer": "I have found the answer."}.get(kind)
        return self.write(actions, thought, turn)


# Each id and title the env showed: a search hit (``[id] title``), an open (``[id] title (page 2 of 3)``),
# a find (``[id] title (3 pages): ...``); the tag grammar puts the first after <information>.
_SHOWN = re.compile(r"(?:^|<information>)\[([^\[\]\s]{1,200})\] ([^\n]*)", re.MULTILINE)
_PAGES = re.compile(r"^(.*?) \((?:page \d+ of (\d+)|(\d+) pages?)\)(?::.*)?$")
_TAG = re.compile(r"<[^<>]*>")


class DeepResearchRandom(_BrowseAgent):
    """Random well-formed calls: searches of question words, opens and finds in documents it
    was shown, and an answer naming a random title it saw (confidence 50). Seeded; LM-free.

    Args:
        protocol: The env's :class:`DeepResearchProtocol`.
        seed: Seeds every episode's turns (with the question, the episode's seed and the turn).
        answer_probability: The chance that a turn after the first answers.
        action_format, max_turns, max_calls: The env's; the agent answers on its last turn and
            once the call budget is spent.
    """

    name = "random"

    def __init__(self, protocol: DeepResearchProtocol, *, seed: int = 0, answer_probability: float = 0.2,
                 action_format: str = "tools", max_turns: int = 65, max_calls: int | None = None):
        super().__init__(protocol, action_format=action_format, max_turns=max_turns, max_calls=max_calls)
        if isinstance(answer_probability, bool) or not isinstance(answer_probability, (int, float)) or not 0 <= answer_probability <= 1:
            raise ConfigError(f"DeepResearchRandom expects answer_probability in [0, 1], got {answer_probability!r}.")
        self.seed, self.answer_probability = seed, float(answer_probability)
        self.rng = random.Random(seed)
        self._questions: dict[int, str] = {}
        self._seen: dict[int, dict[str, str]] = {}  # slot -> doc id -> title
        self._pages: dict[int, dict[str, int]] = {}  # slot -> doc id -> pages (once opened or found in)

    @classmethod
    def for_env(cls, env: Any, **options: Any) -> DeepResearchRandom:
        """The random agent of ``env`` (wrapped or not); ``options`` as the constructor's."""
        return cls(search_env(env).protocol, **{**cls._env_settings(env), **options})

    def _rng(self, info: Mapping[str, Any]) -> random.Random:
        if "episode_seed" in info and "example_id" in info:
            return random.Random(turn_seed(self.seed, info))
        return self.rng

    def _read(self, slot: int, observation: str) -> None:
        seen, pages = self._seen.setdefault(slot, {}), self._pages.setdefault(slot, {})
        for doc_id, rest in _SHOWN.findall(observation):
            m = _PAGES.match(rest)
            title = (m.group(1) if m else rest).strip()
            if m and (m.group(2) or m.group(3)):
                pages[doc_id] = int(m.group(2) or m.group(3))
            if title:
                seen.setdefault(doc_id, title)

    def _words(self, rng: random.Random, text: str, most: int) -> str:
        words = _TAG.sub(" ", text).replace("?", " ").split() or ["unknown"]
        n = rng.randint(1, min(most, len(words)))
        start = rng.randrange(len(words) - n + 1)
        return " ".join(words[start:start + n])

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[Any]:
        self._check_batch(observations, infos)
        return [self._turn(info.get("slot", position), observation, info)
                for position, (observation, info) in enumerate(zip(observations, infos))]

    def _turn(self, slot: int, observation: Any, info: Mapping[str, Any]) -> Any:
        turn = int(info.get("turn", 0))
        if turn == 0:
            self._questions[slot] = str(info.get("question", observation))
            self._seen[slot], self._pages[slot] = {}, {}
        else:
            self._read(slot, observation if isinstance(observation, str) else str(observation))
        question, seen, pages = self._questions.get(slot, ""), self._seen.get(slot, {}), self._pages.get(slot, {})
        rng = self._rng(info)
        calls = int(info.get("num_calls", 0) or 0)
        left = None if self.max_calls is None else self.max_calls - calls
        last = turn >= self.max_turns - 1 or (left is not None and left <= 0)
        if turn > 0 and (last or rng.random() < self.answer_probability):
            ids = sorted(seen)
            answer = seen[rng.choice(ids)] if ids else self._words(rng, question, 3)
            cited = tuple(rng.sample(ids, rng.randint(0, min(3, len(ids), self.protocol.max_citations)))) if ids else ()
            return self.write([CitedAnswer(answer, cited, 50.0)], None, turn)
        n = rng.randint(1, min(3, self.per_turn()))
        if left is not None:
            n = max(1, min(n, left))
        actions: list[Action] = []
        for _ in range(n):
            pick = rng.random()
            if not seen or pick < 0.3:
                actions.append(Search(self._words(rng, question, 5)))
                continue
            doc_id = rng.choice(sorted(seen))
            if pick < 0.75:
                actions.append(Open(doc_id, rng.randint(1, pages.get(doc_id, 1))))
            else:
                actions.append(Find(doc_id, self._words(rng, question, 2)))
        return self.write(actions, None, turn)

    def end_episode(self, slot: int) -> None:
        for state in (self._questions, self._seen, self._pages):
            state.pop(slot, None)
