"""Baselines every benchmark should show beside a search agent.

- :class:`NoRetrievalAgent`: the LM answers from memory in one turn.
- :class:`NaiveRAGAgent`: top-k documents for the question itself, then one answer
  (with the env's retriever or another one, e.g. dense).
- :class:`RandomAgent`: uniformly random well-formed actions (LM-free), the floor.

The LM baselines use s3's answer prompts (its zero-shot and RAG generator prompts), so
their numbers are comparable with the s3 generator's. They answer through the env's
protocol (``Protocol.write``), so they run in any env whose agent gives the answer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.agents.base import Agent, turn_seed
from searchgym.agents.lm_agents import LMTurnAgent
from searchgym.agents.trajectory import Trajectory
from searchgym.corpora.types import Retriever, is_search_engine
from searchgym.envs.access import search_env
from searchgym.envs.components.lm_frozen import generator_messages
from searchgym.envs.protocols import Answer, Complete, Evidence, Protocol, Search, Select, make_protocol
from searchgym.error import ConfigError
from searchgym.lm.base import Generation, LanguageModel

_TAG = re.compile(r"<[^<>]*>")


def clean_answer(text: str, max_chars: int = 200) -> str:
    """The first non-empty line of a generation, without an ``Answer:`` lead-in."""
    for line in text.splitlines():
        line = line.strip()
        if line.lower().startswith("answer:"):
            line = line[len("answer:") :].strip()
        if line:
            return line[:max_chars]
    return ""


class _OneShotAgent(LMTurnAgent):
    """Answers every question in its first turn from a prompt of its own.

    If the env did not take that answer (an empty or unusable one is an invalid turn),
    each later turn is a fresh try from the same prompt (with its own sampling seed),
    until the env's turn budget ends the episode."""

    def __init__(self, lm: LanguageModel, protocol: str | Protocol, *, max_new_tokens: int = 32, **sampling: Any):
        super().__init__(lm, max_new_tokens=max_new_tokens, **sampling)
        self._questions: dict[int, str] = {}
        self.protocol = make_protocol(protocol)
        if self.protocol.answers_with_generator:
            raise ConfigError(
                f"{type(self).__name__} answers itself, but in the {self.protocol.name!r} protocol the env's "
                "generator answers; benchmark it on an env whose agent gives the answer (e.g. SearchR1-v0)."
            )

    def docs(self, question: str) -> list[str]:
        return []

    def act_with_generations(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[Generation | None]]:
        self._check_batch(observations, infos)
        prompts, slots = [], []
        for position, info in enumerate(infos):
            slot = info.get("slot", position)
            if "question" in info:
                self._questions[slot] = info["question"]
            elif slot not in self._questions:
                raise ConfigError(
                    f"{type(self).__name__}.act expects the reset info (with 'question') on an episode's first turn, "
                    f"got keys {sorted(info)}; feed every episode from its reset observation."
                )
            question = self._questions[slot]
            prompt = self.chat_ids(generator_messages(question, self.docs(question)))
            self._trajectories[slot] = Trajectory(prompt)
            prompts.append(prompt)
            slots.append(slot)
        generations = self._generate(prompts, (), infos)
        actions = []
        for slot, g in zip(slots, generations):
            self._trajectories[slot].add_generated(g.token_ids, g.logprobs, g.finish_reason)
            actions.append(self.protocol.write([Answer(clean_answer(g.text))]))
        return actions, list(generations)

    def end_episode(self, slot: int) -> Trajectory | None:
        self._questions.pop(slot, None)
        return super().end_episode(slot)

    @classmethod
    def for_env(cls, env: Any, lm: LanguageModel, **options: Any) -> _OneShotAgent:
        return cls(lm, search_env(env).protocol, **options)


class NoRetrievalAgent(_OneShotAgent):
    """The LM answers from its own knowledge (s3's zero-shot prompt), in one turn."""

    name = "no-retrieval"


class NaiveRAGAgent(_OneShotAgent):
    """Retrieves the top ``k`` documents for the question, then answers in one turn.

    Args:
        retriever: Any :class:`Retriever` over the env's corpus (``for_env`` uses the
            env's own retriever unless one is given).
        k: Documents in the prompt.
    """

    name = "naive-rag"

    def __init__(self, lm: LanguageModel, protocol: str | Protocol, retriever: Retriever, *, k: int = 3, **options: Any):
        super().__init__(lm, protocol, **options)
        if not is_search_engine(retriever):
            raise ConfigError(f"NaiveRAGAgent expects a search engine (an object with search(queries, k)), got {type(retriever).__name__}.")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"NaiveRAGAgent expects k to be a positive integer, got {k!r}.")
        self.retriever = retriever
        self.k = k

    def docs(self, question: str) -> list[str]:
        return [f"{h.passage.title}\n{h.passage.text}" for h in self.retriever.search([question], self.k)[0]]

    @classmethod
    def for_env(cls, env: Any, lm: LanguageModel, *, retriever: Retriever | None = None, **options: Any) -> NaiveRAGAgent:
        inner = search_env(env)
        options.setdefault("k", inner.top_k)
        return cls(lm, inner.protocol, retriever if retriever is not None else inner.retriever, **options)


class GoldPassageAgent(_OneShotAgent):
    """Reads the question's gold passages, then answers in one turn: the reader's upper
    bound, what retrieval at its best would give the same model.

    The gold passages are those a question's ``metadata`` names: wiki-vital's
    ``source_passage_id`` (the FanOutQA source article) or synthwiki's ``supporting_ids``.

    Args:
        passages: Question text -> the passage texts to read.
    """

    name = "gold-passage"

    def __init__(self, lm: LanguageModel, protocol: str | Protocol, passages: Mapping[str, Sequence[str]], **options: Any):
        super().__init__(lm, protocol, **options)
        self.passages = {question: list(texts) for question, texts in passages.items()}

    def docs(self, question: str) -> list[str]:
        return self.passages.get(question, [])

    @classmethod
    def for_env(cls, env: Any, lm: LanguageModel, **options: Any) -> GoldPassageAgent:
        inner = search_env(env)
        passages: dict[str, list[str]] = {}
        for ex in inner.examples:
            ids = ex.metadata.get("supporting_ids") or ([ex.metadata["source_passage_id"]] if "source_passage_id" in ex.metadata else [])
            if not ids:
                raise ConfigError(
                    f"GoldPassageAgent expects questions whose metadata names their gold passages (wiki-vital's "
                    f"'source_passage_id' or synthwiki's 'supporting_ids'), got question {ex.id!r} with metadata keys "
                    f"{sorted(ex.metadata)}; benchmark it on wiki-vital or synthwiki."
                )
            docs = [inner.corpus.get(pid) for pid in ids]
            passages[ex.question] = [f"{d.title}\n{d.text}" for d in docs]
        return cls(lm, inner.protocol, passages, **options)


class RandomAgent(Agent):
    """Uniformly random well-formed turns: search a few words of the question, select
    random documents (s3), quote random evidence (R-Search), or answer with a random
    span of the last observation. Seeded; LM-free."""

    name = "random"

    def __init__(self, protocol: str | Protocol, *, seed: int = 0, answer_probability: float = 0.3):
        self.protocol = make_protocol(protocol)
        self.seed = seed
        self.rng = random.Random(seed)
        if not 0.0 <= answer_probability <= 1.0:
            raise ConfigError(f"RandomAgent expects answer_probability in [0, 1], got {answer_probability!r}.")
        self.answer_probability = answer_probability
        self._questions: dict[int, str] = {}

    @classmethod
    def for_env(cls, env: Any, **options: Any) -> RandomAgent:
        return cls(search_env(env).protocol, **options)

    @staticmethod
    def _span(rng: random.Random, text: str, most: int) -> str:
        # Words only: tags copied from an observation would make the turn malformed.
        words = _TAG.sub(" ", text).split() or ["unknown"]
        n = rng.randint(1, min(most, len(words)))
        start = rng.randrange(len(words) - n + 1)
        return " ".join(words[start : start + n])

    def _rng(self, info: Mapping[str, Any]) -> random.Random:
        """Under a driver, a stream per (seed, question, episode seed, turn): an episode
        plays the same turns however many others run beside it, and a resumed benchmark
        replays what the uninterrupted one played. Otherwise the agent's own stream."""
        if "episode_seed" in info and "example_id" in info:
            return random.Random(turn_seed(self.seed, info))
        return self.rng

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[str]:
        self._check_batch(observations, infos)
        actions = []
        for position, (observation, info) in enumerate(zip(observations, infos)):
            slot = info.get("slot", position)
            if info.get("turn", 0) == 0:
                self._questions[slot] = info.get("question", observation)
            question = self._questions.get(slot, observation)
            rng = self._rng(info)
            finish = rng.random() < self.answer_probability
            if self.protocol.answers_with_generator:
                select = Select(tuple(sorted(rng.sample(range(1, 9), rng.randint(0, 3)))))
                last = Complete() if finish else Search(self._span(rng, question, 5))
                actions.append(self.protocol.write([select, last] if select.doc_numbers else [last]))
            elif finish:
                answer = Answer(self._span(rng, observation, 4))
                if self.protocol.name == "r_search":
                    actions.append(self.protocol.write([Evidence(self._span(rng, observation, 30)), answer]))
                else:
                    actions.append(self.protocol.write([answer]))
            else:
                actions.append(self.protocol.write([Search(self._span(rng, question, 5))]))
        return actions

    def end_episode(self, slot: int) -> None:
        self._questions.pop(slot, None)
