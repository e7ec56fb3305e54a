"""A :class:`LanguageModel` over vLLM's async engine (``AsyncLLM``), for episodes that do not wait.

:class:`~searchgym.lm.vllm.VLLMLM` drives vLLM's offline engine: one ``generate`` call is
decoded to its end before the next one starts, so it is not ``concurrent`` and
``run_episodes(mode="async")`` refuses it. :class:`AsyncVLLMLM` holds ``AsyncLLM``, the
engine behind vLLM's OpenAI server, in this process: calls made from several threads at
once join the engine's running batch as they arrive (continuous batching), and each returns
when its own prompts are done. That is what the async driver needs, without a server, a
port or HTTP in between; the round driver's one batched call per turn works as with
:class:`VLLMLM`.

The contract is :class:`VLLMLM`'s: the exact sampled ids with their processed logprobs,
stop strings kept, per-prompt seeds, prompts too long for the context flagged, pushed
weights (:meth:`update_weights`) with the prefix cache dropped. The engine core runs in a
spawned process (vLLM's async engine has no in-process mode), so scripts need the
``if __name__ == "__main__":`` guard, and pushed weights travel through a temporary
safetensors folder.

The engine's event loop runs on a daemon thread of its own; :meth:`close` (also run when
the model is garbage-collected or the interpreter exits) stops the engine and the loop.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
import weakref
from typing import Any

from searchgym.error import ConfigError
from searchgym.lm.base import Generation, SamplingParams
from searchgym.lm.vllm import VLLMLM


class AsyncVLLMLM(VLLMLM):
    """Generation with vLLM's async engine, serving calls from several threads side by side.

    Args:
        model, tokenizer, dtype, max_model_len, seed: As for :class:`VLLMLM`.
        in_process: Refused when true: the async engine's core always runs in a process
            of its own.
        engine_options: Fields of vLLM's ``AsyncEngineArgs`` (e.g. ``max_num_seqs``,
            ``enforce_eager``, ``gpu_memory_utilization``).

    Use it with ``run_episodes(..., mode="async")`` or ``searchgym bench --driver async
    --backend vllm-async``: each episode's next turn is sent as soon as its own step ends,
    and the engine decodes it beside whatever else is in flight.
    """

    concurrent = True
    _no_in_process = (
        "vLLM's async engine always runs its core in a process of its own. Use VLLMLM(in_process=True) for an in-process offline engine."
    )

    def _start(self, options: dict[str, Any]) -> Any:
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        try:
            engine_args = AsyncEngineArgs(**options)
        except TypeError as e:
            raise ConfigError(f"AsyncVLLMLM passes its engine options to vLLM's AsyncEngineArgs, which refused them: {e}.") from e
        self._ids = itertools.count()
        self._prefix = uuid.uuid4().hex[:8]  # request ids unique across the engines of a process
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="searchgym-vllm-async", daemon=True)
        thread.start()
        self._loop = loop

        async def start() -> Any:  # AsyncLLM binds its output handler to the loop it is used from
            return AsyncLLM.from_engine_args(engine_args)

        try:
            self._engine = [asyncio.run_coroutine_threadsafe(start(), loop).result()]
        except BaseException:
            _stop([], loop, thread)
            raise
        self._finalizer = weakref.finalize(self, _stop, self._engine, loop, thread)
        return self.engine.model_config

    @property
    def engine(self) -> Any:
        """vLLM's ``AsyncLLM`` (held in a list that :meth:`close` empties, so that the engine
        is freed when it is stopped, not at the interpreter's teardown)."""
        self._check_open()
        return self._engine[0]

    def _generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        from vllm.sampling_params import RequestOutputKind

        loop = self._running_loop()
        results, requests = self._requests(prompt_ids, params)
        futures = []
        try:
            for _, prompt, sampling in requests:
                sampling.output_kind = RequestOutputKind.FINAL_ONLY
                request_id = f"searchgym-{self._prefix}-{next(self._ids)}"
                futures.append(asyncio.run_coroutine_threadsafe(self._final(prompt, sampling, request_id), loop))
            for (i, _, _), future in zip(requests, futures):
                results[i] = self._generation(future.result())
        except BaseException:
            for future in futures:  # a cancelled request is aborted in the engine (Ctrl-C, a failed sibling)
                future.cancel()
            raise
        return results  # type: ignore[return-value]

    async def _final(self, prompt: Any, sampling: Any, request_id: str) -> Any:
        final = None
        async for output in self.engine.generate(prompt, sampling, request_id):
            final = output
        if final is None or not final.outputs:
            raise ConfigError(f"AsyncVLLMLM got no output from vLLM's async engine for request {request_id}.")
        return final.outputs[0]

    def _rpc(self, method: str, kwargs: dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(self.engine.collective_rpc(method, kwargs=kwargs), self._running_loop()).result()

    def _reset_prefix_cache(self) -> None:
        asyncio.run_coroutine_threadsafe(self.engine.reset_prefix_cache(), self._running_loop()).result()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        self._check_open()
        return self._loop

    def _check_open(self) -> None:
        if self.closed:
            raise ConfigError("AsyncVLLMLM was closed; load a new one to generate.")

    @property
    def closed(self) -> bool:  # type: ignore[override]
        """Whether :meth:`close` stopped the engine (``load_lm`` then loads a new one)."""
        return not getattr(self, "_engine", None)

    def close(self) -> None:
        """Stop the engine (its core process) and the event loop's thread. Later calls raise."""
        self._finalizer()


def _stop(holder: list[Any], loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Shut the engine in ``holder`` down (and empty it), then its loop: the output handler
    is cancelled first, so that the engine core's exit is not reported as a dead engine."""
    engine = holder.pop() if holder else None
    if engine is not None and loop.is_running():

        async def cancel_handler() -> None:
            handler = getattr(engine, "output_handler", None)
            if handler is not None:
                handler.cancel()
                engine.output_handler = None

        try:
            asyncio.run_coroutine_threadsafe(cancel_handler(), loop).result(timeout=30)
        except Exception:  # noqa: BLE001 - shutting down: the engine is stopped below either way
            pass
    if engine is not None:
        engine.shutdown()

    async def finish_tasks() -> None:  # the engine client's socket readers, cancelled by its shutdown
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    if loop.is_running():
        try:
            asyncio.run_coroutine_threadsafe(finish_tasks(), loop).result(timeout=30)
        except Exception:  # noqa: BLE001 - shutting down: the loop stops below either way
            pass
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=30)
    if not thread.is_alive():
        loop.close()
