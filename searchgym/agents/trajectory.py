"""The token record of one episode, as a trainer needs it.

A :class:`Trajectory` is the prompt ids followed by segments in order: generated ids
(exactly what the engine sampled, with their logprobs) and environment ids (the
tokenized observations). ``loss_mask`` is 1 on generated ids and 0 on environment ids.
Generated text is never decoded and re-tokenized: the ids the model saw on the next turn
are the ids it sampled.

Played through tool calls under a chat template, the record is also compared with a fresh
render of the whole conversation at every step, the final one included; ``render_mismatch``
says why they first differed (the record is kept as it is: it is what the model read and
sampled; a template that rewrites history never stops the episode).

An episode whose context a context policy rewrote (``SearchEnv(context="archive" |
"summarize")``) played several conversations: its record is then several records, one per
conversation, each exact against a fresh render of its own conversation. The agent hands
over the last one; ``earlier`` holds those before it, and :meth:`Trajectory.records` lists
them all in order (one record, itself, when the context was never rewritten).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Segment:
    """A run of response tokens from one source.

    ``generated`` segments carry the sampled ids, their logprobs and the generation's
    ``finish_reason``; environment segments (observations) have ``logprobs=None``.
    """

    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    generated: bool
    finish_reason: str | None = None

    def __len__(self) -> int:
        return len(self.token_ids)


@dataclass
class Trajectory:
    """Prompt ids and the response segments of one episode (see the module docstring)."""

    prompt_ids: tuple[int, ...]
    segments: list[Segment] = field(default_factory=list)
    #: Tool play: None while the record equals the chat template's render of the whole
    #: conversation; else why it first differed: ``"history"`` (the template rewrote earlier
    #: turns, as Qwen3's drops past ``<think>`` blocks), ``"turn"`` (a sampled turn is not the
    #: template's writing of the message the env read from it) or ``"tokens"`` (the same text,
    #: tokenized whole, splits into other tokens than its parts: a header ending in whitespace)
    #: or ``"template"`` (the template raised on the conversation: Llama 3.1's allows one call
    #: per turn). The final turn is checked too, when the driver hands the agent the last info
    #: (``Agent.observe_end``).
    render_mismatch: str | None = None
    #: The records of the conversations this episode played before its context was last
    #: rewritten, oldest first (see the module docstring); empty when it never was.
    earlier: list[Trajectory] = field(default_factory=list)

    def records(self) -> list[Trajectory]:
        """Every record of the episode, in order: ``earlier`` and then this one."""
        return [*self.earlier, self]

    def restarted(self, prompt_ids: tuple[int, ...]) -> Trajectory:
        """A new record from ``prompt_ids`` (a fresh render of the rewritten conversation),
        with this one and those before it as its ``earlier``."""
        closed = Trajectory(self.prompt_ids, self.segments, self.render_mismatch)
        return Trajectory(tuple(prompt_ids), earlier=[*self.earlier, closed])

    def add_generated(self, token_ids: tuple[int, ...], logprobs: tuple[float, ...], finish_reason: str) -> None:
        self.segments.append(Segment(tuple(token_ids), tuple(logprobs), True, finish_reason))

    def add_observation(self, token_ids: tuple[int, ...]) -> None:
        if token_ids:
            self.segments.append(Segment(tuple(token_ids), None, False))

    @property
    def response_ids(self) -> list[int]:
        """Every response id (generated and environment), in order."""
        return [t for s in self.segments for t in s.token_ids]

    @property
    def loss_mask(self) -> list[int]:
        """1 for each generated id of :attr:`response_ids`, 0 for each environment id."""
        return [int(s.generated) for s in self.segments for _ in s.token_ids]

    @property
    def response_logprobs(self) -> list[float | None]:
        """The sampled logprob of each generated id; ``None`` at environment ids."""
        out: list[float | None] = []
        for s in self.segments:
            out.extend(s.logprobs if s.logprobs is not None else [None] * len(s.token_ids))
        return out

    def context_ids(self) -> list[int]:
        """Prompt and response ids: what the model reads before its next turn."""
        return [*self.prompt_ids, *self.response_ids]

    @property
    def num_generated(self) -> int:
        return sum(len(s) for s in self.segments if s.generated)

    def __len__(self) -> int:
        return len(self.prompt_ids) + sum(len(s) for s in self.segments)
