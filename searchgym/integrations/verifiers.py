"""Any searchgym env as a verifiers 0.4.0 environment: ``vf-eval searchgym-verifiers``.

verifiers 0.4.0 (``verifiers.v1``) finds an environment by its taskset id: the installed
module of that name (``-`` read as ``_``) exporting one ``Taskset`` subclass through
``__all__``, and, when it exports one, its own ``Harness`` (the agent program). The
module ``searchgym_verifiers`` re-exports the three classes here:

- :class:`SearchGymTaskset` (config :class:`SearchGymConfig`, ``--env.taskset.*``): one
  task per question of the env's split; ``env_id`` is any id ``gym.make`` takes (the five
  systems, the methods, ``DeepResearch-v0``, a user's ``module:Env-v0``), ``env_kwargs``
  its ``gym.make`` arguments (user pieces as ``module:attr`` strings), ``imports`` modules
  to import first (a user's registry), ``action_format`` tags or tools.
- :class:`SearchGymHarness`: the game's loop, run in-process (verifiers allows a harness
  that sends every model call through the rollout's interception ``endpoint``, which
  records the trace). Tools: searchgym's :class:`~searchgym.agents.chat_tools.ChatToolAgent`
  plays the env's own ``info["messages"]`` and ``info["tools"]``, as ``searchgym bench``'s
  ``chat-tools`` run does; tags: the prompt is a user message, each reply is the turn's
  text, each observation the next user message.
- The episode's return is the trace's reward (``searchgym_return``, weight 1); each reward
  component rides along as ``searchgym/<name>`` with weight 0 (in the results, not in the
  total) and EM, F1, searches and turns as metrics; ``trace.info["searchgym_episode"]``
  holds the episode's summary.

The game stays in the env: budgets, penalties, grounding and the recipe are its own.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import verifiers.v1 as vf
from pydantic import Field, field_validator
from verifiers.v1.runtimes import ProgramResult

from searchgym.agents.base import Agent
from searchgym.error import ConfigError

__all__ = ["SearchGymConfig", "SearchGymData", "SearchGymEnv", "SearchGymEnvConfig", "SearchGymHarness", "SearchGymHarnessConfig", "SearchGymTask", "SearchGymTaskset"]


class SearchGymConfig(vf.TasksetConfig):
    """Which searchgym game and which questions: ``--env.taskset.<field>`` on ``vf-eval``."""

    env_id: str = "searchgym/SearchR1-v0"
    """A registered id (``SearchR1-v0`` or ``searchgym/SearchR1-v0``), or a user's ``module:Env-v0``."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """``gym.make`` arguments (JSON on the command line); user pieces as ``module:attr`` strings."""
    split: str = "dev"
    """The dataset split whose questions are the tasks."""
    action_format: Literal["tags", "tools"] | None = None
    """``tags`` or ``tools``; unset keeps the id's own (tags, DeepResearch-v0: tools)."""
    imports: list[str] = Field(default_factory=list)
    """Modules imported before the env is made (a user's ``register`` calls, recipes, protocols)."""
    max_new_tokens: int = 512
    """Tokens per reply asked of the server (``max_tokens``)."""

    @field_validator("env_kwargs", mode="before")
    @classmethod
    def _json_text(cls, value: Any) -> Any:
        """``--env.taskset.env-kwargs '{"top_k": 1}'``: JSON text on the command line."""
        if isinstance(value, str):
            import json

            try:
                return json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"env_kwargs expects a JSON object, got {value!r} ({e.msg})") from e
        return value


class SearchGymData(vf.TaskData):
    """One question: the game to make and the question's id in its split."""

    env_id: str
    env_kwargs: dict[str, Any]
    split: str
    action_format: Literal["tags", "tools"] | None
    imports: list[str]
    example_id: str
    max_new_tokens: int


class SearchGymTask(vf.Task[SearchGymData, vf.State, vf.TaskConfig]):
    """The rewards are recorded by :class:`SearchGymHarness` as the episode ends."""

    @property
    def key(self) -> str:
        return f"{self.data.env_id}/{self.data.split}/{self.data.example_id}"


_FREE_ENVS: dict[str, list[Any]] = {}
_LOCK = threading.Lock()


def _key(env_id: str, env_kwargs: Mapping[str, Any], split: str, action_format: str | None, imports: Sequence[str]) -> str:
    return json.dumps([env_id, dict(env_kwargs), split, action_format, list(imports)], sort_keys=True, default=str)


def make_env(env_id: str, env_kwargs: Mapping[str, Any], *, split: str, action_format: str | None = None, imports: Sequence[str] = ()) -> Any:
    """A searchgym env for these settings: a free one made earlier in this process (rollouts
    run concurrently, one env each; :func:`release_env` gives it back), else a new one."""
    import gymnasium as gym

    import searchgym  # noqa: F401  (registers the ids)
    from searchgym.envs.registration import full_env_id
    from searchgym.plugins import import_modules

    import_modules(imports)
    with _LOCK:
        free = _FREE_ENVS.get(_key(env_id, env_kwargs, split, action_format, imports))
        if free:
            return free.pop()
    options = {**dict(env_kwargs), "split": split}
    if action_format is not None:
        options["action_format"] = action_format
    return gym.make(full_env_id(env_id), **options)


def release_env(env: Any, env_id: str, env_kwargs: Mapping[str, Any], *, split: str, action_format: str | None = None, imports: Sequence[str] = ()) -> None:
    with _LOCK:
        _FREE_ENVS.setdefault(_key(env_id, env_kwargs, split, action_format, imports), []).append(env)


class SearchGymTaskset(vf.Taskset[SearchGymTask, SearchGymConfig]):
    """One task per question of ``split`` (``--select.limit N`` takes the first N)."""

    def load(self):
        from searchgym.envs.access import search_env

        config = self.config
        env = make_env(config.env_id, config.env_kwargs, split=config.split, action_format=config.action_format, imports=config.imports)
        examples = search_env(env).examples
        release_env(env, config.env_id, config.env_kwargs, split=config.split, action_format=config.action_format, imports=config.imports)
        for example in examples:
            yield SearchGymTask(
                SearchGymData(
                    id=example.id, name=example.id, prompt=example.question, env_id=config.env_id,
                    env_kwargs=dict(config.env_kwargs), split=config.split, action_format=config.action_format,
                    imports=list(config.imports), example_id=example.id, max_new_tokens=config.max_new_tokens,
                ),
                config.task,
            )


class SearchGymHarnessConfig(vf.HarnessConfig):
    pass


class SearchGymEnvConfig(vf.SingleAgentEnvConfig):
    """verifiers' single-agent env, its seat on the host: the harness runs in-process and
    runs no program, so it needs no sandbox (verifiers' default runtime is a remote one)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class SearchGymEnv(vf.SingleAgentEnv, vf.Env[SearchGymEnvConfig]):
    """One seat playing the taskset, as verifiers' ``SingleAgentEnv``."""


def play(env: Any, lm: Any, example_id: str, *, max_new_tokens: int = 512) -> Any:
    """Play ``example_id`` in ``env`` with the chat model ``lm`` (an ``OpenAILM``); its
    :class:`~searchgym.agents.driver.EpisodeResult`. A tools env plays through
    ``ChatToolAgent`` (the bench's ``chat-tools``), a tags env through :class:`ChatTagAgent`."""
    from searchgym.agents import Task, run_episodes
    from searchgym.agents.chat_tools import ChatToolAgent
    from searchgym.envs.access import search_env

    if getattr(search_env(env), "action_format", "tags") == "tools":
        agent = ChatToolAgent.for_env(env, lm, max_new_tokens=max_new_tokens)
    else:
        agent = ChatTagAgent(lm, max_new_tokens=max_new_tokens)
    (result,) = run_episodes([env], agent, [Task(example_id)])
    return result


class ChatTagAgent(Agent):
    """A tag game through a chat model: the prompt is the first user message, each reply
    the turn's text, each observation the next user message."""

    name = "chat-tags"

    def __init__(self, lm: Any, *, max_new_tokens: int = 512):
        self.lm, self.max_new_tokens = lm, max_new_tokens
        self.conversations: dict[int, list[dict[str, Any]]] = {}

    def end_episode(self, slot: int) -> None:
        self.conversations.pop(slot, None)

    def act(self, observations, infos):
        conversations = []
        for position, (observation, info) in enumerate(zip(observations, infos)):
            slot = info.get("slot", position)
            if info.get("turn", 0) == 0:
                self.conversations[slot] = []
            conversation = self.conversations[slot]
            conversation.append({"role": "user", "content": observation})
            conversations.append(conversation)
        replies = self.lm.chat(conversations, max_new_tokens=self.max_new_tokens)
        texts = []
        for conversation, reply in zip(conversations, replies):
            text = reply.text or ""
            conversation.append({"role": "assistant", "content": text})
            texts.append(text)
        return texts


class SearchGymHarness(vf.Harness[SearchGymHarnessConfig]):
    """The game's loop, in-process: every model call goes to the rollout's interception
    ``endpoint`` (so verifiers records it), every turn is the env's ``step``."""

    APPENDS_SYSTEM_PROMPT = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, tool_interception_url=None) -> ProgramResult:
        from searchgym.lm.http import OpenAILM

        task = trace.task.data if isinstance(getattr(trace.task, "data", None), SearchGymData) else data
        if not isinstance(task, SearchGymData):
            raise ConfigError(f"SearchGymHarness plays searchgym tasks (SearchGymTaskset), got {type(task).__name__}.")
        env = make_env(task.env_id, task.env_kwargs, split=task.split, action_format=task.action_format, imports=task.imports)
        lm = OpenAILM(ctx.model, base_url=endpoint, api_key=secret, tokenizer=None, max_retries=0)
        try:
            result = await asyncio.to_thread(play, env, lm, task.example_id, max_new_tokens=task.max_new_tokens)
        finally:
            release_env(env, task.env_id, task.env_kwargs, split=task.split, action_format=task.action_format, imports=task.imports)
        if result.outcome in ("backend_error", "error", "prompt_too_long"):
            # Not a score: verifiers records the rollout as failed, with the cause.
            raise vf.HarnessError(f"searchgym episode {task.example_id} could not be played ({result.outcome}): {result.error}")
        record(trace, result)
        return ProgramResult(exit_code=0, stdout="", stderr="")


def record(trace: Any, result: Any) -> None:
    """The episode's return as the trace's reward, its components (weight 0) and metrics beside it."""
    trace.record_reward("searchgym_return", float(result.reward), 1.0)
    for name, value in sorted(result.reward_components.items()):
        trace.record_reward(f"searchgym/{name}", float(value), 0.0)
    for name in ("em", "f1", "num_searches", "num_turns", "num_invalid"):
        if hasattr(result, name):
            trace.record_metric(name, float(getattr(result, name)))
    trace.info["searchgym_episode"] = {
        "example_id": result.example_id, "prediction": result.prediction, "reward": float(result.reward),
        "reward_components": {k: float(v) for k, v in result.reward_components.items()}, "outcome": result.outcome,
    }
