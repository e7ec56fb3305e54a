"""The async driver: episodes that do not wait for each other.

:func:`searchgym.agents.driver.drive` plays rounds: every live episode's turn in one
batched call, then every env's step, and the next round starts when the slowest turn of
this one has ended. With a backend that serves requests concurrently (an OpenAI-compatible
server such as vLLM's, which batches the requests in flight itself) that barrier only
costs time: an episode whose turn was short waits for the longest one of its round.
:func:`drive_async` drops it. One thread (the caller's) owns every env and every play and
runs an event loop; worker threads only call out:

1. an episode waiting on its policy goes to a worker at once: one
   ``act_with_generations`` call for that episode alone (at most ``concurrency`` in
   flight; the others wait in the order they became ready);
2. when it returns, the episode's env steps as a play
   (:mod:`searchgym.envs.components.model_calls`). Each model call or search the play
   yields waits in the queue of its batch key (same model and sampling parameters; same
   retriever and ``k``). A key whose model or retriever has no call in flight sends
   everything queued as one joined call; what arrives while a call runs goes together in
   the next, so batches grow by themselves under load, as
   :class:`~searchgym.corpora.coalesce.CoalescingRetriever` and ``searchgym serve`` do.
   A retriever, and a model that does not serve concurrent calls
   (``LanguageModel.concurrent`` false, e.g. a local transformers model used as the s3
   generator), runs one call at a time;
3. when its step ends the episode's next turn is queued; a finished episode hands over its
   result (``on_result`` runs in the caller's thread) and its slot starts the next task.

Each episode is played as in the round driver: the same resets (task seeds), the same
``info`` (``slot``, ``episode_seed``) and therefore the same sampling seeds, and each
search or model call answers each query or prompt as it would alone. So a deterministic
agent gets the same results per example in both modes (tested); the order in which
episodes end, the batches' composition and which slot plays which task depend on
timing. A task without a seed resets its env from the env's own random state, which then
depends on which episodes that env played before: give tasks seeds (the bench does).

Failures are handled as in the round driver: a ``BackendError`` or a prompt that no longer
fits ends that episode (``backend_error``, ``prompt_too_long``), any other error inside a
step ends it as ``error``, and an agent that raises anything else stops the run. On an
exception (Ctrl-C included) the loop stops at once: the calls not yet started are
cancelled, no result is handed over after it, and the requests in flight end within their
own timeouts in the background.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from searchgym.agents.base import Agent
from searchgym.agents.live import LiveEpisode, Task, check_played, describe_error, observe_end, progress_bar
from searchgym.envs.components.model_calls import BatchCounts, Call, ModelCall, Play, SearchCall
from searchgym.error import BackendError

#: Most env calls (searches, model calls of the envs' components) in flight at once, each
#: on a different model or retriever.
ENV_CALL_WORKERS = 8


def drive_async(
    num_slots: int,
    policies: Mapping[str, Agent],
    tasks: Sequence[Task],
    start: Callable[[int, Task], LiveEpisode],
    *,
    concurrency: int | None = None,
    on_result: Callable[[Any], None] | None = None,
    progress: bool = False,
    desc: str = "episodes",
    batch_counts: BatchCounts | None = None,
) -> list[Any]:
    """Play every task with ``num_slots`` episodes live at once, none waiting for another's
    turn (see the module docstring). The arguments are :func:`~searchgym.agents.driver.drive`'s,
    and:

    Args:
        concurrency: Most policy calls (one episode's turn each) in flight at once
            (default ``num_slots``: every live episode's).
        batch_counts: Added to with the joined calls: ``calls``/``requests`` and
            ``searches``/``search_requests`` as in the round driver, ``rounds`` the times
            the loop sent env calls out.

    Returns:
        Each episode's :meth:`LiveEpisode.result`, in task order.
    """
    counts = batch_counts if batch_counts is not None else BatchCounts()
    limit = num_slots if concurrency is None else concurrency
    roles = list(policies)
    results: list[Any] = [None] * len(tasks)
    queue = deque(enumerate(tasks))
    live: dict[int, LiveEpisode] = {}  # slot -> its episode
    task_index: dict[int, int] = {}  # slot -> the index of its episode's task
    plays: dict[int, Play[Any]] = {}  # slot -> the play it is in (its reset or a step)
    resetting: set[int] = set()  # slots whose play is their reset
    ready: deque[int] = deque()  # slots waiting on their policy, in the order they became ready
    waiting_calls: dict[Any, list[tuple[int, Call]]] = {}  # batch key -> (slot, call) queued
    busy: set[Any] = set()  # models and retrievers with a call in flight
    running: dict[Future[Any], tuple[Any, ...]] = {}
    turns_in_flight = 0
    bar = progress_bar(len(tasks), progress, desc)
    clock = time.perf_counter()

    def seat(slot: int, role: str) -> int:
        return slot * len(roles) + roles.index(role)  # as drive's: distinct per (slot, role)

    def tick() -> None:
        # The time since the last event, shared by the episodes live through it.
        nonlocal clock
        now = time.perf_counter()
        if live:
            share = (now - clock) / len(live)
            for episode in live.values():
                episode.wall += share
        clock = now

    def finish(slot: int, outcome: str | None = None, error: str | None = None) -> None:
        episode = live.pop(slot)
        plays.pop(slot, None)
        resetting.discard(slot)
        if outcome is None:
            observe_end(policies, episode, lambda role: seat(slot, role))
        trajectories = {role: agent.end_episode(seat(slot, role)) for role, agent in policies.items()}
        results[task_index.pop(slot)] = result = episode.result(outcome, error, trajectories)
        if on_result is not None:
            on_result(result)
        if bar is not None:
            bar.update(1)

    def advance(slot: int, value: Any = None, error: BaseException | None = None) -> None:
        """Run the slot's play to its next call (queued under its batch key) or its end."""
        play = plays[slot]
        try:
            call = play.throw(error) if error is not None else play.send(value)
        except StopIteration as stop:
            del plays[slot]
            if slot in resetting:
                resetting.discard(slot)
                ready.append(slot)
            elif stop.value:
                finish(slot)
            else:
                ready.append(slot)
        except BackendError as e:
            finish(slot, "backend_error", str(e))
        except Exception as e:
            if slot in resetting:
                raise  # a reset that fails for another reason is a setup error (a task not in the env)
            finish(slot, "error", describe_error(e))
        else:
            waiting_calls.setdefault(call.batch_key(), []).append((slot, call))

    def fill() -> None:
        # Every free slot takes the next task (a reset that fails frees it again at once).
        for slot in range(num_slots):
            while slot not in live and queue:
                index, task = queue.popleft()
                live[slot], task_index[slot] = start(slot, task), index
                plays[slot] = live[slot].begin()
                resetting.add(slot)
                advance(slot)

    def dispatch() -> None:
        nonlocal turns_in_flight
        while ready and turns_in_flight < limit:
            slot = ready.popleft()
            episode = live[slot]
            role, observation, info = episode.turn()
            info = dict(info, slot=seat(slot, role), episode_seed=episode.task.seed)
            future = turn_pool.submit(policies[role].act_with_generations, [observation], [info])
            running[future] = ("turn", slot, role)
            turns_in_flight += 1
        sent = False
        for key in list(waiting_calls):
            members = waiting_calls[key]
            resource = _resource(members[0][1])
            if resource in busy:
                continue
            del waiting_calls[key]
            calls = [call for _, call in members]
            if isinstance(calls[0], SearchCall):
                counts.searches += 1
                counts.search_requests += len(calls)
            else:
                counts.calls += 1
                counts.requests += len(calls)
            future = call_pool.submit(type(calls[0]).join(calls).run)
            running[future] = ("call", resource, members)
            busy.add(resource)
            sent = True
        counts.rounds += sent
        if bar is not None:
            bar.note(live=len(live), turns=turns_in_flight)

    def turn_done(slot: int, role: str, future: Future[Any]) -> None:
        agent = policies[role]
        try:
            played = future.result()
        except BackendError as e:
            finish(slot, "backend_error", str(e))
            return
        texts, generations = check_played(agent, played, 1)
        if generations[0] is not None and generations[0].finish_reason == "error":  # the agent could not play this episode
            finish(slot, "error", agent.episode_error(seat(slot, role)) or f"the {role} could not play this turn")
        elif live[slot].count(role, generations[0]):
            plays[slot] = live[slot].play(texts[0])
            advance(slot)
        else:
            finish(slot, "prompt_too_long", f"the {role}'s context no longer fits its model's context window; nothing was generated for this turn")

    def call_done(members: list[tuple[int, Call]], future: Future[Any]) -> None:
        try:
            answers = future.result()
        except Exception as e:  # handed to each play of the call: it ends those steps only
            for slot, _ in members:
                advance(slot, error=e)
            return
        offset = 0
        for slot, call in members:
            advance(slot, answers[offset : offset + call.rows])
            offset += call.rows

    turn_pool = ThreadPoolExecutor(limit, thread_name_prefix="searchgym-turn")
    call_pool = ThreadPoolExecutor(ENV_CALL_WORKERS, thread_name_prefix="searchgym-call")
    try:
        fill()
        dispatch()
        while running:
            # A timeout, so that Ctrl-C is seen within it (a signal may wake another thread).
            done, _ = wait(list(running), timeout=0.5, return_when=FIRST_COMPLETED)
            if not done:
                continue
            tick()
            for future in done:
                kind, *what = running.pop(future)
                if kind == "turn":
                    turns_in_flight -= 1
                    turn_done(what[0], what[1], future)
                else:
                    busy.discard(what[0])
                    call_done(what[1], future)
            fill()
            dispatch()
        assert not live and not queue, "the async driver stopped with episodes left"
    finally:
        for future in running:
            future.cancel()
        turn_pool.shutdown(wait=False, cancel_futures=True)
        call_pool.shutdown(wait=False, cancel_futures=True)
        if bar is not None:
            bar.close()
    return results


def _resource(call: Call) -> Any:
    """What one call occupies while it runs: its retriever, its model when the model does not
    serve concurrent calls, else its batch key (one joined call per key in flight)."""
    if isinstance(call, SearchCall):
        return ("retriever", id(call.retriever))
    if isinstance(call, ModelCall) and not getattr(call.lm, "concurrent", False):
        return ("model", id(call.lm))
    return call.batch_key()
