"""The driver: many episodes live at once, their LM calls batched.

``run_episodes(envs, agent, tasks)`` plays Gymnasium envs with one agent and
:func:`searchgym.agents.team.run_team_episodes` plays PettingZoo team envs with one policy
per role; both run :func:`drive`. It keeps an episode live in every env (a *slot*) and
plays rounds:

1. each policy plays, in one ``act_with_generations`` call, the turns of every live
   episode waiting on it (an LM agent makes one ``generate`` call for the whole batch
   and returns its generations beside the texts, from which the token counts come);
2. every env steps, together: the model calls of the envs' components (RECON
   summarizer, s3 generator and judge, R-Search reader) are batched too, one ``generate``
   per model and sampling parameters at each point where the steps wait on a model
   (:func:`searchgym.envs.components.model_calls.play_all`; ``batch_counts`` counts them);
3. a finished episode hands over its result, and its slot starts the next task.

The agent sees each info with ``slot`` (the episode's key for that agent) and
``episode_seed`` (the task's reset seed) added; LM agents given a seed derive each turn's
sampling seed from the question, ``episode_seed`` and the turn, so sampled episodes, like
greedy ones, come out as when the tasks are played one at a time, whatever the number of
envs (up to the floating-point rounding of batched products).

That is the default mode, ``"rounds"``: reproducible, and right for a local engine that
decodes one batch at a time. ``mode="async"`` (:mod:`searchgym.agents.async_driver`) is for
backends that serve requests concurrently: each episode's next turn starts when its own
step ends, while searches and env model calls still go out joined.

Failures are outcomes, not crashes: a prompt that no longer fits the model, a backend
that times out or answers garbage, or any error inside one episode's step is recorded
on that episode (``outcome``, ``error``) and the others go on.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from searchgym.agents.async_driver import drive_async
from searchgym.agents.base import Agent
from searchgym.agents.live import LiveEpisode, Task, check_played, describe_error, observe_end, progress_bar
from searchgym.agents.transcript import add_calls, add_documents, prompt_entry, turn_entry
from searchgym.envs.access import env_play, env_reset_play, search_env
from searchgym.envs.components.model_calls import BatchCounts, Play, play_all
from searchgym.error import BackendError, ConfigError
from searchgym.rewards.hedging import hedged
from searchgym.rewards.metrics import cover_exact_match, exact_match, f1_score, span_check
from searchgym.rewards.normalize import normalize_answer_r1searcher

#: Values of :attr:`EpisodeResult.outcome`.
OUTCOMES = ("answered", "completed", "truncated", "prompt_too_long", "backend_error", "error")

#: Raw score of each strict score of :class:`EpisodeResult` (the papers' metrics).
RAW_SCORES = {"f1_raw": "f1", "cover_em_raw": "cover_em", "gen_acc_raw": "gen_acc"}


def answer_scores(
    prediction: str | None, answers: Sequence[str], candidates: Sequence[str] = (), question: str | None = None
) -> dict[str, float]:
    """EM, F1, cover-EM and GenAcc (span check) of ``prediction``, strict (a hedge scores 0:
    :mod:`~searchgym.rewards.hedging`, F1 with its own check) and raw (``*_raw``: the papers'
    metrics). ``question`` lets a sentence restate the question around its answer."""
    raw = {
        "f1": f1_score(prediction, answers),
        "cover_em": cover_exact_match(prediction, answers),
        "gen_acc": span_check(prediction, answers),
    }
    strict = {
        "f1": 0.0 if hedged(prediction, answers, candidates, question=question, check="f1") else raw["f1"],
        "cover_em": 0.0 if hedged(prediction, answers, candidates, normalize_answer_r1searcher, question=question) else raw["cover_em"],
        "gen_acc": 0.0 if hedged(prediction, answers, candidates, question=question) else raw["gen_acc"],
    }
    return {"em": exact_match(prediction, answers), **strict, **{k: raw[v] for k, v in RAW_SCORES.items()}}


#: The role of the one agent of :func:`run_episodes` (the key of its token counts).
AGENT = "agent"


@dataclass
class EpisodeResult:
    """What one episode produced (plain data; ``to_dict`` is JSON-able).

    ``prediction`` is the answer that was scored (the agent's, or for s3 the frozen
    generator's); ``em``/``f1``/``cover_em``/``gen_acc`` score it against ``answers``
    (``gen_acc`` is s3's span check), strictly: a hedged prediction (one naming more than
    one candidate, :mod:`~searchgym.rewards.hedging`) scores 0. ``f1_raw``,
    ``cover_em_raw`` and ``gen_acc_raw`` are the papers' raw metrics of the same prediction
    (EM cannot be hedged). ``context_tokens`` counts the tokens of the agent's
    record when the agent has a model (prompt, every turn and observation: what the model
    read on its last turn plus that turn), else the env's ``context_tokens``. ``wall_time`` is this episode's share
    of the rounds it was live in (``mode="async"``: of the time it was live, each moment
    shared among the episodes live then). ``outcome`` is one of :data:`OUTCOMES`; ``flags`` lists
    what went wrong on the way without ending the episode: ``length`` (a turn hit
    ``max_new_tokens``), ``empty_generation``, ``invalid_turn``, ``observation_truncated``,
    ``render_mismatch`` (tool play: the agent's token record differs from a fresh render
    of the conversation by its chat template; see ``Trajectory.render_mismatch``),
    ``ended_without_call`` (tool play: a reply with no tool call was read as the final
    answer), ``other_grammar_tags`` (tool play: a reply with no call wrote a tag grammar's
    tags, such as ``<search>``).
    ``turn_rewards`` is the env's reward of each step, in order (a recipe's turn rewards,
    invalid-action penalties, the final score on the last step); ``reward`` is their sum.
    A trainer with per-turn credit reads them (``Args.credit="turn"``); records written
    before the field existed load with it empty. ``turns`` is what a person reads of the
    episode (:mod:`~searchgym.agents.transcript`: the prompt, then each turn's text, searches
    with their documents, the env's reply and reward); None for records written before it
    existed and for the team game's episodes.
    """

    example_id: str
    seed: int | None
    question: str
    answers: list[str]
    prediction: str | None
    reward: float
    reward_components: dict[str, float]
    em: float
    f1: float
    cover_em: float
    gen_acc: float
    num_turns: int
    num_searches: int
    num_invalid: int
    context_tokens: int
    generated_tokens: int
    wall_time: float
    outcome: str
    flags: list[str] = field(default_factory=list)
    error: str | None = None
    trajectory: Any = None
    f1_raw: float | None = None
    cover_em_raw: float | None = None
    gen_acc_raw: float | None = None
    turn_rewards: list[float] = field(default_factory=list)
    turns: list[dict[str, Any]] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("trajectory")
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeResult:
        names = {f for f in cls.__dataclass_fields__ if f != "trajectory"}
        # Records written before the raw scores existed hold raw scores only.
        missing = sorted(names - set(d) - {"flags", "error", "turn_rewards", "turns", *RAW_SCORES})
        if missing:
            raise ConfigError(f"EpisodeResult.from_dict expects the keys of EpisodeResult.to_dict(), missing {missing}.")
        return cls(**{k: v for k, v in d.items() if k in names})


def drive(
    num_slots: int,
    policies: Mapping[str, Agent],
    tasks: Sequence[Task],
    start: Callable[[int, Task], LiveEpisode],
    *,
    on_result: Callable[[Any], None] | None = None,
    progress: bool = False,
    desc: str = "episodes",
    batch_counts: BatchCounts | None = None,
) -> list[Any]:
    """Play every task with ``num_slots`` episodes live at once (see the module docstring).

    Args:
        num_slots: Episodes live at once (one per env).
        policies: role -> the agent that plays it.
        tasks: The episodes, in order.
        start: ``start(slot, task)`` resets the env of ``slot`` for ``task`` and returns
            the live episode.
        on_result: Called with each result as soon as its episode ends.
        progress: Show a progress bar over episodes, labelled ``desc``.
        batch_counts: Added to with the batched model calls of the envs' components.

    Returns:
        Each episode's :meth:`LiveEpisode.result`, in task order.
    """
    roles = list(policies)
    results: list[Any] = [None] * len(tasks)
    queue = deque(enumerate(tasks))
    live: dict[int, LiveEpisode] = {}  # slot -> its episode
    task_index: dict[int, int] = {}  # slot -> the index of its episode's task
    bar = progress_bar(len(tasks), progress, desc)
    round_started, round_size = time.perf_counter(), 1

    def seat(slot: int, role: str) -> int:
        # The agent's key for one episode: distinct per (slot, role), so that one agent
        # object may play several roles.
        return slot * len(roles) + roles.index(role)

    def fill() -> None:
        # Every free slot takes the next task; their resets play together (searches batched).
        started = time.perf_counter()
        new = []
        for slot in range(num_slots):
            if queue and slot not in live:
                index, task = queue.popleft()
                live[slot], task_index[slot] = start(slot, task), index
                new.append(slot)
        outcomes = play_all([live[slot].begin() for slot in new], batch_counts)
        for slot in new:
            live[slot].wall = (time.perf_counter() - started) / len(new)
        for slot, outcome in zip(new, outcomes):
            if isinstance(outcome, BackendError):
                finish(slot, "backend_error", str(outcome))
            elif isinstance(outcome, BaseException):
                raise outcome  # a reset that fails for another reason is a setup error (a task not in the env)

    def finish(slot: int, outcome: str | None = None, error: str | None = None) -> None:
        episode = live.pop(slot)
        episode.wall += (time.perf_counter() - round_started) / round_size
        if outcome is None:
            observe_end(policies, episode, lambda role: seat(slot, role))
        trajectories = {role: agent.end_episode(seat(slot, role)) for role, agent in policies.items()}
        results[task_index.pop(slot)] = result = episode.result(outcome, error, trajectories)
        if on_result is not None:
            on_result(result)
        if bar is not None:
            bar.update(1)

    fill()
    rounds = 0
    while live or queue:
        if not live:
            fill()
            continue
        slots = sorted(live)
        round_started, round_size = time.perf_counter(), len(slots)
        rounds += 1
        if bar is not None:  # a round of long LM turns shows that it runs (tokens come from the backend)
            bar.note(round=rounds, live=len(slots))
        turns = {slot: live[slot].turn() for slot in slots}  # slot -> (role, observation, info)

        # 1. Each policy plays the turns of all the episodes waiting on it in one call.
        actions: dict[int, str] = {}
        for role, agent in policies.items():
            waiting = [slot for slot in slots if turns[slot][0] == role]
            if not waiting:
                continue
            observations = [turns[slot][1] for slot in waiting]
            infos = [dict(turns[slot][2], slot=seat(slot, role), episode_seed=live[slot].task.seed) for slot in waiting]
            try:
                played = agent.act_with_generations(observations, infos)
            except BackendError as e:  # the whole call failed: each of its episodes records it
                for slot in waiting:
                    finish(slot, "backend_error", str(e))
                continue
            texts, generations = check_played(agent, played, len(waiting))
            for slot, text, generation in zip(waiting, texts, generations):
                if generation is not None and generation.finish_reason == "error":  # the agent could not play this episode
                    finish(slot, "error", agent.episode_error(seat(slot, role)) or f"the {role} could not play this turn")
                elif live[slot].count(role, generation):
                    actions[slot] = text
                else:
                    finish(slot, "prompt_too_long", f"the {role}'s context no longer fits its model's context window; nothing was generated for this turn")

        # 2. Every env steps; the model calls of their components are batched.
        stepping = sorted(actions)
        outcomes = play_all([live[slot].play(actions[slot]) for slot in stepping], batch_counts)
        for slot, outcome in zip(stepping, outcomes):
            if isinstance(outcome, BackendError):
                finish(slot, "backend_error", str(outcome))
            elif isinstance(outcome, BaseException):
                finish(slot, "error", describe_error(outcome))
            elif outcome:
                finish(slot)

        # 3. The episodes still live take their share of the round; free slots start the next tasks.
        share = (time.perf_counter() - round_started) / round_size
        for episode in live.values():
            episode.wall += share
        fill()
    if bar is not None:
        bar.close()
    return results


# ---------------------------------------------------------------------------- one agent, Gymnasium envs
def run_episodes(
    envs: Sequence[Any],
    agent: Agent,
    tasks: Sequence[Task],
    *,
    on_result: Callable[[EpisodeResult], None] | None = None,
    progress: bool = False,
    desc: str | None = None,
    keep_trajectories: bool = False,
    scheduling: str = "turns",
    batch_counts: BatchCounts | None = None,
    mode: str = "rounds",
    concurrency: int | None = None,
) -> list[EpisodeResult]:
    """Play every task with ``len(envs)`` episodes live at once.

    In rounds (``mode="rounds"``, the default), each round makes one
    ``act_with_generations`` call for the turns of every live episode, then every env
    steps; reproducible, and at temperature 0 equal to playing the tasks one at a time.
    With ``mode="async"`` no episode waits for another's turn
    (:mod:`searchgym.agents.async_driver`): for agents whose model serves concurrent
    requests (an OpenAI-compatible server such as vLLM's).

    Args:
        envs: Environments (``gym.make`` results or :class:`SearchEnv`), used as slots; each
            must hold every task's ``example_id`` in its dataset.
        agent: Plays all live episodes with one ``act_with_generations`` call per round.
        tasks: The episodes, in order.
        on_result: Called with each result as soon as its episode ends (e.g. to append it
            to a file, so an interrupted run can resume).
        progress: Show a progress bar over episodes.
        desc: The progress bar's label.
        keep_trajectories: Attach the agent's token record to each result (LM agents).
        scheduling: ``"turns"``, the only scheduling (see :func:`check_scheduling`).
        batch_counts: A :class:`~searchgym.envs.components.model_calls.BatchCounts` added to with the
            batched model calls of the envs' components (e.g. 16 RECON envs searching in
            the same round make one summarizer call).
        mode: ``"rounds"`` (default) or ``"async"`` (see :func:`check_mode`).
        concurrency: ``mode="async"`` only: most turns in flight at once (default
            ``len(envs)``).

    Returns:
        One :class:`EpisodeResult` per task, in task order.
    """
    if not envs:
        raise ConfigError("run_episodes expects at least one env, got none.")
    if not isinstance(agent, Agent):
        raise ConfigError(f"run_episodes expects an Agent, got {type(agent).__name__}.")
    check_scheduling(scheduling, "run_episodes")
    check_mode(mode, concurrency, "run_episodes", [agent])

    def start(slot: int, task: Task) -> LiveEpisode:
        return _GymEpisode(envs[slot], task, keep_trajectories)

    return drive_in_mode(
        mode, concurrency, len(envs), {AGENT: agent}, tasks, start, on_result=on_result, progress=progress,
        desc=desc or "episodes", batch_counts=batch_counts,
    )


class _GymEpisode(LiveEpisode):
    """An episode of a Gymnasium search env (behind any wrappers) played by one agent."""

    def __init__(self, env: Any, task: Task, keep_trajectory: bool):
        super().__init__(task, (AGENT,))
        self.env, self.keep_trajectory = env, keep_trajectory
        self.reward = 0.0
        self.turn_rewards: list[float] = []  # the env's reward of each step, in order
        self.terminated = False
        self.observation, self.info = "", {}
        self.question, self.answers, self.candidates = "", [], ()  # known once the env is reset
        self.transcript: list[dict[str, Any]] = []  # what a person reads of it (EpisodeResult.turns)

    def begin(self) -> Play[None]:
        env, task = self.env, self.task
        self.observation, self.info = yield from env_reset_play(env, seed=task.seed, options={"example_id": task.example_id})
        example = env.get_wrapper_attr("example")
        self.question, self.answers = example.question, list(example.answers)
        self.candidates = tuple(example.candidates)
        self.transcript = [prompt_entry(self.observation)]

    def turn(self) -> tuple[str, str, dict[str, Any]]:
        return AGENT, self.observation, self.info

    def final_info(self, role: str) -> Mapping[str, Any] | None:
        return self.info

    def play(self, action: str) -> Play[bool]:
        self.observation, reward, self.terminated, truncated, self.info = yield from env_play(self.env, action)
        self.reward += reward
        self.turn_rewards.append(float(reward))
        self.transcript.append(turn_entry(action, self.observation, reward, self.info))
        if self.info.get("invalid_reason"):
            self.flag("invalid_turn")
        if self.info.get("observation_truncated"):
            self.flag("observation_truncated")
        if self.info.get("ended_without_call"):
            self.flag("ended_without_call")
        if self.info.get("tags_without_call"):
            self.flag("other_grammar_tags")
        return bool(self.terminated or truncated)

    def result(self, outcome: str | None, error: str | None, trajectories: Mapping[str, Any]) -> EpisodeResult:
        info, trajectory = self.info, trajectories[AGENT]
        records = trajectory.records() if callable(getattr(trajectory, "records", None)) else [trajectory]
        if any(getattr(t, "render_mismatch", None) for t in records):  # any conversation's record (context rewrites)
            self.flag("render_mismatch")
        prediction = None
        if outcome is None:
            prediction = info.get("prediction")
            if not self.terminated:
                outcome = "truncated"
            else:
                outcome = "completed" if self.env.get_wrapper_attr("protocol").answers_with_generator else "answered"
        answers = self.answers
        return EpisodeResult(
            example_id=self.task.example_id,
            seed=self.task.seed,
            question=self.question,
            answers=answers,
            prediction=prediction,
            reward=float(self.reward),
            reward_components=dict(info.get("reward_components", {})),
            **answer_scores(prediction, answers, self.candidates, self.question),
            num_turns=int(info.get("turn", 0)),
            num_searches=int(info.get("num_searches", 0)),
            num_invalid=int(info.get("num_invalid", 0)),
            # What the model read on its last turn plus that turn, when the agent has one.
            context_tokens=len(trajectory) if trajectory is not None else int(info.get("context_tokens", 0)),
            generated_tokens=self.generated[AGENT],
            wall_time=self.wall,
            outcome=outcome,
            flags=list(self.flags),
            error=error,
            trajectory=trajectory if self.keep_trajectory else None,
            turn_rewards=list(self.turn_rewards),
            turns=self._turns(),
        )

    def _turns(self) -> list[dict[str, Any]]:
        try:
            game = getattr(search_env(self.env), "game", None)  # a role env of the team game has none
        except ConfigError:  # an env of the user's that plays the game without being one: its turns, no documents
            game = None
        # The team game's roles share a TeamGame, which keeps no single record of searches.
        if game is not None and game.example is not None and callable(getattr(game, "record", None)):
            # naive_search=False: reading the record must not search (s3's baseline is not shown)
            record = game.record(naive_search=False)
            add_documents(self.transcript, record.searches)
            add_calls(self.transcript, record, game.protocol)
        return self.transcript


# ---------------------------------------------------------------------------- helpers
#: The drivers of :func:`run_episodes` and :func:`~searchgym.agents.team.run_team_episodes`.
MODES = ("rounds", "async")


def check_mode(mode: str, concurrency: int | None, owner: str, agents: Sequence[Any], field: str = "mode") -> None:
    """``mode`` is ``"rounds"`` (one batched call per turn of every live episode, then every
    env steps: reproducible) or ``"async"`` (each episode's next turn starts when its own
    step ends: for agents whose model serves concurrent requests); ``concurrency``, the
    most turns in flight, is a positive integer and goes with ``"async"`` only. ``field``
    names ``mode`` in the messages (``BenchConfig`` calls it ``driver``)."""
    if mode not in MODES:
        raise ConfigError(f"{owner} expects {field} to be one of {', '.join(map(repr, MODES))}, got {mode!r}.")
    if concurrency is not None:
        if mode != "async":
            raise ConfigError(
                f"{owner} got concurrency={concurrency!r} with {field}={mode!r}; concurrency bounds the turns in flight of {field}='async'."
            )
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"{owner} expects concurrency to be a positive integer, got {concurrency!r}.")
    if mode == "async":
        from searchgym.lm.base import LanguageModel

        for agent in agents:
            lm = getattr(agent, "lm", None)
            if isinstance(lm, LanguageModel) and not lm.concurrent:
                raise ConfigError(
                    f"{owner}(mode='async') plays each episode's turn as a call of its own, for a model that serves "
                    f"concurrent requests (searchgym.lm.vllm_async.AsyncVLLMLM, vLLM's async engine; searchgym.lm.http.OpenAILM "
                    f"against a vLLM or other OpenAI-compatible server); "
                    f"{type(agent).__name__}'s model is a {type(lm).__name__}, which generates one call at a time, so the "
                    "episodes would wait in line. Leave mode out (mode='rounds' batches every live episode's turn in one call)."
                )


def drive_in_mode(mode: str, concurrency: int | None, *args: Any, **kwargs: Any) -> list[Any]:
    """:func:`drive` (``"rounds"``) or :func:`~searchgym.agents.async_driver.drive_async`."""
    if mode == "async":
        return drive_async(*args, concurrency=concurrency, **kwargs)
    return drive(*args, **kwargs)


def check_scheduling(scheduling: str, owner: str) -> None:
    """Episodes are played turn by turn: ``scheduling`` must be ``"turns"``.

    ``"continuous"`` (one shared decode loop for episodes that do not wait for each
    other's turns) was removed: it measured slower than turn by turn.
    """
    if scheduling == "continuous":
        raise ConfigError(
            f"{owner}(scheduling='continuous') was removed: continuous scheduling measured slower than turn by turn "
            "(greedy rollout 37.2 s vs 27.8 s). Leave scheduling (--scheduling) out: episodes are played turn by turn."
        )
    if scheduling != "turns":
        raise ConfigError(f"{owner} expects scheduling='turns' (the only scheduling), got {scheduling!r}.")
