"""RECON's summarizer: a language model condenses every retrieval before the agent reads it.

The prompt is the seed's (``search_r1/search/retrieval_with_summarizer.py`` in RECON's
code), verbatim. As in the seed, the "User Question" slot holds the *search query*, not
the episode's question. The seed hard-codes the ``Clarity`` aspect, the only one whose
description it ships; the paper distils summaries across six aspects (clarity, factual
correctness, completeness, coverage, coherence, logicality). The other five descriptions
below are ours, written in the style of the seed's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.corpora.types import Hit
from searchgym.envs.model_calls import ModelUser
from searchgym.envs.summarizers import Summarizer
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

#: Aspect name -> (title, description). Only ``clarity`` is the seed's text.
ASPECTS: dict[str, tuple[str, str]] = {
    "clarity": (
        "Clarity",
        "Write in a clear, accessible manner that is easy to understand. Use simple, direct language and avoid "
        "jargon or overly complex sentences. Present information in a straightforward way that makes the key points "
        "immediately apparent to the reader. Ensure that each statement is unambiguous and easy to follow.",
    ),
    "factual_correctness": (
        "Factual Correctness",
        "State only facts that the documents support, exactly as they state them. Keep names, numbers and dates "
        "unchanged, do not generalize or round them, and leave out anything the documents do not say.",
    ),
    "completeness": (
        "Completeness",
        "Include every fact from the documents that bears on the user question, including qualifications and "
        "conditions, so that nothing needed to answer it is missing from the context.",
    ),
    "coverage": (
        "Coverage",
        "Draw on all of the retrieved documents rather than one of them. Represent each relevant document and each "
        "distinct aspect of the question they address, noting where documents add to or differ from each other.",
    ),
    "coherence": (
        "Coherence",
        "Organize the context as one connected text. Group related facts together, order them so that each follows "
        "from the one before, and link them with clear transitions instead of listing them in isolation.",
    ),
    "logicality": (
        "Logicality",
        "Make the reasoning the facts support explicit. Show how the facts relate (cause, sequence, comparison, "
        "part and whole) so that a reader can follow the steps from the documents to what the question needs.",
    ),
}


def render_documents(hits: Sequence[Hit]) -> str:
    """The seed's document lines: ``[Doc i] title: text``, title without quotes, from 1."""
    return "".join(f"[Doc {i}] {h.passage.title.strip(chr(34))}: {h.passage.text}\n" for i, h in enumerate(hits, 1))


def recon_prompt(query: str, hits: Sequence[Hit], aspect: str = "clarity") -> str:
    """RECON's summarizer prompt for the documents ``hits`` retrieved with ``query``."""
    if aspect not in ASPECTS:
        raise UnknownNameError("summary aspect", aspect, ASPECTS)
    title, description = ASPECTS[aspect]
    return RECON_PROMPT.format(
        aspect_title=title,
        aspect_description=description,
        user_question=query,
        search_query=query,
        documents=render_documents(hits),
    )


def fallback_summary(hits: Sequence[Hit]) -> str:
    """What the seed returns when the summarizer fails: each document cut to 200 characters."""
    return "\n".join(f"Doc {i}: {h.passage.text[:200]}..." for i, h in enumerate(hits, 1))


class LLMSummarizer(Summarizer, ModelUser):
    """A language model writes RECON's support context for every retrieval.

    Args:
        model: A :class:`~searchgym.lm.base.LanguageModel` or a model name for
            :func:`~searchgym.lm.registry.load_lm` (``"smollm2"``, a folder, an id).
        aspect: One of :data:`ASPECTS` (the seed uses ``clarity``).
        backend, backend_options: How a model name is loaded.
        max_new_tokens, temperature: Generation settings (the seed asks its service for up
            to 800 tokens at temperature 0.1; greedy here, for reproducible benchmarks).

    The ``question`` argument of :meth:`summarize` is not shown to the model: the seed
    fills the prompt's "User Question" with the search query. An empty generation or a
    prompt that does not fit the model falls back to the seed's fallback (each document
    cut to 200 characters), so a search always returns something. The model call goes
    through :meth:`~searchgym.envs.model_calls.ModelUser.generate`, so envs stepped
    together batch it (:mod:`searchgym.envs.model_calls`).
    """

    name = "llm"

    def __init__(
        self,
        model: Any = "smollm2",
        *,
        aspect: str = "clarity",
        backend: str = "transformers",
        backend_options: Mapping[str, Any] | None = None,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
    ):
        from searchgym.lm.base import check_sampling_params
        from searchgym.lm.registry import load_lm

        if aspect not in ASPECTS:
            raise UnknownNameError("summary aspect", aspect, ASPECTS)
        check_sampling_params(max_new_tokens=max_new_tokens, temperature=temperature, top_p=1.0, stop=(), seed=None)
        if model is None:
            raise ConfigError("LLMSummarizer expects model= to be a LanguageModel or a model name such as 'smollm2', got None.")
        self.lm = load_lm(model, backend=backend, **dict(backend_options or {}))
        self.aspect = aspect
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature

    def summarize(self, question: str, query: str, hits: Sequence[Hit]) -> str:
        if not hits:
            return ""
        prompt = self.lm.apply_chat([{"role": "user", "content": recon_prompt(query, hits, self.aspect)}])
        (g,) = self.generate([prompt], max_new_tokens=self.max_new_tokens, temperature=self.temperature)
        text = g.text.strip() if g.finish_reason != "prompt_too_long" else ""
        return text or fallback_summary(hits)

    def __repr__(self) -> str:
        return f"LLMSummarizer(lm={type(self.lm).__name__}, aspect={self.aspect!r}, max_new_tokens={self.max_new_tokens})"
