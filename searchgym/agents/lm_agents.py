"""Language-model agents: the policy LM plays the env's protocol, one turn per step.

Three families share one loop and differ in what the protocol lets the policy do:

- :class:`EndToEndAgent` (Search-R1, R1-Searcher, RECON): reasons, searches, answers.
- :class:`SearcherAgent` (s3): searches and selects documents; the env's frozen
  generator answers from the selection.
- :class:`EvidenceAgent` (R-Search): searches, writes ``<original_evidence>`` and
  answers; the env's frozen reader answers from the evidence for the evidence reward.

Each episode's context is kept as token ids (a :class:`Trajectory`): the prompt, then
for every turn the ids the engine sampled and the tokenized observation. The next turn
is generated from those ids, so what the model read is exactly what a trainer sees.

The same agents play envs made with ``action_format="tools"`` (an episode whose reset
``info`` has ``tools``): the prompt is ``info["messages"]`` rendered by the chat template
with ``tools=info["tools"]``; each turn's raw sampled text is the action (the env's tool
parser reads it); each observation is the template's rendering of the step's new
messages and the next assistant header (:func:`~searchgym.agents.tokens.observation_text`).
Where the env's context policy rewrote the conversation (``info["context_rewrite"]``), the
agent closes the episode's record and starts another from a fresh render of the new one
(:meth:`~searchgym.agents.trajectory.Trajectory.records` lists them). Where the record
differs from a fresh render of the whole conversation (a template that
rewrites history, or a turn the template would write otherwise), at any step or at the end
(:meth:`LMAgent.observe_end`), the agent keeps its own record, marks it
(``Trajectory.render_mismatch``), counts it (``render_mismatches``) and warns once. An
episode whose record cannot be kept at all ends alone: its generation is
:data:`~searchgym.agents.base.FAILED` and the drivers record the error.
"""

from __future__ import annotations

import threading
import warnings
from abc import abstractmethod
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from searchgym.agents.base import FAILED, Agent, turn_seed
from searchgym.agents.live import describe_error
from searchgym.agents.tokens import encode_text, observation_text, prompt_ids, render_chat
from searchgym.agents.trajectory import Trajectory
from searchgym.envs.access import search_env
from searchgym.envs.protocols import Protocol, make_protocol
from searchgym.envs.tools.parsers import TOOL_PARSERS
from searchgym.error import ConfigError, UnknownNameError
from searchgym.lm.base import Generation, LanguageModel
from searchgym.lm.chat_templates import ChatTemplate, check_tool_template, default_tool_parser, end_of_turn, template_by_name


def _positive_int(owner: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{owner} expects {name} to be a positive integer, got {value!r}.")
    return value


class LMTurnAgent(Agent):
    """Shared plumbing of agents that generate with a :class:`LanguageModel`.

    Per-episode state is keyed by ``info["slot"]`` (set by the vectorized driver; the
    position in the batch otherwise) and starts afresh when ``info["turn"] == 0``.
    Subclasses implement :meth:`act_with_generations` (the texts and the batch's
    generations, in order); ``act`` returns its texts. :meth:`end_episode` hands over and
    forgets a slot's :class:`Trajectory`.
    """

    def __init__(
        self,
        lm: LanguageModel,
        *,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        max_observation_tokens: int | None = None,
        max_context_tokens: int | None = None,
    ):
        if not isinstance(lm, LanguageModel):
            raise ConfigError(
                f"{type(self).__name__} expects lm to be a searchgym LanguageModel (e.g. "
                f"searchgym.lm.registry.load_lm('smollm2')), got {type(lm).__name__}."
            )
        self.lm = lm
        self.max_new_tokens = _positive_int(type(self).__name__, "max_new_tokens", max_new_tokens)
        owner = type(self).__name__
        self.max_observation_tokens = None if max_observation_tokens is None else _positive_int(owner, "max_observation_tokens", max_observation_tokens)
        self.max_context_tokens = None if max_context_tokens is None else _positive_int(owner, "max_context_tokens", max_context_tokens)
        self.temperature = temperature
        self.top_p = top_p
        self.seed = seed
        self._calls = 0
        self._calls_lock = threading.Lock()
        self._trajectories: dict[int, Trajectory] = {}
        self._failures: dict[int, Exception] = {}  # slot -> why its record could not be kept (see LMAgent.act_with_generations)

    @abstractmethod
    def act_with_generations(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[Generation | None]]:
        """One turn of text per observation and the :class:`Generation` it came from."""

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[str]:
        return self.act_with_generations(observations, infos)[0]

    # -- token bookkeeping
    def encode(self, text: str) -> tuple[int, ...]:
        return encode_text(self.lm.tokenizer, text)

    def observation_ids(self, text: str) -> tuple[int, ...]:
        """An observation's ids, cut to ``max_observation_tokens`` (as Search-R1 and s3 cut
        theirs at ``max_obs_length``)."""
        ids = self.encode(text)
        return ids if self.max_observation_tokens is None else ids[: self.max_observation_tokens]

    def chat_ids(self, messages: Sequence[Mapping[str, str]]) -> tuple[int, ...]:
        return self.encode(self.lm.apply_chat(messages))

    def end_episode(self, slot: int) -> Trajectory | None:
        self._forget(slot)
        self._failures.pop(slot, None)
        return self._trajectories.pop(slot, None)

    def episode_error(self, slot: int) -> str | None:
        error = self._failures.get(slot)
        return describe_error(error) if error is not None else None

    def _forget(self, slot: int) -> None:
        """Drop what a subclass keeps per episode besides the trajectory."""

    def trajectory(self, slot: int) -> Trajectory | None:
        """The live trajectory of ``slot`` (``None`` if it has none)."""
        return self._trajectories.get(slot)

    def _seeds(self, infos: Sequence[Mapping[str, Any]]) -> list[int] | None:
        """One sampling seed per episode of an ``act`` call (``None`` without a seed).

        Under a driver (infos with ``episode_seed`` and ``example_id``), the seed is
        derived from this agent's seed, the role, the question, the episode's seed and
        the turn: an episode draws the same tokens however many others are decoded
        beside it. Otherwise from this agent's seed, the call's number and the position."""
        if self.seed is None:
            return None
        with self._calls_lock:
            call = self._calls
            self._calls += 1
        return [turn_seed(self.seed, info, "call", call, position) for position, info in enumerate(infos)]

    def _generate(self, contexts: Sequence[Sequence[int]], stop: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[Generation]:
        """One generation per context; a context longer than ``max_context_tokens`` gets an
        empty ``prompt_too_long`` one without reaching the model (the driver ends its episode)."""
        seed = self._seeds(infos)
        cap = self.max_context_tokens
        fits = [i for i, c in enumerate(contexts) if cap is None or len(c) <= cap]
        out = [Generation("", (), (), "prompt_too_long")] * len(contexts)
        if fits:
            generations = self.lm.generate(
                [list(contexts[i]) for i in fits],
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                stop=stop,
                seed=None if seed is None else [seed[i] for i in fits],
            )
            for i, g in zip(fits, generations):
                out[i] = g
        return out


@dataclass
class _Chat:
    """A tool episode's place in its conversation: how many messages the record holds and
    whether the latest sampled turn ended with the template's end of turn."""

    seen: int
    closed: bool = True


class LMAgent(LMTurnAgent):
    """The policy LM plays the protocol: the env's prompt, then one generation per turn.

    Args:
        lm: The policy model.
        protocol: The env's protocol (name or instance); :meth:`for_env` reads it.
        max_new_tokens: Most tokens per turn (a turn that hits it is cut mid-text; the
            env then usually finds no closing tag and answers with feedback).
        temperature, top_p, seed: Sampling; temperature 0 is greedy. With a seed, each
            episode's turn samples from its own stream (see :meth:`_seeds`), so a
            sampled run is reproducible and independent of how episodes are batched.
        max_observation_tokens: Each observation is cut to this many tokens before the
            model reads it (Search-R1's and s3's ``max_obs_length``); None: whole.
        max_context_tokens: A turn whose context (prompt, turns, observations) is longer
            ends its episode as ``prompt_too_long`` (Search-R1's ``max_prompt_length``,
            which instead drops the oldest tokens: here the record must be what the model
            read); None: only the model's own window.
        chat: Whether to format the prompt with the model's chat template (the env's
            ``info["prompt_messages"]``); ``None`` follows the protocol
            (``Protocol.uses_chat_template``: R1-Searcher's base prompt is raw text, as its
            released Qwen-2.5-7B-Base script feeds it).
            Tool play always uses the chat template.
        chat_template: Tool play: a template of :data:`searchgym.lm.chat_templates.CHAT_TEMPLATES`
            (``"hermes"``, ``"hermes-think"``, ``"llama3"``, ``"mistral"``) to render the
            conversation with, the tokenizer left as it is; ``None``: the tokenizer's own
            (it must write tools: SmolLM2's does not).
        tool_parser: Tool play: the env parser that reads what the template shows the model to write;
            ``None``: the template's (for a template the project does not know, such as a
            model's own, read off its render of a probe call: :func:`default_tool_parser`).
            :meth:`for_env` refuses an env made with another parser.

    Generation stops at the protocol's stop strings (e.g. ``</search>``), so every turn is
    one action; observations are tokenized and appended without a new chat turn, as in
    the original repositories. In tool play a turn ends at the template's end of turn.
    """

    name = "lm"
    #: Protocol names this family plays; ``None``: any.
    protocols: ClassVar[tuple[str, ...] | None] = None

    def __init__(
        self,
        lm: LanguageModel,
        protocol: str | Protocol = "search_r1",
        *,
        max_new_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int | None = None,
        chat: bool | None = None,
        chat_template: str | None = None,
        tool_parser: str | None = None,
        max_observation_tokens: int | None = None,
        max_context_tokens: int | None = None,
    ):
        super().__init__(
            lm, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed,
            max_observation_tokens=max_observation_tokens, max_context_tokens=max_context_tokens,
        )
        self.protocol = make_protocol(protocol)
        if self.protocols is not None and self.protocol.name not in self.protocols:
            raise ConfigError(
                f"{type(self).__name__} plays the {', '.join(self.protocols)} protocol(s), got "
                f"{self.protocol.name!r}. Use {_family_for(self.protocol.name)} for that env."
            )
        self.chat = self.protocol.uses_chat_template if chat is None else bool(chat)
        self.template = None if chat_template is None else chat_template_for(lm.tokenizer, chat_template, type(self).__name__)
        source = self.template.source if self.template is not None else None
        self.end_of_turn = end_of_turn(lm.tokenizer, source)
        if tool_parser is not None and tool_parser not in TOOL_PARSERS:
            raise UnknownNameError("tool parser", tool_parser, TOOL_PARSERS)
        self.tool_parser = tool_parser or default_tool_parser(lm.tokenizer, source)
        #: Tool episodes whose record differed from a fresh render, by reason (see Trajectory.render_mismatch).
        self.render_mismatches: Counter[str] = Counter()
        self._chats: dict[int, _Chat] = {}
        self._checked_template = False

    @classmethod
    def for_env(cls, env: Any, lm: LanguageModel, **options: Any) -> LMAgent:
        """An agent for the protocol of ``env`` (wrapped or not)."""
        agent = cls(lm, search_env(env).protocol, **options)
        agent.check_env(env)
        return agent

    def check_env(self, env: Any) -> None:
        """Refuse an env made with ``action_format="tools"`` whose tool parser cannot read
        what this agent's chat template shows the model to write."""
        inner = search_env(env)
        surface = getattr(getattr(inner, "game", None), "tools", None)
        if surface is None:
            return
        expected = TOOL_PARSERS.get(self.tool_parser)
        if surface.parser is not expected and surface.parser in TOOL_PARSERS.values():
            used = next(name for name, parser in TOOL_PARSERS.items() if parser is surface.parser)
            raise ConfigError(
                f"{type(self).__name__} writes tool calls the {self.tool_parser!r} parser reads (its chat template's form), "
                f"but the env reads turns with tool_parser={used!r}. Make the env with tool_parser={self.tool_parser!r}, "
                f"or give the agent the chat_template whose calls {used!r} reads."
            )

    # -- the loop
    def act_with_generations(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[Generation | None]]:
        """One turn per episode and its :class:`Generation`. An episode whose record could not
        be kept (e.g. a chat template that raises on its conversation) is not played: its
        generation is :data:`FAILED` (``finish_reason="error"``), :meth:`episode_error` says
        why, and the drivers end that episode alone (outcome ``"error"``)."""
        self._check_batch(observations, infos)
        contexts = []
        slots = []
        failed: set[int] = set()
        for position, (observation, info) in enumerate(zip(observations, infos)):
            slot = info.get("slot", position)
            self._failures.pop(slot, None)
            try:
                self._record_observation(slot, observation, info)
            except Exception as e:  # noqa: BLE001  this episode's record failed: the driver ends it, the others go on
                if isinstance(e, ConfigError) and info.get("turn", 0) == 0:
                    raise  # a setup error (a template without tools, a refused option): no episode can play
                self._fail(slot, e)
                failed.add(position)
            else:
                contexts.append(self._trajectories[slot].context_ids())
                slots.append(slot)
        played = [i for i in range(len(infos)) if i not in failed]
        generations = self._generate_grouped(contexts, [self._stop(slot) for slot in slots], [infos[i] for i in played])
        texts = []
        for slot, g in zip(slots, generations):
            self._trajectories[slot].add_generated(g.token_ids, g.logprobs, g.finish_reason)
            chat = self._chats.get(slot)
            if chat is None:
                texts.append(g.text)
                continue
            eot = self.end_of_turn
            chat.closed = bool(eot) and self.lm.tokenizer.decode(g.token_ids[-16:]).endswith(eot)
            texts.append(g.text.removesuffix(eot) if eot else g.text)  # the raw turn: the env's parser reads it
        out_texts: list[str] = [""] * len(infos)
        out_generations: list[Generation | None] = [FAILED] * len(infos)
        for i, text, g in zip(played, texts, generations):
            out_texts[i], out_generations[i] = text, g
        return out_texts, out_generations

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[str]:
        """One turn of text per observation; an episode whose record could not be kept raises
        its error here (no driver is there to end it alone)."""
        texts, generations = self.act_with_generations(observations, infos)
        for position, (info, generation) in enumerate(zip(infos, generations)):
            error = self._failures.get(info.get("slot", position)) if generation is FAILED else None
            if error is not None:
                raise error
        return texts

    def _fail(self, slot: int, error: Exception) -> None:
        """Forget ``slot``'s record, which ``error`` stopped, and keep why."""
        self._failures[slot] = error
        self._trajectories.pop(slot, None)
        self._chats.pop(slot, None)

    def _record_observation(self, slot: int, observation: str, info: Mapping[str, Any]) -> None:
        """Start ``slot``'s record (turn 0) or add the observation of its last step."""
        if info.get("turn", 0) == 0:
            self._chats.pop(slot, None)
            if "tools" in info:
                if self.max_observation_tokens is not None:
                    raise ConfigError(
                        f"{type(self).__name__} got max_observation_tokens={self.max_observation_tokens} for a tool "
                        "episode: a tool result is a message of the chat template, and a cut one would no longer be "
                        "what a fresh render of the conversation gives. Drop max_observation_tokens for "
                        "action_format='tools' (the env's top_k bounds what a search returns)."
                    )
                self._trajectories[slot] = Trajectory(self._tool_prompt_ids(info))
                self._chats[slot] = _Chat(len(info["messages"]))
            else:
                self._trajectories[slot] = Trajectory(prompt_ids(self.lm.tokenizer, observation, info, chat=self.chat))
        else:
            trajectory = self._trajectories.get(slot)
            if trajectory is None:
                raise ConfigError(
                    f"{type(self).__name__}.act got turn {info.get('turn')} of slot {slot} without its first "
                    "turn; feed every episode from its reset observation."
                )
            if info.get("context_rewrite") is not None:
                self._trajectories[slot] = trajectory.restarted(self._rewritten_prompt_ids(slot, info))
            elif slot in self._chats:
                self._add_tool_observation(slot, trajectory, info)
            else:
                trajectory.add_observation(self.observation_ids(observation))

    def _rewritten_prompt_ids(self, slot: int, info: Mapping[str, Any]) -> tuple[int, ...]:
        """The prompt of the record that starts where the env's context policy rewrote the
        conversation (``info["context_rewrite"]``): a fresh render of the whole new conversation,
        as a reset's prompt is (tags: its prompt and the history text after it)."""
        rewrite = info["context_rewrite"]
        chat = self._chats.get(slot)
        if chat is not None:
            messages = info["messages"]
            chat.seen, chat.closed = len(messages), True
            return self.encode(render_chat(self.lm.tokenizer, messages, info["tools"], template=self._template_source(), generation_prompt=True))
        prompt = prompt_ids(self.lm.tokenizer, rewrite["prompt"], {"prompt_messages": rewrite["prompt_messages"]}, chat=self.chat)
        return (*prompt, *self.encode(rewrite.get("history", "")))

    def _stop(self, slot: int) -> tuple[str, ...]:
        if slot in self._chats:
            return (self.end_of_turn,) if self.end_of_turn else ()
        return tuple(self.protocol.stop_strings)

    def _generate_grouped(self, contexts: Sequence[Sequence[int]], stops: Sequence[tuple[str, ...]], infos: Sequence[Mapping[str, Any]]) -> list[Generation]:
        """One ``generate`` call per set of stop strings (one call when the batch plays one format)."""
        out: list[Generation | None] = [None] * len(contexts)
        for stop in dict.fromkeys(stops):
            rows = [i for i, s in enumerate(stops) if s == stop]
            for i, g in zip(rows, self._generate([contexts[i] for i in rows], stop, [infos[i] for i in rows])):
                out[i] = g
        return out  # type: ignore[return-value]

    def _forget(self, slot: int) -> None:
        self._chats.pop(slot, None)

    # -- tool play
    def _template_source(self) -> str | None:
        return self.template.source if self.template is not None else None

    def _tool_prompt_ids(self, info: Mapping[str, Any]) -> tuple[int, ...]:
        if not self._checked_template:
            check_tool_template(self.lm.tokenizer, self._template_source(), owner=type(self).__name__)
            self._checked_template = True
        return self.encode(render_chat(self.lm.tokenizer, info["messages"], info["tools"], template=self._template_source(), generation_prompt=True))

    def _add_tool_observation(self, slot: int, trajectory: Trajectory, info: Mapping[str, Any]) -> None:
        chat = self._chats[slot]
        messages, tools = info.get("messages"), info.get("tools")
        if not isinstance(messages, Sequence) or len(messages) <= chat.seen or messages[chat.seen].get("role") != "assistant":
            raise ConfigError(
                f"{type(self).__name__}.act expects a tool episode's info['messages'] to continue its conversation: the "
                f"{chat.seen} messages it had, the assistant's turn, then the env's replies; got "
                f"{len(messages) if isinstance(messages, Sequence) else type(messages).__name__} messages. Feed each "
                "episode's infos in order, from its reset."
            )
        source = self._template_source()
        text, rewritten = observation_text(
            self.lm.tokenizer, messages, tools, since=chat.seen + 1, end_of_turn=self.end_of_turn, closed=chat.closed, template=source,
        )
        trajectory.add_observation(self.encode(text))
        chat.seen = len(messages)
        if trajectory.render_mismatch is None:
            self._check_render(trajectory, messages, tools, rewritten=rewritten, final=False)

    def observe_end(self, slot: int, info: Mapping[str, Any]) -> None:
        """Check the final turn of a tool episode's record against a fresh render of the
        conversation through that turn (``info["messages"]``, the env's last info): the
        record up to the template's end of turn must be its ids, else it is marked."""
        chat, trajectory = self._chats.get(slot), self._trajectories.get(slot)
        messages = info.get("messages")
        if chat is None or trajectory is None or trajectory.render_mismatch is not None or not isinstance(messages, Sequence):
            return
        if len(messages) <= chat.seen or not isinstance(messages[chat.seen], Mapping) or messages[chat.seen].get("role") != "assistant":
            return  # not the conversation this record played
        self._check_render(trajectory, messages[: chat.seen + 1], info.get("tools"), rewritten=False, final=True)

    def _check_render(self, trajectory: Trajectory, messages: Sequence[Mapping[str, Any]], tools: Any, *, rewritten: bool, final: bool) -> None:
        """Mark ``trajectory`` when it is not the template's fresh render of ``messages``: with
        the next assistant header, or (``final``) through the last turn's end of turn."""
        try:
            text = render_chat(self.lm.tokenizer, messages, tools, template=self._template_source(), generation_prompt=not final)
        except Exception:  # noqa: BLE001  the template refuses the conversation it is asked to write
            self._report_mismatch(trajectory, "template")
            return
        eot = self.end_of_turn
        if final and eot and eot in text:
            text = text[: text.rindex(eot) + len(eot)]  # what follows the end of turn is the next turn's
        fresh, record = self.encode(text), tuple(trajectory.context_ids())
        if record != fresh:
            decode = self.lm.tokenizer.decode
            same_text = decode(record) == decode(fresh)
            self._report_mismatch(trajectory, "history" if rewritten else "tokens" if same_text else "turn")

    def _report_mismatch(self, trajectory: Trajectory, reason: str) -> None:
        trajectory.render_mismatch = reason
        self.render_mismatches[reason] += 1
        if self.render_mismatches[reason] == 1:
            why = {
                "history": "the chat template rewrote earlier turns (e.g. dropped past <think> blocks)",
                "turn": "a sampled turn is not the chat template's writing of the message the env read from it",
                "tokens": "the same text, tokenized in one piece, splits into other tokens than its parts did (e.g. a header "
                          "ending in whitespace before the sampled turn)",
                "template": "the chat template refuses to render the conversation (e.g. Llama 3.1's allows one call per turn)",
            }[reason]
            warnings.warn(
                f"{type(self).__name__}: a token record differs from a fresh render of its conversation: {why}. The agent "
                f"keeps its own record (what the model read and sampled) and marks it (Trajectory.render_mismatch={reason!r}); "
                "further ones are counted in agent.render_mismatches.",
                stacklevel=3,
            )


def chat_template_for(tokenizer: Any, name: str, owner: str) -> ChatTemplate:
    """The project template ``name``, checked to fit ``tokenizer`` (its markers are tokens)."""
    template = template_by_name(name)
    vocab = tokenizer.get_vocab()
    missing = [t for t in template.tokens if t not in vocab]
    if missing:
        raise ConfigError(
            f"{owner} got chat_template={template.name!r}, whose markers {', '.join(missing)} are not tokens of this "
            f"tokenizer. searchgym.lm.chat_templates.install_chat_template(tokenizer, {template.name!r}, model) adds "
            "them (and grows the model's embeddings; their rows start untrained), or pick a template of the model's own tokens."
        )
    return template


class EndToEndAgent(LMAgent):
    """Search-R1 / R1-Searcher / RECON: the policy reasons, searches and answers."""

    name = "end-to-end"
    protocols = ("search_r1", "r1_searcher", "recon")


class SearcherAgent(LMAgent):
    """s3: the policy only searches and selects; the env's frozen generator answers."""

    name = "searcher"
    protocols = ("s3",)


class EvidenceAgent(LMAgent):
    """R-Search: the policy searches, writes its evidence and answers; the env's frozen
    reader answers again from that evidence (the evidence reward)."""

    name = "evidence"
    protocols = ("r_search",)


FAMILIES: tuple[type[LMAgent], ...] = (EndToEndAgent, SearcherAgent, EvidenceAgent)


def _family_for(protocol: str) -> str:
    for cls in FAMILIES:
        if protocol in (cls.protocols or ()):
            return cls.__name__
    return "LMAgent"


def policy_agent(env: Any, lm: LanguageModel, **options: Any) -> LMAgent:
    """The agent family that plays the protocol of ``env`` (in its tags or through tool calls)."""
    protocol = search_env(env).protocol
    family = next((cls for cls in FAMILIES if protocol.name in (cls.protocols or ())), LMAgent)
    agent = family(lm, protocol, **options)
    agent.check_env(env)
    return agent
