"""StepSearch (arXiv 2505.15107; Zillwang/StepSearch): every search is paid as it happens.

Each turn that ran searches is one *step*. Its reward is the information gain of the
documents it retrieved (how much they raise the coverage of the question's gold
supporting passages) minus a redundancy penalty (the share of them already retrieved),
paid through :meth:`StepSearchReward.turn_reward`, so that ``--credit turn`` puts it on
that turn's tokens. The finished episode is paid the answer's F1 plus 0.618 x the
search-key score (how well the queries match the question's sub-queries); an episode
without a final answer gets -1 and gives back the step rewards it was paid.

The rules follow the released code (``verl/utils/reward_score/qa_step.py``,
``submodule.py`` at commit 43215ba); docs/methods.md gives each with its line and what
searchgym does differently. Built on the public extension points only: a reward recipe
that pays each turn and is handed the env's corpus (:meth:`StepSearchReward.set_corpus`)
to read the gold passages' text.

Gold supporting passages, by the data at hand (:func:`step_golds`):

- synthwiki: ``hop_facts`` (one passage per hop, read from the corpus; its ``query`` is the
  hop's search key);
- MuSiQue: ``paragraphs`` with ``is_supporting`` (their ``paragraph_text``), search keys from
  ``question_decomposition`` (each sub-question, ``#k`` replaced by the k-th sub-answer);
- HotpotQA: ``supporting_facts`` (titles): those paragraphs of ``context`` when the line has
  it, else the corpus passages with those titles; no search keys.

Anything else is refused by a :class:`MissingGoldError` naming the fields it looked for.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.corpora import Hit
from searchgym.envs.protocols import SearchR1Protocol
from searchgym.error import ConfigError
from searchgym.rewards import Episode, RewardRecipe, RewardResult, f1_score, hedged, normalize_answer

__all__ = [
    "MissingGoldError",
    "StepSearchReward",
    "StepSearchProtocol",
    "information_gains",
    "redundancy",
    "released_doc_texts",
    "search_key_score",
    "step_golds",
    "tfidf_cosines",
]

#: scikit-learn's default ``token_pattern``: words of two or more word characters.
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_PLACEHOLDER = re.compile(r"#(\d+)")


class MissingGoldError(ConfigError):
    """An example has no gold supporting passages StepSearch's step reward can read."""


# ---------------------------------------------------------------- similarity
def tfidf_cosines(doc: str, golds: Sequence[str]) -> list[float]:
    """The cosine of ``doc`` against each of ``golds`` under a TF-IDF fitted on ``[doc] + golds``
    alone, after :func:`~searchgym.rewards.normalize_answer` (the released ``subm_tfidf_cosine``).

    The weights are scikit-learn ``TfidfVectorizer()``'s defaults, written out so that
    searchgym does not depend on scikit-learn: raw term counts over lowercase tokens of two
    or more word characters, smoothed idf ``ln((1 + n) / (1 + df)) + 1`` over the ``n`` texts,
    rows scaled to unit length. A doc or gold without such a token has cosine 0 (where
    scikit-learn would refuse an empty vocabulary).
    """
    texts = [normalize_answer(doc), *(normalize_answer(g) for g in golds)]
    counts = [Counter(_TOKEN.findall(t.lower())) for t in texts]
    n = len(texts)
    df = Counter(term for c in counts for term in c)
    idf = {term: math.log((1 + n) / (1 + d)) + 1.0 for term, d in df.items()}

    def unit(c: Counter) -> dict[str, float]:
        weights = {term: count * idf[term] for term, count in c.items()}
        norm = math.sqrt(sum(w * w for w in weights.values()))
        return {term: w / norm for term, w in weights.items()} if norm > 0 else {}

    vec = unit(counts[0])
    out = []
    for c in counts[1:]:
        gold = unit(c)
        out.append(max(0.0, sum(w * gold.get(term, 0.0) for term, w in vec.items())))
    return out


def information_gains(steps: Sequence[Sequence[str]], golds: Sequence[str]) -> list[float]:
    """Per step (the documents one turn retrieved), the mean over golds of how much the step's
    best cosine to that gold raises the best cosine of the steps before it (from 0): the
    released ``G_t = (1/n) sum_j max(c_j^t - m_j^{t-1}, 0)``. No golds: every gain 0."""
    if not golds:
        return [0.0] * len(steps)
    best = [0.0] * len(golds)
    gains = []
    for docs in steps:
        match = [0.0] * len(golds)
        for doc in docs:
            match = [max(m, c) for m, c in zip(match, tfidf_cosines(doc, golds))]
        gains.append(sum(max(c - b, 0.0) for c, b in zip(match, best)) / len(golds))
        best = [max(b, c) for b, c in zip(best, match)]
    return gains


def redundancy(steps: Sequence[Sequence[str]]) -> list[float]:
    """Per step, the share of its documents already retrieved, by earlier steps or earlier in
    the same step (exact text): the released ``P_t``. A step without documents: 0."""
    seen: set[str] = set()
    out = []
    for docs in steps:
        repeated = 0
        for doc in docs:
            repeated += doc in seen
            seen.add(doc)
        out.append(repeated / len(docs) if docs else 0.0)
    return out


def released_doc_texts(texts: Sequence[str]) -> list[str]:
    """The documents of one search as the released reward reads them back from the observation.

    The released observation writes ``Doc i<## Title: t ##> text`` one per line, and its parser
    keeps what follows each ``##>`` up to the next ``<##``, so every document but the last keeps
    the next one's ``Doc i+1`` label (``qa_step.py:54-66``, ``generation.py:476-486`` at 43215ba).
    A document is then the same text again only at the same rank, which is what the released
    redundancy counts; the label's word ``doc`` also enters the TF-IDF of the gain."""
    return [f"{t}\nDoc {i + 2}" if i + 1 < len(texts) else t for i, t in enumerate(texts)]


def _f1(prediction: str, gold: str) -> float:
    return round(f1_score(prediction, [gold], special_yes_no=False), 4)


def search_key_score(queries: Sequence[str], key_groups: Sequence[Sequence[str]]) -> float:
    """How well the queries cover the question's search keys (the released rule).

    ``key_groups`` holds one group per sub-question, each its alternative phrasings. Each
    query, in order, is matched to the group with its best token F1 (max over the group's
    phrasings; the first group on a tie) and *sets* that group's score (a later, weaker
    query to the same group overwrites a better one, as released); the score is the mean
    over groups. No groups: 0.
    """
    if not key_groups:
        return 0.0
    matched: dict[int, float] = {}
    for query in queries:
        best, group = 0.0, -1
        for g, phrasings in enumerate(key_groups):
            score = max((_f1(query, p) for p in phrasings), default=0.0)
            if score > best:
                best, group = score, g
        if group >= 0:
            matched[group] = best
    return sum(matched.values()) / len(key_groups)


# ---------------------------------------------------------------- golds
def _content(text: str) -> str:
    """A retrieved ``"title\\ntext"`` without its title (the released reward drops the title)."""
    title, sep, body = text.partition("\n")
    return body if sep else title


def _titles(supporting_facts: Any) -> list[str]:
    if isinstance(supporting_facts, Mapping):  # Hugging Face / FlashRAG: {"title": [...], "sent_id": [...]}
        titles = supporting_facts.get("title", [])
    else:  # the original HotpotQA: [[title, sent_id], ...]
        titles = [fact[0] for fact in supporting_facts if isinstance(fact, Sequence) and not isinstance(fact, str) and fact]
    return list(dict.fromkeys(str(t) for t in titles))


def _context_paragraphs(context: Any) -> dict[str, str]:
    if isinstance(context, Mapping):  # {"title": [...], "sentences": [[...], ...]}
        pairs = zip(context.get("title", []), context.get("sentences", []))
    else:  # [[title, [sentences]], ...]
        pairs = (tuple(item[:2]) for item in context if isinstance(item, Sequence) and len(item) >= 2)
    return {str(title): "".join(map(str, sentences)) for title, sentences in pairs}


#: id(corpus) -> (corpus, {title: position of its first passage}), built once per corpus.
_TITLE_INDEXES: dict[int, tuple[Any, dict[str, int]]] = {}


def _title_index(corpus: Any) -> dict[str, int]:
    """Each title's first passage in ``corpus``: one pass over the corpus, the first time a
    HotpotQA line without ``context`` needs it (minutes for a corpus of millions)."""
    held = _TITLE_INDEXES.get(id(corpus))
    if held is None or held[0] is not corpus:
        index: dict[str, int] = {}
        for position, passage in enumerate(corpus):
            index.setdefault(passage.title, position)
        held = _TITLE_INDEXES[id(corpus)] = (corpus, index)
    return held[1]


def step_golds(metadata: Mapping[str, Any], corpus: Any = None, *, example_id: str = "") -> tuple[list[str], list[list[str]]]:
    """The gold supporting passages' texts and the search-key groups of one example.

    ``corpus`` (a :class:`~searchgym.corpora.Corpus`: ``get(passage_id)``, positions, iteration) is read for synthwiki's ``hop_facts`` and for
    HotpotQA titles without ``context``. Raises :class:`MissingGoldError` naming the fields
    it looked for when the example has none of them.
    """
    where = f"example {example_id!r}" if example_id else "the example"
    if metadata.get("hop_facts"):
        if corpus is None:
            raise MissingGoldError(
                f"StepSearchReward reads the text of {where}'s supporting passages (hop_facts' passage_id) from the "
                "corpus, but has none; build it inside an env (which hands it the corpus) or call set_corpus(corpus)."
            )
        facts = metadata["hop_facts"]
        return [corpus.get(str(f["passage_id"])).text for f in facts], [[str(f["query"])] for f in facts if f.get("query")]
    if metadata.get("paragraphs") and any(isinstance(p, Mapping) and "is_supporting" in p for p in metadata["paragraphs"]):
        golds = [str(p.get("paragraph_text", "")) for p in metadata["paragraphs"] if isinstance(p, Mapping) and p.get("is_supporting")]
        steps = [s for s in metadata.get("question_decomposition") or () if isinstance(s, Mapping)]
        answers = [str(s.get("answer", "")) for s in steps]

        def filled(question: str) -> str:
            return _PLACEHOLDER.sub(lambda m: answers[int(m.group(1)) - 1] if 0 < int(m.group(1)) <= len(answers) else m.group(0), question)

        return golds, [[filled(str(s.get("question", "")))] for s in steps if s.get("question")]
    if metadata.get("supporting_facts"):
        titles = _titles(metadata["supporting_facts"])
        if metadata.get("context"):
            paragraphs = _context_paragraphs(metadata["context"])
            return [paragraphs[t] for t in titles if t in paragraphs], []
        if corpus is None:
            raise MissingGoldError(
                f"StepSearchReward reads {where}'s supporting_facts titles from the corpus (the line has no context), "
                "but has none; build it inside an env or call set_corpus(corpus)."
            )
        index = _title_index(corpus)
        return [corpus[index[t]].text for t in titles if t in index], []
    raise MissingGoldError(
        f"StepSearchReward's step reward expects {where} to name its gold supporting passages in its metadata: "
        "synthwiki's 'hop_facts', MuSiQue's 'paragraphs' (with 'is_supporting'), or HotpotQA's 'supporting_facts'; "
        f"it has none of them (its fields: {sorted(metadata) or 'none'}). Use a dataset that has one, or "
        "StepSearchReward(step_rewards=False) for the outcome reward alone."
    )


# ---------------------------------------------------------------- the released observation
class StepSearchProtocol(SearchR1Protocol):
    """Search-R1's grammar with StepSearch's released observation (``generation.py:403``,
    ``:476-486`` at 43215ba): ``<information> Doc 1<## Title: t ##> text`` with one document a
    line. An option (``protocol="searchgym.methods.stepsearch:StepSearchProtocol"``): the
    reward reads the env's search records, never this text, so it does not change the pay.
    After the documents of the last search turn (only the answer turn left) the env appends the
    released ``<warning>`` (``generation.py:374-376``, appended at ``:404`` when ``is_last``)."""

    name = "stepsearch"
    last_search_notice = (
        "<warning> Now, I can no longer call <search></search> for external information. I must analyze and answer "
        "based on the existing information. Now let me make a final thought and give an answer. </warning>\n\n"
    )

    @staticmethod
    def format_doc(number: int, hit: Hit) -> str:
        return f"Doc {number}<## Title: {hit.passage.title} ##> {hit.passage.text}"

    def wrap_information(self, text: str) -> str:
        return f"\n\n<information> {text.strip()} </information>\n\n"


# ---------------------------------------------------------------- the recipe
class StepSearchReward(RewardRecipe):
    """StepSearch's reward: per-search information gain minus redundancy, paid each turn, then
    answer F1 + ``search_key_weight`` x the search-key score; no final answer: -1, and the
    step rewards paid are given back.

    - ``step_coefficient`` (0.6): the weight of each step's ``gain - redundancy``. The released
      trainer states 0.6 (``main_ppo.py:42``) but adds it to a tensor it has already written in
      place, so it pays 1.6 in effect; ``step_coefficient=1.6`` reproduces that.
    - ``search_key_weight`` (0.618): the weight of the search-key score (``qa_step.py:218``).
    - ``information_gain``, ``redundancy_penalty`` (True): the two terms of the step reward.
    - ``step_rewards`` (True): pay steps at all (False: no golds are read; the outcome alone).
    - ``no_answer_score`` (-1): the episode's score when it never answered; the step rewards
      it was paid are subtracted from it, so such an episode sums to exactly this (the
      released code pays no step reward to a response without a final answer).
    - ``strict`` (True): a hedged answer (both options of a comparison, a list) scores F1 0;
      False: the released F1.
    - ``released_parser`` (False): read each search's documents as the released parser does
      (:func:`released_doc_texts`: every document but the last keeps the next one's ``Doc k``
      label), so a document counts as seen only when it returns at the same rank. False: a
      document is seen when its text was retrieved before, at any rank.

    A question whose gold passages resolve to none (HotpotQA titles found nowhere) gets no step
    reward, neither gain nor redundancy, as released (``qa_step.py:118-119``).
    """

    name = "stepsearch"

    def __init__(
        self,
        *,
        step_coefficient: float = 0.6,
        search_key_weight: float = 0.618,
        information_gain: bool = True,
        redundancy_penalty: bool = True,
        step_rewards: bool = True,
        no_answer_score: float = -1.0,
        strict: bool = True,
        released_parser: bool = False,
        invalid_action_penalty: float = 0.0,
    ):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        for label, value in (("step_coefficient", step_coefficient), ("search_key_weight", search_key_weight),
                             ("no_answer_score", no_answer_score)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"StepSearchReward expects {label} to be a finite number, got {value!r}.")
        for label, value in (("information_gain", information_gain), ("redundancy_penalty", redundancy_penalty),
                             ("step_rewards", step_rewards), ("strict", strict),
                             ("released_parser", released_parser)):
            if not isinstance(value, bool):
                raise ConfigError(f"StepSearchReward expects {label} to be True or False, got {value!r}.")
        self.step_coefficient = float(step_coefficient)
        self.search_key_weight = float(search_key_weight)
        self.information_gain = information_gain
        self.redundancy_penalty = redundancy_penalty
        self.step_rewards = step_rewards
        self.no_answer_score = float(no_answer_score)
        self.strict = strict
        self.released_parser = released_parser
        self._corpus: Any = None

    def set_corpus(self, corpus: Any) -> None:
        """Called by the env with its corpus once it is built: the gold passages' text is read from it."""
        self._corpus = corpus

    def floor(self, episode: Episode) -> float:
        return self.no_answer_score

    # -- steps
    def golds(self, episode: Episode) -> tuple[list[str], list[list[str]]]:
        """The episode's gold passages' texts and search-key groups (:func:`step_golds`)."""
        return step_golds(episode.metadata, self._corpus, example_id=episode.example_id)

    def steps(self, episode: Episode) -> list[tuple[int, float, float]]:
        """``(round, gain, redundancy)`` of every turn that ran searches, in order (the
        searches of one turn, parallel tool calls included, are one step)."""
        rounds: dict[int, list[str]] = {}
        for search in episode.searches:
            texts = [_content(t) for t in search.texts]
            rounds.setdefault(search.round, []).extend(released_doc_texts(texts) if self.released_parser else texts)
        if not rounds:
            return []
        golds, _ = self.golds(episode)
        if not golds:  # released: no gold passages, no step reward at all (qa_step.py:118-119)
            return []
        docs = list(rounds.values())
        gains = information_gains(docs, golds) if self.information_gain else [0.0] * len(docs)
        repeats = redundancy(docs) if self.redundancy_penalty else [0.0] * len(docs)
        return list(zip(rounds, gains, repeats))

    def turn_reward(self, episode: Episode) -> Mapping[str, float] | None:
        if not self.step_rewards or not episode.turns:
            return None
        this = episode.turns[-1].round
        for round_, gain, repeat in self.steps(episode):
            if round_ == this:
                return {"gain": self.step_coefficient * gain, "redundancy": -self.step_coefficient * repeat}
        return None

    # -- the outcome
    def score(self, episode: Episode) -> RewardResult:
        if episode.answer is None:
            paid = sum(self.step_coefficient * (g - p) for _, g, p in self.steps(episode)) if self.step_rewards else 0.0
            return RewardResult(self.no_answer_score - paid, {"f1": 0.0, "search_keys": 0.0, "withdrawn": -paid})
        f1 = round(f1_score(episode.answer, episode.answers, special_yes_no=False), 4)
        if self.strict and hedged(episode.answer, episode.answers, episode.candidates, question=episode.question, check="f1"):
            f1 = 0.0
        keys = 0.0
        if self.step_rewards and self.search_key_weight:
            _, groups = self.golds(episode)
            keys = search_key_score([s.query for s in episode.searches], groups)
        return RewardResult(f1 + self.search_key_weight * keys, {"f1": f1, "search_keys": keys})
