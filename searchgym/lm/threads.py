"""Thread counts that keep CPU generation fast when the CPU is shared.

PyTorch's CPU kernels run on an OpenMP team of ``torch.get_num_threads()`` threads (one
per core by default) whose threads spin while they wait for each other at the end of
every parallel region. A decode step of a small model is thousands of short regions; when
another process holds one of the cores, the thread that lost its core arrives late at
every one of them and the others spin meanwhile. On the 2-core machine this project is
developed on, one competing CPU-bound process made SmolLM2's batched decoding 3.2x slower
with 2 threads, but only 1.6x slower than the solo 2-thread run with 1 thread; two
rollouts at once took 3.0x as long each as one alone with 2 threads, 1.7x with 1 thread.

:class:`ThreadTuner` sets the count to the cores the process actually gets. Over a window
of forward passes (prefill and decode steps) it compares the CPU time the process used with the wall time its threads
had (spinning counts as CPU time, so only a thread that waited for a core makes the share
fall): alone the share stays near 1 and nothing changes, with no extra work; when it falls
below ``low``, the count drops to the cores received. While below the caller's count, it
tries the full count again for one window every so often (the period doubles up to
``max_period`` passes while the contention lasts) and returns to it once the cores are free.
Thread counts change no result of SmolLM2's greedy decoding (measured bit-identical at 1
and 2 threads); they change only how fast it comes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class ThreadTuner:
    """Sets torch's intra-op thread count across the forward passes of one generation
    loop to the cores the process gets (see the module docstring).

    Args:
        torch: The ``torch`` module.
        window: Forward passes per measurement.
        low: A share of the threads' wall time below this means the process did not get
            its cores.
        min_period: Passes before the full count is tried again after a drop.
        max_period: Most passes between tries; the period doubles after each failed try.

    Use :meth:`session` around a generation loop (it sets the tuned count and restores
    the caller's on exit) and :meth:`step` around each forward pass. The caller's count
    (``torch.get_num_threads()`` when the session opens) is the most used. ``choice`` is
    the current count, ``share`` the last window's share, ``tries`` how many times the
    full count was tried again, ``changes`` how many times the count changed.
    """

    def __init__(self, torch: Any, *, window: int = 8, low: float = 0.8, min_period: int = 64, max_period: int = 1024):
        self.torch = torch
        self.window = window
        self.low = low
        self.min_period = min_period
        self.max_period = max_period
        self.choice: int | None = None
        self.share: float | None = None
        self.tries = self.changes = 0
        self._ceiling = 1
        self._period = min_period
        self._countdown = min_period
        self._trying = False
        self._reset_window()

    @contextmanager
    def session(self) -> Iterator[None]:
        """Run the generation loop inside: the tuned count while inside, the caller's after."""
        torch = self.torch
        caller = torch.get_num_threads()
        if caller != self._ceiling:  # the caller changed its count: start over from it
            self._ceiling, self.choice, self._period, self._countdown, self._trying = caller, caller, self.min_period, self.min_period, False
        self._reset_window()  # a window never spans two sessions (the time between is not generation)
        try:
            self._use(self._threads())
            yield
        finally:
            self._use(caller)

    @contextmanager
    def step(self) -> Iterator[None]:
        """Measure one forward pass; adjust the count at the end of a window."""
        if self._ceiling <= 1:
            yield
            return
        threads = self._threads()
        self._use(threads)
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        self._wall += time.perf_counter() - wall
        self._cpu += time.process_time() - cpu
        self._steps += 1
        self._countdown -= 1
        if self._steps >= self.window:
            self._decide(threads)
        elif not self._trying and self._countdown <= 0 and (self.choice or self._ceiling) < self._ceiling:
            self._trying, self.tries = True, self.tries + 1  # the next window runs the full count
            self._reset_window()

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
