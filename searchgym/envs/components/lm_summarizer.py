"""RECON's summarizer: a language model condenses every retrieval before the agent reads it.

The prompt's frame is the seed's (``search_r1/search/retrieval_with_summarizer.py`` in
RECON's code), verbatim. The paper (App. B.3) fills its "User Question" slot with the
user's question and its "Search Query" slot with the query; the seed's rollout code sends
the search query in both (``question_slot="query"`` keeps that). The paper distils
summaries across six aspects (clarity, factual correctness, completeness, coverage,
coherence, logicality), each described in App. B.3; :data:`ASPECTS` holds those
descriptions word for word (the seed's ``clarity`` text is the same as the paper's).
The paper's summarizer samples with temperature 0.7, top-p 0.9, top-k 40 (the defaults).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.corpora.types import Hit
from searchgym.envs.components.model_calls import ModelUser
from searchgym.envs.components.summarizer_base import Summarizer
from searchgym.error import ConfigError, UnknownNameError

RECON_PROMPT = """You are a helpful assistant in a retrieval-augmented question-answering system.

You will be given:
- A user question
- A search prompt (query) used to retrieve information
- A set of documents retrieved using that query

Your task is to generate a support context — a concise, well-structured summary that captures all the key facts from the documents which are relevant to answering the user question.

Important Instructions:
- Do not answer the question directly.
- Do not add external knowledge or hallucinate any content.
- Use only the information found in the retrieved documents.
- Rephrase and compress where appropriate, but preserve factual meaning.
- Maintain consistent tone and structure throughout.
- Focus on maximizing the following aspect in your output:

Focus Aspect: {aspect_title}
→ {aspect_description}

User Question: {user_question}

Search Query (used by the retriever): {search_query}

Retrieved Documents:
{documents}
Please write the support context for me. Make it clear, factual, and optimized for the aspect defined above."""

#: Aspect name -> (title, description): the six of App. B.3, word for word (``clarity`` is
#: also the seed's text).
ASPECTS: dict[str, tuple[str, str]] = {
    "clarity": (
        "Clarity",
        "Write in a clear, accessible manner that is easy to understand. Use simple, direct language and avoid "
        "jargon or overly complex sentences. Present information in a straightforward way that makes the key points "
        "immediately apparent to the reader. Ensure that each statement is unambiguous and easy to follow.",
    ),
    "factual_correctness": (
        "Factual Correctness",
        "Ensure that every statement in the support context is factually accurate and directly supported by the "
        "retrieved documents. Do not include any information that is inferred, assumed, or fabricated. Avoid "
        "hallucinations, exaggerations, or unsupported claims.",
    ),
    "completeness": (
        "Completeness",
        "Make sure that the support context includes all major facts from the retrieved documents that are needed to "
        "answer the user's question. Do not omit important information, even if it seems implicit. The summary should "
        "be as thorough as possible within a compact form.",
    ),
    "coverage": (
        "Coverage",
        "Ensure comprehensive coverage of all relevant information from the retrieved documents. Include all key facts, "
        "data points, examples, and supporting details that could be useful for answering the question. Avoid omitting "
        "important information even if it seems redundant, as comprehensive coverage is prioritized over brevity.",
    ),
    "coherence": (
        "Coherence",
        "Create a logically coherent and well-structured summary that flows naturally from one point to the next. Use "
        "clear transitions, logical connections, and a consistent narrative structure. Ensure that ideas are presented "
        "in a logical sequence that makes sense to the reader, with each piece of information building upon the "
        "previous one.",
    ),
    "logicality": (
        "Logicality",
        "Present information in a logically sound manner with clear reasoning and valid conclusions. Ensure that "
        "cause-and-effect relationships are properly established, that arguments are well-structured, and that "
        "conclusions follow logically from the presented evidence. Avoid logical fallacies and ensure that the "
        "information flows in a way that makes logical sense.",
    ),
}

#: Where the episode's question goes: ``question`` (the paper: the user's question in the
#: "User Question" slot) or ``query`` (the seed's rollout code: the search query in both slots).
QUESTION_SLOTS = ("question", "query")

#: The paper's sampling for the summarizer (App. B.4): temperature 0.7, top-p 0.9, top-k 40.
PAPER_SAMPLING = {"temperature": 0.7, "top_p": 0.9, "top_k": 40}


def render_documents(hits: Sequence[Hit]) -> str:
    """The seed's document lines: ``[Doc i] title: text``, title without quotes, from 1."""
    return "".join(f"[Doc {i}] {h.passage.title.strip(chr(34))}: {h.passage.text}\n" for i, h in enumerate(hits, 1))


def recon_prompt(question: str, query: str, hits: Sequence[Hit], aspect: str = "clarity") -> str:
    """RECON's summarizer prompt for the documents ``hits`` retrieved with ``query`` while
    answering ``question`` (pass the query as ``question`` for the seed's prompt)."""
    if aspect not in ASPECTS:
        raise UnknownNameError("summary aspect", aspect, ASPECTS)
    title, description = ASPECTS[aspect]
    return RECON_PROMPT.format(
        aspect_title=title,
        aspect_description=description,
        user_question=question.strip(),
        search_query=query.strip(),
        documents=render_documents(hits),
    )


def fallback_summary(hits: Sequence[Hit]) -> str:
    """What the seed returns when the summarizer fails: each document cut to 200 characters."""
    return "\n".join(f"Doc {i}: {h.passage.text[:200]}..." for i, h in enumerate(hits, 1))


class LLMSummarizer(Summarizer, ModelUser):
    """A language model writes RECON's support context for every retrieval.

    Args:
        model: A :class:`~searchgym.lm.base.LanguageModel` or a model name for
            :func:`~searchgym.lm.registry.load_lm` (``"smollm2"``, a folder such as a
            ``searchgym distill-summarizer`` run's ``final/``, an id, an OpenAI-compatible URL
            with ``backend="openai"``).
        aspect: One of :data:`ASPECTS` (the seed uses ``clarity``).
        question_slot: ``"question"`` (the paper: the user's question in the prompt's "User
            Question" slot) or ``"query"`` (the seed's code: the search query there too).
        backend, backend_options: How a model name is loaded.
        max_new_tokens, temperature, top_p, top_k: Generation settings; the defaults are the
            paper's sampling (:data:`PAPER_SAMPLING`). ``temperature=0`` decodes greedily (the
            previous default). The seed asks its service for up to 800 tokens.
        seed: Sampling is seeded per prompt from ``seed`` and the prompt, so an env replays
            the same summaries; None draws fresh randomness on every call.

    An empty generation or a prompt that does not fit the model falls back to the seed's
    fallback (each document cut to 200 characters), so a search always returns something.
    The model call goes through :meth:`~searchgym.envs.components.model_calls.ModelUser.generate`, so
    envs stepped together batch it (:mod:`searchgym.envs.components.model_calls`).
    """

    name = "llm"

    def __init__(
        self,
        model: Any = "smollm2",
        *,
        aspect: str = "clarity",
        question_slot: str = "question",
        backend: str = "transformers",
        backend_options: Mapping[str, Any] | None = None,
        max_new_tokens: int = 256,
        temperature: float = PAPER_SAMPLING["temperature"],
        top_p: float = PAPER_SAMPLING["top_p"],
        top_k: int = PAPER_SAMPLING["top_k"],
        seed: int | None = 0,
    ):
        from searchgym.lm.base import SEED_LIMIT, check_sampling_params
        from searchgym.lm.registry import load_lm

        if aspect not in ASPECTS:
            raise UnknownNameError("summary aspect", aspect, ASPECTS)
        if question_slot not in QUESTION_SLOTS:
            raise UnknownNameError("summarizer question slot", question_slot, QUESTION_SLOTS)
        check_sampling_params(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k, stop=(), seed=None)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT):
            raise ConfigError(f"LLMSummarizer expects seed to be an integer in [0, 2**63) or None, got {seed!r}.")
        if model is None:
            raise ConfigError("LLMSummarizer expects model= to be a LanguageModel or a model name such as 'smollm2', got None.")
        self.lm = load_lm(model, backend=backend, **dict(backend_options or {}))
        self.aspect = aspect
        self.question_slot = question_slot
        self.max_new_tokens = max_new_tokens
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        self.seed = seed

    def prompt(self, question: str, query: str, hits: Sequence[Hit]) -> str:
        """The chat prompt the model reads for one retrieval."""
        shown = question if self.question_slot == "question" else query
        return self.lm.apply_chat([{"role": "user", "content": recon_prompt(shown, query, hits, self.aspect)}])

    def summarize(self, question: str, query: str, hits: Sequence[Hit]) -> str:
        (summary,) = self.summarize_many([(question, query, hits)])
        return summary

    def summarize_many(self, requests: Sequence[tuple[str, str, Sequence[Hit]]]) -> list[str]:
        """:meth:`summarize` of each (question, query, hits) in one batched model call; each
        summary is the one :meth:`summarize` writes alone (sampling is seeded per prompt)."""
        from searchgym.lm.base import derive_seed

        summaries = ["" for _ in requests]
        prompts, seeds, where = [], [], []
        for i, (question, query, hits) in enumerate(requests):
            if not hits:
                continue
            prompt = self.prompt(question, query, hits)
            prompts.append(prompt)
            seeds.append(None if self.seed is None or self.temperature == 0 else derive_seed("recon-summarizer", self.seed, prompt))
            where.append(i)
        if not prompts:
            return summaries
        seed = None if all(s is None for s in seeds) else seeds
        generations = self.generate(
            prompts, max_new_tokens=self.max_new_tokens, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, seed=seed
        )
        for i, g in zip(where, generations):
            text = g.text.strip() if g.finish_reason != "prompt_too_long" else ""
            summaries[i] = text or fallback_summary(requests[i][2])
        return summaries

    def __repr__(self) -> str:
        return (
            f"LLMSummarizer(lm={type(self.lm).__name__}, aspect={self.aspect!r}, question_slot={self.question_slot!r}, "
            f"max_new_tokens={self.max_new_tokens}, temperature={self.temperature}, top_p={self.top_p}, top_k={self.top_k})"
        )
