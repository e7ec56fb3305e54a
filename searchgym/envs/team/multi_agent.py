"""The multi-agent search env for PettingZoo: searcher, summarizer and generator as agents.

Exposed the way PettingZoo's own environments are: this module has ``env()`` (the AEC env
behind PettingZoo's order-enforcing wrapper), ``raw_env()`` (the bare
:class:`SearchTeamEnv`) and ``parallel_env()`` (:class:`SearchTeamParallelEnv`); both
classes carry ``metadata["name"] == "search_team_v0"``, and
:data:`searchgym.envs.registration.MULTI_AGENT_ENVS` maps that name to this module
(``make_multi_agent("search_team_v0", parallel=True, **options)``).

The game itself lives in :mod:`searchgym.envs.team.game`; this module only adds the
PettingZoo APIs. Requires the ``multiagent`` extra (``pip install -e '.[multiagent]'`` in the checkout).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gymnasium.utils import seeding

from searchgym.envs.components.model_calls import Play, run_play
from searchgym.envs.single.spaces import TextObservation, UnicodeText
from searchgym.envs.team.game import TeamGame
from searchgym.envs.team.info import role_info
from searchgym.envs.team.seats import ROLES
from searchgym.error import ConfigError, SearchGymError, UnknownNameError, check_name, require

_pettingzoo = require("pettingzoo", extra="multiagent", feature="The PettingZoo multi-agent env")
from pettingzoo import AECEnv, ParallelEnv  # noqa: E402
from pettingzoo.utils import wrappers  # noqa: E402

NAME = "search_team_v0"
METADATA = {"name": NAME, "render_modes": ["ansi", "human"], "render_fps": 1, "is_parallelizable": False}


class _TeamShell:
    """What the AEC and parallel forms share: the game, the spaces, seeding, rendering."""

    metadata = METADATA

    def _build(self, roles: Sequence[str], render_mode: str | None, options: Mapping[str, Any]) -> None:
        TeamGame.check_options(options, type(self).__name__)
        if render_mode is not None:
            check_name("render mode", render_mode, METADATA["render_modes"])
        self.render_mode = render_mode
        self.game = TeamGame(roles, **options)
        self.possible_agents = list(self.game.roles)
        # One space object per agent, so that seeding one agent's space leaves the others alone.
        self._action_spaces = {a: UnicodeText(self.game.max_action_chars) for a in self.possible_agents}
        self._observation_spaces = {a: UnicodeText(self.game.max_observation_chars) for a in self.possible_agents}
        self._np_random, self._np_random_seed = seeding.np_random(None)

    def observation_space(self, agent: str) -> UnicodeText:
        return self._observation_spaces[self._known(agent)]

    def action_space(self, agent: str) -> UnicodeText:
        return self._action_spaces[self._known(agent)]

    def _known(self, agent: str) -> str:
        if agent not in self._action_spaces:
            raise UnknownNameError("agent", agent, self.possible_agents)
        return agent

    def _start(self, seed: int | None, options: dict[str, Any] | None) -> None:
        if seed is not None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        self.game.reset(self.game.pick_example(options, self._np_random, strict=False))

    def transcript(self, agent: str) -> str:
        """Everything ``agent`` has read and written this episode, then what it has not read yet."""
        return self.game.transcript(self._known(agent))

    def render(self) -> str | None:
        if self.render_mode is None or self.game.example is None:
            return None
        text = "\n".join(f"===== {a} =====\n{self.game.transcript(a)}" for a in self.possible_agents)
        if self.render_mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        pass


class SearchTeamEnv(_TeamShell, AECEnv):
    """Search-augmented question answering by a team of agents (PettingZoo AEC).

    ## Description
    A team answers one question. The ``searcher`` plays s3's protocol: it reads the top
    documents for the question, issues ``<query>`` searches, keeps documents with
    ``<important_info>[1, 3]</important_info>`` and ends with
    ``<search_complete>True</search_complete>``. The ``summarizer`` condenses every
    retrieval (the initial one included) into ``<summary>…</summary>`` before the searcher
    reads it. The ``generator`` answers from the documents the searcher kept (with s3's
    rule, also every window it never annotated). Agents take turns as the game requires:
    ``[summarizer] searcher ([summarizer] searcher)* generator``; ``agent_selection``
    names whose turn it is.

    ## Agents
    ``possible_agents`` is the roster ``roles`` in the order searcher, summarizer,
    generator. Every roster holds the searcher. Without a summarizer agent, retrievals
    pass through raw (or the ``summarizer=`` component condenses them); without a
    generator agent, the frozen ``generator=`` (default ``"gold-span"``) answers.

    ## Action Space
    ``UnicodeText(max_action_chars)`` per agent: one turn, any string. A malformed turn
    (no query and no true search complete; an empty summary or answer; environment-owned
    tags written by the agent) is part of the game: it is counted (``info["num_invalid"]``,
    ``info["invalid_reason"]``) and adds ``invalid_action_penalty`` to that agent's reward.
    The searcher gets s3's feedback and plays again; an empty summary passes the raw
    documents on; an empty answer scores 0.

    ## Observation Space
    ``UnicodeText(max_observation_chars)`` per agent. ``observe(agent)`` is the text that
    agent has not read yet: its prompt before its first turn, afterwards what the game
    appended since its last turn (the next retrieval or summary, feedback). Each agent's
    whole context is ``transcript(agent)``. Prompts: the searcher's is s3's, with the
    initial documents (or their summary); the summarizer's is
    :data:`~searchgym.envs.team.protocol.SUMMARIZER_INSTRUCTIONS` with the question, then
    each retrieval as a query and a ``<documents>`` block; the generator's is s3's
    generator prompt. ``infos[agent]["prompt_messages"]`` holds the prompt as chat
    messages before the agent's first turn.

    ## Starting State
    A question drawn with the env's seeded RNG, or chosen by ``options={"example_index":
    i}``, ``{"example_id": id}`` or ``{"example": QAExample}`` (other keys are ignored with
    a warning). The initial retrieval for the question is made at reset.

    ## Rewards
    At the end of the episode, for the agents in the roster:

    - ``generator``: the answer score of its answer (``answer_metric``, s3's GenAcc by default);
    - ``searcher``: Gain Beyond RAG, GenAcc of the answer minus GenAcc of the frozen
      generator answering from the naive top-``initial_top_k`` documents (cached per question);
    - ``summarizer``: the answer score minus ``context_cost`` times the tokens it put into
      the context (its summaries, or the raw documents where its summary was empty).

    Each malformed turn adds ``invalid_action_penalty`` (default -0.1) at once.

    ## Episode End
    When the answer is given (by the generator agent, or by the frozen generator when the
    search ends), every agent is terminated. The search ends when the searcher declares it
    complete or after ``max_searcher_turns`` turns (``infos[a]["search_truncated"]``).

    ## Information
    ``infos[agent]``: ``example_id``, ``question``, ``acting`` (its turn now), ``turn`` (its
    turns so far), ``action_kinds``, ``query``, ``invalid_reason``, ``action_truncated``,
    ``forged_env_tags``, ``ignored_chars`` (of its last turn), ``retrieved_ids`` (searcher:
    the documents of its latest window, numbered from 1; summarizer: the retrieval to
    condense; generator: its documents), ``selected_ids``, ``num_searches``, ``num_invalid``,
    ``context_chars``, ``context_tokens``, ``summary_tokens``, ``observation_truncated``;
    before its first turn ``prompt_messages``; at the end ``answer`` (the generator
    agent's), ``prediction`` (the answer scored), ``answers`` (gold), ``reward_components``
    (its own), ``team_rewards``, ``search_truncated`` and ``context_ids``.

    ## Arguments
    ``roles`` (default all three) and ``render_mode`` (``"ansi"``, ``"human"``); every other
    argument is :class:`~searchgym.envs.team.game.TeamGame`'s: corpus, dataset, split,
    retriever and their options, ``top_k``, ``initial_top_k``, ``max_searcher_turns``,
    ``max_searches``, ``summarizer``, ``generator``, ``judge``, ``answer_metric``,
    ``context_cost``, ``invalid_action_penalty``, ``max_action_chars``,
    ``max_observation_chars``, ``token_counter``.

    ## Version History
    - v0: initial release.
    """

    def __init__(self, roles: Sequence[str] = ROLES, *, render_mode: str | None = None, **options: Any):
        super().__init__()
        self._build(roles, render_mode, options)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._start(seed, options)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: role_info(self.game, a) for a in self.agents}
        self.agent_selection = self.game.current

    def observe(self, agent: str) -> TextObservation:
        return TextObservation(self.game.observation(self._known(agent)))

    def step(self, action: Any) -> None:
        run_play(self.play(action))

    def play(self, action: Any) -> Play[None]:
        """:meth:`step` with its model calls explicit, for the driver that steps many team
        envs together (see :mod:`searchgym.envs.components.model_calls`)."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        rewards = yield from self.game.play(agent, action)  # raises on a non-text action before changing anything
        self._cumulative_rewards[agent] = 0.0
        self.rewards = {a: float(rewards.get(a, 0.0)) for a in self.agents}
        self.infos = {a: role_info(self.game, a) for a in self.agents}
        if self.game.done:
            self.terminations = dict.fromkeys(self.agents, True)
        else:
            self.agent_selection = self.game.current
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()


class SearchTeamParallelEnv(_TeamShell, ParallelEnv):
    """The same game as :class:`SearchTeamEnv` through PettingZoo's parallel API.

    The game is turn-based, so a parallel step plays one turn: every live agent may send
    an action, and only the action of the agent whose turn it is is played (the one with
    ``infos[agent]["acting"]``; the others are ignored and may be ``None`` or missing).
    ``observations[agent]`` is, as in the AEC form, the text that agent has not read yet,
    so an agent reads it when it acts. All agents stay live until the answer is given,
    then all terminate together. Rewards, infos and arguments are :class:`SearchTeamEnv`'s.
    (PettingZoo's ``aec_to_parallel`` needs agents that act in a fixed cycle, which this
    game does not have, hence a native parallel form.)
    """

    def __init__(self, roles: Sequence[str] = ROLES, *, render_mode: str | None = None, **options: Any):
        self._build(roles, render_mode, options)
        self.agents: list[str] = []

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, TextObservation], dict[str, dict]]:
        self._start(seed, options)
        self.agents = list(self.possible_agents)
        return self._observations(), {a: role_info(self.game, a) for a in self.agents}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise SearchGymError("SearchTeamParallelEnv.step() was called on a finished episode; call reset() first.")
        if not isinstance(actions, Mapping):
            raise ConfigError(f"SearchTeamParallelEnv.step expects a dict of actions by agent name, got {type(actions).__name__}.")
        acting = self.game.current
        if acting not in actions:
            raise ConfigError(
                f"SearchTeamParallelEnv.step expects an action for the {acting!r} agent (whose turn it is, "
                f"infos[{acting!r}]['acting']), got actions for {sorted(actions)}."
            )
        rewards = self.game.act(acting, actions[acting])
        observations = self._observations()
        done = self.game.done
        rewards = {a: float(rewards.get(a, 0.0)) for a in self.agents}
        terminations = dict.fromkeys(self.agents, done)
        truncations = dict.fromkeys(self.agents, False)
        infos = {a: role_info(self.game, a) for a in self.agents}
        if done:
            self.agents = []
        if self.render_mode == "human":
            self.render()
        return observations, rewards, terminations, truncations, infos

    def _observations(self) -> dict[str, TextObservation]:
        return {a: TextObservation(self.game.observation(a)) for a in self.agents}


def raw_env(roles: Sequence[str] = ROLES, **options: Any) -> SearchTeamEnv:
    """The bare AEC env (see :class:`SearchTeamEnv` for the arguments)."""
    return SearchTeamEnv(roles, **options)


def env(roles: Sequence[str] = ROLES, **options: Any) -> AECEnv:
    """The AEC env behind PettingZoo's order-enforcing wrapper (step or observe before
    reset raises), as PettingZoo's own ``env()`` constructors return it."""
    return wrappers.OrderEnforcingWrapper(raw_env(roles, **options))


def parallel_env(roles: Sequence[str] = ROLES, **options: Any) -> SearchTeamParallelEnv:
    """The parallel form (see :class:`SearchTeamParallelEnv`)."""
    return SearchTeamParallelEnv(roles, **options)


__all__ = ["METADATA", "NAME", "ROLES", "SearchTeamEnv", "SearchTeamParallelEnv", "env", "parallel_env", "raw_env"]
