"""Who plays a team episode: the roster of roles and each role's seat.

A *roster* names the roles played by agents, always with the searcher. A :class:`Seat` is
one role's side of the episode: the text it has read and written, the text it has not
read yet (its next observation), its turn counters and the details of its last turn.
:class:`~searchgym.envs.team.game.TeamGame` keeps one seat per role of its roster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from searchgym.envs.protocols import Invalid, ParsedTurn
from searchgym.error import ConfigError, UnknownNameError
from searchgym.rewards import Turn

#: Every role, in turn order; a roster keeps this order.
ROLES = ("searcher", "summarizer", "generator")

#: The details of a role's last turn (``info`` keys) before it has played one.
TURN_DEFAULTS: dict[str, Any] = {
    "action_kinds": (), "query": None, "invalid_reason": None, "action_truncated": False,
    "forged_env_tags": False, "ignored_chars": 0,
}


def check_roster(roles: Any) -> tuple[str, ...]:
    """``roles`` as a tuple in :data:`ROLES` order; a clear error for anything else."""
    if isinstance(roles, str) or not isinstance(roles, Sequence):
        raise ConfigError(
            f"The multi-agent env expects roles to be a list of role names among {', '.join(ROLES)}, got {roles!r}; "
            "e.g. roles=('searcher', 'generator')."
        )
    for role in roles:
        if role not in ROLES:
            raise UnknownNameError("role", role, ROLES)
    if len(set(roles)) != len(roles):
        raise ConfigError(f"The multi-agent env expects each role at most once in roles, got {list(roles)}.")
    if not roles:
        raise ConfigError("The multi-agent env expects at least one role, got an empty roster; the searcher is always needed.")
    if "searcher" not in roles:
        raise ConfigError(
            f"The multi-agent env expects the searcher in every roster (it drives the episode), got {list(roles)}; "
            "add 'searcher' (a scripted searcher such as role_env's 'complete' policy plays it if you only train another role)."
        )
    return tuple(r for r in ROLES if r in roles)


@dataclass
class Seat:
    """One role's side of the episode: its context and its turn counters.

    ``token_counter`` counts the tokens of its context; ``max_observation_chars`` bounds
    what it reads at once (the rest of a longer observation is never read).
    """

    token_counter: Callable[[str], int]
    max_observation_chars: int
    history: list[str] = field(default_factory=list)  # everything it read and wrote, in order
    pending: str = ""  # what it has not read yet (its next observation)
    prompt_messages: list[dict[str, str]] | None = None  # its prompt as chat messages
    turns: int = 0
    invalid: int = 0  # its malformed turns
    records: list[Turn] = field(default_factory=list)  # its turns as a reward recipe reads them
    chars: int = 0  # the length of ``history``
    tokens: int = 0  # the tokens of ``history``
    last: dict[str, Any] = field(default_factory=lambda: dict(TURN_DEFAULTS))  # details of its last turn, for info

    def show(self, text: str, messages: list[dict[str, str]] | None = None) -> None:
        """Append ``text`` to what it will read next; ``messages``: the same text as chat
        messages, kept when it is the role's prompt (the first text it is shown)."""
        if not text:
            return
        self.pending += text
        if messages is not None and self.prompt_messages is None:
            self.prompt_messages = messages

    def observation(self) -> str:
        """What it has not read yet, cut to ``max_observation_chars``."""
        return self.pending[: self.max_observation_chars]

    @property
    def observation_truncated(self) -> bool:
        return len(self.pending) > self.max_observation_chars

    def transcript(self) -> str:
        """Everything it has read and written, then what it has not read yet."""
        return "".join(self.history) + self.observation()

    def take_turn(self, turn: ParsedTurn, *, action_truncated: bool) -> bool:
        """It plays ``turn``: it has read its observation, and the turn (its cleaned text)
        joins its context and its records. Returns whether the turn was malformed (an
        invalid action, or environment-owned tags it wrote itself), which is counted."""
        observed = self.observation()
        self.pending = ""
        self.record(observed)
        self.turns += 1
        self.last = dict(TURN_DEFAULTS, action_kinds=turn.kinds, action_truncated=action_truncated,
                         forged_env_tags=turn.forged_env_tags, ignored_chars=turn.ignored_chars)
        self.record(turn.text)
        self.records.append(Turn(turn.text, turn.kinds))
        invalid = next((a for a in turn.actions if isinstance(a, Invalid)), None)
        if invalid is None and not turn.forged_env_tags:
            return False
        self.invalid += 1
        self.last["invalid_reason"] = invalid.reason if invalid is not None else "the turn wrote environment-owned tags"
        return True

    def record(self, text: str) -> None:
        """``text`` joins its context (what it read, or the cleaned text of its turn)."""
        if text:
            self.history.append(text)
            self.chars += len(text)
            self.tokens += self.token_counter(text)

    def context_size(self) -> tuple[int, int]:
        """Characters and tokens of its context, its next observation included."""
        pending = self.observation()
        return self.chars + len(pending), self.tokens + (self.token_counter(pending) if pending else 0)
