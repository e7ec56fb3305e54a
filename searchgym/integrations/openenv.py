"""Any searchgym env as an OpenEnv 0.10.0 environment, over OpenEnv's HTTP/WebSocket server.

OpenEnv's server wraps an ``Environment`` (``reset`` / ``step`` / ``state``) with typed
pydantic ``Action`` / ``Observation`` / ``State`` models; its ``EnvClient`` steps it over a
WebSocket session (one env instance per session). Here:

- :class:`SearchGymAction`: one turn, ``text`` (tag text, or raw hermes text the tools env's
  parser reads) or ``message`` (an assistant message with ``tool_calls``, tools envs);
- :class:`SearchGymObservation`: the env's observation ``text``; for a tools env the
  ``messages`` the turn added and the game's ``tools``; the step's ``reward`` and ``done``;
  ``reward_components`` once the episode ends; ``metadata`` the env's counts;
- :class:`SearchGymState`: the episode (id, question id, turns, searches, return so far);
- :class:`SearchGymEnvironment`: the searchgym env made by ``gym.make(env_id, **env_kwargs)``;
  ``reset(example_id=..., seed=...)`` picks the question;
- :class:`SearchGymClient`: OpenEnv's ``EnvClient`` for these types (``client.step("<search>x</search>")``);
- :func:`create_searchgym_app` and ``python -m searchgym.integrations.openenv --env-id ID``: the server
  (127.0.0.1 by default);
- :func:`trl_environment`: TRL's OpenEnv route, ``GRPOTrainer(environment_factory=trl_environment(url))``:
  each rollout's object holds a client of the served tools env; its methods are the game's tools
  and it scores as :func:`searchgym.integrations.trl.tool_environment` does in-process
  (``unread_calls`` included). An action may also ``end`` the episode (scored as at the env's
  turn budget: a rollout a trainer stopped) or carry an ``unread`` reply (played only when the
  env's tool parser reads a call in it).

The rewards are the env's own step rewards: the same turns give the same return as in-process.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from searchgym.error import ConfigError, SearchGymError
from searchgym.integrations.trl_tools import ToolEnvironment  # no TRL import: the base that unread_calls reads

__all__ = [
    "OpenEnvToolEnvironment", "SearchGymAction", "SearchGymClient", "SearchGymEnvironment", "SearchGymObservation", "SearchGymState",
    "create_searchgym_app", "trl_environment",
]

#: The ``info`` counts an observation carries in its metadata.
_COUNTS = ("turn", "num_searches", "num_invalid", "action_kind", "prediction")


class SearchGymAction(Action):
    """One turn: ``text`` (the protocol's tags, or raw tool-call text) or, for a tools env,
    ``message`` (an assistant message with ``tool_calls``)."""

    text: str = Field(default="", description="The turn's text: tags, or raw tool-call text (hermes)")
    message: dict[str, Any] | None = Field(default=None, description="An assistant message with tool_calls (tools envs)")
    end: bool = Field(default=False, description="End the episode here, scored as at the env's turn budget (a rollout a trainer stopped)")
    unread: bool = Field(default=False, description="Tools envs: play text only if the env's tool parser reads a call in it")


class SearchGymObservation(Observation):
    """What the env showed after a turn (or at reset)."""

    text: str = Field(default="", description="The env's observation text (at reset: the prompt)")
    messages: list[dict[str, Any]] = Field(default_factory=list, description="Tools envs: the messages this step added")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="Tools envs: the game's tools (at reset)")
    reward_components: dict[str, float] = Field(default_factory=dict, description="The recipe's components, once the episode ends")


class SearchGymState(State):
    """The episode: its question and its counts so far."""

    env_id: str = ""
    example_id: str | None = None
    question: str | None = None
    num_searches: int = 0
    episode_return: float = 0.0


class SearchGymEnvironment(Environment[SearchGymAction, SearchGymObservation, SearchGymState]):
    """A searchgym env behind OpenEnv's server: one instance per session."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str = "searchgym/SearchR1-v0", **env_kwargs: Any):
        import gymnasium as gym

        import searchgym  # noqa: F401  (registers the ids)
        from searchgym.envs.registration import full_env_id

        super().__init__()
        self.env_id = full_env_id(env_id)
        self.env = gym.make(self.env_id, **env_kwargs)
        self._state = SearchGymState(env_id=self.env_id)
        self._seen, self._done = 0, False

    def reset(self, seed: int | None = None, episode_id: str | None = None, example_id: str | None = None, **kwargs: Any) -> SearchGymObservation:
        if kwargs:
            raise ConfigError(f"SearchGymEnvironment.reset expects seed, episode_id and example_id, got also {', '.join(sorted(kwargs))}.")
        options = {"example_id": example_id} if example_id is not None else None
        observation, info = self.env.reset(seed=seed, options=options)
        from searchgym.envs.access import search_env

        example = search_env(self.env).example
        self._state = SearchGymState(env_id=self.env_id, episode_id=episode_id, example_id=example.id, question=example.question)
        messages = list(info.get("messages") or [])
        self._seen, self._done = len(messages), False
        return SearchGymObservation(text=str(observation), messages=messages, tools=list(info.get("tools") or []), metadata=_counts(info))

    def step(self, action: SearchGymAction, timeout_s: float | None = None, **kwargs: Any) -> SearchGymObservation:
        from searchgym.envs.access import search_env

        inner = search_env(self.env)
        if action.end or self._done:
            return self._end(inner) if action.end and not self._done else SearchGymObservation(done=self._done, reward=0.0)
        if action.unread:
            from searchgym.envs.tools.messages import safe_parse

            tools = getattr(getattr(inner, "game", None), "tools", None)
            if tools is None or not action.text or not safe_parse(tools.parser, action.text).calls:
                return SearchGymObservation(reward=0.0, done=False)
        turn = action.message if action.message is not None else action.text
        observation, reward, terminated, truncated, info = self.env.step(turn)
        messages = list(info.get("messages") or [])
        added, self._seen = messages[self._seen :], len(messages)
        self._state.step_count += 1
        self._state.num_searches = int(info.get("num_searches", 0))
        self._state.episode_return += float(reward)
        done = self._done = bool(terminated or truncated)
        components = {k: float(v) for k, v in (info.get("reward_components") or {}).items()} if done else {}
        return SearchGymObservation(text=str(observation), messages=_jsonable(added), reward=float(reward), done=done,
                                    reward_components=components, metadata={**_counts(info), "truncated": bool(truncated)})

    def _end(self, inner: Any) -> SearchGymObservation:
        """The episode ended here: the recipe scores the turns so far with no answer, as at the turn budget."""
        result = inner.recipe.score(inner.episode())
        self._done = True
        self._state.episode_return += float(result.total)
        return SearchGymObservation(reward=float(result.total), done=True, reward_components={k: float(v) for k, v in result.components.items()},
                                    metadata={"prediction": result.prediction, "cut": True})

    @property
    def state(self) -> SearchGymState:
        return self._state

    def close(self) -> None:
        self.env.close()


def _counts(info: Mapping[str, Any]) -> dict[str, Any]:
    return {k: info[k] for k in _COUNTS if k in info}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class SearchGymClient(EnvClient[SearchGymAction, SearchGymObservation, SearchGymState]):
    """OpenEnv's client for a served searchgym env. ``step`` takes a :class:`SearchGymAction`,
    a turn's text or an assistant message."""

    def _step_payload(self, action: Any) -> dict[str, Any]:
        if isinstance(action, str):
            action = SearchGymAction(text=action)
        elif isinstance(action, Mapping):
            action = SearchGymAction(message=dict(action))
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[SearchGymObservation]:
        observation = SearchGymObservation(**{**payload.get("observation", {}), "reward": payload.get("reward"), "done": payload.get("done", False)})
        return StepResult(observation=observation, reward=payload.get("reward"), done=bool(payload.get("done", False)))

    def _parse_state(self, payload: dict[str, Any]) -> SearchGymState:
        return SearchGymState(**payload)


def trl_environment(base_url: str) -> Any:
    """A factory for TRL 1.16's ``GRPOTrainer(environment_factory=...)`` over the tools env
    served at ``base_url`` (``--env-options '{"action_format": "tools"}'``): each object opens
    its own WebSocket session (one env on the server) and plays as
    :func:`searchgym.integrations.trl.tool_environment`'s objects play in-process: ``reset(**row)``
    starts the row's ``example_id`` and returns the game's prompt; each tool method is one turn
    of one call; ``get_reward()`` is the episode's return, an episode TRL left open ended as at
    the turn budget; ``unread_calls`` in ``reward_funcs`` plays a last reply whose call TRL could
    not read. Rows: ``searchgym.integrations.trl.tool_dataset`` (same env options)."""
    from searchgym.integrations.trl_tools import tool_method

    probe = SearchGymClient(base_url=base_url).sync()
    with probe:
        tools = list(probe.reset().observation.tools)
    if not tools:
        raise ConfigError(f"trl_environment plays a tools env; the server at {base_url} shows no tools (serve it with "
                          "--env-options '{\"action_format\": \"tools\"}').")
    names = [t["function"]["name"] for t in tools]
    clash = [n for n in names if n.startswith("_") or hasattr(OpenEnvToolEnvironment, n)]
    if clash:
        raise ConfigError(f"trl_environment expects tool names that are not the environment's own methods, got {clash}.")
    cls = type("".join(n.title() for n in names) + "OpenEnvToolEnvironment", (OpenEnvToolEnvironment,),
               {n: tool_method(t) for n, t in zip(names, tools)})

    def make_environment() -> OpenEnvToolEnvironment:
        return cls(base_url)

    return make_environment


class OpenEnvToolEnvironment(ToolEnvironment):
    """The base of :func:`trl_environment`'s objects (a ``ToolEnvironment``, so that
    ``unread_calls`` reads them): a client session instead of an env in-process."""

    def __init__(self, base_url: str):
        super().__init__(f"openenv:{base_url}", {})
        self.base_url = base_url
        self._client: Any = None
        self._return = 0.0
        self._done = False
        self._turns = 0

    def reset(self, **row: Any) -> str:
        from searchgym.integrations.trl_tools import REPLY_RULE, TRL_REPLY_RULE, check_prompt

        example_id = row.get("example_id")
        if not isinstance(example_id, str) or not example_id:
            raise ConfigError(f"{type(self).__name__}.reset expects the row's example_id, got {example_id!r}; build the dataset "
                              "with searchgym.integrations.trl.tool_dataset(env_id, split=...).")
        check_prompt(row.get("prompt"), type(self).__name__)
        if self._client is None:
            self._client = SearchGymClient(base_url=self.base_url).sync()
            self._client.connect()
        result = self._client.reset(example_id=example_id)
        self._return, self._done, self._turns, self._reward, self.calls_after_end = 0.0, False, 0, None, 0
        self.episode = result.observation  # the last observation (TRL's logs read nothing here)
        return result.observation.text.replace(REPLY_RULE, TRL_REPLY_RULE)

    def get_reward(self) -> float:
        if self._client is None:
            raise SearchGymError(f"{type(self).__name__}.get_reward() was called before reset(); there is no episode.")
        if self._reward is None:
            if not self._done:
                self._take(SearchGymAction(end=True))
            self._reward = self._return
        return self._reward

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _take(self, action: SearchGymAction) -> Any:
        result = self._client.step(action)
        self._return += float(result.reward or 0.0)
        self._done = self._done or bool(result.done)
        self.episode = result.observation
        return result

    def _read_reply(self, completion: Any) -> None:
        message = completion[-1] if isinstance(completion, (list, tuple)) and completion else completion
        if isinstance(message, Mapping):
            if message.get("role") != "assistant" or message.get("tool_calls"):
                return
            message = message.get("content")
        if self._client is None or self._done or not isinstance(message, str) or not message:
            return
        if self._reward is not None:
            raise SearchGymError(f"unread_calls read a rollout after {type(self).__name__}.get_reward() scored it; list unread_calls "
                                 "in GRPOTrainer's reward_funcs (TRL adds get_reward after them).")
        self._take(SearchGymAction(text=message, unread=True))

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        from searchgym.integrations.trl_tools import EPISODE_OVER

        if self._client is None:
            raise SearchGymError(f"{type(self).__name__}.{name}() was called before reset(); there is no episode.")
        if self._done:
            self.calls_after_end += 1
            return EPISODE_OVER
        call = {"id": f"call_{self._turns}", "type": "function", "function": {"name": name, "arguments": arguments}}
        self._turns += 1
        result = self._take(SearchGymAction(message={"role": "assistant", "content": "", "tool_calls": [call]}))
        if result.done:
            if result.observation.metadata.get("truncated"):
                return "The turn budget is spent: the episode is over."
            if name == "finish":
                return "Search complete: the generation model answers from the kept documents. The episode is over."
            return "Answer received. The episode is over."
        return "\n\n".join(str(m.get("content")) for m in result.observation.messages if m.get("role") != "assistant")


def create_searchgym_app(env_id: str = "searchgym/SearchR1-v0", *, max_concurrent_envs: int = 8, **env_kwargs: Any) -> Any:
    """OpenEnv's FastAPI app serving ``gym.make(env_id, **env_kwargs)``, one env per session."""
    return create_fastapi_app(
        lambda: SearchGymEnvironment(env_id, **env_kwargs), SearchGymAction, SearchGymObservation,
        max_concurrent_envs=max_concurrent_envs, env_name=env_id.replace("/", "-"), state_cls=SearchGymState,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m searchgym.integrations.openenv", description="Serve a searchgym env as an OpenEnv environment.")
    parser.add_argument("--env-id", default="searchgym/SearchR1-v0", help="env id (default searchgym/SearchR1-v0)")
    parser.add_argument("--env-options", default="{}", help="gym.make arguments as JSON, e.g. '{\"action_format\": \"tools\"}'")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help="import a module first (user pieces)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free one, printed)")
    parser.add_argument("--max-sessions", type=int, default=8, help="concurrent WebSocket sessions (one env each)")
    args = parser.parse_args(argv)
    import socket

    import uvicorn

    from searchgym.plugins import import_modules

    import_modules(args.imports)
    app = create_searchgym_app(args.env_id, max_concurrent_envs=args.max_sessions, **json.loads(args.env_options))
    sock = socket.socket()
    sock.bind((args.host, args.port))
    sock.listen(128)  # connections wait in the backlog until uvicorn serves them
    print(f"http://{args.host}:{sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
