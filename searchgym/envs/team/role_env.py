"""One role of the multi-agent game as a single-agent Gymnasium env; the other roles are
played by given policies (frozen while this role trains).

``gym.make("searchgym/MultiAgentSummarizer-v0")`` looks to a trainer like any
:class:`~searchgym.envs.single.core.SearchEnv`: text in and out, the role's protocol as
``env.unwrapped.protocol`` (so :func:`searchgym.agents.lm_agents.policy_agent` picks the
agent that plays it), the questions as ``env.unwrapped.examples``, and SearchEnv's info
keys. ``searchgym train --env-id MultiAgentSummarizer-v0`` therefore trains the summarizer
by RL while the searcher and generator stay fixed.

A policy for another role is any of:

- an agent, i.e. an object with ``act(observations, infos) -> actions`` (batched, such as
  every :mod:`searchgym.agents` class; an LM agent's calls are batched across envs by the
  vectorized driver). It reads the role's observation and info as if it played the AEC
  env; its per-episode state is keyed by ``info["slot"]``, unique per env instance;
- a callable ``(observation, info) -> str``;
- a built-in name (:data:`POLICIES`): the searcher's ``"complete"`` keeps the initial
  retrieval and declares its search complete at once (naive RAG through the team), and
  ``"oracle"`` issues a synthwiki question's solution queries in order, keeping every
  window whole, then completes.

A role outside the roster is the environment's component, not a policy: pass
``summarizer="extractive"`` (or ``"llm"``) to condense retrievals, and ``generator=`` (a
callable, ``"gold-span"``, a LanguageModel or a model name) to answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from searchgym.corpora.types import Corpus, QAExample, Retriever
from searchgym.envs.components.model_calls import Play, run_play
from searchgym.envs.protocols import Complete, Protocol, Search
from searchgym.envs.single.spaces import UnicodeText
from searchgym.envs.team.game import TeamGame
from searchgym.envs.team.info import role_info
from searchgym.envs.team.seats import ROLES, check_roster
from searchgym.error import ConfigError, UnknownNameError, check_name

#: Slots of agent policies: unique per env instance, so that envs may share one agent.
_SLOTS = itertools.count(1_000_000)


# ---------------------------------------------------------------- players of the other roles
class _Player:
    """Plays one role of a :class:`TeamGame` for one env."""

    def play(self, game: TeamGame, role: str) -> str:
        raise NotImplementedError

    def end_episode(self) -> None:
        """The episode ended: forget its state."""


class _AgentPlayer(_Player):
    def __init__(self, agent: Any, slot: int):
        self.agent = agent
        self.slot = slot

    def play(self, game: TeamGame, role: str) -> str:
        info = dict(role_info(game, role), slot=self.slot)
        actions = self.agent.act([game.observation(role)], [info])
        if not isinstance(actions, Sequence) or len(actions) != 1:
            raise ConfigError(
                f"The {role} policy {type(self.agent).__name__}.act expects to return one action per observation, "
                f"got {actions!r} for one observation."
            )
        return actions[0]

    def end_episode(self) -> None:
        end = getattr(self.agent, "end_episode", None)
        if callable(end):
            end(self.slot)


class _CallablePlayer(_Player):
    def __init__(self, fn: Callable[[str, dict], str]):
        self.fn = fn

    def play(self, game: TeamGame, role: str) -> str:
        return self.fn(game.observation(role), role_info(game, role))


class CompleteSearcher(_Player):
    """The searcher declares its search complete at once: the team works from the initial
    retrieval (naive top-k for the question)."""

    def play(self, game: TeamGame, role: str) -> str:
        return game.protocols["searcher"].write([Complete()])


class OracleQueriesSearcher(_Player):
    """Issues a synthwiki question's solution queries (``metadata["oracle_queries"]``) in
    order without selecting, so every window reaches the generator whole; then completes.
    Questions without solution queries complete at once."""

    def play(self, game: TeamGame, role: str) -> str:
        queries = list(game.example.metadata.get("oracle_queries", ()))
        turn = game.seats["searcher"].turns
        last_turn = turn + 1 >= game.max_searcher_turns
        protocol = game.protocols["searcher"]
        if turn < len(queries) and not last_turn:
            return protocol.write([Search(queries[turn])])
        return protocol.write([Complete()])


#: Built-in policies by role and name.
POLICIES: dict[str, dict[str, Callable[[], _Player]]] = {
    "searcher": {"complete": CompleteSearcher, "oracle": OracleQueriesSearcher},
    "summarizer": {},
    "generator": {},
}


def make_player(role: str, spec: Any, slot: int) -> _Player:
    """The player of ``role`` described by ``spec`` (see the module docstring)."""
    if isinstance(spec, str):
        if spec not in POLICIES[role]:
            if not POLICIES[role]:
                component = "summarizer='extractive'" if role == "summarizer" else "generator='gold-span' (or a model)"
                raise ConfigError(
                    f"The {role} has no built-in policy names, got {spec!r}. Pass an agent or a callable "
                    f"(observation, info) -> str, or drop {role!r} from roles and set the env component: {component}."
                )
            raise UnknownNameError(f"{role} policy", spec, POLICIES[role])
        return POLICIES[role][spec]()
    if callable(getattr(spec, "act", None)):
        return _AgentPlayer(spec, slot)
    if callable(spec):
        return _CallablePlayer(spec)
    raise ConfigError(
        f"A {role} policy must be an agent (with act(observations, infos)), a callable (observation, info) -> str "
        f"or one of the names {sorted(POLICIES[role]) or '(none for this role)'}, got {type(spec).__name__}."
    )


# ---------------------------------------------------------------- the env
class RoleEnv(gym.Env[str, str]):
    """One role of the multi-agent search game; the other roles are played by policies.

    ## Description
    The team game of :class:`~searchgym.envs.team.multi_agent.SearchTeamEnv` seen by one agent,
    ``role``. Between its turns the env plays the other roster roles with their
    ``policies`` (frozen: nothing here updates them). Used to train one role with the
    single-agent trainer while the others stay fixed.

    ## Action Space
    ``UnicodeText(max_action_chars)``: one turn of the role in its protocol (searcher: s3;
    summarizer: ``<summary>…</summary>``; generator: the answer). Malformed turns are
    counted and penalised, never raised.

    ## Observation Space
    ``UnicodeText(max_observation_chars)``. ``reset`` returns the role's prompt; each
    ``step`` returns what the game appended for the role since its turn (``""`` at the end).

    ## Starting State
    As :class:`~searchgym.envs.single.core.SearchEnv`: a question drawn with the seeded RNG, or
    ``options={"example_index" | "example_id" | "example": ...}``.

    ## Rewards
    The role's reward in the team game: searcher Gain Beyond RAG, summarizer answer score
    minus the context cost, generator answer score; each malformed turn adds
    ``invalid_action_penalty``. Components: ``info["reward_components"]``; every role's
    final reward: ``info["team_rewards"]``.

    ## Episode End
    Terminated when the answer is given. For the searcher, truncated instead when its turn
    budget (``max_searcher_turns``) ended the search (the answer is still scored).

    ## Information
    The role's info of the team game (:class:`~searchgym.envs.team.multi_agent.SearchTeamEnv`),
    which has SearchEnv's keys: ``turn``, ``action_kinds``, ``query``, ``retrieved_ids``,
    ``selected_ids``, ``num_searches``, ``num_invalid``, ``invalid_reason``,
    ``context_chars``, ``context_tokens``, ``action_truncated``, ``observation_truncated``,
    ``forged_env_tags``, ``ignored_chars``, ``example_id``; at reset ``question`` and
    ``prompt_messages``; at the end ``answer``, ``prediction``, ``answers`` and
    ``reward_components``.

    ## Arguments
    - ``role``: the role this env's agent plays (``searcher``, ``summarizer`` or ``generator``).
    - ``policies``: role -> policy for the other roster roles (see the module docstring).
      The searcher's defaults to ``"complete"`` when another role is trained.
    - ``roles``: the roster; default ``role``, the searcher and every role with a policy.
    - Everything else is :class:`~searchgym.envs.team.game.TeamGame`'s (corpus, dataset,
      retriever, ``top_k``, ``max_searcher_turns``, ``summarizer``, ``generator``,
      ``answer_metric``, ``context_cost``, ``invalid_action_penalty``, ...).

    ## Version History
    - v0: initial release.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    def __init__(
        self,
        role: str = "summarizer",
        *,
        policies: Mapping[str, Any] | None = None,
        roles: Sequence[str] | None = None,
        render_mode: str | None = None,
        **options: Any,
    ):
        check_name("role", role, ROLES)
        TeamGame.check_options(options, "RoleEnv")
        if policies is not None and not isinstance(policies, Mapping):
            raise ConfigError(f"RoleEnv expects policies to be a dict role -> policy, got {type(policies).__name__}.")
        policies = dict(policies or {})
        for name in policies:
            check_name("role", name, ROLES)
        if role in policies:
            raise ConfigError(
                f"RoleEnv trains the {role}, so it cannot also have a policy in policies; drop policies[{role!r}] "
                "or train another role."
            )
        if role != "searcher":
            policies.setdefault("searcher", "complete")
        roster = check_roster(roles if roles is not None else [r for r in ROLES if r == role or r in policies])
        if role not in roster:
            raise ConfigError(f"RoleEnv trains the {role}, which must be in roles, got {list(roster)}.")
        for name in policies:
            if name not in roster:
                raise ConfigError(
                    f"RoleEnv got a policy for the {name}, which is not in roles {list(roster)}; add it to roles or drop the policy."
                )
        missing = [r for r in roster if r != role and r not in policies]
        if missing:
            raise ConfigError(
                f"RoleEnv needs a policy for every other role of the roster, missing {missing}; pass policies={{{missing[0]!r}: "
                "<agent or callable>}} or drop it from roles (the env's component plays it then)."
            )
        if render_mode is not None:
            check_name("render mode", render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode
        self.role = role
        self.game = TeamGame(roster, **options)
        self._slot = next(_SLOTS)
        self.players = {r: make_player(r, spec, self._slot) for r, spec in policies.items()}
        self.protocol: Protocol = self.game.protocols[role]
        self.action_space = UnicodeText(self.game.max_action_chars)
        self.observation_space = UnicodeText(self.game.max_observation_chars)

    # What trainers and benchmarks read from SearchEnv.
    @property
    def examples(self) -> list[QAExample]:
        return self.game.examples

    @property
    def example(self) -> QAExample | None:
        return self.game.example

    @property
    def corpus(self) -> Corpus:
        return self.game.corpus

    @property
    def retriever(self) -> Retriever:
        return self.game.retriever

    @retriever.setter
    def retriever(self, value: Retriever) -> None:
        self.game.retriever = value  # e.g. the trainer's timing view of the shared retriever

    @property
    def top_k(self) -> int:
        return self.game.top_k

    @property
    def transcript(self) -> str:
        """The role's whole context so far."""
        return self.game.transcript(self.role) if self.game.example is not None else ""

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        for player in self.players.values():
            player.end_episode()
        self.game.reset(self.game.pick_example(options, self.np_random, strict=True))
        run_play(self._advance())
        return self.game.observation(self.role), role_info(self.game, self.role)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        return run_play(self.play(action))

    def play(self, action: str) -> Play[tuple[str, float, bool, bool, dict]]:
        """:meth:`step` with the model calls of the game's components explicit, for
        :func:`searchgym.envs.step_all` (see :mod:`searchgym.envs.components.model_calls`)."""
        reward = (yield from self.game.play(self.role, action))[self.role]
        reward += yield from self._advance()
        done = self.game.done
        observation = "" if done else self.game.observation(self.role)
        info = role_info(self.game, self.role)
        truncated = done and self.role == "searcher" and self.game.search_truncated
        if self.render_mode == "human":
            print(self.render())
        return observation, float(reward), done and not truncated, truncated, info

    def _advance(self) -> Play[float]:
        """Play the other roles until it is this role's turn or the episode is over; the
        reward this role got meanwhile."""
        reward = 0.0
        while not self.game.done and self.game.current != self.role:
            role = self.game.current
            reward += (yield from self.game.play(role, self.players[role].play(self.game, role)))[self.role]
        if self.game.done:
            for player in self.players.values():
                player.end_episode()
        return reward

    def render(self) -> str | None:
        if self.render_mode is None or self.game.example is None:
            return None
        return self.transcript
