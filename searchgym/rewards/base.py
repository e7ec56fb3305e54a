"""The types every recipe shares: the episode record, the result, the recipe base class,
and the frozen-model plumbing (how recipes call a generator, reader or judge).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from searchgym.error import ConfigError
from searchgym.rewards.metrics import span_check


# ---------------------------------------------------------------- data
#: What the environment can append after an agent turn, as :attr:`Turn.observation` names it.
OBSERVATION_KINDS = ("documents", "feedback", "budget")


@dataclass(frozen=True)
class Turn:
    """One agent turn as the env recorded it, and what the env answered, by kind only.

    - ``text``: the agent's own turn as the env kept it (cut at the protocol's stop
      string, with any environment-owned blocks the agent forged removed).
    - ``actions``: the kinds of action the protocol parsed from it, in order
      (``"search"``, ``"select"``, ``"evidence"``, ``"answer"``, ``"complete"``,
      ``"invalid"``).
    - ``observation``: what the env appended after it, in order, among
      :data:`OBSERVATION_KINDS`: ``"documents"`` (a retrieval, rendered or summarized),
      ``"feedback"`` (the protocol's invalid-turn feedback), ``"budget"`` (the search
      budget notice). Empty after the last turn, which gets no observation.

    - ``round``: the agent turn this record belongs to, counted from 0 (the env's
      ``info["turn"]`` minus one). A tag turn is one record; a tool turn (one assistant
      message) is one record per run of calls the protocol writes as one tag turn, and all
      records of one message share its round: parallel calls are one round, sequential
      ones several (:attr:`Episode.rounds`).
    - ``parsed``: the protocol's action objects behind ``actions``, in order (``Search(query)``,
      ``Answer(text)``, a protocol's own kinds such as a ``Refine(text)``), parsed from the
      agent's own words only.

    Only the kinds are kept, never the text of the documents or the feedback: a recipe
    or format check reads the agent's words and the shape of the exchange, nothing the
    environment wrote.
    """

    text: str
    actions: tuple[str, ...] = ()
    observation: tuple[str, ...] = ()
    round: int = 0
    parsed: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        for kind in self.observation:
            if kind not in OBSERVATION_KINDS:
                raise ConfigError(f"Turn expects observation kinds among {OBSERVATION_KINDS}, got {kind!r}.")
        if not isinstance(self.round, int) or isinstance(self.round, bool) or self.round < 0:
            raise ConfigError(f"Turn expects round to be an integer >= 0 (the agent turn, from 0), got {self.round!r}.")
        object.__setattr__(self, "parsed", tuple(self.parsed))

    @property
    def valid(self) -> bool:
        """Whether the protocol found a well-formed action in this turn."""
        return any(kind != "invalid" for kind in self.actions)


@dataclass(frozen=True)
class Budgets:
    """The env's budgets, as a recipe reads them (:attr:`Episode.budgets`): the gym.make
    arguments of the same names.

    - ``max_turns``: agent turns per episode (the last one's search does not run).
    - ``top_k``: documents per search; ``initial_top_k``: documents of the first
      observation of a protocol that starts from retrieved documents (s3; else ``top_k``).
    - ``max_searches``, ``max_calls``, ``max_context_tokens``: the search, call and context
      budgets; None where the env sets none.
    """

    max_turns: int
    top_k: int
    initial_top_k: int | None = None
    max_searches: int | None = None
    max_calls: int | None = None
    max_context_tokens: int | None = None


@dataclass(frozen=True)
class SearchRecord:
    """One search the env ran, as a recipe reads it (:attr:`Episode.searches`).

    - ``turn``: the agent turn that asked for it, from 1 (the env's ``info["turn"]``).
    - ``round``: that turn counted from 0 (``turn - 1``), as :attr:`Turn.round`: the searches
      of one agent turn (several tags, or parallel tool calls) share a round and went out as
      one batch; sequential searches have different rounds.
    - ``query``: the query as the agent wrote it (the engine got it cut to ``max_query_chars``).
    - ``ids``, ``texts``: the retrieved passages, best first: their ids and ``"title\ntext"``
      (as :attr:`Episode.retrieved_docs`).

    A search that did not run (on the last turn, or past the search budget) has no record.
    """

    turn: int
    round: int
    query: str
    ids: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ids", tuple(self.ids))
        object.__setattr__(self, "texts", tuple(self.texts))
        if len(self.ids) != len(self.texts):
            raise ConfigError(
                f"SearchRecord expects one text per retrieved id, got {len(self.ids)} ids and {len(self.texts)} texts."
            )


@dataclass
class Episode:
    """What a recipe may read about one finished episode (plain data, filled by the env).

    - ``question``, ``answers``: the example's question and gold answers.
    - ``turns``: every agent turn as a :class:`Turn` (the agent's text and the kinds of
      what the env answered). There is deliberately no prompt, document or feedback
      text here: format checks and extractors read the agent's own words only.
    - ``answer``: the final answer the protocol extracted from the agent's own turn;
      ``None`` if it never answered.
    - ``retrieved_docs``: per search, the retrieved passages as ``"title\\ntext"``.
    - ``selected_docs``: the passages the s3 searcher kept.
    - ``evidence``: the evidence the R-Search agent wrote (``None`` if none).
    - ``observations``: the text of each retrieval the env showed the agent, in order,
      as shown (rendered or summarized, cut at ``max_observation_chars``). Recipes read it
      only to check what the agent quoted (R-Search's grounded evidence), never to
      extract an answer.
    - ``naive_rag_docs``: top-k passages for the question itself; filled only for recipes
      with ``needs_naive_rag``, and left ``None`` once the recipe has the baseline cached
      (:meth:`~searchgym.rewards.recipes.S3GainBeyondRAG.has_naive_rag`).
    - ``naive_rag_size``: how many naive-RAG documents the env asked for (the ``k`` of
      that search); the recipe's baseline cache is keyed by it, so a cached baseline is
      read without searching again. ``None``: the number of ``naive_rag_docs``.
    - ``num_searches``, ``num_invalid``: searches run and malformed turns.
    - ``format_ok``: the protocol's verdict that every turn was well formed.
    - ``example_id``: the example's id (s3 caches its naive-RAG baseline by it).
    - ``evidence_possible``: whether the agent's protocol has an evidence block it could
      write (R-Search's does; the env fills it from the protocol). R-Search's recipe pays no
      evidence-format score where evidence cannot be written: Eq. 5 pays it to an episode
      without a search, so on a grammar without evidence it would pay for not searching.
    - ``candidates``: the options the question offers (both sides of a comparison), when
      the data knows them; strict recipes refuse credit to an answer naming two of them.
    - ``metadata``: the example's metadata as plain data (a copy: changing it changes no
      example). synthwiki's: ``kind``, ``hops`` (per hop ``passage_id``, ``answer``,
      ``evidence``), ``supporting_ids``; a FlashRAG file's: every field of its line beyond
      id, question and answers (HotpotQA's ``supporting_facts``, MuSiQue's
      ``question_decomposition``, its ``metadata`` dict's keys).
    - ``searches``: each search that ran, in order, as a :class:`SearchRecord` (its turn and
      round, query, retrieved ids and texts).
    - ``budgets``: the env's :class:`Budgets` (max turns, top-k, max searches, max calls,
      max context tokens); None for an episode built outside an env.
    """

    question: str
    answers: tuple[str, ...]
    turns: tuple[Turn, ...] = ()
    answer: str | None = None
    retrieved_docs: list[list[str]] = field(default_factory=list)
    selected_docs: list[str] = field(default_factory=list)
    evidence: str | None = None
    observations: list[str] = field(default_factory=list)
    naive_rag_docs: list[str] | None = None
    num_searches: int = 0
    num_invalid: int = 0
    format_ok: bool = True
    example_id: str = ""
    candidates: tuple[str, ...] = ()
    evidence_possible: bool = True
    naive_rag_size: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    searches: tuple[SearchRecord, ...] = ()
    budgets: Budgets | None = None

    def __post_init__(self) -> None:
        # A bare string would otherwise be read as one gold answer per character.
        self.answers = (self.answers,) if isinstance(self.answers, str) else tuple(self.answers)
        self.candidates = (self.candidates,) if isinstance(self.candidates, str) else tuple(self.candidates)
        self.turns = tuple(self.turns)
        for turn in self.turns:
            if not isinstance(turn, Turn):
                raise ConfigError(
                    f"Episode expects turns to be Turn records (the agent's text and the observation kinds), "
                    f"got {type(turn).__name__}; build them as Turn(text, actions, observation)."
                )
        if not isinstance(self.metadata, Mapping):
            raise ConfigError(f"Episode expects metadata to be a mapping (the example's), got {type(self.metadata).__name__}.")
        self.metadata = dict(self.metadata)
        self.searches = tuple(self.searches)
        for search in self.searches:
            if not isinstance(search, SearchRecord):
                raise ConfigError(
                    f"Episode expects searches to be SearchRecord records, got {type(search).__name__}; "
                    f"build them as SearchRecord(turn, round, query, ids, texts)."
                )

    @property
    def rounds(self) -> tuple[tuple[Turn, ...], ...]:
        """The turns grouped by :attr:`Turn.round`, in order: one group per agent turn (a tool
        turn's calls together). Turns built without a round all have round 0: give them their
        rounds to group them."""
        groups: list[list[Turn]] = []
        for turn in self.turns:
            if groups and groups[-1][-1].round == turn.round:
                groups[-1].append(turn)
            else:
                groups.append([turn])
        return tuple(tuple(g) for g in groups)

    @property
    def agent_text(self) -> str:
        """Every agent turn, concatenated in order: the only text format checks read."""
        return "".join(turn.text for turn in self.turns)

    @property
    def acted(self) -> bool:
        """Whether any turn held a well-formed action. An episode that did not act earns
        its recipe's :meth:`~RewardRecipe.floor`: doing nothing earns nothing."""
        return any(turn.valid for turn in self.turns)


@dataclass(frozen=True)
class RewardResult:
    """The episode's reward (``total``) and the named numbers it was made from.

    ``prediction`` is the answer the recipe scored when it is not the agent's own (s3: the
    frozen generator's answer from the selected documents); ``None`` otherwise.
    """

    total: float
    components: dict[str, float]
    prediction: str | None = None


# ---------------------------------------------------------------- frozen models
def call_frozen(fn: Callable[..., Any], *args: Any, answers: Sequence[str]) -> Any:
    """Call a frozen model, handing it the gold answers only if it declares ``uses_gold``."""
    if getattr(fn, "uses_gold", False):
        return fn(*args, answers=answers)
    return fn(*args)


class GoldSpanReader:
    """A perfect reader: answers with the first gold answer found in the context, else ``""``.

    ``reader(question, context, *, answers)``; ``context`` is a string or a sequence of
    strings (each searched on its own). A gold answer is "found" when its normalized
    tokens occur contiguously in the normalized text's tokens (s3's
    :func:`~searchgym.rewards.metrics.span_check`): ``"no"`` is not found in ``"not
    known"``, nor ``"Democrat"`` in ``"Democratic"``.

    It stands in for the s3 generator or the R-Search reader in tests and LM-free runs.
    It is an upper bound, not a model: it reads the gold answers (``uses_gold = True``
    tells recipes to pass them) and never fails when the answer is in the context, so
    rewards computed with it measure whether the documents *contain* the answer.
    """

    uses_gold = True

    def __call__(self, question: str, context: str | Sequence[str], *, answers: Sequence[str]) -> str:
        pieces = [context] if isinstance(context, str) else list(context)
        for gold in answers:
            if any(span_check(piece, [gold]) for piece in pieces):
                return gold
        return ""

    def __repr__(self) -> str:
        return "GoldSpanReader()"


def check_strict(recipe: str, strict: Any) -> bool:
    """``strict`` if it is a bool; otherwise a :class:`ConfigError` saying what it means."""
    if not isinstance(strict, bool):
        raise ConfigError(
            f"Reward recipe {recipe!r} expects strict to be True (a hedged answer scores as a wrong one) "
            f"or False (the paper's raw metric), got {strict!r}."
        )
    return strict


def require_callable(recipe: str, role: str, fn: Any, signature: str) -> Callable[..., Any]:
    """``fn`` if it is callable; otherwise a :class:`ConfigError` naming the argument to pass."""
    if fn is None:
        raise ConfigError(
            f"Reward recipe {recipe!r} needs a {role}, got none. "
            f"Pass {role}=<callable {signature}>, e.g. {role}=GoldSpanReader() for an LM-free upper bound."
        )
    if not callable(fn):
        raise ConfigError(
            f"Reward recipe {recipe!r} expects {role}= to be a callable {signature}, got {type(fn).__name__}."
        )
    return fn


# ---------------------------------------------------------------- base
class RewardRecipe(ABC):
    """How one system scores an episode.

    Class attributes: ``name`` (registry key), ``needs`` (frozen models the constructor
    requires, among ``generator``, ``reader``, ``judge``), ``optional`` (frozen models it
    accepts but can do without), ``needs_naive_rag`` (the env must fill
    ``Episode.naive_rag_docs``). ``invalid_action_penalty`` is the reward the env adds
    for each malformed turn. A recipe pays the finished episode (:meth:`score`) and may also
    pay each turn as it ends (:meth:`turn_reward`).
    """

    name: ClassVar[str]
    needs: ClassVar[frozenset[str]] = frozenset()
    optional: ClassVar[frozenset[str]] = frozenset()
    needs_naive_rag: ClassVar[bool] = False

    def __init__(self, *, invalid_action_penalty: float = 0.0):
        self.invalid_action_penalty = float(invalid_action_penalty)

    @abstractmethod
    def score(self, episode: Episode) -> RewardResult:
        """The reward of a finished episode. An episode that took no well-formed action
        (``not episode.acted``) must earn exactly :meth:`floor`."""

    def turn_reward(self, episode: Episode) -> float | Mapping[str, float] | None:
        """What this recipe pays for the turn that just ended (default: nothing, ``None``).

        The env calls it after every turn, the last one included (before :meth:`score`), with
        the episode so far: ``episode.turns[-1]`` (with its round) is the turn just played and
        ``episode.searches`` ends with its searches; ``answer`` is set once the agent answered.
        It returns ``None`` (pays nothing), a number, or named numbers (a mapping) whose sum
        is paid. The payment is added to that step's reward and shown in that step's
        ``info["reward_components"]``: a number as ``{"turn": x}``, a mapping's names
        prefixed ``turn/`` (``{"turn/gain": x}``); on the last step beside the components of
        :meth:`score`, whose names must therefore not be ``turn`` or start with ``turn/``.
        The sum of an episode's step rewards is: its turn rewards + ``invalid_action_penalty``
        per malformed turn + ``score(...).total``.

        It may call the recipe's frozen models, as :meth:`score` does, and must not change
        the recipe (it can run again on the same turn). A recipe that does not override it
        costs nothing: the env builds no per-turn record for it. Values that are not finite
        numbers, and exceptions, fail the episode with a :class:`~searchgym.error.RecipeError`.
        Pay for progress, not for activity: a turn reward a policy can collect by searching
        or writing more, without getting closer to the answer, is a reward hack.
        """
        return None

    def floor(self, episode: Episode) -> float:
        """The reward of an episode in which the agent took no well-formed action: the least
        this recipe pays on ``episode``'s question (before ``invalid_action_penalty``).
        ``check_search_env`` checks that an agent writing tag-free text earns it."""
        return 0.0

    def settings(self) -> dict[str, Any]:
        """What identifies this recipe for the resume checks (``searchgym.plugins.settings_of``):
        its public attributes (weights, scores, options; a frozen model by its class), so a run
        resumed with other weights is refused and one with equal weights resumes in any process.
        Override it when a setting lives elsewhere (a private attribute, a file)."""
        from searchgym.plugins import recorded_settings

        return {k: recorded_settings(v) for k, v in sorted(vars(self).items()) if not k.startswith("_")}

    def describe(self) -> str:
        """One line on what this recipe's reward is made of, with its weights, for readers of a
        table of mean rewards (``searchgym bench`` prints it under the rows of its envs).
        Default: the first sentence of the class docstring; a recipe whose reward has parts
        overrides it to name them."""
        doc = " ".join((type(self).__doc__ or "").split("\n\n")[0].replace("``", "").split())
        sentence = doc.split(". ")[0].rstrip(".:")
        return sentence or type(self).__name__

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
