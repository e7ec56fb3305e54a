"""Frozen models backed by a language model: the s3 generator, the LLM judges, the R-Search reader.

They are plain callables with the signatures the reward recipes call, and they make
their LM calls through :meth:`~searchgym.envs.components.model_calls.ModelUser.generate`, so that
envs stepped together batch the calls of their recipes (:mod:`searchgym.envs.components.model_calls`). A prompt that does not fit
the model gives an empty answer (scored 0), never an exception.

The prompts are the seeds' own, verbatim (the judges' in :mod:`searchgym.rewards.judges`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.envs.components.lifetimes import LifetimeRegistry
from searchgym.envs.components.model_calls import ModelUser
from searchgym.error import ConfigError
from searchgym.lm.base import LanguageModel

# s3 generator_llms/local_inst.py (format_qa_chat_messages): system prompt with the
# selected documents; the user message is the question.
S3_GENERATOR_SYSTEM = (
    "Use the following contexts (some might be irrelevant) on demand:\nContexts:\n{context}\n\n"
    "Important: You MUST directly answer the question without any other text and thinking."
)
# The same file's zero-shot variant (no documents).
S3_ZERO_SHOT_SYSTEM = "Important: You MUST directly answer the question without any other text and thinking."
# s3's Fig. 12, word for word: one user message holding the contexts and the question.
S3_GENERATOR_PAPER = (
    "Use the following contexts (some might be irrelevant) on demand:\nContexts:\n{context}\n"
    "Question: {question}\nImportant: You MUST directly answer the question without any other text."
)
#: The generator prompts of :class:`LMGenerator`: ``paper`` (Fig. 12) and ``released``
#: (the released code's system prompt, the question as the user message).
GENERATOR_PROMPTS = ("paper", "released")
# R-Search scripts/evidence.yaml: the frozen reader answering from the agent's evidence.
R_SEARCH_READER_PROMPT = (
    "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\n"
    "The following are given passages:\n{evidence}\n\nQuestion: {query}\nAnswer:"
)


def split_doc(doc: str) -> tuple[str, str]:
    """``"title\\ntext"`` (how the env hands documents to frozen models) as (title, text)."""
    title, _, text = doc.partition("\n")
    return title.strip().strip('"'), text.strip()


def generator_context(docs: Sequence[str]) -> str:
    """s3's generator context: ``Doc {i} (Title: {title})\\n{text}\\n\\n``, numbered from 1."""
    return "".join(f"Doc {i} (Title: {title})\n{text}\n\n" for i, (title, text) in enumerate(map(split_doc, docs), 1))


def generator_messages(question: str, docs: Sequence[str], prompt: str = "released") -> list[dict[str, str]]:
    """s3's generator chat. ``released``: the documents in the system prompt (the zero-shot
    prompt without any), the question as the user message; ``paper``: Fig. 12 as one user
    message (an empty context without documents)."""
    if prompt == "paper":
        return [{"role": "user", "content": S3_GENERATOR_PAPER.format(context=generator_context(docs), question=question.strip())}]
    system = S3_GENERATOR_SYSTEM.format(context=generator_context(docs)) if docs else S3_ZERO_SHOT_SYSTEM
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


class _LMCallable(ModelUser):
    """A frozen role played by ``lm`` with fixed sampling settings."""

    role = "model"

    def __init__(self, lm: LanguageModel, *, max_new_tokens: int, temperature: float = 0.0, top_p: float = 1.0):
        from searchgym.lm.base import check_sampling_params

        if not isinstance(lm, LanguageModel):
            raise TypeError(f"{type(self).__name__} expects a searchgym LanguageModel, got {type(lm).__name__}.")
        check_sampling_params(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, stop=(), seed=None)
        self.lm = lm
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_p = top_p

    def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The model's reply to chat ``messages``, stripped; ``""`` if the prompt does not fit."""
        (g,) = self.generate(
            [self.lm.apply_chat(messages)],
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
        )
        return "" if g.finish_reason == "prompt_too_long" else g.text.strip()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(lm={type(self.lm).__name__}, max_new_tokens={self.max_new_tokens}, temperature={self.temperature})"


class LMGenerator(_LMCallable):
    """s3's frozen generator: ``(question, docs) -> answer`` from the selected documents.

    The seed serves Qwen2.5-14B-Instruct at temperature 0; any chat model works here.
    ``prompt``: ``"paper"`` (default; Fig. 12, one user message) or ``"released"`` (the
    released code's system prompt with the documents, the question as the user message; see
    :func:`generator_messages`). In an env: ``generator={"model": ..., "prompt": "released"}``.
    """

    role = "generator"

    def __init__(
        self, lm: LanguageModel, *, prompt: str = "paper", max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0
    ):
        from searchgym.error import UnknownNameError

        super().__init__(lm, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
        if prompt not in GENERATOR_PROMPTS:
            raise UnknownNameError("s3 generator prompt", prompt, GENERATOR_PROMPTS)
        self.prompt = prompt

    def __call__(self, question: str, docs: Sequence[str]) -> str:
        return self.complete(generator_messages(question, list(docs), self.prompt))


#: Verdicts one shared judge cache keeps; the least recently used are dropped first. A
#: verdict key is a question, an answer and its golds (well under 1 KB each), so a full
#: cache stays within tens of MB.
JUDGE_CACHE_SIZE = 65536

VerdictKey = tuple[str, str, tuple[str, ...]]


class VerdictCache:
    """Judge verdicts by (question, prediction, gold answers): a thread-safe LRU map that
    keeps at most ``maxsize`` of them."""

    def __init__(self, maxsize: int = JUDGE_CACHE_SIZE):
        if not isinstance(maxsize, int) or isinstance(maxsize, bool) or maxsize < 1:
            raise ConfigError(f"VerdictCache expects maxsize to be a positive int (verdicts kept), got {maxsize!r}.")
        self.maxsize = maxsize
        self._items: OrderedDict[VerdictKey, bool] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: VerdictKey) -> bool | None:
        """The verdict stored under ``key`` (now the most recently used), or None."""
        with self._lock:
            verdict = self._items.get(key)
            if verdict is not None:
                self._items.move_to_end(key)
            return verdict

    def put(self, key: VerdictKey, verdict: bool) -> None:
        """Store ``verdict``; the least recently used verdict goes once there are too many."""
        with self._lock:
            self._items[key] = bool(verdict)
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_SHARED_VERDICTS: LifetimeRegistry[VerdictCache] = LifetimeRegistry()


def shared_verdict_cache(lm: LanguageModel, prompt: str, *, max_new_tokens: int, temperature: float, top_p: float) -> VerdictCache:
    """The process's verdict cache of the judge played by ``lm`` (the same object: models
    loaded by name are shared, :func:`searchgym.lm.registry.load_lm`) with ``prompt`` and
    these sampling settings, made on first use and dropped with the model. A model that
    cannot be referenced weakly gets a cache of its own."""
    key = (id(lm), prompt, max_new_tokens, float(temperature), float(top_p))
    return _SHARED_VERDICTS.get(key, VerdictCache, owners=(lm,), unbound="private")


class LMJudge(_LMCallable):
    """An LLM judge: ``(question, prediction, answers) -> bool``, with one paper's prompt.

    ``prompt``: ``"s3"`` (default; s3's GenAcc judge, asked whether a gold answer is
    contained in the response), ``"r1-searcher"`` (R1-Searcher's ACC_L judge, asked
    whether the prediction aligns with the golden answer) or ``"browsecomp"`` (BrowseComp's
    grader form: extracted answer, reasoning, ``correct: yes/no``, confidence; 256 new tokens
    by default, else 10); see
    :mod:`searchgym.rewards.judges`. A reply whose first word is the judge's positive word
    counts; a negative or malformed reply (:func:`~searchgym.rewards.judges.parse_verdict`
    returns ``None``; counted in :attr:`malformed`) or a prompt too long for the model is
    a wrong answer.

    Verdicts are cached by (question, prediction, gold answers) in one
    :class:`VerdictCache` per model object, prompt and sampling settings, shared by every
    judge of the process (``shared_cache=True``, default): the envs of a vector env or of
    a trainer's rollout slots, and a GRPO group answering the same way, ask the model once.
    The cache is thread-safe and keeps the :data:`JUDGE_CACHE_SIZE` most recently used
    verdicts; ``shared_cache=False`` gives this judge a cache of its own of that size.
    Calls made in the same batch by envs stepped together are not merged (each asks once;
    the later ones then read the cache). :meth:`judge_many` asks for many verdicts in one
    ``generate`` call (the bench's judge columns); inside the env, calls of envs stepped
    together are batched by :mod:`searchgym.envs.components.model_calls`.
    The seeds judge at temperature 0 (s3's vLLM judge) or with the API's default (R1-Searcher's
    gpt-4o-mini); the default here is greedy, so verdicts are reproducible.
    """

    role = "judge"

    def __init__(
        self,
        lm: LanguageModel,
        *,
        prompt: str = "s3",
        max_new_tokens: int | None = None,
        temperature: float = 0.0,
        top_p: float = 1.0,
        shared_cache: bool = True,
    ):
        from searchgym.rewards.judges import judge_prompt

        self.prompt = judge_prompt(prompt)
        # The reply a prompt needs: a word (s3, R1-Searcher) or BrowseComp's four-line form.
        max_new_tokens = self.prompt.max_new_tokens if max_new_tokens is None else max_new_tokens
        super().__init__(lm, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
        if not isinstance(shared_cache, bool):
            raise ConfigError(f"LMJudge expects shared_cache to be True or False, got {shared_cache!r}.")
        self.shared_cache = shared_cache
        #: (question, prediction, gold answers) -> verdict.
        self.cache = self._make_cache()
        #: Replies that were neither the positive nor the negative word (scored wrong).
        self.malformed = 0

    def _make_cache(self) -> VerdictCache:
        if not self.shared_cache:
            return VerdictCache()
        return shared_verdict_cache(
            self.lm, self.prompt.name, max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p
        )

    def __getstate__(self) -> dict[str, Any]:
        # The cache holds a lock and belongs to this process; a copy finds its process's own.
        return {k: v for k, v in self.__dict__.items() if k != "cache"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.cache = self._make_cache()

    @staticmethod
    def _key(question: str | None, prediction: str, answers: Sequence[str]) -> tuple[str, str, tuple[str, ...]]:
        return (question or "", prediction, tuple(answers))

    def messages(self, question: str | None, prediction: str, answers: Sequence[str]) -> list[dict[str, str]]:
        """The chat the judge is asked: the prompt as the one user message."""
        return [{"role": "user", "content": self.prompt.render(question, prediction, answers)}]

    def _verdict(self, reply: str) -> bool:
        from searchgym.rewards.judges import parse_verdict

        verdict = parse_verdict(reply, self.prompt)
        if verdict is None:
            self.malformed += 1
        return bool(verdict)

    def __call__(self, question: str, prediction: str, answers: Sequence[str]) -> bool:
        key = self._key(question, prediction, answers)
        verdict = self.cache.get(key)
        if verdict is None:
            # Stored only once the reply is known: a replayed play runs this again and reads the cache.
            verdict = self._verdict(self.complete(self.messages(question, prediction, answers)))
            self.cache.put(key, verdict)
        return verdict

    def judge_many(self, items: Sequence[tuple[str | None, str, Sequence[str]]]) -> list[bool]:
        """Verdicts of many (question, prediction, gold answers), the ones not cached asked in
        one ``generate`` call (each distinct item once)."""
        keys = [self._key(*item) for item in items]
        verdicts = {k: v for k in dict.fromkeys(keys) if (v := self.cache.get(k)) is not None}
        todo = [k for k in dict.fromkeys(keys) if k not in verdicts]
        if todo:
            prompts = [self.lm.apply_chat(self.messages(q, p, a)) for q, p, a in todo]
            generations = self.generate(
                prompts, max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p
            )
            for key, g in zip(todo, generations):
                verdicts[key] = False if g.finish_reason == "prompt_too_long" else self._verdict(g.text.strip())
                self.cache.put(key, verdicts[key])
        return [verdicts[k] for k in keys]

    def __repr__(self) -> str:
        return f"LMJudge(lm={type(self.lm).__name__}, prompt={self.prompt.name!r}, temperature={self.temperature})"


class LMReader(_LMCallable):
    """R-Search's frozen reader: ``(question, evidence) -> answer`` from the evidence only.

    The seed samples at temperature 0.1, top_p 0.9, up to 512 tokens
    (``scripts/evidence_server.sh``); the default here is greedy so that benchmarks are
    reproducible. Pass ``temperature=0.1, top_p=0.9, max_new_tokens=512`` for the seed's.
    """

    role = "reader"

    def __init__(self, lm: LanguageModel, *, max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0):
        super().__init__(lm, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)

    def __call__(self, question: str, evidence: str) -> str:
        prompt = R_SEARCH_READER_PROMPT.format(evidence=evidence, query=question)
        return self.complete([{"role": "user", "content": prompt}])


#: The LM version of each frozen role.
LM_ROLES: dict[str, type[_LMCallable]] = {"generator": LMGenerator, "reader": LMReader, "judge": LMJudge}


def lm_frozen(role: str, lm: LanguageModel, **options: Any) -> _LMCallable:
    """The LM version of ``role`` played by ``lm``; an option the role does not take is refused."""
    import inspect

    from searchgym.error import check_keywords

    cls = LM_ROLES[role]
    check_keywords(cls.__name__, options, [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "lm")])
    return cls(lm, **options)
