"""The browse game's scores: correctness, the evidence the agent read and cited, calibration.

Per episode (each in ``info["reward_components"]`` and a ``searchgym bench`` column):

- ``correct``: the answer matches a gold answer after normalization (exact match; a judge
  replaces it when one is given: BrowseComp's grader format, :data:`BROWSECOMP_JUDGE`);
- ``evidence_recall``: the share of the question's evidence documents the agent was shown
  (a search hit) or read (``open`` or ``find``); ``gold_recall``: the same of its gold
  documents (those that hold the answer);
- ``citation_precision``: the share of the cited ids that are evidence or gold documents (a
  forged id counts against it); ``citation_recall``: the share of the evidence cited;
- ``calls``: the searches, opens and finds that ran; ``confidence``: the answer's stated
  confidence in [0, 1] (absent when none was given).

Over a run: accuracy, the means of the above, and the calibration error
(:func:`calibration_error`, BrowseComp's, after Humanity's Last Exam: the root mean square of
the gap between confidence and accuracy over bins of confidence-sorted answers).

The reward (:class:`DeepResearchReward`) is correctness by default; evidence terms are options,
each built so that doing more is not worth more: ``citation_weight`` pays the F1 of the
citations (citing everything has no precision, and an answer cites at most ``max_citations``),
``evidence_weight`` the F1 of the documents the agent *opened* against the evidence (opening
everything has no precision), and ``calibration_weight`` charges the Brier score of the stated
confidence (a proper scoring rule: the honest confidence is the best one).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from searchgym.rewards import Episode, RewardRecipe, RewardResult, exact_match, hedged
from searchgym.error import ConfigError

__all__ = ["BROWSE_METRICS", "DeepResearchReward", "browse_metrics", "calibration_error", "opened_ids", "shown_ids"]

#: The per-episode metrics, in the order bench shows them.
BROWSE_METRICS = ("correct", "evidence_recall", "gold_recall", "citation_precision", "citation_recall", "calls")


def _ids(metadata: Mapping[str, Any], key: str) -> list[str]:
    value = metadata.get(key) or ()
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def shown_ids(episode: Episode) -> list[str]:
    """The doc ids of every search hit the agent was shown, in order, once each."""
    return list(dict.fromkeys(i for search in episode.searches for i in search.ids))


def _read_calls(episode: Episode) -> list[Any]:
    """Every ``open`` and ``find`` whose result the agent read, repeats included. A call past the
    call budget (its turn's observation says ``budget``) or refused (an unknown id or page: the
    parser made it an invalid action) read nothing; nor did the calls of the last turn of an
    episode that never answered (the game shows nothing after the turn that ends it)."""
    turns = episode.turns
    if episode.answer is None and turns:
        last = turns[-1].round
        turns = tuple(t for t in turns if t.round != last)
    return [a for t in turns if "budget" not in t.observation for a in t.parsed
            if getattr(a, "kind", None) in ("open", "find") and isinstance(getattr(a, "doc_id", None), str)]


def opened_ids(episode: Episode) -> list[str]:
    """The doc ids the agent read inside (an ``open`` or a ``find`` it read), in order, once each."""
    return list(dict.fromkeys(a.doc_id for a in _read_calls(episode)))


def _final_answer(episode: Episode) -> Any:
    for turn in reversed(episode.turns):
        for action in reversed(turn.parsed):
            if getattr(action, "kind", None) == "answer":
                return action
    return None


def _share(found: Iterable[str], wanted: Sequence[str]) -> float:
    wanted_set = set(wanted)
    return len(wanted_set & set(found)) / len(wanted_set) if wanted_set else 0.0


def _f1(found: Sequence[str], wanted: Sequence[str]) -> float:
    hits = len(set(found) & set(wanted))
    if not hits:
        return 0.0
    precision, recall = hits / len(set(found)), hits / len(set(wanted))
    return 2 * precision * recall / (precision + recall)


def browse_metrics(episode: Episode, correct: float) -> dict[str, float]:
    """The per-episode metrics of :data:`BROWSE_METRICS` (and ``confidence`` when stated)."""
    metadata = episode.metadata
    evidence, gold = _ids(metadata, "evidence_ids"), _ids(metadata, "gold_ids")
    relevant = set(evidence) | set(gold)
    seen = set(shown_ids(episode)) | set(opened_ids(episode))
    answer = _final_answer(episode) if episode.answer is not None else None
    cited = list(getattr(answer, "citations", ()) or ())
    calls = len(episode.searches) + len(_read_calls(episode))
    metrics = {
        "correct": float(correct),
        "evidence_recall": _share(seen, evidence),
        "gold_recall": _share(seen, gold),
        "citation_precision": len(set(cited) & relevant) / len(set(cited)) if cited else 0.0,
        "citation_recall": _share(cited, evidence or gold),
        "calls": float(calls),
    }
    confidence = getattr(answer, "confidence", None)
    if confidence is not None:
        metrics["confidence"] = float(confidence) / 100.0
    return metrics


def calibration_error(confidences: Sequence[float], correct: Sequence[float], *, bin_size: int = 100) -> float | None:
    """BrowseComp's calibration error (after Humanity's Last Exam's ``calib_err``, its beta = 100):
    the answers sorted by confidence (in [0, 1]) are cut into bins of ``bin_size`` (the last bin
    takes the rest), and the error is the root of the mean over answers of each bin's squared gap
    between mean confidence and accuracy. None for no answers; a run smaller than one bin is one bin."""
    if len(confidences) != len(correct):
        raise ConfigError(f"calibration_error expects one correctness per confidence, got {len(confidences)} and {len(correct)}.")
    if not confidences:
        return None
    pairs = sorted(zip(confidences, correct))
    n = len(pairs)
    bins = [pairs[i:i + bin_size] for i in range(0, n, bin_size)]
    if len(bins) > 1 and len(bins[-1]) < bin_size:
        bins[-2:] = [bins[-2] + bins[-1]]
    total = 0.0
    for chunk in bins:
        gap = sum(c for c, _ in chunk) / len(chunk) - sum(a for _, a in chunk) / len(chunk)
        total += len(chunk) / n * gap * gap
    return math.sqrt(total)


class DeepResearchReward(RewardRecipe):
    """Correctness of the answer (1 or 0), with optional evidence and calibration terms.

    Args:
        citation_weight: Adds ``citation_weight`` x the F1 of the cited ids against the
            question's evidence (and gold) documents.
        evidence_weight: Adds ``evidence_weight`` x the F1 of the documents opened (read with
            ``open`` or ``find``) against the evidence documents.
        calibration_weight: Subtracts ``calibration_weight`` x the Brier score
            ``(confidence - correct)^2`` of a stated confidence (an answer without one, or an
            episode that ends with no answer, is charged as confidence 0.5).
        strict: A hedged answer (naming several candidates) scores as a wrong one.
        judge: ``(question, prediction, answers) -> bool``: decides correctness in place of
            exact match (an LLM judge in BrowseComp's grader format, from ``judge=``).
    """

    name = "deep_research"
    optional = frozenset({"judge"})

    def __init__(self, *, citation_weight: float = 0.0, evidence_weight: float = 0.0, calibration_weight: float = 0.0,
                 strict: bool = True, judge: Any = None, invalid_action_penalty: float = 0.0):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        for key, value in (("citation_weight", citation_weight), ("evidence_weight", evidence_weight),
                           ("calibration_weight", calibration_weight)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"DeepResearchReward expects {key} to be a finite number >= 0, got {value!r}.")
        if not isinstance(strict, bool):
            raise ConfigError(f"DeepResearchReward expects strict to be True or False, got {strict!r}.")
        if judge is not None and not callable(judge):
            raise ConfigError(f"DeepResearchReward expects judge to be a callable (question, prediction, answers) -> bool, got {judge!r}.")
        self.citation_weight, self.evidence_weight = float(citation_weight), float(evidence_weight)
        self.calibration_weight, self.strict, self.judge = float(calibration_weight), strict, judge

    def correct(self, episode: Episode) -> float:
        """1.0 if the answer is right (exact match after normalization, or the judge's yes), else 0."""
        answer = episode.answer
        if answer is None or not episode.acted:
            return 0.0
        if self.strict and hedged(answer, episode.answers, candidates=episode.candidates, question=episode.question):
            return 0.0
        if self.judge is not None:
            if exact_match(answer, episode.answers):
                return 1.0
            return 1.0 if self.judge(episode.question, answer, list(episode.answers)) is True else 0.0
        return exact_match(answer, episode.answers)

    def score(self, episode: Episode) -> RewardResult:
        correct = self.correct(episode)
        metrics = browse_metrics(episode, correct)
        total = correct
        if self.citation_weight:
            answer = _final_answer(episode) if episode.answer is not None else None
            cited = list(getattr(answer, "citations", ()) or ())
            relevant = sorted(set(_ids(episode.metadata, "evidence_ids")) | set(_ids(episode.metadata, "gold_ids")))
            metrics["citation_f1"] = _f1(cited, relevant)
            total += self.citation_weight * metrics["citation_f1"]
        if self.evidence_weight:
            metrics["evidence_f1"] = _f1(opened_ids(episode), _ids(episode.metadata, "evidence_ids"))
            total += self.evidence_weight * metrics["evidence_f1"]
        if self.calibration_weight:
            # An episode that ends without an answer is charged as an answer of confidence 0.5 (the
            # most an honest forecast can expect to pay), else not answering (a refused confidence
            # repeated to the turn limit) would dodge the charge a wrong answer pays.
            stated = metrics.get("confidence", 0.5)
            metrics["brier"] = (stated - correct) ** 2
            total -= self.calibration_weight * metrics["brier"]
        if not episode.acted:
            total = self.floor(episode)
        return RewardResult(total, metrics)

    def describe(self) -> str:
        parts = ["correct (exact match after normalization" + (", or the judge" if self.judge is not None else "") + ")"]
        if self.citation_weight:
            parts.append(f"{self.citation_weight:g} x citation F1")
        if self.evidence_weight:
            parts.append(f"{self.evidence_weight:g} x F1 of the documents opened against the evidence")
        if self.calibration_weight:
            parts.append(f"- {self.calibration_weight:g} x the Brier score of the confidence")
        return " + ".join(parts)
