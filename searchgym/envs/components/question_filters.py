"""Which questions of a split an env plays (``SearchEnv(question_filter=...)``).

``"s3"`` is s3's training filter (§3.2, §4.1 of the paper; ``scripts/data_process`` of its
repository): a question whose gold answers include yes / no / true / false is dropped, and
so is every question that the env's own naive-RAG baseline already answers (its recipe's
GenAcc on the naive top-``initial_top_k`` documents is positive). Gain Beyond RAG can never
be positive on such a question, so a searcher trained on it only learns not to lose. The
baseline GenAcc of each kept question is left in the recipe's cache, so training does not
pay for it again. The baseline GenAcc of every question asked is also kept per setting
(dataset, generator, judge, retriever, top-n), in memory and on disk
(:mod:`searchgym.envs.components.filter_cache`): the other envs of a vector env and later runs ask the
generator nothing and keep the same questions.
"""

from __future__ import annotations

from collections.abc import Iterable

from searchgym.corpora.types import QAExample, Retriever
from searchgym.envs.components.filter_cache import filter_verdicts
from searchgym.envs.components.frozen import doc_text
from searchgym.error import ConfigError, check_name
from searchgym.rewards import Episode, RewardRecipe, normalize_answer

#: Filter name -> what it keeps.
QUESTION_FILTERS = {
    "s3": "questions the env's naive-RAG baseline gets wrong, without yes/no golds (s3's training set)",
}
#: Golds that make a question yes/no for s3's filter (compared after normalization).
YES_NO = frozenset({"yes", "no", "true", "false"})


def is_yes_no(example: QAExample) -> bool:
    """Whether any gold answer of ``example`` is yes, no, true or false (s3 drops these)."""
    return any(normalize_answer(a) in YES_NO for a in example.answers)


#: Questions whose naive-RAG documents the s3 filter searches in one retriever call.
SEARCH_CHUNK = 64


def s3_training_questions(
    examples: Iterable[QAExample], retriever: Retriever, recipe: RewardRecipe, *, initial_top_k: int,
    limit: int | None = None,
) -> list[QAExample]:
    """The questions of ``examples`` that s3 trains on: no yes/no gold, and naive RAG (the
    ``recipe``'s generator on the top ``initial_top_k`` documents ``retriever`` returns for
    the question) wrong. Stops once ``limit`` questions are kept."""
    if not getattr(recipe, "needs_naive_rag", False):
        raise ConfigError(
            f"question_filter='s3' keeps the questions the env's naive-RAG baseline gets wrong, so it expects a reward "
            f"with a naive-RAG baseline (s3_gbr), got {getattr(recipe, 'name', type(recipe).__name__)!r}; "
            "pass reward='s3_gbr' or drop question_filter."
        )
    examples = list(examples)
    store = filter_verdicts(examples, retriever, recipe, initial_top_k=initial_top_k)
    known = store.load()
    new: dict[str, float] = {}
    kept: list[QAExample] = []
    searched: dict[str, list[str]] = {}  # key -> the naive-RAG documents, searched a chunk at a time

    def search_ahead(start: int) -> None:
        # One retriever call for the next questions still to judge (a few past a limit may be searched for nothing).
        todo = [ex for ex in examples[start:start + SEARCH_CHUNK] if not is_yes_no(ex) and (ex.id or ex.question) not in known]
        searched.clear()
        if todo:
            hits = retriever.search([ex.question for ex in todo], initial_top_k)
            searched.update({ex.id or ex.question: [doc_text(h.passage) for h in found] for ex, found in zip(todo, hits)})

    try:
        for position, example in enumerate(examples):
            if limit is not None and len(kept) >= limit:
                break
            if position % SEARCH_CHUNK == 0:
                search_ahead(position)
            if is_yes_no(example):
                continue
            key = example.id or example.question
            if key in known:
                acc = known[key]
                # The env reads the baseline from the recipe's cache, as if it had just been computed.
                if hasattr(recipe, "naive_rag_key") and isinstance(getattr(recipe, "naive_rag_cache", None), dict):
                    recipe.naive_rag_cache.setdefault(recipe.naive_rag_key(example.id, example.question, initial_top_k), acc)
            else:
                docs = searched[key] if key in searched else [doc_text(h.passage) for h in retriever.search([example.question], initial_top_k)[0]]
                episode = Episode(
                    example.question, tuple(example.answers), naive_rag_docs=docs, example_id=example.id,
                    naive_rag_size=initial_top_k, candidates=tuple(example.candidates),
                )
                acc = new[key] = recipe.naive_rag_acc(episode)
            if acc <= 0.0:
                kept.append(example)
    finally:
        store.save(new)  # what was asked before an error is not asked again
    return kept


def filter_questions(
    name: str | None, examples: list[QAExample], retriever: Retriever, recipe: RewardRecipe, *, initial_top_k: int,
    limit: int | None = None,
) -> list[QAExample]:
    """``examples`` under the filter ``name`` of :data:`QUESTION_FILTERS` (None: all), at most ``limit``."""
    if name is None:
        return examples[:limit]
    check_name("question filter", name, QUESTION_FILTERS)
    return s3_training_questions(examples, retriever, recipe, initial_top_k=initial_top_k, limit=limit)
