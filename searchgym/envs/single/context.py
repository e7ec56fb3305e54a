"""Context policies: what the conversation an agent reads becomes as an episode grows.

A :class:`~searchgym.envs.single.game.SearchGame` asks its policy after every step that does
not end the episode (:meth:`ContextPolicy.after_step`). The policies, by name
(``SearchEnv(context=NAME, context_options={...})``):

- ``"keep"`` (the default): nothing is ever rewritten; the conversation only grows.
- ``"archive"``: tool results older than ``keep_last`` turns are replaced by a short stub that
  says what was there and how to get it again (``[archived: search 'q' returned doc ids d1,
  d2; search again or open them]``); with ``max_tokens``, only once the context passes it.
- ``"summarize"`` (ReSum): once the context passes ``max_tokens``, a summary is written, by the
  policy itself (``by="policy"``: the env's observation asks for it and the agent's next turn
  is the summary) or by a frozen model (``by="model"``, a yielded
  :class:`~searchgym.envs.components.model_calls.ModelCall`, batched with the other envs'),
  and the conversation restarts from the prompt, the question and the summary.

A rewrite is reported in that step's ``info["context_rewrite"]``: the policy, the turn, the
kind (``"archive"`` or ``"restart"``), what was archived or the summary (and who wrote it),
and the whole new conversation: ``prompt``, ``prompt_messages`` and ``history`` (tags: the
text that follows the prompt) or ``messages`` (tools, also ``info["messages"]``). An agent
that keeps a token record starts a new one there (a new segment) from a fresh render of it.

A summary is never played: it is not parsed for actions (an answer in it answers nothing),
not part of the turns a recipe reads, not evidence, and the environment's own tags are
removed from it before it is shown, framed as the agent's unverified notes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from searchgym.envs.components.model_calls import ModelUser, Play, replay
from searchgym.envs.protocols.base import Search, strip_blocks
from searchgym.error import ConfigError, check_name

#: The policies of ``SearchEnv(context=...)``.
CONTEXT_POLICIES = ("keep", "archive", "summarize")

#: What the env asks for when the policy writes the summary (``summarize`` with ``by="policy"``).
SUMMARY_REQUEST = (
    "Your context is full. Do not call a tool or answer now. Write a summary of your work so far for yourself: the "
    "question, what you searched and read (queries, document ids, pages), the facts you found with their document ids, "
    "and what is left to find. The conversation will restart from the question and this summary."
)
#: How the summary is shown in the restarted prompt.
SUMMARY_FRAME = "\n\nNotes you wrote on your work so far (your own summary, not a source):\n{summary}\n"
#: The frozen summarizer's prompt (``by="model"``).
MODEL_SUMMARY_PROMPT = (
    "An agent is answering a question by searching documents. Summarize its work so far for it: what it searched and "
    "read (queries, document ids, pages), the facts it found with their document ids, and what is left to find. "
    "Write only the summary.\n\nQuestion: {question}\n\nWork so far:\n{work}\n\nSummary:"
)


class ContextPolicy:
    """Keep everything (``context="keep"``): the base of the policies, which does nothing."""

    name = "keep"

    def settings(self) -> dict[str, Any]:
        """The policy's settings, as plain data (``info["context_rewrite"]``, run records)."""
        return {}

    def reset(self) -> None:
        """A new episode."""

    def after_step(self, game: Any, observation: str) -> Play[dict[str, Any] | None]:
        """Rewrite ``game``'s conversation after a step that did not end the episode, if the
        policy says so; the rewrite's record (``info["context_rewrite"]``) or None."""
        return None
        yield  # a play with no call

    def wants_summary(self, game: Any) -> bool:
        """Whether the agent's next turn is a summary (asked for by :meth:`after_step`)."""
        return False

    def summary_turn(self, game: Any, text: str) -> dict[str, Any]:
        raise ConfigError(f"The {self.name!r} context policy asks for no summary turn.")


def _positive(owner: str, name: str, value: Any, *, allow_none: bool = False) -> Any:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{owner} expects {name} to be a positive integer{' or None' if allow_none else ''}, got {value!r}.")
    return value


class ArchiveContext(ContextPolicy):
    """Tool results older than ``keep_last`` turns become stubs (see the module docstring).

    Args:
        keep_last: The turns whose results stay whole (the latest ones), at least 1.
        max_tokens: Archive only once the context reaches this many tokens (the env's
            ``token_counter``); None: at every step where an old result is still whole.
    """

    name = "archive"

    def __init__(self, *, keep_last: int = 2, max_tokens: int | None = None):
        self.keep_last = _positive("context='archive'", "keep_last", keep_last)
        self.max_tokens = _positive("context='archive'", "max_tokens", max_tokens, allow_none=True)

    def settings(self) -> dict[str, Any]:
        return {"keep_last": self.keep_last, "max_tokens": self.max_tokens}

    def after_step(self, game: Any, observation: str) -> Play[dict[str, Any] | None]:
        if self.max_tokens is not None and game.context_tokens < self.max_tokens:
            return None
        view = game.context_view
        last = len(game.turns) - self.keep_last  # steps before this index are old
        old = [i for i in range(view.start, last) if i not in view.archived and game.turns[i][1]]
        if not old:
            return None
        stubs = {i: stub(game, i) for i in old}
        if game.tools is None:
            view.archived.update(stubs)
        else:
            for i, text in stubs.items():
                for m in view.tool_messages.get(i, ()):
                    game.messages[m] = {**game.messages[m], "content": text}
                view.archived[i] = text
        yield from ()
        return {"kind": "archive", "archived_turns": [i + 1 for i in old], "stubs": [stubs[i] for i in old]}


class SummarizeContext(ContextPolicy):
    """Past ``max_tokens``, a summary and a restart (ReSum; see the module docstring).

    Args:
        max_tokens: The context size (the env's ``token_counter``) that calls for a summary.
        by: ``"policy"`` (the agent writes it in a turn of its own, which counts as a turn)
            or ``"model"`` (a frozen model writes it at once).
        model: ``by="model"``: a language model, a model name, a mapping as the env's
            frozen models take, or a callable ``(question, work) -> summary``.
        max_new_tokens: The frozen model's summary length.
        max_summary_chars: A longer summary is cut to it.
    """

    name = "summarize"

    def __init__(self, *, max_tokens: int = 8192, by: str = "policy", model: Any = None, max_new_tokens: int = 512,
                 max_summary_chars: int = 4096):
        owner = "context='summarize'"
        self.max_tokens = _positive(owner, "max_tokens", max_tokens)
        check_name("summary writer (by)", by, ("policy", "model"))
        self.by = by
        self.max_new_tokens = _positive(owner, "max_new_tokens", max_new_tokens)
        self.max_summary_chars = _positive(owner, "max_summary_chars", max_summary_chars)
        self.model_spec = model
        self.writer: Callable[[str, str], str] | None = None
        if by == "model":
            if model is None:
                raise ConfigError(
                    "context='summarize' with by='model' expects context_options['model']: a model name (e.g. 'smollm2'), a "
                    "LanguageModel, or a callable (question, work) -> summary; or by='policy' to let the agent write it."
                )
            self.writer = model_writer(model, max_new_tokens=self.max_new_tokens)
        self.reset()

    def settings(self) -> dict[str, Any]:
        model = self.model_spec if isinstance(self.model_spec, (str, type(None))) else type(self.model_spec).__name__
        return {"max_tokens": self.max_tokens, "by": self.by, "model": model, "max_new_tokens": self.max_new_tokens,
                "max_summary_chars": self.max_summary_chars}

    def reset(self) -> None:
        self.asked = False

    def wants_summary(self, game: Any) -> bool:
        return self.asked

    def after_step(self, game: Any, observation: str) -> Play[dict[str, Any] | None]:
        # A summary turn may not be the last turn (it answers nothing): ask only with two turns left.
        if game.context_tokens < self.max_tokens or game.log.turn + (2 if self.by == "policy" else 1) > game.max_turns:
            return None
        if self.by == "policy":
            self.asked = True
            return {"kind": "summary_request", "request": SUMMARY_REQUEST}
        question, work = game.example.question, game.context_view.history(game.turns)
        writer = self.writer
        summary = yield from replay(lambda: writer(question, work), [u for u in (writer,) if isinstance(u, ModelUser)])
        return restart(game, self, summary, by="model")

    def summary_turn(self, game: Any, text: str) -> dict[str, Any]:
        """The agent's summary turn: the conversation restarts from it."""
        self.asked = False
        return restart(game, self, text, by="policy")


def clean_summary(game: Any, text: str, limit: int) -> str:
    """A summary as the restarted prompt shows it: inside ``<summary>`` if the writer used
    it, without the environment's own tags (nothing in it poses as retrieved documents), cut
    to ``limit`` characters."""
    start, end = text.find("<summary>"), text.rfind("</summary>")
    if start >= 0:
        text = text[start + len("<summary>"): end if end > start else None]
    text, _ = strip_blocks(text, tuple(game.protocol.env_tags))
    return text.strip()[:limit]


def restart(game: Any, policy: SummarizeContext, summary: str, *, by: str) -> dict[str, Any]:
    """Restart ``game``'s conversation from its prompt, the question and ``summary``."""
    summary = clean_summary(game, summary, policy.max_summary_chars)
    block = SUMMARY_FRAME.format(summary=summary or "(none)")
    view = game.context_view
    view.prompt = game.prompt + block
    view.prompt_messages = [dict(m) for m in game.first_messages]
    view.prompt_messages[-1]["content"] = str(view.prompt_messages[-1]["content"]) + block
    view.start = len(game.turns)  # the conversation holds no step of before, nor the one that restarts it (appended already)
    view.archived.clear()
    if game.tools is not None:
        game.messages[:] = [dict(m) for m in game.first_messages]
        game.messages[-1]["content"] = str(game.messages[-1]["content"]) + block
    return {"kind": "restart", "summary": summary, "by": by}


def model_writer(spec: Any, *, max_new_tokens: int) -> Callable[[str, str], str]:
    """The ``(question, work) -> summary`` of a frozen model spec (see :class:`SummarizeContext`)."""
    from searchgym.lm.base import LanguageModel

    if isinstance(spec, (str, Mapping)):
        from searchgym.lm.registry import load_lm

        spec = load_lm(spec) if isinstance(spec, str) else load_lm(spec["model"], **{k: v for k, v in spec.items() if k != "model"})
    if isinstance(spec, LanguageModel):
        return ModelSummaryWriter(spec, max_new_tokens=max_new_tokens)
    if callable(spec):
        return spec
    raise ConfigError(f"context_options['model'] expects a model name, a LanguageModel or a callable, got {type(spec).__name__}.")


class ModelSummaryWriter(ModelUser):
    """A frozen model writing the summary of ``summarize`` with ``by="model"``, greedily."""

    def __init__(self, lm: Any, *, max_new_tokens: int = 512):
        self.lm, self.max_new_tokens = lm, max_new_tokens

    def __call__(self, question: str, work: str) -> str:
        prompt = self.lm.apply_chat([{"role": "user", "content": MODEL_SUMMARY_PROMPT.format(question=question, work=work)}])
        (g,) = self.generate([prompt], max_new_tokens=self.max_new_tokens, temperature=0.0)
        return "" if g.finish_reason == "prompt_too_long" else g.text.strip()


# ---------------------------------------------------------------------------- stubs
def stub(game: Any, step: int) -> str:
    """What stands for the results of step ``step`` (from 0) once archived."""
    turn = step + 1
    searches = [s for s in game.searched if s.turn == turn]
    parts = [f"search {s.query!r} returned doc ids {', '.join(s.ids) or 'none'}" for s in searches]
    for record in game.records:
        if record.round == step:
            parts += [describe(a) for a in record.parsed if not isinstance(a, Search) and _shows_result(a)]
    if not parts:
        return "[archived: an earlier result; ask again to see it]"
    again = "search again or open them" if searches and len(parts) == len(searches) else "call again to see it"
    return f"[archived: {'; '.join(parts)}; {again}]"


def _shows_result(action: Any) -> bool:
    return action.kind not in ("answer", "complete", "invalid", "evidence", "select")


def describe(action: Any) -> str:
    """An action of the protocol's own kinds as a short call (``open(doc_id='d17', page=2)``)."""
    fields = dataclasses.asdict(action) if dataclasses.is_dataclass(action) else {}
    return f"{action.kind}({', '.join(f'{k}={v!r}' for k, v in fields.items())})"


# ---------------------------------------------------------------------------- the conversation
@dataclasses.dataclass
class ContextView:
    """The conversation the agent reads, as the policy left it: the prompt (and its chat
    messages), the first step in it (``start``), the steps whose results were archived (their
    stubs), and, with tools, the indices in ``game.messages`` of each step's tool replies."""

    prompt: str = ""
    prompt_messages: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    start: int = 0
    archived: dict[int, str] = dataclasses.field(default_factory=dict)
    tool_messages: dict[int, list[int]] = dataclasses.field(default_factory=dict)

    def history(self, turns: Sequence[tuple[str, str]]) -> str:
        """Tags: the text after the prompt, each step's turn and result (or its stub)."""
        return "".join(a + (self.stubbed(i) if i in self.archived else o)
                       for i, (a, o) in enumerate(turns) if i >= self.start)

    def stubbed(self, step: int) -> str:
        return f"\n\n{self.archived[step]}\n\n"


def context_text(game: Any) -> str:
    """The conversation the agent reads, as text: the prompt and each step since the last
    restart, archived results as their stubs (its size is the env's ``context_tokens``)."""
    return game.context_view.prompt + game.context_view.history(game.turns)


def rewrite_record(game: Any, rewrite: Mapping[str, Any]) -> dict[str, Any]:
    """``info["context_rewrite"]``: the policy, its settings, the turn and what it did, and the
    whole new conversation (``prompt``, ``prompt_messages``, and ``history`` in tags or
    ``messages`` with tools), from which an agent renders its next record afresh."""
    view = game.context_view
    record = {"policy": game.context_policy.name, "settings": game.context_policy.settings(), "turn": game.turn, **rewrite,
              "prompt": view.prompt, "prompt_messages": [dict(m) for m in view.prompt_messages]}
    if game.tools is None:
        record["history"] = view.history(game.turns)
    else:
        record["messages"] = [dict(m) for m in game.messages]
    return record


def make_context_policy(name: Any, options: Mapping[str, Any] | None = None) -> ContextPolicy:
    """The policy ``name`` (one of :data:`CONTEXT_POLICIES`, or a :class:`ContextPolicy`) with ``options``."""
    if isinstance(name, ContextPolicy):
        if options:
            raise ConfigError("SearchEnv got context_options with a ContextPolicy object; set them on the object.")
        return name
    check_name("context policy", name, CONTEXT_POLICIES)
    cls = {"keep": ContextPolicy, "archive": ArchiveContext, "summarize": SummarizeContext}[name]
    try:
        return cls(**dict(options or {}))
    except TypeError as e:
        allowed = [p for p in cls.__init__.__code__.co_varnames[1: cls.__init__.__code__.co_argcount + cls.__init__.__code__.co_kwonlyargcount]]
        raise ConfigError(f"context={name!r} expects context_options among {allowed}, got {sorted(dict(options or {}))}.") from e
