"""Reward recipes: how each system (Search-R1, s3, R1-Searcher, R-Search, RECON) turns a finished episode into a reward.

The environment fills an :class:`Episode` when an episode ends and asks the recipe for a
:class:`RewardResult`. Recipes are pure apart from the frozen models they call (the s3
generator, the R-Search reader, an optional judge), which are passed to the constructor
as plain callables. Defaults are the papers' published settings:

====================== ========================================================== =======
name                   reward                                                     range
====================== ========================================================== =======
``search_r1_em``       EM of the answer (Search-R1 ``qa_em.compute_score_em``)    0..1
``search_r1_format``   Search-R1 v0.3 table: EM, sequence validity, retrieval hit 0..1
``r1_searcher_stage1`` 0.5 if it searched + 0.5 if the format is correct          0..1
``r1_searcher_stage2`` answer F1, minus 2 if the format is wrong                  -2..1
``r_search``           0.2 answer format + 0.2 evidence format + answer F1        0..2.4
                       + F1 of the reader's answer from the agent's evidence
                       (the sentences of it that quote this episode's documents)
``s3_gen_acc``         GenAcc of the generator on the selected documents          0..1
``s3_gbr``             Gain Beyond RAG: GenAcc(selected) - GenAcc(naive top-k)    -1..1
====================== ========================================================== =======

No seed penalizes a malformed turn by itself, so ``invalid_action_penalty`` is 0 for all
of them (every constructor accepts one).

Doing nothing earns nothing: an episode in which the agent took no well-formed action
(``not Episode.acted``) earns each recipe's :meth:`~RewardRecipe.floor`, the least it
pays on that question (0; -2 for ``r1_searcher_stage2``; minus the naive-RAG GenAcc for
``s3_gbr``). Format credit goes only to an episode that answered: R-Search's paper rule,
which pays its evidence-format score to an episode without any search or answer, is
``RSearchReward(paper_format_rule=True)``. Recipes read the agent's own turns
(``Episode.turns``), never the prompt, documents or feedback text.

No credit for hedging: an answer that could hold more than one answer (both options of a
comparison, a list, a second name beside the gold; for containment metrics also text longer
than a sentence; :mod:`~searchgym.rewards.hedging`) has its answer metric scored 0, as a
wrong answer, by every recipe that pays partial or containment credit
(``r1_searcher_stage1`` with ``answer_score``, ``r1_searcher_stage2``, ``r_search``,
``s3_gen_acc``, ``s3_gbr``); a sentence stating one answer keeps its credit. F1 is checked
for candidates, lists and second answers only (its precision prices length), a frozen
generator's answer for candidates and lists only. ``strict=False`` restores the paper's raw
metric. Exact match (``search_r1_em``, ``search_r1_format``) pays no hedge, so those
recipes have no such option.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from searchgym.error import ConfigError, UnknownNameError
from searchgym.plugins import piece_source
from searchgym.rewards.base import (
    Episode,
    GoldSpanReader,
    RewardRecipe,
    RewardResult,
    check_strict,
    require_callable,
    call_frozen,
)
from searchgym.rewards.formats import (
    R_SEARCH_EVIDENCE_RULES,
    r1_searcher_format_errors,
    r_search_format,
    search_r1_sequence,
)
from searchgym.rewards.grounding import DEFAULT_MAX_EVIDENCE_WORDS, DEFAULT_MIN_SPAN_WORDS, ground_evidence
from searchgym.rewards.metrics import (
    Judge,
    answer_in_text,
    cover_exact_match,
    exact_match,
    f1_score,
    gen_acc,
)
from searchgym.rewards.hedging import hedged
from searchgym.rewards.normalize import normalize_answer_r1searcher

# Episode, RewardResult, RewardRecipe and GoldSpanReader live in base.py and are part of
# this module's API too.
__all__ = [
    "RECIPES",
    "Episode",
    "GoldSpanReader",
    "R1SearcherStage1",
    "R1SearcherStage2",
    "RSearchReward",
    "RewardRecipe",
    "RewardResult",
    "S3GainBeyondRAG",
    "S3GenAcc",
    "SearchR1EM",
    "SearchR1Format",
    "make_recipe",
    "recipe_accepts",
    "recipe_source",
]


# ---------------------------------------------------------------- Search-R1
class SearchR1EM(RewardRecipe):
    """Search-R1's outcome reward (``verl/utils/reward_score/qa_em.py``, ``compute_score_em``).

    ``score`` if the answer exactly matches a gold answer after normalization,
    ``format_score`` if it answered but wrongly (0 in all Search-R1 scripts), 0 if it
    never answered. RECON uses the same reward.
    """

    name = "search_r1_em"

    def __init__(self, *, score: float = 1.0, format_score: float = 0.0, invalid_action_penalty: float = 0.0):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        self.correct_score = float(score)
        self.format_score = float(format_score)

    def describe(self) -> str:
        """The pay of a right answer, of a wrong one and of none."""
        return f"EM: {self.correct_score:g} for a right answer, {self.format_score:g} for a wrong one, 0 without an answer"

    def score(self, episode: Episode) -> RewardResult:
        em = exact_match(episode.answer, episode.answers)
        if episode.answer is None:
            total = 0.0
        else:
            total = self.correct_score if em else self.format_score
        return RewardResult(total, {"em": em})


class SearchR1Format(RewardRecipe):
    """Search-R1 v0.3 format reward (``verl/utils/reward_score/qa_em_format.py``).

    ``valid`` is :func:`~searchgym.rewards.formats.search_r1_sequence`; ``retrieval``
    is whether a gold answer occurs in some retrieved passage (checked only for valid
    sequences, as in the seed, which reads the ``<information>`` blocks: with a
    summarizer those hold the summary, here the passages are read). With ``s = structure_format_score``,
    ``r = retrieval_score``, ``f = final_format_score``:

    ============== ===== ========= ==========
    answer         valid retrieval reward
    ============== ===== ========= ==========
    none           yes   yes       s + r
    none           yes   no        s
    none           no    \\-        0
    EM correct     yes   \\-        score
    EM correct     no    \\-        score - s
    wrong          yes   yes       s + r
    wrong          yes   no        s
    wrong          no    \\-        f
    ============== ===== ========= ==========

    Defaults are ``scripts/nq_hotpotqa/v0.3/train_{ppo,grpo}_format.sh``:
    ``s = 0.2``, ``f = 0.1``, ``r = 0``, ``score = 1``. (The seed's comments assume
    ``r = 0.1``; its ``format_score`` argument is accepted there but never used.)
    """

    name = "search_r1_format"

    def __init__(
        self,
        *,
        structure_format_score: float = 0.2,
        final_format_score: float = 0.1,
        retrieval_score: float = 0.0,
        score: float = 1.0,
        invalid_action_penalty: float = 0.0,
    ):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        self.structure_format_score = float(structure_format_score)
        self.final_format_score = float(final_format_score)
        self.retrieval_score = float(retrieval_score)
        self.correct_score = float(score)

    def describe(self) -> str:
        """The parts of Search-R1 v0.3's format reward, with their weights."""
        s, r, f, score = self.structure_format_score, self.retrieval_score, self.final_format_score, self.correct_score
        return (
            f"EM {score:g} for a right answer ({score - s:g} if the turns are malformed); else {s:g} for well-formed turns "
            f"(+{r:g} when a retrieved passage holds the answer), {f:g} for a malformed episode that answered, 0 otherwise"
        )

    def score(self, episode: Episode) -> RewardResult:
        valid, _ = search_r1_sequence(episode.turns)
        retrieval = valid and any(answer_in_text(doc, episode.answers) for docs in episode.retrieved_docs for doc in docs)
        em = exact_match(episode.answer, episode.answers)
        s, r = self.structure_format_score, self.retrieval_score
        if em:
            total = self.correct_score if valid else self.correct_score - s
        elif valid:
            total = s + r if retrieval else s
        else:
            total = 0.0 if episode.answer is None else self.final_format_score
        return RewardResult(total, {"em": em, "valid_format": float(valid), "retrieval_correct": float(retrieval)})


# ---------------------------------------------------------------- R1-Searcher
class R1SearcherStage1(RewardRecipe):
    """R1-Searcher stage 1 (paper arXiv:2503.05592 §2.2; README "Reward Design").

    ``retrieval_score`` (0.5) if the agent searched at least once, plus ``format_score``
    (0.5) if :func:`~searchgym.rewards.formats.r1_searcher_format_errors` finds nothing.
    The answer is not scored in stage 1 (paper). The released Llama stage-1 server
    (``train/reward_server_llama_stage1.py``) also adds +1 when the answer passes
    cover-EM and -1 otherwise; set ``answer_score=1.0`` to reproduce it. With ``strict``
    (default) a hedged answer fails cover-EM; ``strict=False`` is the server's raw test.
    """

    name = "r1_searcher_stage1"

    def __init__(
        self,
        *,
        retrieval_score: float = 0.5,
        format_score: float = 0.5,
        answer_score: float = 0.0,
        max_answer_words: int = 10,
        strict: bool = True,
        invalid_action_penalty: float = 0.0,
    ):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        self.strict = check_strict(self.name, strict)
        self.retrieval_score = float(retrieval_score)
        self.format_score = float(format_score)
        self.answer_score = float(answer_score)
        self.max_answer_words = int(max_answer_words)

    def describe(self) -> str:
        """The parts of stage 1's reward, with their weights."""
        answer = f" {self.answer_score:+g} for a cover-EM answer, {-self.answer_score:+g} otherwise" if self.answer_score else ""
        return f"{self.retrieval_score:g} for searching at least once + {self.format_score:g} for a well-formed episode{answer}"

    def score(self, episode: Episode) -> RewardResult:
        searched = episode.num_searches >= 1
        format_ok = not r1_searcher_format_errors(episode.turns, self.max_answer_words)
        cem = cover_exact_match(episode.answer, episode.answers)
        if self.strict and hedged(
            episode.answer, episode.answers, episode.candidates, normalize_answer_r1searcher, question=episode.question
        ):
            cem = 0.0
        total = self.retrieval_score * searched + self.format_score * format_ok
        if self.answer_score:
            total += self.answer_score if cem else -self.answer_score
        return RewardResult(total, {"searched": float(searched), "format_ok": float(format_ok), "cover_em": cem})

    def floor(self, episode: Episode) -> float:
        return -self.answer_score


class R1SearcherStage2(RewardRecipe):
    """R1-Searcher stage 2: answer F1 minus ``format_penalty`` (2) if the format is wrong.

    F1 uses R1-Searcher's normalization (punctuation to spaces, ``True``/``False`` to
    ``yes``/``no``) and the yes/no/noanswer rule; no answer scores F1 0. Penalty 2 is the
    paper's and that of ``train/reward_server_qwen_zero.py`` (the server the README
    starts); the Llama stage-2 server subtracts 1. With ``strict`` (default) a hedged
    answer scores F1 0; ``strict=False`` is the paper's F1.
    """

    name = "r1_searcher_stage2"

    def __init__(
        self,
        *,
        format_penalty: float = 2.0,
        max_answer_words: int = 10,
        strict: bool = True,
        invalid_action_penalty: float = 0.0,
    ):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        self.strict = check_strict(self.name, strict)
        self.format_penalty = float(format_penalty)
        self.max_answer_words = int(max_answer_words)

    def describe(self) -> str:
        """The parts of stage 2's reward, with their weights."""
        return f"answer F1 (R1-Searcher's normalization) - {self.format_penalty:g} when the format is wrong"

    def score(self, episode: Episode) -> RewardResult:
        f1 = f1_score(episode.answer, episode.answers, normalize_answer_r1searcher)
        if self.strict and hedged(
            episode.answer, episode.answers, episode.candidates, normalize_answer_r1searcher,
            question=episode.question, check="f1",
        ):
            f1 = 0.0
        format_ok = not r1_searcher_format_errors(episode.turns, self.max_answer_words)
        total = f1 - (0.0 if format_ok else self.format_penalty)
        return RewardResult(total, {"f1": f1, "format_ok": float(format_ok)})

    def floor(self, episode: Episode) -> float:
        return -self.format_penalty


# ---------------------------------------------------------------- R-Search
class RSearchReward(RewardRecipe):
    """R-Search's reward (paper Eq. 5; ``src/verl/utils/reward_score/qa_f1.py``, ``compute_score_f1``).

    ``answer_format_score`` (0.2) + ``evidence_format_score`` (0.2) for the flags of
    :func:`~searchgym.rewards.formats.r_search_format`, plus the answer's token F1, plus
    the token F1 of ``reader(question, evidence)`` — a frozen model of another family
    (Llama-3.2-3B-Instruct in the seed) answering from the agent's evidence alone. Both
    F1s use the plain normalization without the yes/no rule and are rounded to 2
    decimals, as the seed's ``F1_check`` does. The reader is called only when the
    evidence is scored (non-empty, after at least one search) and something of it is left
    to read.

    Eq. 5's flags are the default (``evidence_rule="eq5"``): an episode without a search
    gets the evidence-format score whether or not it wrote evidence (its evidence is not
    read); ``evidence_rule="seed"`` is the released code, for which evidence written without
    a search is a wrong format (1.2 instead of 1.4 for a right answer).

    Departures, each a defense with its option:

    - ``grounded=True`` (default): only the sentences of the evidence that quote the
      documents the env showed in this episode are evidence
      (:func:`~searchgym.rewards.grounding.ground_evidence`, with ``min_span_words``), and
      evidence with more than ``max_evidence_words`` grounded words is not evidence. The
      reader reads the grounded part only, and the evidence-format score after a search
      needs a non-empty grounded part within the budget. Without it, an evidence block of
      corpus titles, of the question (which names the answer of a comparison question) or
      of every retrieved document earns the evidence reward. ``grounded=False`` reads the
      evidence as written, as the paper does.
    - Both format scores are paid only to an episode that answered. The seed pays the
      evidence-format score to any episode without a search and without an evidence
      block, so an agent that never writes a valid turn earns 0.2 (a degenerate optimum
      under RL); ``paper_format_rule=True`` restores that rule to reproduce its numbers.

    - ``strict`` (default): a hedged answer, the agent's or the reader's, scores F1 0
      (:mod:`searchgym.rewards.hedging`); ``strict=False`` is the seed's F1.

    The paper's reward exactly: ``RSearchReward(reader, grounded=False, paper_format_rule=True, strict=False)``.
    """

    name = "r_search"
    needs = frozenset({"reader"})

    def __init__(
        self,
        reader: Callable[..., str] | None = None,
        *,
        answer_format_score: float = 0.2,
        evidence_format_score: float = 0.2,
        grounded: bool = True,
        max_evidence_words: int = DEFAULT_MAX_EVIDENCE_WORDS,
        min_span_words: int = DEFAULT_MIN_SPAN_WORDS,
        evidence_rule: str = "eq5",
        paper_format_rule: bool = False,
        strict: bool = True,
        invalid_action_penalty: float = 0.0,
    ):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        self.reader = require_callable(self.name, "reader", reader, "(question, evidence) -> str")
        self.answer_format_score = float(answer_format_score)
        self.evidence_format_score = float(evidence_format_score)
        for option, value in (("grounded", grounded), ("paper_format_rule", paper_format_rule)):
            if not isinstance(value, bool):
                raise ConfigError(f"Reward recipe 'r_search' expects {option} to be True or False, got {value!r}.")
        for option, value in (("max_evidence_words", max_evidence_words), ("min_span_words", min_span_words)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"Reward recipe 'r_search' expects {option} to be a positive int, got {value!r}.")
        if evidence_rule not in R_SEARCH_EVIDENCE_RULES:
            raise UnknownNameError("R-Search evidence rule", evidence_rule, R_SEARCH_EVIDENCE_RULES)
        self.grounded = grounded
        self.max_evidence_words = max_evidence_words
        self.min_span_words = min_span_words
        self.evidence_rule = evidence_rule
        self.paper_format_rule = paper_format_rule
        self.strict = check_strict(self.name, strict)

    def describe(self) -> str:
        """The parts of Eq. 5, with their weights: why a wrong, well-formed answer earns the
        two format scores."""
        formats = self.answer_format_score + self.evidence_format_score
        paid = "to every episode" if self.paper_format_rule else "to an episode that answered"
        return (
            f"answer F1 + evidence F1 (the frozen reader's answer from the evidence) + answer format {self.answer_format_score:g} "
            f"+ evidence format {self.evidence_format_score:g} (Eq. 5: paid without a search too"
            f"{'; after one, for evidence quoting the documents shown' if self.grounded else ''}), "
            f"format paid {paid}: a wrong answer in form earns {formats:g}"
        )

    def score(self, episode: Episode) -> RewardResult:
        fmt = r_search_format(episode.turns, evidence_rule=self.evidence_rule)
        answered = episode.answer is not None or self.paper_format_rule
        answer_f1 = round(self._f1(episode.answer, episode), 2)
        evidence_ok = fmt.evidence_ok
        evidence = episode.evidence if episode.evidence is not None else fmt.evidence
        read = (evidence or "").strip() if fmt.evidence_scored else ""
        grounded_share, grounded_words = 0.0, 0.0
        if read and self.grounded:
            grounding = ground_evidence(
                read, episode.observations, max_words=self.max_evidence_words, min_span_words=self.min_span_words
            )
            read = grounding.text
            grounded_share, grounded_words = grounding.fraction, float(grounding.words)
            evidence_ok = evidence_ok and bool(read)
        evidence_f1 = 0.0
        if read:
            reply = call_frozen(self.reader, episode.question, read, answers=episode.answers)
            evidence_f1 = round(self._f1(reply, episode), 2)
        # A grammar without evidence: no episode gets the evidence-format score (Eq. 5 would pay
        # it for not searching, the one way to leave evidence out).
        evidence_ok = evidence_ok and episode.evidence_possible
        answer_format, evidence_format = fmt.answer_ok and answered, evidence_ok and answered
        total = (
            self.answer_format_score * answer_format
            + self.evidence_format_score * evidence_format
            + answer_f1
            + evidence_f1
        )
        components = {
            "answer_f1": answer_f1,
            "evidence_f1": evidence_f1,
            "answer_format": float(answer_format),
            "evidence_format": float(evidence_format),
        }
        if self.grounded:
            components.update(evidence_grounded=grounded_share, evidence_words=grounded_words)
        return RewardResult(total, components)

    def _f1(self, prediction: str | None, episode: Episode) -> float:
        if self.strict and hedged(prediction, episode.answers, episode.candidates, question=episode.question, check="f1"):
            return 0.0
        return f1_score(prediction, episode.answers, special_yes_no=False)


# ---------------------------------------------------------------- s3
class S3GenAcc(RewardRecipe):
    """s3's GenAcc of the frozen generator on the documents the searcher selected.

    ``generator(question, docs) -> str`` answers from ``Episode.selected_docs``; the
    answer is scored by :func:`~searchgym.rewards.metrics.gen_acc` (span check, then the
    optional ``judge(question, prediction, answers)`` when the span check fails, as s3's
    ``check_answer_correct``). A searcher that took no well-formed action gets GenAcc 0
    without a call to the generator (in s3 the generator would still read the initial
    naive retrieval, paying a searcher that did nothing). With ``strict`` (default) a
    hedged generator answer scores 0 (before the judge); ``strict=False`` is s3's GenAcc.
    """

    name = "s3_gen_acc"
    needs = frozenset({"generator"})
    optional = frozenset({"judge"})

    def __init__(
        self,
        generator: Callable[..., str] | None = None,
        judge: Judge | None = None,
        *,
        strict: bool = True,
        invalid_action_penalty: float = 0.0,
    ):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        self.strict = check_strict(self.name, strict)
        self.generator = require_callable(self.name, "generator", generator, "(question, docs) -> str")
        if judge is not None:
            judge = require_callable(self.name, "judge", judge, "(question, prediction, answers) -> bool | float")
        self.judge = judge

    def _answer(
        self, question: str, docs: Sequence[str], answers: Sequence[str], candidates: Sequence[str] = ()
    ) -> tuple[float, str]:
        """GenAcc of the generator's answer from ``docs``, and that answer."""
        prediction = call_frozen(self.generator, question, list(docs), answers=answers)
        # The frozen generator writes sentences by design: lists and both options only.
        if self.strict and hedged(prediction, answers, candidates, question=question, check="frozen"):
            return 0.0, prediction
        return gen_acc(prediction, answers, self.judge, question), prediction

    def _gen_acc(self, question: str, docs: Sequence[str], answers: Sequence[str], candidates: Sequence[str] = ()) -> float:
        return self._answer(question, docs, answers, candidates)[0]

    def _searcher_answer(self, episode: Episode) -> tuple[float, str]:
        """GenAcc and answer of the generator on the searcher's documents; 0 and ``""``
        without a call when the searcher took no well-formed action."""
        if not episode.acted:
            return 0.0, ""
        return self._answer(episode.question, episode.selected_docs, episode.answers, episode.candidates)

    def describe(self) -> str:
        """What GenAcc pays."""
        return "GenAcc: 1 when the frozen generator, reading the selected documents, answers right, else 0"

    def score(self, episode: Episode) -> RewardResult:
        acc, prediction = self._searcher_answer(episode)
        return RewardResult(acc, {"gen_acc": acc}, prediction)


class S3GainBeyondRAG(S3GenAcc):
    """s3's Gain Beyond RAG: GenAcc(selected docs) - GenAcc(naive top-k RAG docs).

    ``baseline_docs`` says how many documents the naive-RAG baseline reads:

    - ``"matched"`` (default): as many as the generator reads from the searcher, and never
      fewer than the initial retrieval (``max(len(selected_docs), initial_top_k)``; the env
      fills ``Episode.naive_rag_docs`` with that many). The two sides then compare like with
      like: a searcher that only retrieves deeper for the question itself (search it again
      and keep documents 4 to 8) hands the generator the naive top-8, and is measured
      against the naive top-8. With a context of at most ``initial_top_k`` documents this
      is the paper's reward exactly. Cached per (example, number of documents asked for).
    - ``"initial"``: the paper's: always the naive top-``initial_top_k`` (s3 §3.2),
      whatever the size of the searcher's context.

    The naive-RAG term depends only on the question (and its size), so it is computed once
    per ``example_id`` (the question text if the id is empty) and cached in
    :attr:`naive_rag_cache`, as s3 precomputes its RAG cache (``scripts/precompute.sh``).
    The env asks :meth:`has_naive_rag` before it searches for the baseline's documents, so
    a question played again costs no search and no generator call.
    ``generation_weight`` adds that many times GenAcc(selected) on top: 0 gives the
    paper's reward; 1 gives what s3's released trainer optimizes
    (``verl/trainer/main_ppo.py`` sets ``USE_UTILITY_SCORE`` and ``USE_GENERATION_SCORE``,
    so ``rag_2.compute_score_rag`` returns gain + GenAcc).
    """

    name = "s3_gbr"
    needs_naive_rag = True
    #: The values of ``baseline_docs``.
    BASELINES = ("matched", "initial")

    def __init__(
        self,
        generator: Callable[..., str] | None = None,
        judge: Judge | None = None,
        *,
        generation_weight: float = 0.0,
        baseline_docs: str = "matched",
        strict: bool = True,
        invalid_action_penalty: float = 0.0,
    ):
        super().__init__(generator, judge, strict=strict, invalid_action_penalty=invalid_action_penalty)
        self.generation_weight = float(generation_weight)
        if baseline_docs not in self.BASELINES:
            raise ConfigError(
                f"Reward recipe {self.name!r} expects baseline_docs to be one of {', '.join(map(repr, self.BASELINES))} "
                f"('matched': the naive-RAG baseline reads as many documents as the searcher's context; 'initial': "
                f"the paper's naive top-k), got {baseline_docs!r}."
            )
        self.baseline_docs = baseline_docs
        #: example id (or question), with ``"matched"`` also the number of documents ->
        #: GenAcc of the generator on the naive-RAG documents.
        self.naive_rag_cache: dict[str | tuple[str, int], float] = {}

    def settings(self) -> dict[str, Any]:
        """The recipe's settings without :attr:`naive_rag_cache` (what it computed, not how it scores)."""
        return {k: v for k, v in super().settings().items() if k != "naive_rag_cache"}

    def naive_rag_key(self, example_id: str, question: str, size: int) -> str | tuple[str, int]:
        """The :attr:`naive_rag_cache` key of a question's baseline on ``size`` naive-RAG
        documents: its id (the question if the id is empty), with ``"matched"`` also ``size``."""
        key = example_id or question
        return (key, int(size)) if self.baseline_docs == "matched" else key

    def has_naive_rag(self, example_id: str, question: str, size: int) -> bool:
        """Whether the baseline on ``size`` naive-RAG documents is cached: the env then
        leaves ``Episode.naive_rag_docs`` empty instead of searching again."""
        return self.naive_rag_key(example_id, question, size) in self.naive_rag_cache

    def naive_rag_acc(self, episode: Episode) -> float:
        """GenAcc on ``episode.naive_rag_docs``, computed on the first call per example
        (per example and number of documents asked for, ``Episode.naive_rag_size``, with
        ``baseline_docs="matched"``); later calls read the cache and need no documents."""
        docs = episode.naive_rag_docs
        size = episode.naive_rag_size if episode.naive_rag_size is not None else (len(docs) if docs is not None else None)
        if self.baseline_docs == "matched" and size is None:
            raise ConfigError(
                f"Reward recipe {self.name!r} with baseline_docs='matched' expects Episode.naive_rag_docs (the "
                f"question's naive top-n documents, n = the documents of the searcher's context and at least "
                f"initial_top_k) or Episode.naive_rag_size (that n, once the baseline is cached) for example "
                f"{episode.example_id or episode.question!r}, got neither; fill them whenever recipe.needs_naive_rag is true."
            )
        key = self.naive_rag_key(episode.example_id, episode.question, size or 0)
        if key not in self.naive_rag_cache:
            if docs is None:
                raise ConfigError(
                    f"Reward recipe {self.name!r} expects Episode.naive_rag_docs (the top-k documents for the "
                    f"question) the first time it scores example {key!r}, got None; fill it whenever "
                    "recipe.has_naive_rag(...) is false."
                )
            self.naive_rag_cache[key] = self._gen_acc(episode.question, docs, episode.answers, episode.candidates)
        return self.naive_rag_cache[key]

    def naive_rag_size(self, context_docs: int, initial_top_k: int) -> int:
        """How many naive-RAG documents the baseline reads for a searcher context of
        ``context_docs`` documents (the env fills ``Episode.naive_rag_docs`` with that many)."""
        return max(context_docs, initial_top_k) if self.baseline_docs == "matched" else initial_top_k

    def floor(self, episode: Episode) -> float:
        return -self.naive_rag_acc(episode)

    def describe(self) -> str:
        """The parts of Gain Beyond RAG, with the baseline's documents and the extra weight."""
        baseline = "as many naive top-k documents as the searcher's" if self.baseline_docs == "matched" else "the naive top-k documents"
        extra = f" + {self.generation_weight:g} x GenAcc(selected)" if self.generation_weight else ""
        return f"Gain Beyond RAG: GenAcc of the frozen generator on the selected documents - GenAcc on {baseline}{extra}"

    def score(self, episode: Episode) -> RewardResult:
        acc, prediction = self._searcher_answer(episode)
        baseline = self.naive_rag_acc(episode)
        gain = acc - baseline
        total = gain + self.generation_weight * acc
        components = {"gen_acc": acc, "naive_rag_acc": baseline, "gain_beyond_rag": gain}
        return RewardResult(total, components, prediction)


# ---------------------------------------------------------------- registry
RECIPES: dict[str, type[RewardRecipe]] = {
    cls.name: cls
    for cls in (
        SearchR1EM,
        SearchR1Format,
        R1SearcherStage1,
        R1SearcherStage2,
        RSearchReward,
        S3GenAcc,
        S3GainBeyondRAG,
    )
}


def recipe_source(spec: Any) -> Any:
    """What a reward spec names, checked without building it: the class of a name in
    :data:`RECIPES`, or the object ``"module:attr"`` names (a :class:`RewardRecipe` subclass,
    a recipe instance, or a factory returning one), or ``spec`` itself if it is a recipe.

    An unknown name is an :class:`UnknownNameError`; a path that does not import, names
    nothing, or names something else is a :class:`ConfigError` that says so. Entry points
    call it before any model loads.
    """
    return piece_source(spec, base=RewardRecipe, registry=RECIPES, what="reward recipe", noun="recipe", kind="reward")


def recipe_accepts(spec: Any) -> tuple[frozenset[str], frozenset[str]]:
    """``(needs, optional)``: the frozen models (generator, reader, judge) the recipe ``spec``
    requires and accepts, read from its class (a factory declares them as attributes
    ``needs`` and ``optional``, or takes none)."""
    source = recipe_source(spec)
    owner = source if isinstance(source, type) else type(source) if isinstance(source, RewardRecipe) else source
    return frozenset(getattr(owner, "needs", frozenset())), frozenset(getattr(owner, "optional", frozenset()))


def make_recipe(name: Any, **kwargs: Any) -> RewardRecipe:
    """The recipe ``name`` names, built with ``kwargs`` (frozen models, weights).

    ``name``: a name in :data:`RECIPES` (a user module may add its own), ``"module:attr"``
    naming a :class:`RewardRecipe` subclass (built with ``kwargs`` like the built-ins: only
    the arguments its constructor accepts), a factory called with ``kwargs`` that returns a
    recipe, or a recipe instance (returned as it is; ``kwargs`` must then be empty).
    """
    source = recipe_source(name)
    label = name if isinstance(name, str) else getattr(source, "__name__", type(source).__name__)
    if isinstance(source, RewardRecipe):
        if kwargs:
            raise ConfigError(
                f"make_recipe got a reward recipe object ({type(source).__name__}) and also {sorted(kwargs)}; "
                "pass them to the recipe's constructor instead."
            )
        return source
    try:
        parameters = inspect.signature(source.__init__ if isinstance(source, type) else source).parameters
    except (TypeError, ValueError):  # a builtin or C callable: let it check its own arguments
        parameters = {}
    accepted = [p for p, v in parameters.items() if p != "self" and v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)]
    open_ended = any(v.kind is v.VAR_KEYWORD for v in parameters.values())
    unknown = sorted(set(kwargs) - set(accepted)) if parameters and not open_ended else []
    if unknown:
        raise ConfigError(
            f"Reward recipe {label!r} does not take {', '.join(map(repr, unknown))}; "
            f"expected arguments among: {', '.join(accepted)}."
        )
    recipe = source(**kwargs)
    if not isinstance(recipe, RewardRecipe):
        raise ConfigError(
            f"Reward recipe {label!r} expects its factory to return a RewardRecipe, got {type(recipe).__name__}."
        )
    return recipe
