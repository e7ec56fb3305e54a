"""Rewards: answer normalization, metrics, format checks and the recipes of each system.

Pure functions of strings; the only frozen models involved (s3's generator, R-Search's
reader, a judge) are callables handed to a recipe. Nothing here imports the rest of
searchgym except its errors.
"""

from searchgym.rewards.formats import (
    RSearchFormat,
    r1_searcher_format_errors,
    r_search_format,
    search_r1_sequence,
)
from searchgym.rewards.grounding import GroundedEvidence, ground_evidence
from searchgym.rewards.metrics import (
    answer_in_text,
    cover_exact_match,
    exact_match,
    f1_score,
    gen_acc,
    span_check,
    sub_exact_match,
)
from searchgym.rewards.hedging import hedge_reason, hedged
from searchgym.rewards.normalize import is_blank_answer, normalize_answer, normalize_answer_r1searcher, tokens
from searchgym.rewards.base import OBSERVATION_KINDS, Budgets, Episode, GoldSpanReader, RewardRecipe, RewardResult, SearchRecord, Turn, call_frozen
from searchgym.rewards.checked import TURN_COMPONENT, checked_score, checked_turn_reward, join_components, pays_turns, recipe_label
from searchgym.rewards.recipes import (
    RECIPES,
    R1SearcherStage1,
    R1SearcherStage2,
    RSearchReward,
    S3GainBeyondRAG,
    S3GenAcc,
    SearchR1EM,
    SearchR1Format,
    make_recipe,
    recipe_accepts,
    recipe_source,
)

__all__ = [
    "OBSERVATION_KINDS",
    "RECIPES",
    "Budgets",
    "Episode",
    "GoldSpanReader",
    "GroundedEvidence",
    "R1SearcherStage1",
    "R1SearcherStage2",
    "RSearchFormat",
    "RSearchReward",
    "RewardRecipe",
    "RewardResult",
    "TURN_COMPONENT",
    "S3GainBeyondRAG",
    "S3GenAcc",
    "SearchRecord",
    "SearchR1EM",
    "SearchR1Format",
    "Turn",
    "answer_in_text",
    "call_frozen",
    "checked_score",
    "checked_turn_reward",
    "cover_exact_match",
    "exact_match",
    "f1_score",
    "gen_acc",
    "ground_evidence",
    "hedge_reason",
    "hedged",
    "is_blank_answer",
    "join_components",
    "make_recipe",
    "recipe_accepts",
    "recipe_source",
    "normalize_answer",
    "normalize_answer_r1searcher",
    "pays_turns",
    "r1_searcher_format_errors",
    "r_search_format",
    "recipe_label",
    "search_r1_sequence",
    "span_check",
    "sub_exact_match",
    "tokens",
]
