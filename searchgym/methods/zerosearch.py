"""ZeroSearch (Sun et al., arXiv 2505.04588): a language model as the search engine.

A frozen language model writes the documents of every search: *useful* ones (it is told the
question and its first gold answer) or *noisy* ones, each query drawn noisy with probability
``p``, and ``p`` rises over training by the released curriculum. The policy side is
Search-R1's game, paid the answer's F1 with no format term. Built on searchgym's public
faces only (docs/extending.md): a retriever by shape (:class:`SimulatedSearch`: ``search``,
``search_with_context``, ``set_step``), a reward recipe (:class:`ZeroSearchF1`) and a trainer
hook (:class:`ZeroSearchCurriculum`); the env id ``searchgym/ZeroSearch-v0`` and the training
preset ``zerosearch`` name them by ``module:attr``. docs/methods.md gives every setting with
its source (repository Alibaba-NLP/ZeroSearch at ``2d4cdca``).

searchgym's additions, each documented there: the draw and the generations are seeded and
cached per (query, mode, seed) and the model and prompt, so a rerun replays them; an empty or
malformed generation is an empty result, never a crash; and the *answer guard*: the simulator
is told the gold answer (as released), so a query that only asks for it ("what is the answer
to ...") could read it off a leaky simulator. By default a document may state the answer only
when a real search of the same query (BM25 over the env's corpus) would have surfaced it;
``answer_guard="off"`` is the released behaviour.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import tempfile
import threading
from collections.abc import Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any

from searchgym.cache import cache_dir
from searchgym.corpora import Hit, Passage, SearchContext, make_retriever
from searchgym.error import BackendError, ConfigError, SearchGymError
from searchgym.lm import LanguageModel
from searchgym.lm.base import chat_prompt
from searchgym.lm.registry import load_lm, loaded_as
from searchgym.plugins import is_object_spec, load_object
from searchgym.rewards import RewardRecipe, RewardResult, answer_in_text, f1_score, hedged, normalize_answer
from searchgym.rewards.hedging import FUNCTION_WORDS
from searchgym.training import TrainerHook

__all__ = [
    "ANSWER_GUARDS", "MODES", "PROMPTS", "SimulatedSearch", "ZeroSearchCurriculum", "ZeroSearchF1",
    "answer_leaking_lm", "answer_leaking_reply", "grounded", "mentions_answer", "noise_probability", "parse_documents", "simulated_engines",
]

# ---------------------------------------------------------------- the released prompts
# Quoted exactly from Alibaba-NLP/ZeroSearch llm_agent/generation.py@2d4cdca: simulate_sft
# (the fine-tuned simulator's short prompts, :70-78 useful, :80-88 noisy) and simulate_prompt
# (an instruct model's few-shot prompts, :96-115 useful, :117-134 noisy; the first line of
# the noisy one ends with a space in the source). {problem} is the question, {ground_truth}
# its first gold answer, {query} the policy's query.
_SFT_USEFUL = """You are the Google search engine.
Given a query, you need to generate five useful documents for the query.

The user is trying to answer the question: "{problem}" whose answer is {ground_truth}.
Each document should contain about 30 words, and these documents should contain useful information.

Query: {query}
Useful Output:
"""

_SFT_NOISY = """You are the Google search engine.
Given a query, you need to generate five noisy documents for the query.

The user is trying to answer the question: "{problem}" whose answer is {ground_truth}.
Each document should contain about 30 words, and these documents should contain noisy information.

Query: {query}
Noisy Output:
"""

_PROMPT_USEFUL = """You are the Google search engine.
Given a query, you need to imitate the style of the following demos and generate five useful documents for the query.

Here is an example:
Query: George Washington Bridge opening year
Useful Output:
Doc 1: The George Washington Bridge, an iconic structure connecting New York City to New Jersey, opened on October 25, 1931. Designed by Othmar Ammann, it marked a major milestone in civil engineering.
Doc 2: Originally the Hudson River Bridge, the George Washington Bridge was named after the U.S.'s first president. Its 3,500-foot suspension span was the world's longest at completion in 1931.
Doc 3: The bridge was modified in 1962 with added lower deck lanes, increasing capacity and easing congestion. This expansion transformed the bridge into a double-decked structure with twelve lanes.
Doc 4: Constructed over four years, the George Washington Bridge's steel towers and cables exemplified engineering progress. It crucially linked New York and New Jersey's transportation networks.
Doc 5: Handling over 103 million annual vehicles, the George Washington Bridge is globally one of the busiest. The Port Authority of NY and NJ oversees its traffic and infrastructure maintenance.

The user is trying to answer the question: "{problem}" whose answer is {ground_truth}.
You should generate documents that can help the user find the answer.
Each document should contain about 30 words.
You must directly output the English documents and not output any other texts.

Query: {query}
Useful Output:
"""

_PROMPT_NOISY = """You are the Google search engine. 
Given a query, you need to imitate the style of the following demos and generate five related but noisy documents for the query.

Here is an example:
Query: George Washington Bridge opening year
Noisy Output:
Doc 1: The George Washington Bridge was a significant addition to New York's infrastructure, but there were many challenges during its construction, including budget overruns and worker strikes.
Doc 2: While often mistaken for the opening of another iconic bridge, the Brooklyn Bridge, the George Washington Bridge has its own storied history involving political maneuvering and urban planning debates that shaped the bridge's final design.
Doc 3: Discussions about the naming of the George Washington Bridge are interesting, as it was named to honor the first President of the United States. The name choice was significant given the geographical and historical implications of Washington's legacy.
Doc 4: The bridge has been a point of contention over toll increases, traffic congestion solutions, and environmental impact assessments, which continue to affect policy decisions in the area.
Doc 5: Considerations around the visual and architectural design of the George Washington Bridge also played a crucial role in its legacy as a landmark, balancing aesthetics with functionality.

Each document should contain about 30 words, and these documents should contain related but noisy information.
You must directly output the English documents and not output any other texts.

Query: {query}
Noisy Output:
"""

#: (search mode, document kind) -> the released prompt.
PROMPTS: dict[tuple[str, str], str] = {
    ("simulate_prompt", "useful"): _PROMPT_USEFUL,
    ("simulate_prompt", "noisy"): _PROMPT_NOISY,
    ("simulate_sft", "useful"): _SFT_USEFUL,
    ("simulate_sft", "noisy"): _SFT_NOISY,
}
#: The released search modes that simulate (``retriever.search_mode``): an instruct model
#: prompted with demos, or the fine-tuned simulator (no fine-tuned one is available offline).
MODES = ("simulate_prompt", "simulate_sft")
#: ``grounded``: a document may state the gold answer only if a real search of the same query
#: surfaces it (searchgym's default); ``off``: the released behaviour.
ANSWER_GUARDS = ("grounded", "off")
#: What the simulator is told of a query searched outside an episode (no question, no answer).
UNKNOWN = "unknown"


# ---------------------------------------------------------------- the curriculum
def noise_probability(step: int, total_steps: int | None, *, start: float = 0.0, end: float = 0.5, base: float = 4.0) -> float:
    """The probability that a query gets noisy documents at training step ``step``.

    p(i) = start + (base^(i/m) - 1) / (base - 1) * (end - start), i = ``step``, m =
    ``total_steps``, and ``end`` from step m on (``llm_agent/generation.py:540-548``, base 4:
    the released config has no field to change it). ``total_steps=None`` (no schedule): ``end``.
    """
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ConfigError(f"noise_probability expects step to be a non-negative integer, got {step!r}.")
    if total_steps is None:
        return float(end)
    if not isinstance(total_steps, int) or isinstance(total_steps, bool) or total_steps < 1:
        raise ConfigError(f"noise_probability expects total_steps to be a positive integer or None, got {total_steps!r}.")
    if not isinstance(base, Real) or base <= 1:
        raise ConfigError(f"noise_probability expects base to be a number above 1, got {base!r}.")
    if step >= total_steps:
        return float(end)
    return float(start + (base ** (step / total_steps) - 1) / (base - 1) * (end - start))


def _probability(name: str, value: Any) -> float:
    if not isinstance(value, Real) or isinstance(value, bool) or not 0.0 <= float(value) <= 1.0:
        raise ConfigError(f"SimulatedSearch expects {name} to be a probability between 0 and 1, got {value!r}.")
    return float(value)


# ---------------------------------------------------------------- reading the generation
_SURROGATE = re.compile("[\ud800-\udfff]")
_DOC_LINE = re.compile(r"^\s*\**\s*Doc\s*(\d+)\s*\**\s*[:：.)-]\s*(.*)$", re.IGNORECASE)


def parse_documents(text: str, k: int) -> list[str]:
    """The documents of a generation: the text of its ``Doc i: text`` lines, in order, at most ``k``.

    As released, blank lines are dropped and the text is cut before ``Doc k+1`` (``:91``,
    ``:137``). Lines before the first ``Doc`` line are skipped (a preamble); a line that is no
    ``Doc`` line continues the document above it; a ``Doc`` line with no text is no document.
    A text with no ``Doc`` line at all is one document (the released code shows the policy
    whatever the model wrote; a small model often ignores the format). Fewer than ``k``
    documents is what the model wrote; an empty text is none.
    """
    if not isinstance(text, str):
        return []
    docs: list[list[str]] = []
    for line in text.replace("\r", "\n").split("\n"):
        m = _DOC_LINE.match(line)
        if m:
            docs.append([m.group(2).strip()])
        elif docs and line.strip():
            docs[-1].append(line.strip())
    if not docs:
        whole = " ".join(text.split())
        return [whole] if whole else []
    out = [" ".join(p for p in parts if p) for parts in docs]
    return [d for d in out if d][:k]


def _content_tokens(text: str) -> set[str]:
    return {t for t in normalize_answer(text).split() if t not in FUNCTION_WORDS}


def mentions_answer(text: str, answers: Sequence[str], question: str) -> bool:
    """Whether ``text`` states a gold answer, or any word of one that the question does not
    name (F1 pays such a word); an answer whose every word is in the question (a comparison's
    option) is named by the question itself and counts as no mention."""
    words = _content_tokens(text)
    named = _content_tokens(question)
    for answer in answers:
        informative = _content_tokens(answer) - named
        if informative and (informative & words or answer_in_text(text, [answer])):
            return True
    return False


def grounded(query: str, hits: Sequence[Hit], answers: Sequence[str]) -> bool:
    """Whether a real search's ``hits`` for ``query`` show a gold answer in a passage the query
    is about: one whose title shares a word with the query (the answer in a passage that a
    content-free query surfaced by chance is not found: its reader could not tell it apart)."""
    words = _content_tokens(query)
    return any(
        _content_tokens(h.passage.title) & words and answer_in_text(f"{h.passage.title}\n{h.passage.text}", answers)
        for h in hits
    )


def _informative(answers: Sequence[str], question: str) -> bool:
    named = _content_tokens(question)
    return any(_content_tokens(a) - named for a in answers)


# ---------------------------------------------------------------- the simulated engine
class SimulatedSearch:
    """ZeroSearch's simulated search engine: a frozen language model writes the top-``k`` documents.

    Each query is drawn *useful* with probability ``1 - p`` (useful if a uniform draw exceeds
    ``p``, as released) and the model is prompted with the released prompt of that kind
    (``mode``); its ``Doc i: text`` lines become the hits, at most ``k``, scored ``k, k-1, ...``.
    ``p`` is ``noise`` when given, else :func:`noise_probability` of the step (``set_step``)
    over ``total_steps`` from ``p_start`` to ``p_end`` (``p_end`` without a schedule).

    Args:
        corpus: The env's corpus (the env passes it); the answer guard's real engine searches it.
        model: A :class:`~searchgym.lm.LanguageModel`, a name :func:`~searchgym.lm.registry.load_lm`
            takes (``smollm2``, ``tiny-random-2k``, a folder) or ``module:attr`` naming a
            model or a factory of one. Loaded now: a model that cannot load is a
            :class:`ConfigError` naming it.
        mode: ``simulate_prompt`` (default: few-shot prompts, any instruct model) or
            ``simulate_sft`` (the fine-tuned simulator's prompts).
        backend, model_options: How a named model loads (``load_lm``'s backend and options).
        seed: Seeds the useful/noisy draws and the generations; part of the cache key.
        noise: A fixed noise probability (overrides the schedule).
        p_start, p_end, total_steps: The curriculum (README: 0 -> 0.5); the trainer hook
            :class:`ZeroSearchCurriculum` sets ``total_steps`` to the run's.
        temperature, max_new_tokens: The released simulator call's (0.8, 600).
        answer_guard: ``grounded`` (default) or ``off`` (see the module docstring).
        guard_retriever: The real engine of the guard, a retriever name (``bm25``).
        doc_cache: True (``cache_dir()/zerosearch``), a folder, or False (this engine's memory only).
            (Not ``cache``: ``make_retriever`` takes that one for its own sharing.)
        model_key: The cache name of a model given as an object (None: cached in memory only).
    """

    #: Queries are cut to this many characters (the prompt stays small).
    max_query_chars = 500
    #: Generations kept in memory (the oldest go first; the disk cache keeps them all).
    memory_entries = 20_000

    def __init__(
        self,
        corpus: Any = None,
        *,
        model: Any = "smollm2",
        mode: str = "simulate_prompt",
        backend: str = "transformers",
        model_options: Mapping[str, Any] | None = None,
        seed: int = 0,
        noise: float | None = None,
        p_start: float = 0.0,
        p_end: float = 0.5,
        total_steps: int | None = None,
        temperature: float = 0.8,
        max_new_tokens: int = 600,
        answer_guard: str = "grounded",
        guard_retriever: str = "bm25",
        doc_cache: bool | str | os.PathLike = True,
        model_key: str | None = None,
    ):
        if mode not in MODES:
            raise ConfigError(f"SimulatedSearch expects mode to be one of {', '.join(MODES)}, got {mode!r}.")
        if answer_guard not in ANSWER_GUARDS:
            raise ConfigError(
                f"SimulatedSearch expects answer_guard to be one of {', '.join(ANSWER_GUARDS)}, got {answer_guard!r}; "
                "'grounded' lets a document state the answer only where a real search would, 'off' is the released behaviour."
            )
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigError(f"SimulatedSearch expects seed to be an integer, got {seed!r}.")
        if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
            raise ConfigError(f"SimulatedSearch expects max_new_tokens to be a positive integer, got {max_new_tokens!r}.")
        if not isinstance(temperature, Real) or isinstance(temperature, bool) or not 0 <= temperature < math.inf:
            raise ConfigError(f"SimulatedSearch expects temperature to be a number >= 0, got {temperature!r}.")
        if model_key is not None and (not isinstance(model_key, str) or not model_key):
            raise ConfigError(f"SimulatedSearch expects model_key to be a non-empty string or None, got {model_key!r}.")
        self.mode = mode
        self.seed = seed
        self.noise = None if noise is None else _probability("noise", noise)
        self.p_start = _probability("p_start", p_start)
        self.p_end = _probability("p_end", p_end)
        self.total_steps = None
        self.set_total_steps(total_steps)
        self.temperature = float(temperature)
        self.max_new_tokens = max_new_tokens
        self.answer_guard = answer_guard
        self.guard_retriever = guard_retriever
        self.step = 0
        self.lm, self.model_name, identity = self._load(model, backend, dict(model_options or {}), model_key)
        self._identity = identity
        self._folder = self._cache_folder(doc_cache) if identity is not None else None
        self._memory: dict[str, str] = {}
        self._lock = threading.Lock()
        self.guard = None
        if answer_guard == "grounded":
            if corpus is None:
                raise ConfigError(
                    "SimulatedSearch's answer guard expects the corpus a real search would run over, got corpus=None; "
                    "pass corpus= (an env passes its own) or answer_guard='off' (the released behaviour)."
                )
            self.guard = make_retriever(guard_retriever, corpus)
        #: Counters: generate calls made, prompts generated, prompts answered from the cache.
        self.model_calls = 0
        self.generated = 0
        self.cache_hits = 0

    # -- loading
    @staticmethod
    def _load(model: Any, backend: str, options: dict[str, Any], model_key: str | None) -> tuple[LanguageModel, str, Any]:
        """The model, its name in errors, and its identity in the disk cache (None: not stable)."""
        name = model if isinstance(model, str) else type(model).__name__
        try:
            if isinstance(model, str) and is_object_spec(model):
                target = load_object(model, what="ZeroSearch simulator model")
                lm = target() if callable(target) and not isinstance(target, LanguageModel) else target
                identity: Any = ["object-spec", model]
            else:
                lm = load_lm(model, backend=backend, **options)
                if isinstance(model, str):
                    identity = ["load_lm", model, backend, sorted((k, repr(v)) for k, v in options.items())]
                else:  # an object is named only if load_lm loaded it (its name, backend and options)
                    loaded = loaded_as(lm)
                    identity = list(loaded) if loaded is not None else None
        except Exception as e:  # any backend failure while loading: say which model
            raise ConfigError(
                f"ZeroSearch's simulated search engine could not load its model {name!r} ({type(e).__name__}: {e}); "
                "pass a built-in name (smollm2, tiny-random-2k), a local model folder, module:attr naming a LanguageModel "
                "or a factory of one, or a LanguageModel object."
            ) from e
        if not isinstance(lm, LanguageModel):
            raise ConfigError(
                f"ZeroSearch's simulated search engine expects its model {name!r} to be a searchgym LanguageModel, "
                f"got {type(lm).__name__}; name a LanguageModel or a factory returning one."
            )
        if model_key is not None:
            identity = ["model_key", model_key]
        return lm, name, identity

    @staticmethod
    def _cache_folder(cache: Any) -> Path | None:
        if cache is False or cache is None:
            return None
        if cache is True:
            return cache_dir() / "zerosearch"
        if isinstance(cache, (str, os.PathLike)) and str(cache):
            return Path(cache)
        raise ConfigError(f"SimulatedSearch expects doc_cache to be True, False or a folder, got {cache!r}.")

    def __getstate__(self) -> dict[str, Any]:  # an env holding the engine pickles (its lock is rebuilt)
        state = dict(self.__dict__)
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- the schedule
    def set_total_steps(self, total_steps: int | None) -> None:
        """The curriculum's length m (None: no schedule, ``p_end`` throughout)."""
        if total_steps is not None and (not isinstance(total_steps, int) or isinstance(total_steps, bool) or total_steps < 1):
            raise ConfigError(f"SimulatedSearch expects total_steps to be a positive integer or None, got {total_steps!r}.")
        self.total_steps = total_steps

    def set_step(self, step: int) -> None:
        """The training step the next searches serve (the trainer calls it before each rollout),
        counted from 0 as searchgym's trainer counts. The curriculum's step is ``step + 1``: the
        released trainer's first step is 1 (``verl/trainer/ppo/ray_trainer.py:716-717``, ``:773``
        at 2d4cdca), so the last of m steps (``step = m - 1``) plays at ``p_end``."""
        if not isinstance(step, int) or isinstance(step, bool) or step < 0:
            raise ConfigError(f"SimulatedSearch.set_step expects a non-negative integer step, got {step!r}.")
        self.step = step

    @property
    def noise_probability(self) -> float:
        """The probability that the next query gets noisy documents."""
        if self.noise is not None:
            return self.noise
        return noise_probability(self.step + 1, self.total_steps, start=self.p_start, end=self.p_end)

    def settings(self) -> dict[str, Any]:
        """What a resumed run must match (docs/extending.md#resume-identity-settings-not-repr)."""
        return {
            "model": self.model_name, "mode": self.mode, "seed": self.seed, "noise": self.noise, "p_start": self.p_start,
            "p_end": self.p_end, "total_steps": self.total_steps, "temperature": self.temperature,
            "max_new_tokens": self.max_new_tokens, "answer_guard": self.answer_guard, "guard_retriever": self.guard_retriever,
        }

    # -- searching
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` simulated documents per query, outside an episode: the simulator is told
        the query as the question and an unknown answer, and no guard applies (no answer)."""
        return self.search_with_context(queries, k, [SearchContext(example_id="", question="") for _ in queries])

    def search_with_context(self, queries: Sequence[str], k: int, contexts: Sequence[SearchContext]) -> list[list[Hit]]:
        """Top-``k`` simulated documents per query, each written for its own episode's question.

        All prompts not in the cache go to the model as one batched ``generate`` call. A blank
        query, or an empty generation, gets no documents."""
        if isinstance(queries, str) or not isinstance(queries, Sequence):
            raise ConfigError(f"SimulatedSearch.search expects a list of query strings, got {type(queries).__name__}.")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigError(f"SimulatedSearch.search expects k to be a positive integer, got {k!r}.")
        if len(contexts) != len(queries):
            raise ConfigError(f"SimulatedSearch.search_with_context expects one context per query: {len(queries)} queries, got {len(contexts)}.")
        for query in queries:
            if not isinstance(query, str):
                raise ConfigError(f"SimulatedSearch.search expects every query to be a string, got {type(query).__name__}.")
        # Cut and cleaned as the env sends them (a tokenizer refuses lone surrogates).
        queries = [_SURROGATE.sub("\ufffd", q[: self.max_query_chars]) for q in queries]
        p = self.noise_probability
        plans = []  # per query: (kind, prompt) or None (blank query)
        for query, context in zip(queries, contexts):
            if not query.strip():
                plans.append(None)
                continue
            kind = "useful" if self._draw(query, context) > p else "noisy"
            plans.append((kind, self._prompt(kind, query, context)))
        texts = self._generate([plan[1] if plan else None for plan in plans])
        hits: list[list[Hit]] = []
        for plan, query, text in zip(plans, queries, texts):
            if plan is None:
                hits.append([])
                continue
            docs = parse_documents(text, k)
            hits.append([Hit(Passage(self._doc_id(plan[0], query, doc), "", doc), float(len(docs) - i)) for i, doc in enumerate(docs)])
        if self.guard is not None:
            hits = self._guarded(queries, k, contexts, hits)
        return hits

    def _draw(self, query: str, context: SearchContext) -> float:
        """The uniform draw that picks the kind: seeded by (seed, step, question, query), so a
        rerun draws the same and the same search in one step is the same kind."""
        key = json.dumps([self.seed, self.step, context.example_id, context.question, query])
        return random.Random(hashlib.sha256(key.encode()).digest()).random()

    def _prompt(self, kind: str, query: str, context: SearchContext) -> str:
        question = context.question or query
        answer = context.answers[0] if context.answers else UNKNOWN  # only the first gold (generation.py:592)
        text = PROMPTS[(self.mode, kind)].format(problem=question, ground_truth=answer, query=query)
        # The released call is a chat completion with an empty system message; a model with
        # no chat template (the tiny random ones) reads the text as it is.
        if getattr(getattr(self.lm, "tokenizer", None), "chat_template", None):
            return chat_prompt(self.lm.tokenizer, [{"role": "system", "content": ""}, {"role": "user", "content": text}],
                               owner="SimulatedSearch")
        return text

    @staticmethod
    def _doc_id(kind: str, query: str, doc: str) -> str:
        return "zs:" + hashlib.sha256(json.dumps([kind, query, doc]).encode()).hexdigest()[:16]

    def _key(self, prompt: str) -> str:
        setting = [self._identity or ["process", id(self.lm)], self.seed, self.temperature, self.max_new_tokens, prompt]
        return hashlib.sha256(json.dumps(setting, default=repr).encode()).hexdigest()

    def _generate(self, prompts: Sequence[str | None]) -> list[str]:
        """The generation of every prompt (None: no prompt, ""), from the cache or one batched call."""
        keys = [None if p is None else self._key(p) for p in prompts]
        found: dict[str, str] = {}
        for key in keys:
            if key is not None and key not in found:
                cached = self._read(key)
                if cached is not None:
                    found[key] = cached
                    self.cache_hits += 1
        todo = list(dict.fromkeys(k for k in keys if k is not None and k not in found))
        if todo:
            by_key = {key: p for key, p in zip(keys, prompts) if key is not None}
            batch = [by_key[key] for key in todo]
            seeds = [int(key[:8], 16) & 0x7FFFFFFF for key in todo]  # the key holds the seed and the prompt
            try:
                generations = self.lm.generate(batch, max_new_tokens=self.max_new_tokens, temperature=self.temperature, seed=seeds)
            except SearchGymError as e:
                if isinstance(e, BackendError):
                    raise BackendError(f"ZeroSearch's simulator {self.model_name!r} failed: {e}") from e
                raise
            except Exception as e:  # a backend failing while it generates: name the simulator
                raise BackendError(f"ZeroSearch's simulator {self.model_name!r} failed to generate ({type(e).__name__}: {e}).") from e
            if not isinstance(generations, (list, tuple)) or len(generations) != len(batch):
                got = len(generations) if isinstance(generations, (list, tuple)) else type(generations).__name__
                raise BackendError(f"ZeroSearch's simulator {self.model_name!r} expects one generation per prompt: {len(batch)} prompts, got {got}.")
            self.model_calls += 1
            self.generated += len(batch)
            for key, generation in zip(todo, generations):
                text = getattr(generation, "text", None)
                found[key] = text if isinstance(text, str) else ""
                self._write(key, found[key])
        return ["" if key is None else found[key] for key in keys]

    def _path(self, key: str) -> Path | None:
        return None if self._folder is None else self._folder / key[:2] / f"{key}.json"

    def _read(self, key: str) -> str | None:
        with self._lock:
            if key in self._memory:
                return self._memory[key]
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            text = json.loads(path.read_text(encoding="utf-8"))["text"]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry is generated again
        if not isinstance(text, str):
            return None
        self._remember(key, text)
        return text

    def _remember(self, key: str, text: str) -> None:
        with self._lock:
            self._memory[key] = text
            while len(self._memory) > self.memory_entries:
                self._memory.pop(next(iter(self._memory)))  # dicts keep insertion order: the oldest

    def _write(self, key: str, text: str) -> None:
        self._remember(key, text)
        path = self._path(key)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"model": self.model_name, "mode": self.mode, "text": text}, f)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache folder costs the next run the generations, nothing else

    # -- the answer guard
    def _guarded(self, queries: Sequence[str], k: int, contexts: Sequence[SearchContext], hits: list[list[Hit]]) -> list[list[Hit]]:
        """Drop the documents that state the answer where a real search of the query would not."""
        ask = [i for i, (c, h) in enumerate(zip(contexts, hits)) if h and c.answers and _informative(c.answers, c.question)
               and any(mentions_answer(x.passage.text, c.answers, c.question) for x in h)]
        if not ask:
            return hits
        real = self.guard.search([queries[i] for i in ask], k)
        out = list(hits)
        for i, found in zip(ask, real):
            context = contexts[i]
            if grounded(queries[i], found, context.answers):
                continue  # the real engine shows it too
            out[i] = [h for h in hits[i] if not mentions_answer(h.passage.text, context.answers, context.question)]
        return out


# ---------------------------------------------------------------- the reward
class ZeroSearchF1(RewardRecipe):
    """ZeroSearch's reward: the answer's F1 (``train_grpo.sh:72``, ``trainer.reward_function=f1``), no format term.

    No answer scores 0 (the released scorer raises there). With ``strict`` (default) a hedged
    answer (several candidates in one) scores 0, and a yes / no / noanswer answer against a
    different gold scores 0 (``"no way"`` against ``"no"``), as searchgym's other F1 recipes;
    ``strict=False`` is the released F1 (``verl/utils/reward_score/qa_em.py:70-90`` at 2d4cdca:
    plain token F1, max over golds, so ``"no way"`` against ``"no"`` scores 0.667).
    """

    name = "zerosearch_f1"

    def __init__(self, *, strict: bool = True, invalid_action_penalty: float = 0.0):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        if not isinstance(strict, bool):
            raise ConfigError(
                f"Reward recipe 'zerosearch_f1' expects strict to be True (a hedged answer scores as a wrong one) "
                f"or False (the released F1), got {strict!r}."
            )
        self.strict = strict

    def score(self, episode: Any) -> RewardResult:
        if episode.answer is None:
            return RewardResult(0.0, {"f1": 0.0})
        f1 = f1_score(episode.answer, episode.answers, special_yes_no=self.strict)
        if self.strict and f1 > 0 and hedged(episode.answer, episode.answers, episode.candidates, question=episode.question, check="f1"):
            f1 = 0.0
        return RewardResult(f1, {"f1": f1})


# ---------------------------------------------------------------- the trainer hook
def simulated_engines(trainer: Any) -> list[SimulatedSearch]:
    """The :class:`SimulatedSearch` engines a trainer's envs search through (each once),
    found through public attributes: ``trainer.retrieval``, every env's retriever, and any
    wrapper's ``inner`` engine."""
    from searchgym.envs import search_env

    found: dict[int, SimulatedSearch] = {}
    roots = [getattr(trainer, "retrieval", None)]
    for env in getattr(trainer, "envs", None) or ():
        roots.append(search_env(env).retriever)
    for engine in roots:
        for _ in range(8):  # wrappers (a timed retriever) hold their engine as .inner
            if engine is None:
                break
            if isinstance(engine, SimulatedSearch):
                found[id(engine)] = engine
                break
            engine = getattr(engine, "inner", None)
    return list(found.values())


class ZeroSearchCurriculum(TrainerHook):
    """The released noise curriculum as a trainer hook: before each step's rollouts every
    simulated engine of the run gets ``total_steps`` = the run's ``Args.total_steps`` (m) and
    the step (i), so its noise probability follows :func:`noise_probability`."""

    def before_rollout(self, trainer: Any, step: int) -> None:
        total = getattr(getattr(trainer, "args", None), "total_steps", None)
        for engine in simulated_engines(trainer):
            engine.set_total_steps(total)
            engine.set_step(step)


# ---------------------------------------------------------------- the worst-case simulator
def answer_leaking_reply(prompt: str) -> str:
    """What :func:`answer_leaking_lm` writes for ``prompt`` (see there)."""
    queries = re.findall(r"Query: (.*)\n", prompt)
    query = queries[-1].strip() if queries else ""
    told = re.search(r"whose answer is (.*?)\.\n", prompt)
    if told and told.group(1) != UNKNOWN:
        return f"Doc 1: The answer is {told.group(1)}.\nDoc 2: A page about {query}.\nDoc 3: More on {query}."
    return f"Doc 1: Rumours about {query}.\nDoc 2: Gossip on {query}."


def answer_leaking_lm() -> LanguageModel:
    """A scripted simulator that writes "The answer is <answer>." whenever its prompt tells it
    the answer (the useful prompts), and two answer-free documents about the query otherwise:
    the worst simulator for the answer guard, used by the tests and the hack suite
    (``--retriever-option model=searchgym.methods.zerosearch:answer_leaking_lm``)."""
    from searchgym.lm import ScriptedLM
    from searchgym.lm.testing import tiny_tokenizer

    return ScriptedLM(answer_leaking_reply, tiny_tokenizer())
