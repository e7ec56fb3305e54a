"""A chat model playing a game through its own function calling, over chat completions.

:class:`ChatToolAgent` plays envs made with ``action_format="tools"``: each turn it sends
every live episode's conversation (``info["messages"]``) with the game's tools
(``info["tools"]``) to an OpenAI-compatible ``/chat/completions`` server
(:meth:`searchgym.lm.http.OpenAILM.chat`), and plays the reply's assistant message as the
action. The server's chat template writes the tools into the prompt and its tool parser
(vLLM: ``--enable-auto-tool-choice --tool-call-parser hermes``) reads the calls back, so
the model plays the way it was tuned to call functions; a reply whose calls the server
could not parse arrives as text, which the env reads with its own ``tool_parser``.

It is the agent ``chat-tools`` of ``searchgym bench``: the bench makes that run's env with
``action_format="tools"`` (:attr:`ChatToolAgent.action_format`), on the same questions and
with the same scores as the tag-prompted runs beside it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from searchgym.agents.base import Agent, turn_seed
from searchgym.envs.access import search_env
from searchgym.error import ConfigError
from searchgym.lm.base import Generation


@dataclass
class ChatRecord:
    """One episode as a chat model played it: the conversation (the env's messages and the
    model's last reply) and each turn's token counts as the server gave them (None where
    it gave none).

    ``len(record)`` is what the model read on its last turn plus that turn, by the server's
    count (as ``len`` of a :class:`~searchgym.agents.trajectory.Trajectory` is for a token
    record): the bench's context tokens."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: list[int | None] = field(default_factory=list)
    completion_tokens: list[int | None] = field(default_factory=list)

    @property
    def counted(self) -> bool:
        """Whether the server counted the last turn's tokens."""
        return bool(self.prompt_tokens) and self.prompt_tokens[-1] is not None and self.completion_tokens[-1] is not None

    def __len__(self) -> int:
        return int(self.prompt_tokens[-1] or 0) + int(self.completion_tokens[-1] or 0) if self.prompt_tokens else 0


class ChatToolAgent(Agent):
    """Plays a tools env through a chat-completions server's function calling.

    Args:
        lm: A model with a ``chat`` method: an :class:`~searchgym.lm.http.OpenAILM`
            (``load_lm(name, backend="openai", base_url=...)``).
        max_new_tokens, temperature, top_p: Sampling of each turn (temperature 0: greedy).
        seed: With a seed and a temperature above 0, each episode's turn is sampled with a
            seed derived from it, the question, the episode's seed and the turn (as the LM
            agents do), for servers that honour ``seed``.
        tool_choice: Sent as the request's ``tool_choice`` (None: the server's default,
            ``"auto"``).
        extra_body: More fields of every request, as a mapping or its JSON text (the
            command line), e.g. ``{"chat_template_kwargs": {"enable_thinking": false}}``.
    """

    name = "chat-tools"
    action_format = "tools"

    def __init__(
        self,
        lm: Any,
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        tool_choice: str | Mapping[str, Any] | None = None,
        extra_body: Mapping[str, Any] | str | None = None,
    ):
        if not callable(getattr(lm, "chat", None)):
            raise ConfigError(
                f"ChatToolAgent expects a chat-completions model (searchgym.lm.http.OpenAILM: load_lm(name, backend='openai', "
                f"base_url='http://HOST:PORT/v1'); command line: --backend openai --backend-option base_url=...), got {type(lm).__name__}."
            )
        if isinstance(extra_body, str):
            try:
                extra_body = json.loads(extra_body)
            except ValueError as e:
                raise ConfigError(f"ChatToolAgent expects extra_body to be a JSON object, got {extra_body[:80]!r} ({e}).") from None
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise ConfigError(f"ChatToolAgent expects extra_body to be a mapping of request fields, got {type(extra_body).__name__}.")
        self.lm = lm
        self.max_new_tokens, self.temperature, self.top_p, self.seed = max_new_tokens, temperature, top_p, seed
        self.tool_choice = tool_choice
        self.extra_body = dict(extra_body) if extra_body is not None else None
        self._records: dict[int, ChatRecord] = {}
        self._calls = 0
        self._lock = threading.Lock()

    @classmethod
    def for_env(cls, env: Any, lm: Any, **options: Any) -> ChatToolAgent:
        """The agent for ``env``, which must be played through tool calls."""
        action_format = getattr(search_env(env), "action_format", None)
        if action_format != "tools":
            raise ConfigError(
                f"ChatToolAgent plays envs made with action_format='tools' (gym.make(env_id, action_format='tools')), "
                f"got an env with action_format={action_format!r}."
            )
        return cls(lm, **options)

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[Any]:
        return self.act_with_generations(observations, infos)[0]

    def act_with_generations(
        self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[Any], list[Generation | None]]:
        """One assistant message per episode (the reply to its conversation) and the
        :class:`~searchgym.lm.replies.ChatReply` it came from."""
        self._check_batch(observations, infos)
        for position, info in enumerate(infos):
            if not isinstance(info.get("messages"), Sequence) or not isinstance(info.get("tools"), Sequence):
                raise ConfigError(
                    f"ChatToolAgent plays envs made with action_format='tools', whose info holds 'messages' and 'tools'; "
                    f"the info of episode {position} has {'no messages' if 'messages' not in info else 'no tools'}."
                )
        seeds = self._seeds(infos)
        # One chat call per distinct tool set (one in a benchmark run: every env is the same game).
        groups: dict[str, list[int]] = {}
        for position, info in enumerate(infos):
            groups.setdefault(json.dumps(info["tools"], sort_keys=True, default=str), []).append(position)
        replies: list[Any] = [None] * len(infos)
        for positions in groups.values():
            answered = self.lm.chat(
                [infos[p]["messages"] for p in positions], tools=infos[positions[0]]["tools"], tool_choice=self.tool_choice,
                max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p,
                seed=None if seeds is None else [seeds[p] for p in positions], extra_body=self.extra_body,
            )
            for p, reply in zip(positions, answered):
                replies[p] = reply
        for position, (info, reply) in enumerate(zip(infos, replies)):
            slot = info.get("slot", position)
            record = self._records.get(slot) if info.get("turn", 0) else None
            if record is None:
                record = self._records[slot] = ChatRecord()
            record.messages = [dict(m) for m in info["messages"]] + [dict(reply.message)]
            record.prompt_tokens.append(getattr(reply, "prompt_tokens", None))
            record.completion_tokens.append(getattr(reply, "completion_tokens", None))
        return [dict(reply.message) for reply in replies], replies

    def end_episode(self, slot: int) -> ChatRecord | None:
        """The episode's :class:`ChatRecord` when the server counted its tokens (the driver
        then reports its length as the context tokens), else None (the env's count is
        used); the slot is forgotten either way."""
        record = self._records.pop(slot, None)
        return record if record is not None and record.counted else None

    def _seeds(self, infos: Sequence[Mapping[str, Any]]) -> list[int] | None:
        if self.seed is None or not self.temperature:
            return None
        with self._lock:
            call = self._calls
            self._calls += 1
        return [turn_seed(self.seed, info, "call", call, position) for position, info in enumerate(infos)]
