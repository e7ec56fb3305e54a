"""ParallelSearch (Zhao et al., 2025, arXiv 2508.09303): several sub-queries in one search turn.

Built on searchgym's public extension points only (docs/extending.md), as a user would build it:

- :class:`ParallelSearchProtocol`: Search-R1's grammar, where one ``<search>`` block may hold
  several sub-queries separated by ``##``. They are parsed as several ``Search`` actions of one
  turn, which the game retrieves as one batch and records as one round
  (``Episode.searches``, ``Episode.rounds``). With ``action_format="tools"`` the same thing is
  several ``search`` calls in one assistant message.
- :class:`ParallelSearchReward`: the released reward. It adds exact match, Search-R1's
  format score, a decomposition reward (split comparison questions, do not split the
  others) and a search-count reward (one round for comparison and single-hop questions, two
  or more for sequential ones). By default the two shaping terms are checked: their bonuses
  are paid only to a right answer, and a decomposition only when its sub-queries are real
  ones. ``shaping="released"`` pays them as the released code does, which can be exploited.
- :func:`question_type`: the released code's parallelizable flag, read from the example's
  ``type``.
- :class:`ParallelOracle`: synthwiki's oracle, searching both sides of a comparison in one turn.

The one piece the library lacked, rendering a turn's searches together (one ``<information>``
block for all sub-queries, as the released code shows them), is the public protocol hook
:meth:`~searchgym.envs.protocols.Protocol.render_turn_docs`.

Sources are Tree-Shu-Zhao/ParallelSearch at commit 5da97f4 (``PS``):

- the prompt: ``scripts/data_process/qa_search_train_merge.py:32-37``;
- executing the sub-queries: ``search_r1/llm_agent/generation.py:438-484``;
- the question type: ``verl/utils/dataset/rl_dataset.py:120-156``;
- the reward: ``verl/utils/reward_score/qa_em_format.py:144-227``;
- the coefficients and budgets: ``train_parallelsearch.sh:88-95``.

docs/methods.md lists each setting and says what searchgym does differently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.agents import Agent
from searchgym.corpora import Hit
from searchgym.envs import search_env
from searchgym.envs.protocols import Action, Answer, Invalid, Search, SearchR1Protocol, find_block, search_or_answer
from searchgym.error import ConfigError, UnknownNameError
from searchgym.rewards import Episode, RewardRecipe, RewardResult, Turn, exact_match, normalize_answer, search_r1_sequence
from searchgym.rewards.hedging import FUNCTION_WORDS

#: What separates the sub-queries of one ``<search>`` block (the released prompt and ``query.split("##")``).
SEPARATOR = "##"

#: The released prompt's sentence on decomposition, word for word. It is inserted into Search-R1's
#: released template right after the ``<search>``/``<information>`` sentence
#: (PS ``scripts/data_process/qa_search_train_merge.py:35``).
DECOMPOSE_SENTENCE = (
    "If the original query is complex or involves multiple parts, you are encouraged to decompose it into smaller "
    "sub-questions, separated by ##. For example: <search> sub-question 1 ## sub-question 2 </search>. "
)

# ---------------------------------------------------------------- question types
#: The released flag ``is_comp``: 1 for a parallelizable question (its sub-questions are
#: independent), -1 for one without a type (NQ-style, ``na``), 0 for the others (sequential).
COMPARISON, NA, SEQUENTIAL = 1, -1, 0
#: ``type`` values that are parallelizable: HotpotQA's and 2Wiki's ``comparison`` and
#: MultiHop-RAG's ``comparison_query`` (its parallel test split: PS
#: ``scripts/data_process/qa_search_test_parallel_sequential.py:10-14``).
PARALLEL_TYPES = frozenset({"comparison", "comparison_query"})
#: The released reward's parallel type: ``comparison`` alone (PS ``verl/utils/dataset/rl_dataset.py:132``),
#: so MultiHop-RAG's ``comparison_query`` is sequential there.
RELEASED_PARALLEL_TYPES = frozenset({"comparison"})
#: ``type`` values read as ``na``. ``na`` is the released one (NQ has no type). synthwiki's
#: ``single`` (one-hop) questions are NQ-like, so searchgym reads them as ``na`` too.
NA_TYPES = frozenset({"na", "single"})


def question_type(metadata: Mapping[str, Any], *, released: bool = False) -> int:
    """The released ``is_comp`` flag of a question, read from its metadata's ``type``.

    Returns :data:`COMPARISON` (1) for ``comparison`` or ``comparison_query`` (``released=True``:
    ``comparison`` alone, as PS ``rl_dataset.py:132`` checks; ``comparison_query`` is then
    sequential), and :data:`NA`
    (-1) for ``na``, synthwiki's ``single`` or no ``type`` at all (the released data sets
    ``na`` where a dataset has none: PS ``qa_search_train_merge.py:67-71``). Any other type is
    :data:`SEQUENTIAL` (0): HotpotQA's and synthwiki's ``bridge``, MuSiQue's
    ``compositional``, 2Wiki's ``inference``. A ``type`` that is not a string is a
    :class:`~searchgym.error.ConfigError`.
    """
    kind = metadata.get("type")
    if kind is None:
        return NA
    if not isinstance(kind, str):
        raise ConfigError(
            f"ParallelSearch expects the example's metadata 'type' to be a question type string such as 'comparison', "
            f"'bridge' or 'na', got {type(kind).__name__} {kind!r}; fix the data file's 'type' field or remove it "
            "(a question without a type is read as 'na')."
        )
    kind = kind.strip().lower()
    if kind in (RELEASED_PARALLEL_TYPES if released else PARALLEL_TYPES):
        return COMPARISON
    return NA if kind in NA_TYPES or not kind else SEQUENTIAL


# ---------------------------------------------------------------- protocol
def split_subqueries(query: str, max_subqueries: int | None = None) -> list[str]:
    """The sub-queries of one ``<search>`` block, split at ``##``. Each is stripped, empty
    ones are dropped, and a repeat (the same words up to case and spacing) keeps only its
    first occurrence. At most ``max_subqueries`` are kept (None: all)."""
    kept: list[str] = []
    seen: set[str] = set()
    for part in query.split(SEPARATOR):
        part = part.strip()
        key = " ".join(part.casefold().split())
        if not key or key in seen:
            continue
        seen.add(key)
        kept.append(part)
        if max_subqueries is not None and len(kept) >= max_subqueries:
            break
    return kept


class ParallelSearchProtocol(SearchR1Protocol):
    """Search-R1's grammar, where one ``<search>`` block holds sub-queries separated by ``##``.

    ``<search> sub-question 1 ## sub-question 2 </search>`` parses as ``Search("sub-question 1")``
    and ``Search("sub-question 2")`` in one turn. The game runs a turn's searches as one batch
    and records them as one round. The released code runs every part of
    ``query.split("##")`` as written. Here the parts are stripped, empty ones are dropped,
    repeats are dropped, and only the first ``max_subqueries`` run. A block with no
    sub-query left (``<search> ## </search>``) is a malformed turn.

    The documents of all of a turn's sub-queries go in one ``<information>`` block, in the
    order of the sub-queries. Each is rendered ``Doc i(Title: ...) ...``, numbered from 1 for
    each sub-query, as the released code renders them (:meth:`render_turn_docs`). With a
    summarizer, each sub-query's summary gets its own block.

    Args:
        prompt: ``"released"`` (the only one): Search-R1's released template with the
            sentence :data:`DECOMPOSE_SENTENCE` inserted, as in the released data
            preparation. The paper's own prompt could not be retrieved.
        max_subqueries: The most sub-queries of one turn that run. The sources do not give a
            cap. The default 4 covers the two sides of a comparison with room to spare, and
            bounds what a ``##``-spamming turn can retrieve.
    """

    name = "parallelsearch"
    PROMPTS = {
        "released": SearchR1Protocol.PROMPTS["released"].replace(
            "</information>. ", "</information>. " + DECOMPOSE_SENTENCE, 1),
    }
    DEFAULT_PROMPT = "released"

    def __init__(self, prompt: str | None = None, max_subqueries: int = 4):
        super().__init__(prompt)
        if isinstance(max_subqueries, bool) or not isinstance(max_subqueries, int) or max_subqueries < 1:
            raise ConfigError(
                f"ParallelSearchProtocol expects max_subqueries to be an integer >= 1 (the most sub-queries of one turn "
                f"that run), got {max_subqueries!r}."
            )
        self.max_subqueries = max_subqueries

    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        action, _ = search_or_answer(text)  # Search-R1's rule: the first closed <search> or <answer> block
        if not isinstance(action, Search):
            return (action,), not isinstance(action, Invalid)
        queries = split_subqueries(action.query, self.max_subqueries)
        if not queries:
            return (Invalid(f"the <search> block holds no sub-query between its {SEPARATOR!r} separators"),), False
        return tuple(Search(q) for q in queries), True

    writable = "it writes one Answer, or one or more Searches (one turn's sub-queries, none holding '##')"

    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        if actions and all(isinstance(a, Search) for a in actions):
            queries = [a.query for a in actions]  # type: ignore[attr-defined]
            if any(SEPARATOR in q or not q.strip() for q in queries):
                raise ConfigError(
                    f"The {self.name} protocol cannot write the searches {queries!r} as one turn: a sub-query must be "
                    f"non-empty and must not hold {SEPARATOR!r} (it would read as several)."
                )
            head = f"<think> {thought} </think>\n" if thought else ""
            return f"{head}<search> {f' {SEPARATOR} '.join(queries)} </search>"
        if len(actions) == 1 and isinstance(actions[0], Answer):
            return super().write(actions, thought)
        raise self._unwritable(actions)

    def render_turn_docs(self, hit_lists: Sequence[Sequence[Hit]]) -> list[str]:
        # One <information> block for the whole turn, numbering restarting per sub-query
        # (PS generation.py:438-484); the later searches add nothing of their own.
        if not hit_lists:
            return []
        block = self.wrap_information("\n".join(self.docs_text(hits) for hits in hit_lists))
        return [block] + [""] * (len(hit_lists) - 1)

    def settings(self) -> dict[str, Any]:
        return {"prompt": self.prompt_style, "max_subqueries": self.max_subqueries}


# ---------------------------------------------------------------- reward
SHAPING_MODES = ("checked", "released")


def search_rounds(episode: Episode) -> list[tuple[Turn, ...]]:
    """The episode's rounds that wrote a search (whether or not it ran), in order. A round
    is one agent turn: a tag turn, or every call of one tool message."""
    return [group for group in episode.rounds if any(isinstance(a, Search) for t in group for a in t.parsed)]


def parallel_format(turns: Sequence[Turn]) -> tuple[bool, str]:
    """Search-R1's ``is_valid_sequence`` (:func:`~searchgym.rewards.search_r1_sequence`), which
    the released reward uses, on a grammar where one search turn may retrieve for several
    sub-queries. The released code shows them in one ``<information>`` block, so the
    documents that follow one turn count as one block here."""
    merged = []
    for turn in turns:
        kinds: list[str] = []
        for kind in turn.observation:
            if not (kind == "documents" and kinds and kinds[-1] == "documents"):
                kinds.append(kind)
        merged.append(dataclasses.replace(turn, observation=tuple(kinds)))
    return search_r1_sequence(merged)


def _content_words(text: str) -> set[str]:
    return {w for w in normalize_answer(text).split() if w not in FUNCTION_WORDS}


class ParallelSearchReward(RewardRecipe):
    """ParallelSearch's reward (PS ``verl/utils/reward_score/qa_em_format.py:168-227``;
    coefficients from ``train_parallelsearch.sh:88-92``).

    ``total = base + decomposition + search_count``. With ``s = structure_format_score``
    (0.1) and ``f = final_format_score`` (0.0), ``base`` is:

    ============== ============== ================
    answer         valid format   invalid format
    ============== ============== ================
    none           s              0
    EM correct     score          score - s
    wrong          s              f
    ============== ============== ================

    EM is exact match after SQuAD normalization, against any gold answer. The format is
    Search-R1's ``is_valid_sequence`` (:func:`parallel_format`).

    **Decomposition** (``comp_score`` = 0.15), read from the first round of the episode that
    searched. Its sub-queries are that turn's searches.

    - ``shaping="released"``, the released code: ``3 * comp_score`` if the question is
      a comparison and that search holds ``##``; ``comp_score`` if the question is not a
      comparison and the episode's first search is a single query, or the episode never
      searched; else 0. Any ``##`` earns the 0.45, junk sub-queries included, and not
      searching at all earns the 0.15.
    - ``shaping="checked"`` (default): the same amounts, paid only for a right
      answer (EM). On a comparison the round must also hold two or more sub-queries. Each
      must be distinct from the others (after normalization) and share a content word with
      the question. Each must have run and retrieved a passage that none of the round's
      other sub-queries retrieved. On other questions the episode must have searched, and
      its first search must be a single query. The paper rewards decompositions that serve
      the answer ("correctness, query decomposition quality, and parallel execution
      benefits", abstract). A split that is junk, repeated, or followed by a wrong answer
      shows no such quality, and would be a reward for activity.

    **Search count** (``count_score`` = 0.35), over ``r``, the number of rounds that wrote a
    search, counted in the agent's own turns only. The released code counts the ``<search>``
    tags of prompt + response, and the prompt's two examples make that ``r + 2``; the
    formula below is the released one with that offset removed.

    - comparison and ``na`` questions: ``count_score * (1 - |r - 1|)``: 0.35 at one round,
      0 at none or two, and -0.35 for each further round;
    - sequential questions: ``count_score * (1 - |min(r, 2) - 2|)``: -0.35 at none, 0 at one,
      0.35 at two or more.

    With ``shaping="checked"`` (default) a positive search-count term is paid only to a right
    answer; the penalties (no search on a sequential question, extra rounds on the others)
    always apply. Released, two searches of anything on a sequential question earn 0.35 even
    with a wrong answer: searching the same query twice would be paid as a multi-hop search.

    The question type is :func:`question_type` of ``Episode.metadata``.

    Args:
        score: EM reward (1.0).
        structure_format_score: s (0.1, ``train_parallelsearch.sh:88``).
        final_format_score: f (0.0, ``:89``).
        count_score: the search-count unit (0.35, ``:90``).
        comp_score: the decomposition unit (0.15, ``:91``); a right split pays 3x.
        shaping: ``"checked"`` (default) or ``"released"``: how the decomposition and
            search-count terms are paid (above).
        released_types: read only ``comparison`` as parallel, as released (:func:`question_type`
            with ``released=True``); None (default): True exactly when ``shaping="released"``.
        invalid_action_penalty: added per malformed turn by the env (0; the released code has none).
    """

    name = "parallelsearch"

    def __init__(
        self,
        *,
        score: float = 1.0,
        structure_format_score: float = 0.1,
        final_format_score: float = 0.0,
        count_score: float = 0.35,
        comp_score: float = 0.15,
        shaping: str = "checked",
        released_types: bool | None = None,
        invalid_action_penalty: float = 0.0,
    ):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        values = {"score": score, "structure_format_score": structure_format_score, "final_format_score": final_format_score,
                  "count_score": count_score, "comp_score": comp_score}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
                raise ConfigError(f"ParallelSearchReward expects {key} to be a finite number, got {value!r}.")
        if shaping not in SHAPING_MODES:
            raise UnknownNameError("ParallelSearch shaping mode", shaping, SHAPING_MODES)
        if released_types is not None and not isinstance(released_types, bool):
            raise ConfigError(f"ParallelSearchReward expects released_types to be True, False or None, got {released_types!r}.")
        self.released_types = shaping == "released" if released_types is None else released_types
        self.correct_score = float(score)
        self.structure_format_score = float(structure_format_score)
        self.final_format_score = float(final_format_score)
        self.count_score = float(count_score)
        self.comp_score = float(comp_score)
        self.shaping = shaping

    # -- the terms
    def search_count_reward(self, rounds: int, kind: int) -> float:
        """The search-count term for ``rounds`` search rounds on a question of type ``kind``."""
        if kind != SEQUENTIAL:
            return self.count_score * (1 - abs(rounds - 1))
        return self.count_score * (1 - abs(min(rounds, 2) - 2))

    def decomposition_reward(self, episode: Episode, kind: int, em: float) -> float:
        """The decomposition term (see the class docstring)."""
        rounds = search_rounds(episode)
        first = rounds[0] if rounds else ()
        queries = [a.query for t in first for a in t.parsed if isinstance(a, Search)]
        if self.shaping == "released":
            raw = next((find_block(t.text, "<search>", "</search>") for t in first if "<search>" in t.text), None) or ""
            split = len(queries) >= 2 or SEPARATOR in raw
            if kind == COMPARISON:
                return 3 * self.comp_score if split else 0.0
            return self.comp_score if not split else 0.0
        if not em or not rounds:
            return 0.0
        if kind != COMPARISON:
            return self.comp_score if len(queries) == 1 else 0.0
        if len(queries) < 2 or not self._distinct_and_useful(episode, first, queries):
            return 0.0
        return 3 * self.comp_score

    @staticmethod
    def _distinct_and_useful(episode: Episode, first: Sequence[Turn], queries: Sequence[str]) -> bool:
        keys = [" ".join(normalize_answer(q).split()) for q in queries]
        if len(set(keys)) != len(keys) or not all(keys):
            return False
        question = _content_words(episode.question)
        if not all(_content_words(q) & question for q in queries):
            return False
        this_round = first[0].round
        records = [s for s in episode.searches if s.round == this_round]
        if len(records) != len(queries):  # a sub-query that did not run (last turn, budget) retrieved nothing
            return False
        for i, record in enumerate(records):
            others = {pid for j, r in enumerate(records) if j != i for pid in r.ids}
            if not set(record.ids) - others:
                return False
        return True

    # -- the recipe
    def score(self, episode: Episode) -> RewardResult:
        kind = question_type(episode.metadata, released=self.released_types)
        valid, _ = parallel_format(episode.turns)
        em = exact_match(episode.answer, episode.answers) if episode.answer is not None else 0.0
        s = self.structure_format_score
        if episode.answer is None:
            base = s if valid else 0.0
        elif em:
            base = self.correct_score if valid else self.correct_score - s
        else:
            base = s if valid else self.final_format_score
        rounds = len(search_rounds(episode))
        comp = self.decomposition_reward(episode, kind, em)
        count = self.search_count_reward(rounds, kind)
        if self.shaping == "checked" and not em:
            count = min(count, 0.0)  # efficiency is a bonus of a right answer; its penalties always apply
        components = {"em": em, "valid_format": float(valid), "decomposition": comp, "search_count": count,
                      "search_rounds": float(rounds), "question_type": float(kind)}
        return RewardResult(base + comp + count, components)

    def floor(self, episode: Episode) -> float:
        # An episode without a well-formed action never searched and never answered.
        kind = question_type(episode.metadata, released=self.released_types)
        released_bonus = self.comp_score if self.shaping == "released" and kind != COMPARISON else 0.0
        count = self.search_count_reward(0, kind)
        return released_bonus + (count if self.shaping == "released" else min(count, 0.0))


# ---------------------------------------------------------------- a scripted agent
class ParallelOracle(Agent):
    """synthwiki's oracle, playing comparisons the ParallelSearch way: both sides in one turn.

    The built-in ``oracle`` agent searches one hop per turn, so a comparison takes it two
    rounds. This one writes a comparison's two oracle queries as one turn
    (``<search> a ## b </search>``, or two parallel ``search`` calls with tools), then
    answers. Other questions it plays hop by hop, as the oracle does. It reads the gold
    answers from synthwiki's metadata: an upper bound for the reward, not a policy.
    ``searchgym bench --agents searchgym.methods.parallelsearch:ParallelOracle``.
    """

    name = "parallel-oracle"

    def __init__(self, env: Any):
        inner = search_env(env)
        self.protocol = inner.protocol
        self.tools = inner.game.tools
        self.action_format = "tools" if self.tools is not None else "tags"
        self.examples = {e.id: e for e in inner.examples}

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[Any]:
        return [self._turn(info) for info in infos]

    def _turn(self, info: Mapping[str, Any]) -> Any:
        example = self.examples.get(info.get("example_id"))
        if example is None or "oracle_queries" not in example.metadata:
            raise ConfigError(
                f"ParallelOracle expects synthwiki questions (metadata with oracle_queries), got example "
                f"{info.get('example_id')!r}; build it for an env over synthwiki."
            )
        queries = list(example.metadata["oracle_queries"])
        if question_type(example.metadata) == COMPARISON:
            queries = [queries]  # one round holding both sides
        else:
            queries = [[q] for q in queries]
        turn = int(info.get("turn", 0))
        if turn < len(queries):
            actions, thought = [Search(q) for q in queries[turn]], "I need to find: " + "; ".join(queries[turn]) + "."
        else:
            actions, thought = [Answer(example.answers[0])], "I have found the answer."
        if self.tools is not None:
            return self.tools.write(actions, thought, turn=turn)
        return self.protocol.write(actions, thought=thought)
