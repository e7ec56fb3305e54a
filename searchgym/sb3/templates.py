"""Template actions and numeric features of a search episode, for classic RL policies.

:class:`TemplateState` follows one episode of a :class:`~searchgym.envs.single.core.SearchEnv`
from what the env reports (the question, and the passages and scores of each search) and
turns a template number into a turn text:

====================  =========================================================
template              what it does
====================  =========================================================
``search_question``   search the question itself
``search_reform``     search a reformulation built from the best passage so far:
                      the new names (capitalized words the question lacks) of its
                      sentence closest to the question, i.e. the bridge entity of
                      a multi-hop question
``select_i``          keep passage ``i`` of the latest search (1..top_k); takes
                      no env turn (s3 sends the selection with the next turn)
``final``             end the episode: s3 declares the search complete (the
                      env's frozen generator answers); the other protocols answer
                      through the caller's frozen generator from the selected
                      passages and every passage of each search in which none
                      was selected (s3's rule, :meth:`TemplateState.context`)
====================  =========================================================

A template that cannot run (a search the turn budget no longer allows, a reformulation
with nothing new to search, a passage that is absent or already selected) does nothing
and is counted as invalid. It is shared by the Stable-Baselines3 wrapper
(:class:`~searchgym.sb3.env.TemplateActions`) and the agent that plays a trained
policy in the benchmark harness (:class:`~searchgym.sb3.agent.SB3Agent`), so both see
exactly the same features.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from searchgym.corpora.types import Hit, Passage
from searchgym.envs.protocols import Answer, Complete, Evidence, Protocol, Search, Select
from searchgym.envs.single.game import SearchLog
from searchgym.error import ConfigError

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOP = frozenset(
    "a an the of in on at to for by with from and or is was were are be been who what which where when how "
    "whose did does do that this as its it his her their he she they whom after before".split()
)
_MONTHS = frozenset("january february march april may june july august september october november december".split())


def content_words(text: str) -> set[str]:
    """Lower-cased words of ``text`` without stop words."""
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP}


def new_names(sentence: str, known: set[str]) -> list[str]:
    """Capitalized words of ``sentence`` (not its first word) that ``known`` lacks, in order."""
    names: list[str] = []
    for i, w in enumerate(_WORD.findall(sentence)):
        low = w.lower()
        if i > 0 and w[0].isupper() and low not in known and low not in _MONTHS and low not in _STOP and w not in names:
            names.append(w)
    return names


def reformulate(question: str, passage: Passage) -> str:
    """A follow-up query from ``passage``: the new names of its sentence sharing the most
    question words (beyond the passage's title); the title when no sentence has any."""
    q = content_words(question)
    title = content_words(passage.title)
    relevant = q - title
    best: list[str] | None = None
    best_overlap = -1
    for sentence in _SENTENCE.split(passage.text):
        names = new_names(sentence, q | title)
        if not names:
            continue
        overlap = len(content_words(sentence) & relevant)
        if overlap > best_overlap:
            best, best_overlap = names, overlap
    return " ".join(best) if best else passage.title


#: Features of the whole episode, then :data:`SLOT_FEATURES` per passage slot.
GLOBAL_FEATURES = (
    "turn_fraction",
    "step_fraction",
    "searches_fraction",
    "question_searched",
    "reformulations_fraction",
    "can_search",
    "reformulation_available",
    "selected_fraction",
    "question_coverage_selected",
    "question_coverage_latest",
    "candidate_support",
)
SLOT_FEATURES = (
    "present",
    "score_relative",
    "score_absolute",
    "question_overlap",
    "query_overlap",
    "selected",
    "seen_before",
    "has_new_names",
)


def window_passages(corpus: Any, info: Mapping[str, Any]) -> tuple[list[Passage], list[float]]:
    """The passages and scores of the search an env ``info`` reports (``retrieved_ids``)."""
    ids = list(info.get("retrieved_ids") or [])
    return [corpus.get(i) for i in ids], list(info.get("retrieved_scores") or [0.0] * len(ids))


def template_names(top_k: int) -> list[str]:
    """The templates of an env returning ``top_k`` passages per search, in action order."""
    return ["search_question", "search_reform", *(f"select_{i}" for i in range(1, top_k + 1)), "final"]


@dataclass
class Decision:
    """What a template asks for: a turn text for the env (``None`` when it takes no turn,
    a selection or an invalid template), and whether it was invalid."""

    turn: str | None
    invalid: bool
    final: bool = False
    answer_docs: tuple[Passage, ...] = ()


class TemplateState:
    """One episode seen through templates (see the module docstring).

    Args:
        protocol: The env's protocol.
        top_k: Passages per search (the number of ``select_i`` templates).
        max_turns: The env's turn budget (the last turn cannot search).
        max_searches: The env's search budget (None: none).
        max_steps: Templates per episode; at this many the ``final`` template is forced.
    """

    def __init__(self, protocol: Protocol, *, top_k: int, max_turns: int, max_searches: int | None = None, max_steps: int):
        if max_steps < 1:
            raise ConfigError(f"TemplateState expects max_steps to be a positive integer, got {max_steps!r}.")
        self.protocol = protocol
        self.top_k = top_k
        self.max_turns = max_turns
        self.max_searches = max_searches
        self.max_steps = max_steps
        self.names = template_names(top_k)
        self.num_actions = len(self.names)
        self.num_features = len(GLOBAL_FEATURES) + top_k * len(SLOT_FEATURES)
        self.log = SearchLog(  # windows, selection, budgets
            max_turns=max_turns, max_searches=max_searches, docs_per_window=protocol.docs_per_window,
            cap_unannotated=protocol.cap_unannotated,
        )

    # ---------------------------------------------------------------- episode
    def reset(self, question: str, passages: Sequence[Passage] = (), scores: Sequence[float] = ()) -> None:
        """A new episode; ``passages`` are the initial documents of protocols that start
        from naive retrieval (s3)."""
        self.question = question
        self._q = content_words(question)
        self.log.reset()
        self.steps = 0
        self.num_invalid = 0
        self.question_searched = False
        self.reformulations = 0
        self.queries: list[str] = []
        self.last_query = question
        self.seen: set[str] = set()
        self.pending: list[int] = []  # s3: selections of the latest window not yet sent
        self.done = False
        self._words: dict[str, set[str]] = {}  # content words of each passage seen, by id
        self._reform: tuple[Any, str | None] | None = None  # (state key, reformulation)
        if passages:
            self.observe(question, passages, scores)

    def observe(self, query: str, passages: Sequence[Passage], scores: Sequence[float]) -> None:
        """The passages (best first) and scores a search returned."""
        self.seen.update(p.id for p in self.window)
        scores = [float(s) for s in scores] + [0.0] * (len(passages) - len(scores))
        self.log.open_window(query, [Hit(p, s) for p, s in zip(passages, scores)])
        self.last_query = query
        self.pending = []

    def follow(self, info: Mapping[str, Any], corpus: Any) -> None:
        """Catch up with an env ``info`` after a turn: its turn count and, when it searched,
        the passages and scores it returned (looked up in ``corpus`` by id)."""
        self.turn = int(info["turn"])
        if info.get("retrieved_ids"):
            self.observe(info.get("query") or "", *window_passages(corpus, info))

    # ---------------------------------------------------------------- state
    @property
    def turn(self) -> int:
        """The env turns taken so far."""
        return self.log.turn

    @turn.setter
    def turn(self, value: int) -> None:
        self.log.turn = value

    @property
    def num_searches(self) -> int:
        return self.log.num_searches

    @property
    def window(self) -> list[Passage]:
        """The passages of the latest search (best first)."""
        return [h.passage for h in self.log.windows[-1].shown] if self.log.windows else []

    @property
    def scores(self) -> list[float]:
        """The retrieval scores of :attr:`window`."""
        return [h.score for h in self.log.windows[-1].shown] if self.log.windows else []

    @property
    def selected(self) -> list[Passage]:
        return [h.passage for h in self.log.selected]

    # ---------------------------------------------------------------- templates
    def can_search(self) -> bool:
        """Whether a search would still run: not on the last turn, within the budget."""
        return self.log.can_search_next()

    def words(self, passage: Passage) -> set[str]:
        """Content words of a passage's title and text (computed once per episode)."""
        if passage.id not in self._words:
            self._words[passage.id] = content_words(f"{passage.title} {passage.text}")
        return self._words[passage.id]

    def reformulation(self) -> str | None:
        """The ``search_reform`` query, or None when there is nothing new to search: built
        from the passage (selected or of the latest search) sharing the most question
        words whose reformulation has not been searched yet. It depends only on the
        latest search, the selection and the queries issued, so it is computed once per
        change of those."""
        key = (len(self.log.windows), len(self.log.selected), len(self.queries))
        if self._reform is None or self._reform[0] != key:
            self._reform = (key, self._reformulate())
        return self._reform[1]

    def _reformulate(self) -> str | None:
        pool = list(self.window) + [p for p in self.selected if p not in self.window]
        issued = {q.lower() for q in self.queries} | {self.question.lower()}
        for passage in sorted(pool, key=lambda p: -len(self.words(p) & self._q)):
            query = reformulate(self.question, passage)
            if query and query.lower() not in issued:
                return query
        return None

    def valid_actions(self) -> np.ndarray:
        """A boolean mask over the templates."""
        mask = np.zeros(self.num_actions, dtype=bool)
        if self.done:
            return mask
        searchable = self.can_search()
        mask[0] = searchable and not self.question_searched
        mask[1] = searchable and self.reformulation() is not None
        chosen = {p.id for p in self.selected}
        for i, p in enumerate(self.window[: self.top_k]):
            mask[2 + i] = p.id not in chosen
        mask[-1] = True
        return mask

    def decide(self, action: int) -> Decision:
        """Apply template ``action``; the turn to send, if any."""
        if self.done:
            raise ConfigError("TemplateState.decide() was called on a finished episode; call reset() first.")
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)) or not 0 <= action < self.num_actions:
            raise ConfigError(f"Expected a template number in [0, {self.num_actions}), got {action!r}.")
        action = int(action)
        self.steps += 1
        if self.steps >= self.max_steps:
            action = self.num_actions - 1  # the step budget is spent: end the episode
        if not self.valid_actions()[action]:
            self.num_invalid += 1
            return Decision(None, invalid=True)
        name = self.names[action]
        if name.startswith("select_"):
            self.log.select([action - 1])
            self.pending.append(action - 1)
            return Decision(None, invalid=False)
        if name == "final":
            self.done = True
            docs = self.context()
            if self.protocol.answers_with_generator:
                return Decision(self._turn_with_pending(Complete()), invalid=False, final=True, answer_docs=docs)
            return Decision(None, invalid=False, final=True, answer_docs=docs)
        if name == "search_question":
            query = self.question
            self.question_searched = True
        else:
            query = self.reformulation() or self.question
            self.reformulations += 1
        self.queries.append(query)
        self.log.num_searches += 1
        return Decision(self._turn_with_pending(Search(query)), invalid=False)

    def context(self) -> tuple[Passage, ...]:
        """The passages an answer is generated from (s3's rule): the selected ones, then
        every passage of each search in which none was selected."""
        return tuple(h.passage for h in self.log.context())

    def answer_turn(self, answer: str, docs: Sequence[Passage]) -> str:
        """The final turn of an answering protocol (R-Search also quotes ``docs`` as evidence).

        Tag characters are dropped from ``answer`` and an empty answer becomes ``"unknown"``,
        so that the turn always parses as an answer and ends the episode."""
        answer = " ".join(answer.replace("<", " ").replace(">", " ").split()) or "unknown"
        if self.protocol.name == "r_search" and docs:
            evidence = " ".join(p.text for p in docs).replace("<", " ").replace(">", " ")
            return self.protocol.write([Evidence(evidence), Answer(answer)])
        return self.protocol.write([Answer(answer)])

    def _turn_with_pending(self, last: Search | Complete) -> str:
        if self.protocol.answers_with_generator and self.pending:
            return self.protocol.write([Select(tuple(self.pending)), last])
        return self.protocol.write([last])

    # ---------------------------------------------------------------- features
    def features(self) -> np.ndarray:
        """The observation: :data:`GLOBAL_FEATURES` then :data:`SLOT_FEATURES` per slot, in [0, 1]."""
        q = self._q or {""}
        chosen = {p.id for p in self.selected}
        window = self.window[: self.top_k]
        words = [self.words(p) for p in window]
        covered_selected = set().union(*(self.words(p) for p in self.selected)) if self.selected else set()
        covered_latest = set().union(*words) if words else set()
        scores = self.scores
        best = max(scores[: len(window)], default=0.0)
        candidates: set[str] = set()
        if self.selected or window:
            pool = self.selected or window
            top = max(pool, key=lambda p: len(self.words(p) & self._q))
            candidates = {w.lower() for s in _SENTENCE.split(top.text) for w in new_names(s, self._q | content_words(top.title))}
        support = sum(1 for w in words if candidates & w) / self.top_k if candidates else 0.0
        out = [
            self.turn / self.max_turns,
            self.steps / self.max_steps,
            self.num_searches / self.max_turns,
            float(self.question_searched),
            min(1.0, self.reformulations / self.max_turns),
            float(self.can_search()),
            float(self.reformulation() is not None),
            min(1.0, len(self.selected) / self.top_k),
            len(q & covered_selected) / len(q),
            len(q & covered_latest) / len(q),
            support,
        ]
        query_words = content_words(self.last_query) or {""}
        for i in range(self.top_k):
            if i >= len(window):
                out.extend([0.0] * len(SLOT_FEATURES))
                continue
            p, w, score = window[i], words[i], scores[i]
            title = content_words(p.title)
            out.extend(
                [
                    1.0,
                    score / best if best > 0 else 0.0,
                    1.0 - math.exp(-max(score, 0.0) / 10.0),
                    len(q & w) / len(q),
                    len(query_words & w) / len(query_words),
                    float(p.id in chosen),
                    float(p.id in self.seen),
                    float(any(new_names(s, self._q | title) for s in _SENTENCE.split(p.text))),
                ]
            )
        return np.clip(np.asarray(out, dtype=np.float32), 0.0, 1.0)
