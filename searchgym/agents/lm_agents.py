"""Language-model agents: the policy LM plays the env's protocol, one turn per step.

Three families share one loop and differ in what the protocol lets the policy do:

- :class:`EndToEndAgent` (Search-R1, R1-Searcher, RECON): reasons, searches, answers.
- :class:`SearcherAgent` (s3): searches and selects documents; the env's frozen
  generator answers from the selection.
- :class:`EvidenceAgent` (R-Search): searches, writes ``<original_evidence>`` and
  answers; the env's frozen reader answers from the evidence for the evidence reward.

Each episode's context is kept as token ids (a :class:`Trajectory`): the prompt, then
for every turn the ids the engine sampled and the tokenized observation. The next turn
is generated from those ids, so what the model read is exactly what a trainer sees.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from searchgym.agents.base import Agent, turn_seed
from searchgym.agents.tokens import encode_text, prompt_ids
from searchgym.agents.trajectory import Trajectory
from searchgym.envs.access import search_env
from searchgym.envs.protocols import Protocol, make_protocol
from searchgym.error import ConfigError
from searchgym.lm.base import Generation, LanguageModel


def _positive_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{owner} expects {name} to be a positive integer, got {value!r}.")
    return value


class LMTurnAgent(Agent):
    """Shared plumbing of agents that generate with a :class:`LanguageModel`.

    Per-episode state is keyed by ``info["slot"]`` (set by the vectorized driver; the
    position in the batch otherwise) and starts afresh when ``info["turn"] == 0``.
    Subclasses implement :meth:`act_with_generations` (the texts and the batch's
    generations, in order); ``act`` returns its texts. :meth:`end_episode` hands over and
    forgets a slot's :class:`Trajectory`.
    """

    def __init__(
        self,
        lm: LanguageModel,
        *,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_observation_tokens: int | None = None,
        max_context_tokens: int | None = None,
    ):
        if not isinstance(lm, LanguageModel):
            raise ConfigError(
                f"{type(self).__name__} expects lm to be a searchgym LanguageModel (e.g. "
                f"searchgym.lm.registry.load_lm('smollm2')), got {type(lm).__name__}."
            )
        self.lm = lm
        self.max_new_tokens = _positive_int(type(self).__name__, "max_new_tokens", max_new_tokens)
        owner = type(self).__name__
        self.max_observation_tokens = None if max_observation_tokens is None else _positive_int(owner, "max_observation_tokens", max_observation_tokens)
        self.max_context_tokens = None if max_context_tokens is None else _positive_int(owner, "max_context_tokens", max_context_tokens)
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self._calls = 0
        self._calls_lock = threading.Lock()
        self._trajectories: dict[int, Trajectory] = {}

    @abstractmethod
    def act_with_generations(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[Generation | None]]:
        """One turn of text per observation and the :class:`Generation` it came from."""

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[str]:
        return self.act_with_generations(observations, infos)[0]

    # -- token bookkeeping
    def encode(self, text: str) -> tuple[int, ...]:
        return encode_text(self.lm.tokenizer, text)

    def observation_ids(self, text: str) -> tuple[int, ...]:
        """An observation's ids, cut to ``max_observation_tokens`` (as Search-R1 and s3 cut
        theirs at ``max_obs_length``)."""
        ids = self.encode(text)
        return ids if self.max_observation_tokens is None else ids[: self.max_observation_tokens]

    def chat_ids(self, messages: Sequence[Mapping[str, str]]) -> tuple[int, ...]:
        return self.encode(self.lm.apply_chat(messages))

    def end_episode(self, slot: int) -> Trajectory | None:
        return self._trajectories.pop(slot, None)

    def trajectory(self, slot: int) -> Trajectory | None:
        """The live trajectory of ``slot`` (``None`` if it has none)."""
        return self._trajectories.get(slot)

    def _seeds(self, infos: Sequence[Mapping[str, Any]]) -> list[int] | None:
        """One sampling seed per episode of an ``act`` call (``None`` without a seed).

        Under a driver (infos with ``episode_seed`` and ``example_id``), the seed is
        derived from this agent's seed, the role, the question, the episode's seed and
        the turn: an episode draws the same tokens however many others are decoded
        beside it. Otherwise from this agent's seed, the call's number and the position."""
        if self.seed is None:
            return None
        with self._calls_lock:
            call = self._calls
            self._calls += 1
        return [turn_seed(self.seed, info, "call", call, position) for position, info in enumerate(infos)]

    def _generate(self, contexts: Sequence[Sequence[int]], stop: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[Generation]:
        """One generation per context; a context longer than ``max_context_tokens`` gets an
        empty ``prompt_too_long`` one without reaching the model (the driver ends its episode)."""
        seed = self._seeds(infos)
        cap = self.max_context_tokens
        fits = [i for i, c in enumerate(contexts) if cap is None or len(c) <= cap]
        out = [Generation("", (), (), "prompt_too_long")] * len(contexts)
        if fits:
            generations = self.lm.generate(
                [list(contexts[i]) for i in fits],
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                stop=stop,
                seed=None if seed is None else [seed[i] for i in fits],
            )
            for i, g in zip(fits, generations):
                out[i] = g
        return out


class LMAgent(LMTurnAgent):
    """The policy LM plays the protocol: the env's prompt, then one generation per turn.

    Args:
        lm: The policy model.
        protocol: The env's protocol (name or instance); :meth:`for_env` reads it.
        max_new_tokens: Most tokens per turn (a turn that hits it is cut mid-text; the
            env then usually finds no closing tag and answers with feedback).
        temperature, top_p, seed: Sampling; temperature 0 is greedy. With a seed, each
            episode's turn samples from its own stream (see :meth:`_seeds`), so a
            sampled run is reproducible and independent of how episodes are batched.
        max_observation_tokens: Each observation is cut to this many tokens before the
            model reads it (Search-R1's and s3's ``max_obs_length``); None: whole.
        max_context_tokens: A turn whose context (prompt, turns, observations) is longer
            ends its episode as ``prompt_too_long`` (Search-R1's ``max_prompt_length``,
            which instead drops the oldest tokens: here the record must be what the model
            read); None: only the model's own window.
        chat: Whether to format the prompt with the model's chat template (the env's
            ``info["prompt_messages"]``); ``None`` follows the protocol
            (``Protocol.uses_chat_template``: R1-Searcher's seed feeds raw text).

    Generation stops at the protocol's stop strings (e.g. ``</search>``), so every turn is
    one action; observations are tokenized and appended without a new chat turn, as in
    the original repositories.
    """

    name = "lm"
    #: Protocol names this family plays; ``None``: any.
    protocols: ClassVar[tuple[str, ...] | None] = None

    def __init__(
        self,
        lm: LanguageModel,
        protocol: str | Protocol = "search_r1",
        *,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        chat: bool | None = None,
        max_observation_tokens: int | None = None,
        max_context_tokens: int | None = None,
    ):
        super().__init__(
            lm, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed,
            max_observation_tokens=max_observation_tokens, max_context_tokens=max_context_tokens,
        )
        self.protocol = make_protocol(protocol)
        if self.protocols is not None and self.protocol.name not in self.protocols:
            raise ConfigError(
                f"{type(self).__name__} plays the {', '.join(self.protocols)} protocol(s), got "
                f"{self.protocol.name!r}. Use {_family_for(self.protocol.name)} for that env."
            )
        self.chat = self.protocol.uses_chat_template if chat is None else bool(chat)

    @classmethod
    def for_env(cls, env: Any, lm: LanguageModel, **options: Any) -> LMAgent:
        """An agent for the protocol of ``env`` (wrapped or not)."""
        return cls(lm, search_env(env).protocol, **options)

    def act_with_generations(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[Generation | None]]:
        self._check_batch(observations, infos)
        contexts = []
        slots = []
        for position, (observation, info) in enumerate(zip(observations, infos)):
            slot = info.get("slot", position)
            if info.get("turn", 0) == 0:
                self._trajectories[slot] = Trajectory(prompt_ids(self.lm.tokenizer, observation, info, chat=self.chat))
            else:
                trajectory = self._trajectories.get(slot)
                if trajectory is None:
                    raise ConfigError(
                        f"{type(self).__name__}.act got turn {info.get('turn')} of slot {slot} without its first "
                        "turn; feed every episode from its reset observation."
                    )
                trajectory.add_observation(self.observation_ids(observation))
            contexts.append(self._trajectories[slot].context_ids())
            slots.append(slot)
        generations = self._generate(contexts, self.protocol.stop_strings, infos)
        for slot, g in zip(slots, generations):
            self._trajectories[slot].add_generated(g.token_ids, g.logprobs, g.finish_reason)
        return [g.text for g in generations], list(generations)


class EndToEndAgent(LMAgent):
    """Search-R1 / R1-Searcher / RECON: the policy reasons, searches and answers."""

    name = "end-to-end"
    protocols = ("search_r1", "r1_searcher", "recon")


class SearcherAgent(LMAgent):
    """s3: the policy only searches and selects; the env's frozen generator answers."""

    name = "searcher"
    protocols = ("s3",)


class EvidenceAgent(LMAgent):
    """R-Search: the policy searches, writes its evidence and answers; the env's frozen
    reader answers again from that evidence (the evidence reward)."""

    name = "evidence"
    protocols = ("r_search",)


FAMILIES: tuple[type[LMAgent], ...] = (EndToEndAgent, SearcherAgent, EvidenceAgent)


def _family_for(protocol: str) -> str:
    for cls in FAMILIES:
        if protocol in (cls.protocols or ()):
            return cls.__name__
    return "LMAgent"


def policy_agent(env: Any, lm: LanguageModel, **options: Any) -> LMAgent:
    """The agent family that plays the protocol of ``env``."""
    protocol = search_env(env).protocol
    for cls in FAMILIES:
        if protocol.name in (cls.protocols or ()):
            return cls(lm, protocol, **options)
    return LMAgent(lm, protocol, **options)
