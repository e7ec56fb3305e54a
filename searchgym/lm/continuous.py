"""Continuous batching: ``generate`` calls from many threads share one decode loop.

The turn-synchronous driver batches one turn of every live episode, so each turn lasts
as long as its longest answer while the other episodes wait. With continuous batching
every episode runs in its own thread and calls ``lm.generate`` when it needs a turn; a
:class:`ContinuousBatcher` owns the model and, between two decode steps, admits the
prompts that arrived (encoded together, reusing cached prefixes), and hands every
sequence back the moment it finishes, so its episode steps the env and comes back with
its next turn while the others keep decoding.

Each prompt is sampled from its own seed's generator, as in a plain ``generate`` call,
so a call's results do not depend on what other calls share the batch (up to the
floating-point rounding of batched matrix products).

:func:`continuous_batching` routes the ``generate`` calls made by the threads that enter
it to one batcher per :class:`~searchgym.lm.hf.TransformersLM`; other backends are
called one request at a time under a lock (vLLM's engine and HTTP servers do their own
scheduling).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from searchgym.lm.base import Generation, SamplingParams
from searchgym.lm.batching import _local

if TYPE_CHECKING:
    from searchgym.lm.hf import Decoding, TransformersLM


class _Request:
    """One ``generate`` call waiting for its sequences."""

    def __init__(self, prompt_ids: list[list[int]], params: SamplingParams):
        self.prompt_ids, self.params = prompt_ids, params
        self.seqs: list[Decoding] = []
        self.results: list[Generation | None] = [None] * len(prompt_ids)
        self.remaining = 0
        self.error: BaseException | None = None
        self.done = threading.Event()


class ContinuousBatcher:
    """A decode loop in a background thread serving :meth:`generate` calls from any thread.

    Args:
        lm: The model; the batcher reuses its sampling, stop strings and prefix cache.
        max_batch_size: Most sequences decoded together (default: ``lm.max_batch_size``);
            later prompts wait for a free row.

    ``steps`` counts decode forward passes, ``prefills`` admission passes, ``peak`` the
    most sequences decoded together.
    """

    def __init__(self, lm: TransformersLM, *, max_batch_size: int | None = None):
        self.lm = lm
        self.max_batch_size = max_batch_size or lm.max_batch_size
        self.steps = self.prefills = self.peak = 0
        self._cond = threading.Condition()
        self._waiting: deque[Decoding] = deque()
        self._closed = False
        self._thread: threading.Thread | None = None

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        """Decode ``prompt_ids`` in the shared loop; block until all of them finish."""
        lm = self.lm
        lm._check_vocabulary(prompt_ids)
        request = _Request(prompt_ids, params)
        request.results, runnable = lm._decodings(prompt_ids, params)
        for i, seq in runnable:
            seq.owner = (request, i)
            request.seqs.append(seq)
        request.remaining = len(request.seqs)
        if not request.seqs:
            return request.results  # type: ignore[return-value]
        with self._cond:
            if self._closed:
                raise RuntimeError("ContinuousBatcher.generate called after close().")
            self._waiting.extend(request.seqs)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="searchgym-decode", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request.results  # type: ignore[return-value]

    def close(self) -> None:
        """Stop the loop once the sequences it holds are done."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join()

    # -- the decode loop (background thread)
    def _loop(self) -> None:
        # The loop's own tuner: thread counts are per thread, and this thread runs every pass.
        with self.lm.thread_session(self.lm.new_tuner()):
            self._run()

    def _run(self) -> None:
        torch = self.lm._torch
        batch: _Batch | None = None
        while True:
            with self._cond:
                while not self._waiting and batch is None and not self._closed:
                    self._cond.wait()
                if batch is None and not self._waiting:
                    return  # closed and idle
                room = self.max_batch_size - (len(batch.seqs) if batch else 0)
                admitted = [self._waiting.popleft() for _ in range(min(room, len(self._waiting)))]
            try:
                with torch.inference_mode():
                    if admitted:
                        batch = self._admit(batch, admitted)
                    if batch is not None:
                        batch = self._step(batch)
            except BaseException as e:  # every caller in flight gets the error
                failed = [*admitted, *(batch.seqs if batch else [])]
                for seq in failed:
                    request = seq.owner[0]
                    request.error = e
                    request.done.set()
                batch = None

    def _admit(self, batch: _Batch | None, seqs: list[Decoding]) -> _Batch | None:
        """Encode newly arrived prompts, sample their first tokens and join the batch."""
        from searchgym.lm.hf import _full_cache

        lm = self.lm
        cache = lm._usable_cache()
        logits, past, mask, positions = lm._prefill(seqs, cache)
        self.prefills += 1
        new = _Batch(seqs, past, mask, positions, cache is not None and _full_cache(past, mask.shape[1]))
        new = self._sample_and_retire(new, logits)
        if batch is None:
            return new
        if new is None:
            return batch
        return batch.merge(new, lm._torch)

    def _step(self, batch: _Batch) -> _Batch | None:
        logits, batch.past, batch.mask, batch.positions = self.lm._decode_step(batch.next_ids, batch.past, batch.mask, batch.positions)
        self.steps += 1
        self.peak = max(self.peak, len(batch.seqs))
        return self._sample_and_retire(batch, logits)

    def _sample_and_retire(self, batch: _Batch, logits: Any) -> _Batch | None:
        """Sample each row's next token (with its call's parameters and its own
        generator), hand back the sequences that finished and drop their rows."""
        from searchgym.lm.hf import _select_rows

        lm, torch = self.lm, self.lm._torch
        rows_of: dict[int, list[int]] = {}
        for row, seq in enumerate(batch.seqs):
            rows_of.setdefault(id(seq.owner[0]), []).append(row)
        next_ids = torch.empty(len(batch.seqs), dtype=torch.long, device=logits.device)
        for rows in rows_of.values():
            request = batch.seqs[rows[0]].owner[0]
            index = torch.tensor(rows, device=logits.device)
            ids, logprobs = lm._sample(logits.index_select(0, index), request.params, [batch.seqs[row].generator for row in rows])
            next_ids[index] = ids
            for row, token, logprob in zip(rows, ids.tolist(), logprobs.tolist()):
                seq = batch.seqs[row]
                if lm._append(seq, token, logprob) and batch.storable:
                    lm._keep(lm.prefix_cache, seq, batch.past, row, batch.mask[row])  # type: ignore[arg-type]
        keep = [row for row, seq in enumerate(batch.seqs) if seq.finish is None]
        for seq in batch.seqs:
            if seq.finish is not None:
                request, i = seq.owner
                request.results[i] = seq.generation()
                request.remaining -= 1
                if request.remaining == 0:
                    request.done.set()
        if not keep:
            return None
        batch.next_ids = next_ids
        if len(keep) < len(batch.seqs):
            batch.mask, batch.positions, batch.next_ids = _select_rows(batch.past, keep, batch.mask, batch.positions, next_ids)
            batch.seqs = [batch.seqs[row] for row in keep]
        return batch


class _Batch:
    """The rows being decoded: their KV cache, attention mask ``[L, W]`` over its columns,
    last positions ``[L, 1]`` and the sampled tokens ``[L]`` to feed next."""

    def __init__(self, seqs: list[Decoding], past: Any, mask: Any, positions: Any, storable: bool):
        self.seqs, self.past, self.mask, self.positions, self.storable = seqs, past, mask, positions, storable
        self.next_ids: Any = None

    def merge(self, other: _Batch, torch: Any) -> _Batch:
        """Append ``other``'s rows; the narrower cache is padded on the left."""
        from searchgym.lm.kv_cache import concat_rows

        self.past, self.mask = concat_rows([(self.past, self.mask), (other.past, other.mask)])
        self.positions = torch.cat([self.positions, other.positions], dim=0)
        self.next_ids = torch.cat([self.next_ids, other.next_ids], dim=0)
        self.seqs = self.seqs + other.seqs
        self.storable = self.storable and other.storable
        return self


class Batching:
    """Routes ``generate`` calls of the threads that entered it (see the module docstring)."""

    def __init__(self, max_batch_size: int | None = None):
        self.max_batch_size = max_batch_size
        self._lock = threading.Lock()
        self._batchers: dict[int, ContinuousBatcher] = {}
        self._serial: dict[int, threading.Lock] = {}

    def generate(self, lm: Any, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        from searchgym.lm.hf import TransformersLM

        with self._lock:
            if isinstance(lm, TransformersLM):
                batcher = self._batchers.get(id(lm))
                if batcher is None:
                    batcher = self._batchers[id(lm)] = ContinuousBatcher(lm, max_batch_size=self.max_batch_size)
            else:
                batcher = None
                serial = self._serial.setdefault(id(lm), threading.Lock())
        if batcher is not None:
            return batcher.generate(prompt_ids, params)
        with serial:
            return lm._generate(prompt_ids, params)

    @property
    def batchers(self) -> list[ContinuousBatcher]:
        return list(self._batchers.values())

    def close(self) -> None:
        for batcher in self.batchers:
            batcher.close()

    @contextmanager
    def entered(self) -> Iterator[None]:
        """Route the calling thread's ``generate`` calls here while inside."""
        previous = getattr(_local, "batching", None)
        _local.batching = self
        try:
            yield
        finally:
            _local.batching = previous


@contextmanager
def continuous_batching(max_batch_size: int | None = None) -> Iterator[Batching]:
    """A :class:`Batching` whose batchers stop on exit; threads join it with
    ``batching.entered()``."""
    batching = Batching(max_batch_size)
    try:
        yield batching
    finally:
        batching.close()
