"""Agents for the roles of the multi-agent env, and a runner that plays many team episodes at once.

``team_agents(lm)`` gives one LM agent per role (the searcher plays s3's protocol with a
:class:`~searchgym.agents.lm_agents.SearcherAgent`; the summarizer and the generator play
theirs with an :class:`~searchgym.agents.lm_agents.LMAgent`); any role can instead be
played by a baseline or a scripted callable ``(observation, info) -> str``.

``run_team_episodes(envs, policies, tasks)`` plays PettingZoo AEC envs
(:func:`searchgym.envs.team.multi_agent.env` or ``raw_env``) with the loop that plays
Gymnasium envs, :func:`searchgym.agents.driver.drive`: ``len(envs)`` episodes are live at
once; every round, each role's policy acts once for all the episodes waiting on that role
(one batched ``generate`` for an LM agent), then the envs step together so that the LM
calls of the env's own components (a frozen LM generator, the LLM summarizer component)
are batched too (:func:`searchgym.envs.components.model_calls.play_all`). Failures are outcomes of
one episode, not crashes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from searchgym.agents.base import Agent
from searchgym.agents.driver import check_mode, drive_in_mode
from searchgym.agents.live import LiveEpisode, Task, check_actions
from searchgym.agents.lm_agents import LMAgent, SearcherAgent
from searchgym.envs.access import env_play
from searchgym.envs.components.model_calls import BatchCounts, Play
from searchgym.envs.protocols.s3 import S3Protocol
from searchgym.envs.team.protocol import GeneratorProtocol, SummarizerProtocol
from searchgym.envs.team.seats import ROLES, check_roster
from searchgym.error import ConfigError
from searchgym.lm.base import LanguageModel
from searchgym.rewards.metrics import exact_match, f1_score, span_check

#: Tokens per turn of each role's LM agent unless told otherwise: a searcher reasons and
#: writes a query, a summary is short; the generator gets the budget of the frozen
#: :class:`~searchgym.envs.components.lm_frozen.LMGenerator` behind the naive-RAG baseline, so that
#: Gain Beyond RAG compares answers written under the same limit.
MAX_NEW_TOKENS = {"searcher": 256, "summarizer": 128, "generator": 64}


def team_agents(
    lm: LanguageModel | Mapping[str, LanguageModel],
    roles: Sequence[str] = ROLES,
    *,
    max_new_tokens: int | Mapping[str, int] | None = None,
    **sampling: Any,
) -> dict[str, LMAgent]:
    """One LM agent per role of ``roles``.

    ``lm`` is one model for every role or a dict role -> model; ``max_new_tokens`` one
    budget or a dict role -> budget (default :data:`MAX_NEW_TOKENS`); ``sampling``
    (``temperature``, ``top_p``, ``seed``) goes to every agent.
    """
    roles = check_roster(roles)
    agents: dict[str, LMAgent] = {}
    for role in roles:
        model = lm.get(role) if isinstance(lm, Mapping) else lm
        if model is None:
            raise ConfigError(f"team_agents got a dict of models without one for the {role}; add lm[{role!r}].")
        budget = max_new_tokens.get(role, MAX_NEW_TOKENS[role]) if isinstance(max_new_tokens, Mapping) else (max_new_tokens or MAX_NEW_TOKENS[role])
        if role == "searcher":
            agents[role] = SearcherAgent(model, S3Protocol(), max_new_tokens=budget, **sampling)
        else:
            protocol = SummarizerProtocol() if role == "summarizer" else GeneratorProtocol()
            agents[role] = LMAgent(model, protocol, max_new_tokens=budget, **sampling)
    return agents


class CallableAgent(Agent):
    """A scripted policy ``(observation, info) -> str`` as a batched agent."""

    name = "callable"

    def __init__(self, fn: Callable[[str, Mapping[str, Any]], str]):
        if not callable(fn):
            raise ConfigError(f"CallableAgent expects a callable (observation, info) -> str, got {type(fn).__name__}.")
        self.fn = fn

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[str]:
        return [self.fn(o, i) for o, i in zip(observations, infos)]


@dataclass
class TeamResult:
    """One team episode (plain data; ``to_dict`` is JSON-able).

    ``rewards``: each roster role's summed reward (malformed-turn penalties included);
    ``reward_components``: each role's components at the end; ``prediction``: the answer
    that was scored (the generator agent's, or the frozen generator's); ``em``, ``f1``,
    ``gen_acc`` score it. ``turns``, ``num_invalid`` and ``generated_tokens`` are per role.
    ``wall_time`` is this episode's share of the rounds it was live in.
    ``outcome``: ``finished``, ``prompt_too_long``, ``backend_error`` or ``error``
    (then ``error`` says why). ``trajectories``: each LM role's token record, when kept.
    """

    example_id: str
    seed: int | None
    question: str
    answers: list[str]
    prediction: str | None
    rewards: dict[str, float]
    reward_components: dict[str, dict[str, float]]
    em: float
    f1: float
    gen_acc: float
    turns: dict[str, int]
    num_invalid: dict[str, int]
    num_searches: int
    summary_tokens: int
    search_truncated: bool
    generated_tokens: dict[str, int]
    wall_time: float
    outcome: str
    error: str | None = None
    trajectories: dict[str, Any] | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("trajectories")
        return d


class _ActPolicy(Agent):
    """A policy object with ``act(observations, infos)`` that is not an :class:`Agent`:
    its turns, without generations (no token counts)."""

    def __init__(self, policy: Any):
        self.policy = policy
        self.name = getattr(policy, "name", type(policy).__name__)

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[str]:
        texts = self.policy.act(observations, infos)
        check_actions(self.policy, texts, len(observations))
        return texts

    def end_episode(self, slot: int) -> Any:
        end = getattr(self.policy, "end_episode", None)
        return end(slot) if callable(end) else None


def _as_agent(role: str, policy: Any) -> Agent:
    if isinstance(policy, Agent):
        return policy
    if callable(getattr(policy, "act", None)):
        return _ActPolicy(policy)
    if callable(policy):
        return CallableAgent(policy)
    raise ConfigError(
        f"run_team_episodes expects the {role} policy to be an agent (with act(observations, infos)) or a callable "
        f"(observation, info) -> str, got {type(policy).__name__}."
    )


def run_team_episodes(
    envs: Sequence[Any],
    policies: Mapping[str, Any],
    tasks: Sequence[Task],
    *,
    keep_trajectories: bool = False,
    on_result: Callable[[TeamResult], None] | None = None,
    progress: bool = False,
    batch_counts: BatchCounts | None = None,
    mode: str = "rounds",
    concurrency: int | None = None,
) -> list[TeamResult]:
    """Play every task with ``len(envs)`` team episodes live at once (see the module docstring).

    Args:
        envs: AEC envs of :mod:`searchgym.envs.team.multi_agent` with the same roster, used as slots.
        policies: role -> agent or callable, for every role of the roster.
        tasks: The episodes (question id and reset seed), in order.
        keep_trajectories: Attach each LM role's :class:`~searchgym.agents.trajectory.Trajectory`.
        on_result: Called with each result as soon as its episode ends.
        progress: Show a progress bar.
        batch_counts: A :class:`~searchgym.envs.components.model_calls.BatchCounts` added to with the
            batched model calls of the envs' components.
        mode, concurrency: ``"rounds"`` (default) or ``"async"``, as in
            :func:`~searchgym.agents.driver.run_episodes`.

    Returns:
        One :class:`TeamResult` per task, in task order.
    """
    if not envs:
        raise ConfigError("run_team_episodes expects at least one env, got none.")
    roster = tuple(envs[0].possible_agents)
    if any(tuple(e.possible_agents) != roster for e in envs):
        raise ConfigError("run_team_episodes expects envs with the same roster (possible_agents).")
    missing = [r for r in roster if r not in policies]
    if missing:
        raise ConfigError(f"run_team_episodes expects a policy for every role of the roster {list(roster)}, missing {missing}.")
    extra = sorted(set(policies) - set(roster))
    if extra:
        raise ConfigError(f"run_team_episodes got policies for {extra}, which are not in the envs' roster {list(roster)}.")
    agents = {role: _as_agent(role, policies[role]) for role in roster}
    check_mode(mode, concurrency, "run_team_episodes", list(agents.values()))

    def start(slot: int, task: Task) -> LiveEpisode:
        return _TeamEpisode(envs[slot], task, keep_trajectories)

    return drive_in_mode(
        mode, concurrency, len(envs), agents, tasks, start, on_result=on_result, progress=progress, desc="team episodes",
        batch_counts=batch_counts,
    )


class _TeamEpisode(LiveEpisode):
    """An episode of a PettingZoo AEC team env; the role whose turn it is plays next."""

    def __init__(self, env: Any, task: Task, keep_trajectories: bool):
        self.roster = tuple(env.possible_agents)
        super().__init__(task, self.roster)
        self.env, self.keep_trajectories = env, keep_trajectories
        env.reset(seed=task.seed, options={"example_id": task.example_id})
        self.rewards = dict.fromkeys(self.roster, 0.0)

    def turn(self) -> tuple[str, str, dict[str, Any]]:
        role = self.env.agent_selection
        return role, self.env.observe(role), dict(self.env.infos[role], role=role)

    def play(self, action: str) -> Play[bool]:
        env = self.env
        yield from env_play(env, action)
        for role in self.roster:
            self.rewards[role] += float(env.rewards.get(role, 0.0))
        return all(env.terminations.get(role, False) for role in env.agents)

    def final_info(self, role: str) -> Mapping[str, Any] | None:
        """``role``'s last info, as ``turn`` hands it (so that an LM agent checks the final
        turn of its record, as in a single-agent episode); None if the env kept none."""
        info = self.env.infos.get(role)
        return None if info is None else dict(info, role=role)

    def result(self, outcome: str | None, error: str | None, trajectories: Mapping[str, Any]) -> TeamResult:
        env, game, roster = self.env, self.env.game, self.roster
        info = env.infos[roster[0]] if env.agents else {}
        prediction = info.get("prediction") if outcome is None else None
        answers = list(game.example.answers)
        return TeamResult(
            example_id=self.task.example_id,
            seed=self.task.seed,
            question=game.example.question,
            answers=answers,
            prediction=prediction,
            rewards=dict(self.rewards),
            reward_components={role: dict(env.infos[role].get("reward_components", {})) for role in roster} if env.agents else {},
            em=exact_match(prediction, answers),
            f1=f1_score(prediction, answers),
            gen_acc=span_check(prediction, answers),
            turns={role: game.seats[role].turns for role in roster},
            num_invalid={role: game.seats[role].invalid for role in roster},
            num_searches=game.num_searches,
            summary_tokens=game.summary_tokens,
            search_truncated=bool(game.search_truncated),
            generated_tokens=dict(self.generated),
            wall_time=self.wall,
            outcome=outcome or "finished",
            error=error,
            trajectories={r: t for r, t in trajectories.items() if t is not None} if self.keep_trajectories else None,
        )
