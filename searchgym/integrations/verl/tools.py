"""searchgym's games as tools of verl's own tool agent loop.

verl's ``tool_agent`` loop (``verl.experimental.agent_loop.tool_agent_loop``) renders the
row's prompt with the tools' schemas through the chat template, generates, reads the
model's calls (``rollout.multi_turn.format``, e.g. ``hermes``), runs each call as
``create`` / ``execute`` / ``release`` of the tool it names, appends the results as tool
messages (masked out of the loss) and generates again, until a reply has no call or a
budget runs out. The tools come from a YAML file (``rollout.multi_turn.tool_config_path``,
``tools_search_r1.yaml`` beside this module)::

    tools:
      - class_name: searchgym.integrations.verl.tools.SearchGymTool
        config: {type: native, name: search, env_id: searchgym/SearchR1-v0, env_kwargs: {}}
      - class_name: searchgym.integrations.verl.tools.SearchGymTool
        config: {type: native, name: answer, env_id: searchgym/SearchR1-v0, env_kwargs: {}}

:class:`SearchGymTool` is one tool of a game; its schema is the env's own (``info["tools"]``,
so a ``tool_schema`` in the YAML may be left out, and one that differs is refused). The
tools of one trajectory share one episode: a searchgym env made with
``action_format="tools"``, reset to the row's question, keyed by the trajectory (verl hands
``execute`` the loop's ``agent_data``). The env plays whole turns: at a turn's first
``execute`` the env steps with the turn's assistant message as verl recorded it (its text
and every call verl runs), so a turn's parallel searches are one turn retrieved in one
batch, and turns verl answered alone (a call of a tool the game does not have) are played
first. Each call gets the env's tool message for it; the turn's step reward is the tool
reward of its first call (verl collects them in ``extra_fields["tool_rewards"]``).

verl's loop ends without telling its tools, and verl scores the response afterwards with
a reward function that cannot reach the env. :class:`SearchGymToolAgentLoop` (registered
as ``searchgym_tool_agent``, ``agent_loop_tools.yaml``) is verl's ``ToolAgentLoop``
unchanged, plus the episode's end: it writes the env's prompt for the row's question (the
row's own prompt is replaced, as the ``searchgym`` loop does), and when verl's loop stops
it plays the last reply (a reply without a call is the final answer in the games where
the agent answers, as in the env), ends an episode still open as the env does at its turn
budget, and returns the episode's return as ``reward_score`` (so verl needs no reward
function), with ``reward_extra_info`` like the ``searchgym`` loop's.

verl's hermes reader drops a ``<tool_call>`` block it cannot decode and keeps the text
around it; played as verl recorded it, a malformed call would be no bad call and its
leftover text the final answer. So the loop keeps each turn's generated text (decoded as
verl's reader decodes it) and the env reads the turn's calls from that text with its own
``tool_parser``, as it reads any raw turn: a malformed or cut call is its bad call, and each
call verl runs gets the env's result for the call the env read alike. This holds when
``rollout.multi_turn.format`` and the env's ``tool_parser`` are both ``hermes``; otherwise,
and under verl's plain ``tool_agent`` loop, the env plays verl's messages.

Rows (:func:`~searchgym.integrations.verl.data.tool_rows`, ``prepare --tools``) carry the
game's prompt, ``agent_name: searchgym_tool_agent`` and the question in
``extra_info.tools_kwargs.<tool>.create_kwargs``. Under verl's plain ``tool_agent`` loop
the tools play the same turns, but the last reply and the end of the episode are not
played: the tool rewards hold the step rewards, not the episode's score.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import uuid4

from pydantic import ConfigDict, Field
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import (
    OpenAIFunctionParametersSchema,
    OpenAIFunctionPropertySchema,
    OpenAIFunctionSchema,
    OpenAIFunctionToolSchema,
    ToolResponse,
)

from searchgym.corpora.types import QAExample
from searchgym.error import ConfigError, SearchGymError
from searchgym.integrations.tool_episode import ToolEpisode, TurnResult
from searchgym.integrations.verl.agent_loop import ENV_POOL, plain_config
from searchgym.integrations.verl.data import TOOL_AGENT_NAME, example_from_row

__all__ = ["EPISODES", "SearchGymTool", "SearchGymToolAgentLoop", "game_tools"]

#: End-of-turn markers verl's hermes reader leaves at the end of a turn's text (it decodes
#: with special tokens): ``<|im_end|>``, ``<|eot_id|>``, ``</s>`` and the like.
_END_MARKERS = re.compile(r"(?:\s*(?:<\|[^<>|\s]{1,40}\|>|</s>|<eos>|<end_of_turn>))+\s*\Z")


# --------------------------------------------------------------------------- schemas
class _Property(OpenAIFunctionPropertySchema):
    model_config = ConfigDict(extra="allow")  # keeps an array's "items" (verl's model has no field for it)


class _Parameters(OpenAIFunctionParametersSchema):
    model_config = ConfigDict(extra="allow")  # keeps "additionalProperties": false
    properties: dict[str, _Property]


class _Function(OpenAIFunctionSchema):
    parameters: _Parameters = Field(default_factory=lambda: _Parameters(type="object", properties={}, required=[]))


class _ToolSchema(OpenAIFunctionToolSchema):
    function: _Function


def game_tools(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The tools of ``env_id``'s game (with ``gym.make`` arguments ``env_kwargs``) as OpenAI
    function schemas, read from its protocol without building the env."""
    from searchgym.envs.protocols import Protocol, make_protocol
    from searchgym.envs.registration import ENV_SPECS, full_env_id
    from searchgym.envs.tools.schemas import tool_schemas

    env_id = full_env_id(env_id)
    if env_id not in ENV_SPECS:
        raise ConfigError(f"SearchGymTool expects a single-agent env id (tool calls are played on {', '.join(ENV_SPECS)}), got {env_id}.")
    kwargs = dict(env_kwargs or {})
    protocol = kwargs.get("protocol", ENV_SPECS[env_id]["protocol"])
    if not isinstance(protocol, Protocol):
        protocol = make_protocol(protocol, **dict(kwargs.get("protocol_options") or {}))
    return tool_schemas(protocol)


# --------------------------------------------------------------------------- episodes
class _Episode:
    """The episode of one trajectory: the env's game, the turns of verl's conversation
    played so far and what each call of the latest turn gets back."""

    def __init__(self, env_key: str):
        self.env_key = env_key
        self.lock = asyncio.Lock()
        self.game: ToolEpisode | None = None
        self.played = 0  # assistant turns of the conversation the env has played
        # The text of each turn the model generated, as verl's reader decoded it (kept by
        # SearchGymToolAgentLoop): the env reads its calls itself, so that a call verl's
        # reader drops (an unreadable <tool_call>) is the env's bad call, not a final answer.
        self.texts: list[str] = []
        self.pending: list[tuple[str, Any, str]] = []  # (name, arguments, text) of the latest turn's calls not yet handed out
        self.unpaid = 0.0  # step rewards not yet returned as a tool reward

    def start(self, env: Any, example: QAExample) -> list[dict[str, Any]]:
        """Reset the game to ``example``; the prompt messages."""
        self.game = ToolEpisode(env)
        self.game.start(example=example)
        return [dict(m) for m in self.game.info["messages"]]

    def catch_up(self, turns: Sequence[Mapping[str, Any]]) -> None:
        """Play the assistant turns of verl's conversation the env has not played yet: each
        turn's text when the loop kept it (and a last turn verl's limits stopped before it
        was read), else verl's message."""
        for i in range(self.played, max(len(turns), len(self.texts))):
            self.played += 1
            message = turns[i] if i < len(turns) else {"role": "assistant", "content": ""}
            calls = _calls(message)
            if self.game.ended:
                self.pending = [(c["function"]["name"], c["function"].get("arguments"), "Error: the episode is over; no tool can be called now.")
                                for c in calls]
                continue
            turn = self.game.play(_END_MARKERS.sub("", self.texts[i]) if i < len(self.texts) else _env_message(message))
            self.unpaid += turn.reward
            if turn.terminated:
                texts = ["Search complete: the generation model answers from the kept documents. The episode is over."
                         if c["function"]["name"] == "finish" else "Answer received. The episode is over." for c in calls]
            elif turn.truncated:
                texts = ["The turn budget is spent: the episode is over."] * len(calls)
            else:
                texts = _answers(calls, turn)
            self.pending = [(c["function"]["name"], c["function"].get("arguments"), t) for c, t in zip(calls, texts)]

    def take(self, name: str, arguments: Any) -> str:
        """The text of the latest turn's call ``name(arguments)`` (the first not handed out)."""
        for i, (n, args, text) in enumerate(self.pending):
            if n == name and _same_arguments(args, arguments):
                del self.pending[i]
                return text
        if self.game.ended:
            return "Error: the episode is over; no tool can be called now."
        raise SearchGymError(f"SearchGymTool got a call {name}({json.dumps(arguments, default=str)[:200]}) that the turn verl recorded does not hold.")

    def pay(self) -> float:
        paid, self.unpaid = self.unpaid, 0.0
        return paid


#: The episode of each trajectory, keyed by verl's ``AgentData`` (dropped with it; its env
#: goes back to the pool then).
EPISODES: weakref.WeakKeyDictionary[Any, _Episode] = weakref.WeakKeyDictionary()
_EPISODES_LOCK = threading.Lock()


def _episode_of(agent_data: Any, env_key: str) -> tuple[_Episode, bool]:
    """The trajectory's episode, and whether it was made now."""
    with _EPISODES_LOCK:
        episode = EPISODES.get(agent_data)
        if episode is not None:
            if episode.env_key != env_key:
                raise ConfigError(
                    f"SearchGymTool expects every tool of a trajectory to play the same env and arguments, got {episode.env_key} "
                    f"and {env_key}; give the tools of the tool config the same env_id and env_kwargs."
                )
            return episode, False
        EPISODES[agent_data] = episode = _Episode(env_key)
        return episode, True


async def _open(episode: _Episode, agent_data: Any, env_id: str, env_kwargs: Mapping[str, Any], example: QAExample) -> list[dict[str, Any]]:
    """Give ``episode`` a pooled env reset to ``example`` (it goes back when ``agent_data`` goes)."""
    loop = asyncio.get_running_loop()
    kwargs = {**env_kwargs, "action_format": "tools"}
    env = await loop.run_in_executor(None, ENV_POOL.acquire, env_id, kwargs)
    weakref.finalize(agent_data, ENV_POOL.release, env_id, kwargs, env)
    return await loop.run_in_executor(None, episode.start, env, example)


def _answers(calls: Sequence[Mapping[str, Any]], turn: TurnResult) -> list[str]:
    """What each of verl's ``calls`` of a turn gets: the env's tool message for the call the
    env read alike (same name and arguments, else the same name), in order. What the env
    could not read as a call (its user message: verl's reader drops such a block and shows
    no reply for it) follows the last call's text, so the model sees it as in the env."""
    recorded = list(_calls(turn.message or {}))
    results = {m.get("tool_call_id"): str(m.get("content", "")) for m in turn.replies if m.get("role") == "tool"}
    unread = "\n\n".join(str(m.get("content", "")) for m in turn.replies if m.get("role") == "user")
    texts = []
    for call in calls:
        name, arguments = call["function"]["name"], call["function"].get("arguments")
        match = next((r for r in recorded if r["function"]["name"] == name and _same_arguments(arguments, r["function"].get("arguments"))), None)
        match = match or next((r for r in recorded if r["function"]["name"] == name), None)
        if match is None:
            texts.append(unread or "Error: this call was not read as the environment reads the turn; it did nothing.")
            continue
        recorded.remove(match)
        texts.append(results.get(match.get("id"), ""))
    if texts and unread and unread not in texts:
        texts[-1] = f"{texts[-1]}\n\n{unread}" if texts[-1] else unread
    return texts


def _calls(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [c for c in (message.get("tool_calls") or []) if isinstance(c, Mapping) and isinstance(c.get("function"), Mapping)]


def _env_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """verl's assistant message as the env reads it: its text without the end-of-turn
    markers verl's reader leaves, and its calls."""
    content = message.get("content")
    text = _END_MARKERS.sub("", content) if isinstance(content, str) else ""
    out: dict[str, Any] = {"role": "assistant", "content": text}
    if _calls(message):
        out["tool_calls"] = [dict(c) for c in _calls(message)]
    return out


def _same_arguments(recorded: Any, given: Any) -> bool:
    """Whether two calls' arguments are the same (either may be JSON text)."""
    if isinstance(recorded, str):
        try:
            recorded = json.loads(recorded)
        except ValueError:
            return False
    if isinstance(given, str):
        try:
            given = json.loads(given)
        except ValueError:
            return False
    return recorded == given


def _assistant_turns(agent_data: Any) -> list[Mapping[str, Any]]:
    """The assistant messages verl generated in this trajectory, in order."""
    generated = int(getattr(agent_data, "assistant_turns", 0))
    turns = [m for m in agent_data.messages if isinstance(m, Mapping) and m.get("role") == "assistant"]
    # A last turn stopped by verl's limits before it was read has no message: count it out.
    return turns[max(len(turns) - generated, 0) :] if generated else []


def _example(create_kwargs: Mapping[str, Any], tool: str) -> QAExample:
    """The question a row's ``tools_kwargs.<tool>.create_kwargs`` names."""
    row = {
        "extra_info": {k: create_kwargs[k] for k in ("example_id", "question", "metadata_json") if k in create_kwargs},
        "reward_model": {"ground_truth": {"target": list(create_kwargs.get("answers") or [])}},
    }
    return example_from_row(row, where=f"tools_kwargs.{tool}.create_kwargs")


# --------------------------------------------------------------------------- the tool
class SearchGymTool(BaseTool):
    """One tool of a searchgym game (see the module docstring).

    Config (the ``config`` of its entry in verl's tool YAML):
        name: The tool (``search``, ``answer``; s3: ``search``, ``select``, ``finish``); by
            default the name of the entry's ``tool_schema``.
        env_id: The registered single-agent env (``searchgym/SearchR1-v0``, ...).
        env_kwargs: ``gym.make`` arguments (``retriever: http://127.0.0.1:8000/retrieve``,
            ``top_k``, ``max_turns``, ``reward``, ...); the same for every tool of the game.
    """

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        config = dict(plain_config(config) or {})
        env_id = config.get("env_id")
        if not isinstance(env_id, str):
            raise ConfigError(f"SearchGymTool expects config.env_id, a registered env id such as searchgym/SearchR1-v0, got {env_id!r}.")
        env_kwargs = plain_config(config.get("env_kwargs")) or {}
        if not isinstance(env_kwargs, Mapping):
            raise ConfigError(f"SearchGymTool expects config.env_kwargs to be a mapping of gym.make arguments, got {env_kwargs!r}.")
        if env_kwargs.get("action_format", "tools") != "tools":
            raise ConfigError(f"SearchGymTool plays the game through tool calls (action_format='tools'), got action_format={env_kwargs['action_format']!r}.")
        from searchgym.envs.registration import full_env_id

        self.env_id = full_env_id(env_id)
        self.env_kwargs = {k: v for k, v in env_kwargs.items() if k != "action_format"}
        tools = {t["function"]["name"]: t for t in game_tools(self.env_id, self.env_kwargs)}
        name = config.get("name") or (tool_schema.function.name if tool_schema is not None else None)
        if name not in tools:
            raise ConfigError(f"SearchGymTool expects config.name to be a tool of {self.env_id}'s game ({', '.join(tools)}), got {name!r}.")
        own = _ToolSchema.model_validate(tools[name])
        # An entry's tool_schema went through verl's model, which keeps no "items" nor
        # "additionalProperties": compare it with the env's schema seen the same way.
        seen = OpenAIFunctionToolSchema.model_validate(tools[name])
        if tool_schema is not None and _dump(tool_schema) != _dump(seen):
            raise ConfigError(
                f"SearchGymTool {name!r} plays {self.env_id}'s own schema, and the tool_schema of its entry differs: "
                f"{json.dumps(_dump(tool_schema))} against {json.dumps(_dump(seen))}. Leave tool_schema out of the tool config."
            )
        self.env_key = json.dumps([self.env_id, self.env_kwargs], sort_keys=True, default=repr)
        self._instances: dict[str, dict[str, Any]] = {}  # instance id -> {"create_kwargs", "episode"}
        super().__init__(config, own)

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        """An instance for one call; ``create_kwargs`` (the row's
        ``tools_kwargs.<tool>.create_kwargs``) name the question."""
        instance_id = instance_id or uuid4().hex
        self._instances[instance_id] = {"create_kwargs": dict(plain_config(kwargs.get("create_kwargs")) or {}), "episode": None}
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        """The env's tool message for this call, and the step rewards of the turns it played."""
        agent_data = kwargs.get("agent_data")
        if agent_data is None:
            raise ConfigError("SearchGymTool.execute expects verl's agent_data (verl's tool agent loop passes it); got none.")
        instance = self._instances.setdefault(instance_id, {"create_kwargs": {}, "episode": None})
        episode, new = _episode_of(agent_data, self.env_key)
        instance["episode"] = episode
        async with episode.lock:
            if new or episode.game is None:
                create_kwargs = instance["create_kwargs"] or dict((agent_data.tools_kwargs.get(self.name) or {}).get("create_kwargs") or {})
                if not create_kwargs:
                    raise ConfigError(
                        f"SearchGymTool {self.name!r} found no question for this trajectory: write rows with "
                        "`python -m searchgym.integrations.verl prepare --tools` (extra_info.tools_kwargs.<tool>.create_kwargs) "
                        f"or run them with the {TOOL_AGENT_NAME} agent loop."
                    )
                await _open(episode, agent_data, self.env_id, self.env_kwargs, _example(create_kwargs, self.name))
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, episode.catch_up, _assistant_turns(agent_data))
            text = episode.take(self.name, parameters)
            reward = episode.pay()
            agent_data.extra_fields["searchgym_episode"] = episode.game.summary()
        return ToolResponse(text=text), reward, {}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The return so far of the episode this instance played in (0.0 before it played)."""
        episode = (self._instances.get(instance_id) or {}).get("episode")
        return float(sum(episode.game.rewards)) if episode is not None and episode.game is not None else 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._instances.pop(instance_id, None)


def _dump(schema: Any) -> dict[str, Any]:
    return schema.model_dump(exclude_unset=True, exclude_none=True)


# --------------------------------------------------------------------------- the loop
@register(TOOL_AGENT_NAME)
class SearchGymToolAgentLoop(ToolAgentLoop):
    """verl's ``ToolAgentLoop`` with the episode's start and end (see the module docstring)."""

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        self._row = kwargs
        self._agent_data: AgentData | None = None
        output = await super().run(sampling_params, **kwargs)
        agent_data = self._agent_data
        episode = EPISODES[agent_data]
        async with episode.lock:
            loop = asyncio.get_running_loop()
            reward = await loop.run_in_executor(None, self._finish, episode, agent_data)
        summary = episode.game.summary()
        cut = len(agent_data.response_mask) >= self.response_length
        output.reward_score = reward
        output.extra_fields.update(
            turn_scores=list(episode.game.rewards),
            searchgym_episode=summary,
            reward_components=summary["reward_components"],
            searchgym_example_id=summary["example_id"],
            searchgym_prediction=summary["prediction"],
            # The searchgym loop's keys (REWARD_INFO_KEYS), so that the two loops log alike.
            reward_extra_info={
                "score": reward,
                "answered": float(summary["answered"]),
                "num_turns": float(summary["num_turns"]),
                "num_searches": float(summary["num_searches"]),
                "num_invalid": float(summary["num_invalid"]),
                "cut_by_length": float(cut),
            },
        )
        return output

    @staticmethod
    def _finish(episode: _Episode, agent_data: Any) -> float:
        episode.catch_up(_assistant_turns(agent_data))  # the last reply, and any turn no tool saw
        return episode.game.finish()

    async def _handle_pending_state(self, agent_data: AgentData, sampling_params: dict[str, Any]) -> AgentState:
        """Start the row's episode; the prompt verl renders is the env's."""
        self._agent_data = agent_data
        tools = [t for t in self.tools.values() if isinstance(t, SearchGymTool)]
        if not tools:
            raise ConfigError(
                f"The {TOOL_AGENT_NAME} agent loop plays a searchgym game whose tools are SearchGymTool entries of "
                "rollout.multi_turn.tool_config_path (tools_search_r1.yaml); got none."
            )
        first = tools[0]
        episode, _ = _episode_of(agent_data, first.env_key)
        async with episode.lock:
            messages = await _open(episode, agent_data, first.env_id, first.env_kwargs, example_from_row(self._row, where="verl row"))
        agent_data.messages = messages
        return await super()._handle_pending_state(agent_data, sampling_params)

    async def _handle_generating_state(self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False) -> AgentState:
        """verl's generating state; then the turn's text, decoded as verl's hermes reader
        decodes it, is kept for the env to read (see :meth:`_Episode.catch_up`)."""
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        if self._reads_text():
            text = await asyncio.get_running_loop().run_in_executor(None, self.tokenizer.decode, list(agent_data.response_ids))
            EPISODES[agent_data].texts.append(text)
        return state

    def _reads_text(self) -> bool:
        """Whether the env reads the turns' text itself: verl's calls are hermes blocks
        (``rollout.multi_turn.format``) and so are the env's (its ``tool_parser``). Another
        format is played from verl's messages (a block its reader drops is not seen)."""
        tools = [t for t in self.tools.values() if isinstance(t, SearchGymTool)]
        return self.tool_parser_name == "hermes" and bool(tools) and tools[0].env_kwargs.get("tool_parser", "hermes") == "hermes"
