"""How a team episode is scored, as plain functions of the answer and the episode's counts.

Rewards at the end of a team episode (every malformed turn also adds the game's
``invalid_action_penalty`` to its role, at once):

- generator: the answer score of its answer (``answer_metric``: s3's GenAcc by default);
- searcher: Gain Beyond RAG, GenAcc of the answer minus GenAcc of the frozen generator
  on the naive top-k documents (s3's reward, :class:`~searchgym.rewards.S3GainBeyondRAG`);
  a searcher that wrote no well-formed turn gets GenAcc 0 (its recipe's floor: doing
  nothing earns nothing), whatever the team answered from the initial retrieval;
- summarizer: the answer score minus ``context_cost`` per token of what it put into the
  context (its summaries; the raw documents where its summary was empty).

:func:`team_recipe` builds s3's recipe over the frozen generator; :func:`judge_answer`
makes the frozen models' calls (the frozen generator's answer, the judge, the naive-RAG
baseline); :func:`answer_score` and :func:`score_team` are arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.envs.components.frozen import make_frozen
from searchgym.error import ConfigError, UnknownNameError
from searchgym.rewards import Episode, S3GainBeyondRAG, call_frozen, exact_match, f1_score, gen_acc, hedged

#: How the generator's answer is scored for the generator's and summarizer's rewards.
ANSWER_METRICS: dict[str, Callable[..., float]] = {
    "gen_acc": lambda prediction, answers, judge, question: gen_acc(prediction, answers, judge, question),
    "em": lambda prediction, answers, judge, question: exact_match(prediction, answers),
    "f1": lambda prediction, answers, judge, question: f1_score(prediction, answers),
}


def check_answer_metric(name: str) -> str:
    """``name`` when it is a key of :data:`ANSWER_METRICS`; else an ``UnknownNameError``."""
    if name not in ANSWER_METRICS:
        raise UnknownNameError("answer metric", name, ANSWER_METRICS)
    return name


def team_recipe(generator: Any, judge: Any = None) -> S3GainBeyondRAG:
    """s3's own recipe over the frozen ``generator`` (and ``judge``): it scores the frozen
    generator's answers and caches the naive-RAG baseline (the paper's naive top-k) per question."""
    if generator is None:
        raise ConfigError(
            "The multi-agent env expects generator= (the frozen generator of the naive-RAG baseline, and the "
            "answerer when the generator is not an agent): a callable (question, docs) -> str, 'gold-span', a "
            "LanguageModel or a model name, got None."
        )
    # The team's searcher keeps at most 3 documents a window (s3's App. C); its baseline is
    # the paper's naive top-initial_top_k. A language model generator reads the released
    # prompt, the one the generator role's agent reads (GeneratorProtocol).
    return S3GainBeyondRAG(
        make_frozen("generator", generator, options={"prompt": "released"}), None if judge is None else make_frozen("judge", judge),
        baseline_docs="initial",
    )


def judge_answer(
    recipe: S3GainBeyondRAG, episode: Episode, answer: str | None, *, frozen_generator: bool
) -> tuple[str | None, float, float]:
    """The answer scored, its GenAcc and the naive-RAG baseline's GenAcc.

    The answer is ``answer`` (the generator agent's; None when it wrote none), or with
    ``frozen_generator`` the recipe's generator's answer from ``episode.selected_docs``.
    This calls the recipe's frozen models, in this order: the generator, the judge, the
    generator on the naive-RAG documents (cached per question by the recipe). A hedged
    answer (:mod:`~searchgym.rewards.hedging`) scores 0 when the recipe is ``strict``.
    """
    question, answers = episode.question, episode.answers
    prediction = call_frozen(recipe.generator, question, episode.selected_docs, answers=answers) if frozen_generator else answer
    # A frozen generator's sentences are checked for lists and both options only; a generator
    # agent's own answer for second answers and length too (it is trained against this score).
    check = "frozen" if frozen_generator else "containment"
    if recipe.strict and hedged(prediction, answers, episode.candidates, question=question, check=check):
        accuracy = 0.0
    else:
        accuracy = gen_acc(prediction, answers, recipe.judge, question)
    return prediction, accuracy, recipe.naive_rag_acc(episode)


def answer_score(metric: str, prediction: str | None, answers: Sequence[str], question: str, *, accuracy: float) -> float:
    """``prediction`` scored by ``metric``; ``accuracy`` is its GenAcc already judged (the
    ``"gen_acc"`` score, so the judge is not asked twice)."""
    if metric == "gen_acc":
        return accuracy
    return ANSWER_METRICS[metric](prediction, answers, None, question)


@dataclass(frozen=True)
class TeamScore:
    """Each role's end-of-episode reward and the named numbers it was made from."""

    rewards: dict[str, float]
    components: dict[str, dict[str, float]]


def score_team(
    roles: Sequence[str],
    *,
    accuracy: float,
    naive_rag_acc: float,
    searcher_acted: bool,
    score: float,
    summary_tokens: int,
    context_cost: float,
    num_invalid: Mapping[str, int],
) -> TeamScore:
    """The end-of-episode rewards of the roles in ``roles`` (see the module docstring).

    Args:
        accuracy: GenAcc of the team's answer; ``naive_rag_acc``: the baseline's.
        searcher_acted: Whether the searcher wrote a well-formed turn (else its GenAcc is 0).
        score: The answer score (``answer_metric``) of the team's answer.
        summary_tokens: The tokens the summarizer put into the context.
        context_cost: Reward the summarizer loses per such token.
        num_invalid: Each role's malformed turns (reported in its components).
    """
    searcher_accuracy = accuracy if searcher_acted else 0.0
    cost = context_cost * summary_tokens
    rewards = {"searcher": searcher_accuracy - naive_rag_acc, "summarizer": score - cost, "generator": score}
    components = {
        "searcher": {"gen_acc": searcher_accuracy, "naive_rag_acc": naive_rag_acc, "gain_beyond_rag": rewards["searcher"]},
        "summarizer": {"answer_score": score, "summary_tokens": float(summary_tokens), "context_cost": cost},
        "generator": {"answer_score": score},
    }
    return TeamScore(
        rewards={role: rewards[role] for role in roles},
        components={role: {**components[role], "num_invalid": float(num_invalid[role])} for role in roles},
    )
