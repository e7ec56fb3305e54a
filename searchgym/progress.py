"""Progress that moves while long work runs.

A :class:`Progress` counts units of work (episodes, optimizer steps, timesteps). On a
terminal it is a tqdm bar; when stderr goes to a file or a pipe it writes a plain line
(``desc: 3/20 ep (15%) 41 s [tokens=5120]``) when it opens, at most every
``SEARCHGYM_PROGRESS_SECONDS`` seconds (default 5) while anything moves, and when it
closes, instead of tqdm's carriage returns.

Work whose units take minutes moves in between: language-model backends call
:func:`generated_tokens` after each decoding step, and every open ``Progress`` shows the
tokens generated since it opened; trainers show their phase (``rollout``, ``update 2/8``)
with :meth:`Progress.note`. Work that may hang says what it waits on (:class:`waiting`):
a request to a model server that has not answered after ``SEARCHGYM_WAIT_SECONDS``
seconds (default 10), and every three times that after, prints ``waiting for the model
server at URL (attempt 2 of 4, 60 s timeout): 10 s without an answer``, above a terminal
bar, even under ``--quiet``. This module imports nothing of searchgym's, so every layer
may report to it.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from typing import Any

__all__ = ["Progress", "generated_tokens", "line_interval", "notice", "wait_seconds", "waiting"]

_OPEN: list["Progress"] = []
_LOCK = threading.Lock()
#: Least seconds between two redraws of a terminal bar caused by tokens or notes.
_REDRAW_SECONDS = 0.5


def line_interval() -> float:
    """Seconds between two plain progress lines (``SEARCHGYM_PROGRESS_SECONDS``, default 5)."""
    text = os.environ.get("SEARCHGYM_PROGRESS_SECONDS", "5")
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        from searchgym.error import ConfigError

        raise ConfigError(f"SEARCHGYM_PROGRESS_SECONDS expects a number of seconds >= 0, got {text!r}.")
    return value


def wait_seconds() -> float:
    """Seconds a :class:`waiting` block runs before it says what it waits on
    (``SEARCHGYM_WAIT_SECONDS``, default 10; 0 says nothing)."""
    text = os.environ.get("SEARCHGYM_WAIT_SECONDS", "10")
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        from searchgym.error import ConfigError

        raise ConfigError(f"SEARCHGYM_WAIT_SECONDS expects a number of seconds >= 0 (0: never say), got {text!r}.")
    return value


def notice(text: str) -> None:
    """One line on stderr, written above a terminal bar when one is open."""
    with _LOCK:
        bars = [p for p in _OPEN if p._bar is not None]
    try:
        if bars:
            bars[-1]._bar.write(text, file=bars[-1].stream)
        else:
            print(text, file=sys.stderr, flush=True)
    except ValueError:  # stderr closed under us (interpreter exit)
        pass


class waiting:  # noqa: N801 (used as a function: ``with waiting(...)``)
    """While the block runs, say what it waits on: ``waiting for WHAT: N s without an answer``
    once it has run ``after`` seconds (default :func:`wait_seconds`), then every three times
    that, until it ends. Blocks waiting on the same ``what`` at once (requests of one call
    in threads) say it once."""

    _said: dict[str, float] = {}

    def __init__(self, what: str, *, after: float | None = None):
        self.what = what
        self.after = wait_seconds() if after is None else after
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._done = False

    def __enter__(self) -> "waiting":
        self.started = time.monotonic()
        if self.after > 0:
            self._arm(self.after)
        return self

    def _arm(self, seconds: float) -> None:
        self._timer = threading.Timer(seconds, self._say)
        self._timer.daemon = True
        self._timer.start()

    def _say(self) -> None:
        with self._lock:
            if self._done:
                return
            now = time.monotonic()
            with _LOCK:  # another block waiting on the same thing said it just now
                quiet = now - waiting._said.get(self.what, -math.inf) < self.after / 2
                if not quiet:
                    waiting._said[self.what] = now
            if not quiet:
                waited = now - self.started
                notice(f"waiting for {self.what}: {waited:.0f} s without an answer" if waited >= 10 else
                       f"waiting for {self.what}: {waited:.1f} s without an answer")
            self._arm(3 * self.after)

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()


def generated_tokens(count: int) -> None:
    """Report ``count`` tokens just generated (one per live row of a decoding step)."""
    with _LOCK:
        listeners = list(_OPEN)
    for progress in listeners:
        progress.add_tokens(count)


class Progress:
    """A count of ``total`` units labelled ``desc`` (see the module docstring).

    Args:
        total: Units of the whole work (``None``: unknown).
        desc: The label.
        unit: The unit's short name (``ep``, ``step``).
        initial: Units already done (a resumed run).
        stream: Where to write (default ``sys.stderr`` at the time of the call).
    """

    def __init__(self, total: int | None, desc: str, unit: str, *, initial: int = 0, stream: Any = None):
        self.total, self.desc, self.unit = total, desc, unit
        self.n = initial
        self.tokens = 0
        self.notes: dict[str, Any] = {}
        self.stream = sys.stderr if stream is None else stream
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._last_draw = 0.0
        self._closed = False
        isatty = getattr(self.stream, "isatty", None)
        self.terminal = bool(isatty and isatty())
        self.interval = line_interval()
        self._bar = None
        if self.terminal:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True, file=self.stream)
        else:
            self._line()
        with _LOCK:
            _OPEN.append(self)

    # ------------------------------------------------------------------ reporting
    def update(self, n: int = 1) -> None:
        """``n`` more units done."""
        with self._lock:
            self.n += n
            if self._bar is not None:
                self._bar.update(n)
            else:
                self._maybe_line()

    def note(self, **values: Any) -> None:
        """Show ``name=value`` pairs after the count (a phase, a loss); ``None`` removes one."""
        with self._lock:
            for name, value in values.items():
                if value is None:
                    self.notes.pop(name, None)
                else:
                    self.notes[name] = value
            self._refresh()

    def add_tokens(self, count: int) -> None:
        """``count`` more generated tokens (see :func:`generated_tokens`)."""
        with self._lock:
            self.tokens += count
            self._refresh()

    def close(self) -> None:
        """The last line (or the bar's last state); stops listening to tokens."""
        with _LOCK:
            if self in _OPEN:
                _OPEN.remove(self)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._bar is not None:
                self._bar.set_postfix_str(self._postfix(), refresh=False)
                self._bar.close()
            else:
                self._line()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ drawing
    def _postfix(self) -> str:
        parts = [f"{k}={v}" for k, v in self.notes.items()]
        if self.tokens:
            parts.append(f"tokens={self.tokens}")
        return ", ".join(parts)

    def _refresh(self) -> None:
        if self._closed:
            return
        if self._bar is not None:
            now = time.monotonic()
            if now - self._last_draw >= _REDRAW_SECONDS:
                self._last_draw = now
                self._bar.set_postfix_str(self._postfix(), refresh=True)
        else:
            self._maybe_line()

    def _maybe_line(self) -> None:
        if time.monotonic() - self._last_draw >= self.interval:
            self._line()

    def _line(self) -> None:
        self._last_draw = time.monotonic()
        elapsed = self._last_draw - self.started
        count = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        postfix = self._postfix()
        text = f"{self.desc}: {count} {self.unit}{share} {elapsed:.0f} s" + (f" [{postfix}]" if postfix else "")
        try:
            print(text, file=self.stream, flush=True)
        except ValueError:  # the stream was closed under us (interpreter exit): nothing to report to
            pass
