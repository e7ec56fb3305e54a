"""The questions and envs of a training run.

The questions come in a seeded order that survives resumes (:class:`DataOrder`); the envs'
arguments follow the curriculum stage and the split (:func:`env_kwargs`); both splits are
checked before anything loads (:func:`check_splits`); and the training envs are built with
a :class:`TimedRetriever` (their public ``retriever`` option) so that a step can report
the seconds spent in retrieval without touching the retriever every env shares.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.corpora import Retriever, load_corpus, make_retriever
from searchgym.envs.registration import env_spec, full_env_id, with_frozen_models
from searchgym.envs.single.core import load_examples
from searchgym.error import ConfigError, UnknownNameError
from searchgym.training.args import Args


class DataOrder:
    """Questions in a seeded order, reshuffled every epoch; its state is two integers."""

    def __init__(self, ids: Sequence[str], seed: int):
        if not ids:
            raise ConfigError("The training split has no questions.")
        self.ids = list(ids)
        self.seed = seed
        self.epoch = 0
        self.position = 0
        self._order = self._shuffled()

    def _shuffled(self) -> list[str]:
        order = list(self.ids)
        random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order

    def take(self, k: int) -> list[str]:
        out = []
        while len(out) < k:
            if self.position == len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._shuffled()
            out.append(self._order[self.position])
            self.position += 1
        return out

    def state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._shuffled()


class TimedRetriever(Retriever):
    """A retriever that sums the seconds its ``search`` calls take, over every env thread.

    The trainer passes it to the envs it builds (their ``retriever`` option); the retriever
    it wraps is the one ``make_retriever`` shares with every env over the corpus, and is
    used as it is. It passes a context-aware engine its contexts (``search_with_context``)
    and the training step (``set_step``). :meth:`over` times another engine on the same clock
    (one retriever per env, one total).
    """

    def __init__(self, inner: Any, *, clock: TimedRetriever | None = None):
        self.inner = inner
        self._clock = clock if clock is not None else self
        self._seconds = 0.0
        self._lock = threading.Lock()

    @property
    def corpus(self) -> Any:  # type: ignore[override]
        return getattr(self.inner, "corpus", None)

    @property
    def max_query_chars(self) -> int | None:  # type: ignore[override]
        return getattr(self.inner, "max_query_chars", None)

    @property
    def seconds(self) -> float:
        """Seconds spent searching, by this retriever and every one timed on its clock."""
        return self._clock._seconds

    def over(self, inner: Any) -> TimedRetriever:
        """``inner`` timed on this retriever's clock."""
        return TimedRetriever(inner, clock=self._clock)

    def search(self, queries: Sequence[str], k: int) -> Any:
        return self._timed(lambda: self.inner.search(queries, k))

    def search_with_context(self, queries: Sequence[str], k: int, contexts: Sequence[Any]) -> Any:
        """The inner engine's ``search_with_context`` when it has one, else its ``search``."""
        with_context = getattr(self.inner, "search_with_context", None)
        if callable(with_context):
            return self._timed(lambda: with_context(queries, k, contexts))
        return self.search(queries, k)

    def set_step(self, step: int) -> None:
        """Tell the inner engine the training step, when it asks for it."""
        tell = getattr(self.inner, "set_step", None)
        if callable(tell):
            tell(step)

    def _timed(self, search: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return search()
        finally:
            clock = self._clock
            with clock._lock:
                clock._seconds += time.perf_counter() - t0


def timed_retriever(env_id: str, options: Mapping[str, Any]) -> TimedRetriever:
    """The retriever the env ``env_id`` builds from ``options`` (the same cached instance), timed."""
    spec = {**env_spec(env_id), **options}
    corpus = load_corpus(spec.get("corpus", "synthwiki"), **dict(spec.get("corpus_options") or {}))
    return TimedRetriever(make_retriever(spec.get("retriever", "bm25"), corpus, **dict(spec.get("retriever_options") or {})))


def make_train_envs(args: Args, kwargs: Mapping[str, Any], retrieval: TimedRetriever) -> list[Any]:
    """The ``num_envs`` training envs made with ``kwargs``, every one searching through
    ``retrieval`` (the shared engine, timed), or with ``Args.retriever_per_env`` each through
    an engine of its own timed on the same clock, then wrapped by ``Args.wrappers``."""
    import gymnasium as gym

    from searchgym.envs.registration import own_retriever
    from searchgym.plugins import apply_wrappers

    env_id = full_env_id(args.env_id)
    envs = []
    for _ in range(args.num_envs):
        engine = retrieval.over(own_retriever(args.env_id, args.env_options)) if args.retriever_per_env else retrieval
        envs.append(apply_wrappers(gym.make(env_id, **{**kwargs, "retriever": engine}), args.wrappers))
    return envs


def tell_step(envs: Sequence[Any], step: int) -> None:
    """Give every search engine of ``envs`` that asks for it (``set_step``) the training step, once each."""
    from searchgym.envs import search_env

    seen: set[int] = set()
    for env in envs:
        engine = search_env(env).retriever
        if id(engine) not in seen:
            seen.add(id(engine))
            tell = getattr(engine, "set_step", None)
            if callable(tell):
                tell(step)


def reward_at(args: Args, step: int) -> str | None:
    """The reward recipe of the curriculum stage of ``step`` (None: the env's default)."""
    if args.stage2_step is not None and step >= args.stage2_step:
        return args.stage2_reward
    return args.reward


def stage_at(args: Args, step: int) -> int:
    """The curriculum stage of ``step``: 2 from ``stage2_step`` on, else 1."""
    return 2 if args.stage2_step is not None and step >= args.stage2_step else 1


def env_kwargs(
    args: Args, split: str, reward: str | None, *, frozen: Any, evaluation: bool = False, stage: int = 1
) -> dict[str, Any]:
    """``gym.make`` arguments of the env on ``split``: ``Args.env_options`` (with
    ``eval_env_options`` when ``evaluation``), the stage's reward and, with
    ``Args.stage_sets``, the stage's questions (training only), the judge, and the frozen
    models (``frozen``: the loaded frozen LM, or None for the built-in ones)."""
    kwargs = {"split": split, **args.env_options}
    if evaluation:
        kwargs.update(args.eval_env_options)
    if reward is not None:
        kwargs["reward"] = reward
    if args.judge_model is not None:
        kwargs.setdefault("judge", args.judge_model)
    if args.stage_sets is not None and not evaluation:
        from searchgym.training.stage_sets import stage_file

        kwargs["dataset"] = str(stage_file(args.stage_sets, stage))
        kwargs["dataset_options"] = None
    kwargs = with_tool_parser(kwargs, args.chat_template)
    model = None if args.frozen_model is None else ("gold-span" if frozen is None else frozen)
    return with_frozen_models(full_env_id(args.env_id), kwargs, frozen=model, summarizer=args.summarizer, summarizer_model=frozen)


def with_tool_parser(options: dict[str, Any], chat_template: str | None) -> dict[str, Any]:
    """``options`` (gym.make arguments) with the tool parser that reads the calls the chat
    template ``chat_template`` shows, when the env plays through tool calls
    (``action_format="tools"``) and the options name no parser."""
    if chat_template is None or options.get("action_format") != "tools" or "tool_parser" in options:
        return options
    from searchgym.lm.chat_templates import template_by_name

    return {**options, "tool_parser": template_by_name(chat_template).tool_parser}


def check_splits(args: Args) -> None:
    """Both splits hold questions (checked before anything is written or loaded: a wrong
    split fails here, not after the model has loaded)."""
    checks = [("train_split", args.train_split, args.env_options)]
    if args.eval_every:
        checks.append(("eval_split", args.eval_split, {**args.env_options, **args.eval_env_options}))
    for name, split, options in checks:
        options = {**env_spec(args.env_id), **options}
        try:
            load_examples(
                options.get("corpus", "synthwiki"), options.get("dataset"), split=split,
                corpus_options=options.get("corpus_options"), dataset_options=options.get("dataset_options"),
                owner=f"Args.{name}",
            )
        except UnknownNameError as e:
            if not e.kind.endswith("split"):
                raise
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"Args.{name} {split!r} is not a split of this env's dataset: {e} Pass {flag} (Args.{name}).") from None
