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
  (127.0.0.1 by default).

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

from searchgym.error import ConfigError

__all__ = [
    "SearchGymAction", "SearchGymClient", "SearchGymEnvironment", "SearchGymObservation", "SearchGymState", "create_searchgym_app",
]

#: The ``info`` counts an observation carries in its metadata.
_COUNTS = ("turn", "num_searches", "num_invalid", "action_kind", "prediction")


class SearchGymAction(Action):
    """One turn: ``text`` (the protocol's tags, or raw tool-call text) or, for a tools env,
    ``message`` (an assistant message with ``tool_calls``)."""

    text: str = Field(default="", description="The turn's text: tags, or raw tool-call text (hermes)")
    message: dict[str, Any] | None = Field(default=None, description="An assistant message with tool_calls (tools envs)")


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
        self._seen = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, example_id: str | None = None, **kwargs: Any) -> SearchGymObservation:
        if kwargs:
            raise ConfigError(f"SearchGymEnvironment.reset expects seed, episode_id and example_id, got also {', '.join(sorted(kwargs))}.")
        options = {"example_id": example_id} if example_id is not None else None
        observation, info = self.env.reset(seed=seed, options=options)
        from searchgym.envs.access import search_env

        example = search_env(self.env).example
        self._state = SearchGymState(env_id=self.env_id, episode_id=episode_id, example_id=example.id, question=example.question)
        messages = list(info.get("messages") or [])
        self._seen = len(messages)
        return SearchGymObservation(text=str(observation), messages=messages, tools=list(info.get("tools") or []), metadata=_counts(info))

    def step(self, action: SearchGymAction, timeout_s: float | None = None, **kwargs: Any) -> SearchGymObservation:
        turn = action.message if action.message is not None else action.text
        observation, reward, terminated, truncated, info = self.env.step(turn)
        messages = list(info.get("messages") or [])
        added, self._seen = messages[self._seen :], len(messages)
        self._state.step_count += 1
        self._state.num_searches = int(info.get("num_searches", 0))
        self._state.episode_return += float(reward)
        done = bool(terminated or truncated)
        components = {k: float(v) for k, v in (info.get("reward_components") or {}).items()} if done else {}
        return SearchGymObservation(text=str(observation), messages=_jsonable(added), reward=float(reward), done=done,
                                    reward_components=components, metadata=_counts(info))

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
