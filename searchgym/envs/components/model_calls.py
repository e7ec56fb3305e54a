"""The model calls and searches of env components, made explicit so that many envs batch them.

An env component that calls a language model (RECON's LLM summarizer, the s3 generator
and judge, the R-Search reader) is a :class:`ModelUser`: it calls the model through
:meth:`ModelUser.generate`, which describes the call as a :class:`ModelCall` (which
model, which prompts, which sampling parameters with one seed per prompt) and runs it.

A game plays a step as a *play*: a Python generator that yields each :class:`ModelCall`
its step needs, is sent the generations, and returns the step's result. The code that
calls the components stays plain: :func:`replay` runs it with the components answering
from the replies the play has received so far; a call without a reply stops the run
(:class:`CallNeeded`), the play yields that call, and once answered the code runs again
from the start, now one reply further. That code must therefore be pure but for its
model calls (summarizing, scoring a finished episode), which it is.

:func:`run_play` plays one step alone, running each call as it comes (``env.step``).
:func:`play_all` plays many steps together: in each round it takes the pending call of
every play, joins the calls to the same model with the same sampling parameters (seeds
aside) into one ``generate`` call, in play order, and sends each play its rows. The
composition of every batch thus depends only on what the envs do; each prompt keeps its
own seed, so an episode draws the same tokens with 1 env or 16; and a call that raises
ends only the steps whose prompts were in it (the error is raised inside their plays).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from searchgym.corpora.types import Hit, SearchContext, SearchEngine
from searchgym.error import BackendError, ConfigError
from searchgym.lm.base import Generation, LanguageModel, SamplingParams, check_prompts, check_sampling_params

T = TypeVar("T")

#: The sampling keywords of ``LanguageModel.generate`` and their defaults.
GENERATE_DEFAULTS = {
    name: p.default for name, p in inspect.signature(LanguageModel.generate).parameters.items() if p.kind is p.KEYWORD_ONLY
}

#: A step played with its model calls and searches explicit: yields calls, is sent their
#: generations (or hits), returns the step's result.
Play = Generator["ModelCall | SearchCall", "list[Any]", T]


@dataclass(frozen=True)
class ModelCall:
    """One ``generate`` call a component needs: ``lm`` (compared by identity), its
    prompts (text or token-id tuples) and validated sampling parameters."""

    lm: LanguageModel
    prompts: tuple[str | tuple[int, ...], ...]
    params: SamplingParams

    @classmethod
    def of(cls, lm: LanguageModel, prompts: Sequence[str | Sequence[int]], **sampling: Any) -> ModelCall:
        """The call ``lm.generate(prompts, **sampling)`` (its arguments checked as generate checks them)."""
        checked = check_prompts(prompts)
        unknown = sorted(set(sampling) - set(GENERATE_DEFAULTS))
        if unknown:
            raise ConfigError(f"ModelCall.of expects the keyword arguments of LanguageModel.generate ({', '.join(GENERATE_DEFAULTS)}), got {unknown}.")
        params = check_sampling_params(**{**GENERATE_DEFAULTS, **sampling}, num_prompts=len(checked))
        return cls(lm, tuple(p if isinstance(p, str) else tuple(p) for p in checked), params)

    def run(self) -> list[Generation]:
        """Run the call on its model."""
        p = self.params
        return self.lm.generate(
            [prompt if isinstance(prompt, str) else list(prompt) for prompt in self.prompts],
            max_new_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p, stop=p.stop, seed=p.seed, top_k=p.top_k,
        )

    def batch_key(self) -> tuple[int, SamplingParams, bool]:
        """Calls with equal keys can share one ``generate``: same model object, same
        sampling parameters but the per-prompt seeds (seeded and unseeded calls apart)."""
        return id(self.lm), replace(self.params, seed=None), self.params.seed is None

    @staticmethod
    def join(calls: Sequence[ModelCall]) -> ModelCall:
        """One call with the prompts of ``calls`` (same :meth:`batch_key`) in order, each
        with its own seed."""
        first = calls[0]
        seeds = None if first.params.seed is None else tuple(s for c in calls for s in c.params.seed)
        return ModelCall(first.lm, tuple(p for c in calls for p in c.prompts), replace(first.params, seed=seeds))

    @property
    def rows(self) -> int:
        """How many answers the call gets (one generation per prompt)."""
        return len(self.prompts)


@dataclass(frozen=True, eq=False)
class SearchCall:
    """One retrieval a game needs: ``retriever.search(queries, k)`` (the retriever compared
    by identity; any :class:`~searchgym.corpora.types.SearchEngine`).

    ``contexts``: one :class:`~searchgym.corpora.types.SearchContext` per query (whose query
    it is), or None. A retriever with ``search_with_context`` is called with them instead of
    ``search``; one without never sees them.
    """

    retriever: SearchEngine
    queries: tuple[str, ...]
    k: int
    contexts: tuple[SearchContext, ...] | None = None

    def run(self) -> list[list[Hit]]:
        """Run the search; a retriever that answers another number of queries is a backend error."""
        with_context = getattr(self.retriever, "search_with_context", None)
        if self.contexts is not None and callable(with_context):
            hits = with_context(list(self.queries), self.k, list(self.contexts))
        else:
            hits = self.retriever.search(list(self.queries), self.k)
        if not isinstance(hits, (list, tuple)) or len(hits) != len(self.queries):
            got = len(hits) if isinstance(hits, (list, tuple)) else type(hits).__name__
            raise BackendError(f"{type(self.retriever).__name__}.search expects one list of hits per query: {len(self.queries)} queries, got {got}.")
        return list(hits)

    def batch_key(self) -> tuple[str, int, int]:
        """Searches with equal keys go out as one call: same retriever object, same ``k``."""
        return ("search", id(self.retriever), self.k)

    @staticmethod
    def join(calls: Sequence[SearchCall]) -> SearchCall:
        """One search with the queries of ``calls`` (same :meth:`batch_key`) in order, each
        query keeping its own context (a call made without one gets an empty context)."""
        contexts = None
        if any(c.contexts is not None for c in calls):
            blank = SearchContext(example_id="", question="")
            contexts = tuple(x for c in calls for x in (c.contexts if c.contexts is not None else (blank,) * len(c.queries)))
        return SearchCall(calls[0].retriever, tuple(q for c in calls for q in c.queries), calls[0].k, contexts)

    @property
    def rows(self) -> int:
        return len(self.queries)


#: What a play yields: a model call or a search.
Call = ModelCall | SearchCall


class CallNeeded(BaseException):
    """Raised by a component running under :func:`replay` when its call has no reply yet
    (a BaseException, so that code catching ``Exception`` around a model call lets it pass)."""

    def __init__(self, call: ModelCall):
        super().__init__("a model call is waiting for its generations (raised and caught inside replay)")
        self.call = call


class ModelUser:
    """Base of the env components that call a language model ``lm``.

    They call it with :meth:`generate`. Outside a play it runs the call at once; while
    :func:`replay` runs the component's caller, ``replies`` holds the generations the
    play has received, and a call not among them raises :class:`CallNeeded`.
    """

    lm: LanguageModel
    #: The play's replies while :func:`replay` runs; None otherwise.
    replies: dict[ModelCall, list[Generation]] | None = None

    def generate(self, prompts: Sequence[str | Sequence[int]], **sampling: Any) -> list[Generation]:
        """``self.lm.generate(prompts, **sampling)``, or its reply in the play being replayed."""
        call = ModelCall.of(self.lm, prompts, **sampling)
        if self.replies is None:
            return call.run()
        if call not in self.replies:
            raise CallNeeded(call)
        return self.replies[call]


def model_users(*objects: Any) -> list[ModelUser]:
    """The :class:`ModelUser` among ``objects`` and their attributes (a reward recipe's
    frozen models: ``generator``, ``reader``, ``judge``)."""
    found: list[ModelUser] = []
    for obj in objects:
        for candidate in (obj, *getattr(obj, "__dict__", {}).values()):
            if isinstance(candidate, ModelUser) and all(candidate is not f for f in found):
                found.append(candidate)
    return found


def replay(fn: Callable[[], T], users: Iterable[ModelUser]) -> Play[T]:
    """Play ``fn()``, whose model calls go through ``users``: yields each call it needs
    and returns its value once every call has its generations (see the module docstring).

    ``fn`` runs again after each reply, so it must be pure but for those calls (what it
    reads does not change between runs). Identical calls within one ``fn`` share one reply.
    """
    users = list(users)
    replies: dict[ModelCall, list[Generation]] = {}
    while True:
        previous = [u.replies for u in users]
        for u in users:
            u.replies = replies
        try:
            return fn()
        except CallNeeded as need:
            call = need.call
        finally:
            for u, p in zip(users, previous):
                u.replies = p
        replies[call] = yield call


def run_play(play: Play[T]) -> T:
    """Play a step alone: each model call runs as it comes."""
    try:
        call = next(play)
        while True:
            call = play.send(call.run())
    except StopIteration as stop:
        return stop.value


@dataclass
class BatchCounts:
    """What :func:`play_all` did: ``calls`` batched ``generate`` calls for ``requests``
    model calls of the plays (``requests - calls`` calls saved), ``searches`` batched
    ``retriever.search`` calls for ``search_requests`` searches of the plays, over ``rounds`` rounds."""

    calls: int = 0
    requests: int = 0
    rounds: int = 0
    searches: int = 0
    search_requests: int = 0


def play_all(plays: Sequence[Play[Any]], counts: BatchCounts | None = None) -> list[Any]:
    """Play many steps together, batching their model calls and searches (see the module docstring).

    Returns each play's result, or the exception that ended it (returned, not raised),
    in order. ``counts``, when given, is added to.
    """
    counts = counts if counts is not None else BatchCounts()
    results: list[Any] = [None] * len(plays)
    pending: dict[int, Call] = {}

    def advance(i: int, generations: list[Generation] | None = None, error: BaseException | None = None) -> None:
        try:
            call = plays[i].throw(error) if error is not None else plays[i].send(generations)
        except StopIteration as stop:
            results[i] = stop.value
        except Exception as e:  # the caller decides what a failed step means
            results[i] = e
        else:
            pending[i] = call

    for i in range(len(plays)):
        advance(i)
    while pending:
        counts.rounds += 1
        calls = {i: pending.pop(i) for i in sorted(pending)}
        groups: dict[Any, list[int]] = {}
        for i, call in calls.items():
            groups.setdefault(call.batch_key(), []).append(i)
        for members in groups.values():
            kind = type(calls[members[0]])
            if kind is SearchCall:
                counts.searches += 1
                counts.search_requests += len(members)
            else:
                counts.calls += 1
                counts.requests += len(members)
            try:
                answers = kind.join([calls[i] for i in members]).run()
            except Exception as e:  # handed to each play of the call: it ends those steps only
                for i in members:
                    advance(i, error=e)
                continue
            start = 0
            for i in members:
                size = calls[i].rows
                advance(i, answers[start : start + size])
                start += size
    return results
