"""Batching the language-model calls of environments that step in parallel threads.

An environment's components (the RECON summarizer, the s3 generator, the R-Search
reader) call ``lm.generate`` for one episode at a time. When a driver steps N
environments at once, those N calls should become one batched call. A :class:`StepRound`
does that without changing the components: the driver runs every ``env.step`` of a round
in its own thread registered as a *participant*; ``LanguageModel.generate`` called from a
participant thread hands its request to the round and blocks. When every participant
still running is blocked on a request, the round serves all of them: requests to the same
model with the same sampling parameters (seeds aside) become one ``generate`` call, in
participant order. The composition of every batch therefore depends only on what the
environments do, never on thread timing, so rounds are reproducible. Seeded requests keep
their per-prompt seeds in the joined call, so each prompt draws what it would have drawn
alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from searchgym.lm.base import Generation, LanguageModel, SamplingParams

_local = threading.local()


def current_round() -> tuple[StepRound, int] | None:
    """The round and participant slot of the calling thread, if it is a participant."""
    return getattr(_local, "entry", None)


@dataclass
class _Request:
    slot: int
    lm: Any
    prompt_ids: list[list[int]]
    params: Any
    result: list[Any] | None = None
    error: BaseException | None = None
    done: bool = False


@dataclass
class StepRound:
    """Coalesces the ``generate`` calls of participant threads (see the module docstring).

    ``calls`` counts the batched ``generate`` calls the round made and ``requests`` the
    calls it received, so a driver can report how much batching happened.
    """

    _cond: threading.Condition = field(default_factory=threading.Condition)
    _active: set[int] = field(default_factory=set)
    _pending: dict[int, _Request] = field(default_factory=dict)
    calls: int = 0
    requests: int = 0

    def join(self, slot: int) -> None:
        """Register ``slot`` before its thread starts, so that the round waits for it."""
        with self._cond:
            if slot in self._active:
                raise RuntimeError(f"StepRound slot {slot} is already a participant.")
            self._active.add(slot)

    @contextmanager
    def participant(self, slot: int) -> Iterator[None]:
        """Run the body as the joined participant ``slot``: its ``generate`` calls join the
        round, and leaving lets the others be served without it."""
        previous = getattr(_local, "entry", None)
        _local.entry = (self, slot)
        try:
            yield
        finally:
            _local.entry = previous
            with self._cond:
                self._active.discard(slot)
                self._serve_if_ready()

    def submit(self, slot: int, lm: LanguageModel, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        """Queue one call and block until the round has served it."""
        request = _Request(slot, lm, prompt_ids, params)
        with self._cond:
            self.requests += 1
            self._pending[slot] = request
            self._serve_if_ready()
            while not request.done:
                self._cond.wait()
        if request.error is not None:
            raise request.error
        return request.result  # type: ignore[return-value]

    # Called with the lock held.
    def _serve_if_ready(self) -> None:
        if not self._pending or len(self._pending) < len(self._active):
            return
        batch = [self._pending.pop(slot) for slot in sorted(self._pending)]
        # Every participant still running waits on a request, so no thread can touch the
        # round while the lock is released for the (long) generation below.
        self._cond.release()
        try:
            for group in _groups(batch):
                self._serve(group)
        finally:
            self._cond.acquire()
        for request in batch:
            request.done = True
        self._cond.notify_all()

    def _serve(self, group: Sequence[_Request]) -> None:
        lm, params = group[0].lm, group[0].params
        prompts = [ids for r in group for ids in r.prompt_ids]
        if params.seed is not None:
            params = replace(params, seed=tuple(seed for r in group for seed in r.params.seed))
        try:
            self.calls += 1
            generations = lm._generate(prompts, params)
        except BaseException as e:  # handed to every waiting caller, raised in its thread
            for r in group:
                r.error = e
            return
        start = 0
        for r in group:
            r.result = generations[start : start + len(r.prompt_ids)]
            start += len(r.prompt_ids)


def _groups(batch: Sequence[_Request]) -> list[list[_Request]]:
    """Requests that can share one call: same model object, same sampling parameters
    but for the per-prompt seeds (seeded and unseeded requests apart)."""
    groups: dict[tuple[int, Any, bool], list[_Request]] = {}
    for r in batch:
        groups.setdefault((id(r.lm), replace(r.params, seed=None), r.params.seed is None), []).append(r)
    return list(groups.values())


def run_round(steps: Sequence[Callable[[], Any]], *, threads: Any) -> tuple[list[Any], StepRound]:
    """Run ``steps`` (zero-argument callables) as the participants of one round.

    ``threads`` is a ``concurrent.futures.ThreadPoolExecutor`` with at least
    ``len(steps)`` workers (every participant must be running for the round to be served).
    Returns each step's return value or the exception it raised (exceptions are returned,
    not raised), in order, and the round.
    """
    workers = getattr(threads, "_max_workers", len(steps))
    if workers < len(steps):
        raise ValueError(f"run_round needs an executor with at least {len(steps)} workers, got {workers}.")
    round_ = StepRound()
    for slot in range(len(steps)):
        round_.join(slot)

    def body(slot: int) -> Any:
        try:
            with round_.participant(slot):
                return steps[slot]()
        except Exception as e:  # the caller decides what a failed step means
            return _Failed(e)

    results = list(threads.map(body, range(len(steps))))
    return [r.error if isinstance(r, _Failed) else r for r in results], round_


@dataclass
class _Failed:
    error: BaseException
