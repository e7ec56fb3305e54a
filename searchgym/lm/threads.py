"""Thread counts that keep CPU work fast when the CPU is shared.

PyTorch's CPU kernels run on an OpenMP team of ``torch.get_num_threads()`` threads (one
per core by default) whose threads spin while they wait for each other at the end of
every parallel region. A decode step of a small model is thousands of short regions; when
another process holds one of the cores, the thread that lost its core arrives late at
every one of them and the others spin meanwhile. On a 2-core machine, one competing
CPU-bound process made SmolLM2's batched decoding 3.2x slower with 2 threads, but only
1.6x slower than the solo 2-thread run with 1 thread; a Search-R1 rollout that takes
146.5 s with one thread ran for more than 7 minutes with two beside other CPU-bound
processes.

:class:`ThreadTuner` sets the count to the cores the process actually gets. Over a window
of forward passes it compares the CPU time the process used with the wall time its
threads had (spinning counts as CPU time, so only a thread that waited for a core makes
the share fall): alone the share stays near 1 and nothing changes; when it falls below
``low``, the count drops to the cores received. While below the caller's count, it tries
the full count again for one window every so often (the period doubles up to
``max_period`` passes while the contention lasts) and returns to it once the cores are
free. The tuner touches no model: its caller marks where each pass starts and ends
(:class:`searchgym.lm.hf.TransformersLM` from the stopping criterion and the logits
processor that ``generate`` calls around every forward pass; SFT around each micro-batch).
Thread counts change no greedy result of the tiny test model (tested at 1 and 2 threads);
they change only how fast it comes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from searchgym.error import ConfigError


class ThreadTuner:
    """Sets torch's intra-op thread count, pass by pass, to the cores the process gets
    (see the module docstring).

    Args:
        torch: The ``torch`` module (or an object with its ``get_num_threads`` and
            ``set_num_threads``).
        window: Passes per measurement.
        low: A share of the threads' wall time below this means the process did not get
            its cores (between 0 and 1).
        min_period: Passes before the full count is tried again after a drop.
        max_period: Most passes between tries; the period doubles after each failed try.

    Use :meth:`session` around a loop of passes (it sets the tuned count and restores the
    caller's on exit), and inside it either :meth:`step` around each pass or
    :meth:`start_pass` / :meth:`end_pass` where a pass starts and ends. The work between
    an end and the next start is not measured, and a pass started but not ended (the
    loop stopped) is dropped by the next start or the session's end. The caller's
    count (``torch.get_num_threads()`` when the session opens) is the most used.
    ``choice`` is the current count, ``share`` the last window's share, ``passes`` the
    passes measured, ``tries`` how many times the full count was tried again,
    ``changes`` how many times the count changed.
    """

    def __init__(self, torch: Any, *, window: int = 8, low: float = 0.8, min_period: int = 64, max_period: int = 1024):
        for name, value in (("window", window), ("min_period", min_period), ("max_period", max_period)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"ThreadTuner expects {name} to be a positive integer (passes), got {value!r}.")
        if max_period < min_period:
            raise ConfigError(f"ThreadTuner expects max_period >= min_period, got {max_period} < {min_period}.")
        if isinstance(low, bool) or not isinstance(low, (int, float)) or not 0 < low <= 1:
            raise ConfigError(f"ThreadTuner expects low to be a share in (0, 1], got {low!r}.")
        self.torch = torch
        self.window = window
        self.low = low
        self.min_period = min_period
        self.max_period = max_period
        self.choice: int | None = None
        self.share: float | None = None
        self.passes = self.tries = self.changes = 0
        self._ceiling = 1
        self._period = min_period
        self._countdown = min_period
        self._trying = False
        self._start: tuple[float, float, int] | None = None  # (wall, cpu, threads) of the open pass
        self._reset_window()

    @contextmanager
    def session(self) -> Iterator[None]:
        """Run the loop inside: the tuned count while inside, the caller's after."""
        caller = self.torch.get_num_threads()
        if caller != self._ceiling:  # the caller changed its count: start over from it
            self._ceiling, self.choice, self._period, self._countdown, self._trying = caller, caller, self.min_period, self.min_period, False
        self._reset_window()  # a window never spans two sessions (the time between is not the loop's)
        try:
            self._use(self._threads())
            yield
        finally:
            self._start = None
            self._use(caller)

    @contextmanager
    def step(self) -> Iterator[None]:
        """Measure the pass run inside; adjust the count at the end of a window."""
        self.start_pass()
        try:
            yield
        finally:
            self.end_pass()

    def start_pass(self) -> None:
        """A pass starts now, at the tuned count."""
        if self._ceiling <= 1:
            return
        threads = self._threads()
        self._use(threads)
        self._start = (time.perf_counter(), time.process_time(), threads)

    def end_pass(self) -> None:
        """The pass started last ends now; at the end of a window the count is adjusted
        for the passes that follow. Without a started pass, nothing happens."""
        if self._start is None:
            return
        wall, cpu, threads = self._start
        self._start = None
        self._wall += time.perf_counter() - wall
        self._cpu += time.process_time() - cpu
        self._steps += 1
        self.passes += 1
        self._countdown -= 1
        if self._steps >= self.window:
            self._decide(threads)
        elif not self._trying and self._countdown <= 0 and (self.choice or self._ceiling) < self._ceiling:
            self._trying, self.tries = True, self.tries + 1  # the next window runs the full count
            self._reset_window()
            self._use(self._threads())

    def _threads(self) -> int:
        return self._ceiling if self._trying else (self.choice or self._ceiling)

    def _decide(self, threads: int) -> None:
        self.share = self._cpu / (self._wall * threads) if self._wall > 0 else 1.0
        cores = max(1, min(threads, round(self.share * threads)))  # the cores the threads got
        previous = self.choice or self._ceiling
        if self._trying:
            self._trying = False
            self.choice = cores if cores > previous else previous
            self._period = self.min_period if cores > previous else min(self._period * 2, self.max_period)
            self._countdown = self._period
        elif self.share < self.low and cores < threads:
            self.choice = cores
            self._countdown = self._period
        if self.choice != previous:
            self.changes += 1
        self._reset_window()
        self._use(self._threads())  # from now on, the work between passes included

    def _reset_window(self) -> None:
        self._wall = self._cpu = 0.0
        self._steps = 0

    def _use(self, threads: int) -> None:
        if self.torch.get_num_threads() != threads:
            self.torch.set_num_threads(threads)


@contextmanager
def fixed_threads(torch: Any, threads: int) -> Iterator[None]:
    """``threads`` intra-op threads inside; the caller's count after."""
    caller = torch.get_num_threads()
    if caller != threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != caller:
            torch.set_num_threads(caller)
