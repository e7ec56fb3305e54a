"""The multi-agent game, without any PettingZoo or Gymnasium API around it.

A *team* answers one question. The **searcher** plays s3's protocol: it reads the naive
top-k retrieval for the question, searches, keeps documents with ``<important_info>`` and
declares its search complete. The **summarizer** condenses every retrieval (the initial
one included) before the searcher reads it. The **generator** answers from the documents
the searcher kept. The *roster* says which roles are agents; a role outside it is played
by the environment: raw documents pass through (or the ``summarizer=`` component
condenses them) and the frozen ``generator=`` answers.

Turn order follows the data: ``[summarizer] searcher ([summarizer] searcher)* generator``.
:class:`TeamGame` holds the state machine; its searcher keeps windows, selection and
budgets in the same :class:`~searchgym.envs.game.SearchLog` as a single agent.
:mod:`searchgym.envs.multi_agent` wraps it as a PettingZoo AEC and parallel env and
:mod:`searchgym.envs.role_env` as a single-agent Gymnasium view of one role.

Rewards (every malformed turn also adds ``invalid_action_penalty`` to its role):

- generator: the answer score of its answer (``answer_metric``: s3's GenAcc by default);
- searcher: Gain Beyond RAG, GenAcc of the answer minus GenAcc of the frozen generator
  on the naive top-k documents (s3's reward, :class:`~searchgym.rewards.S3GainBeyondRAG`);
  a searcher that wrote no well-formed turn gets GenAcc 0 (its recipe's floor: doing
  nothing earns nothing), whatever the team answered from the initial retrieval;
- summarizer: the answer score minus ``context_cost`` per token of what it put into the
  context (its summaries; the raw documents where its summary was empty).
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from searchgym.corpora.retrievers import make_retriever
from searchgym.corpora.types import Hit, Passage, QAExample, Retriever
from searchgym.envs.frozen import make_frozen
from searchgym.envs.game import SearchLog, Window
from searchgym.envs.model_calls import Play, model_users, replay, run_play
from searchgym.envs.protocols import Answer, Complete, Invalid, Protocol, Search, Select
from searchgym.envs.protocols.s3 import S3Protocol
from searchgym.envs.protocols.team import GeneratorProtocol, Summary, SummarizerProtocol, doc_texts
from searchgym.envs.summarizers import Summarizer, make_summarizer
from searchgym.envs.tasks import EXAMPLE_OPTIONS, count_tokens, load_task_data, pick_example, positive_int
from searchgym.error import ConfigError, SearchGymError, UnknownNameError
from searchgym.rewards import Episode, S3GainBeyondRAG, Turn, call_frozen, exact_match, f1_score, gen_acc

#: Every role, in turn order; a roster keeps this order.
ROLES = ("searcher", "summarizer", "generator")

#: How the generator's answer is scored for the generator's and summarizer's rewards.
ANSWER_METRICS: dict[str, Callable[..., float]] = {
    "gen_acc": lambda prediction, answers, judge, question: gen_acc(prediction, answers, judge, question),
    "em": lambda prediction, answers, judge, question: exact_match(prediction, answers),
    "f1": lambda prediction, answers, judge, question: f1_score(prediction, answers),
}


def check_roster(roles: Any) -> tuple[str, ...]:
    """``roles`` as a tuple in :data:`ROLES` order; a clear error for anything else."""
    if isinstance(roles, str) or not isinstance(roles, Sequence):
        raise ConfigError(
            f"The multi-agent env expects roles to be a list of role names among {', '.join(ROLES)}, got {roles!r}; "
            "e.g. roles=('searcher', 'generator')."
        )
    for role in roles:
        if role not in ROLES:
            raise UnknownNameError("role", role, ROLES)
    if len(set(roles)) != len(roles):
        raise ConfigError(f"The multi-agent env expects each role at most once in roles, got {list(roles)}.")
    if not roles:
        raise ConfigError("The multi-agent env expects at least one role, got an empty roster; the searcher is always needed.")
    if "searcher" not in roles:
        raise ConfigError(
            f"The multi-agent env expects the searcher in every roster (it drives the episode), got {list(roles)}; "
            "add 'searcher' (a scripted searcher such as role_env's 'complete' policy plays it if you only train another role)."
        )
    return tuple(r for r in ROLES if r in roles)


@dataclass
class _Seat:
    """One role's side of the episode: its context and its turn counters."""

    history: list[str] = field(default_factory=list)  # everything it read and wrote, in order
    pending: str = ""  # what it has not read yet (its next observation)
    prompt_messages: list[dict[str, str]] | None = None
    turns: int = 0
    invalid: int = 0
    records: list[Turn] = field(default_factory=list)  # its turns as a reward recipe reads them
    chars: int = 0
    tokens: int = 0
    last: dict[str, Any] = field(default_factory=dict)  # details of its last turn, for info


_TURN_DEFAULTS = {
    "action_kinds": (), "query": None, "invalid_reason": None, "action_truncated": False,
    "forged_env_tags": False, "ignored_chars": 0,
}


class TeamGame:
    """The state machine of one team episode (see the module docstring).

    Args:
        roles: The agents' roles, a non-empty subset of :data:`ROLES` holding the searcher.
        corpus, dataset, split, corpus_options, dataset_options, retriever,
            retriever_options: as :class:`~searchgym.envs.core.SearchEnv`'s.
        top_k: Documents per search. ``initial_top_k``: documents of the initial retrieval for
            the question (default ``top_k``), which is also the naive-RAG baseline.
        max_searcher_turns: Turns of the searcher; as in s3 its last turn cannot search, and
            the search ends there (``info["search_truncated"]``). ``max_searches``: a lower
            search budget (None: none).
        summarizer, summarizer_options: The component that condenses retrievals when the
            summarizer is not an agent: None (raw documents pass through), ``"extractive"``,
            ``"llm"`` or a :class:`Summarizer`.
        generator: The frozen generator: answers when the generator is not an agent, and
            always gives the naive-RAG baseline of the searcher's reward. A callable
            ``(question, docs) -> str``, ``"gold-span"``, a LanguageModel or a model name.
        judge: s3's optional judge for GenAcc, ``(question, prediction, answers) -> bool``.
        answer_metric: How the answer is scored for the generator and the summarizer:
            ``"gen_acc"`` (s3's span check, then the judge), ``"em"`` or ``"f1"``. The
            searcher's Gain Beyond RAG always uses GenAcc, as s3 defines it.
        context_cost: Reward the summarizer loses per token it puts into the context.
        invalid_action_penalty: Reward (<= 0) added to a role for each malformed turn.
        max_action_chars, max_observation_chars: Bounds of every action and observation.
        token_counter: ``str -> int`` for token counts (context cost, ``context_tokens``);
            default: whitespace-separated words.
    """

    def __init__(
        self,
        roles: Sequence[str] = ROLES,
        corpus: Any = "synthwiki",
        dataset: Any = None,
        *,
        split: str = "dev",
        corpus_options: Mapping[str, Any] | None = None,
        dataset_options: Mapping[str, Any] | None = None,
        retriever: str | Retriever = "bm25",
        retriever_options: Mapping[str, Any] | None = None,
        top_k: int = 3,
        initial_top_k: int | None = None,
        max_searcher_turns: int = 4,
        max_searches: int | None = None,
        summarizer: str | Summarizer | None = None,
        summarizer_options: Mapping[str, Any] | None = None,
        generator: Any = "gold-span",
        judge: Any = None,
        answer_metric: str = "gen_acc",
        context_cost: float = 0.001,
        invalid_action_penalty: float = -0.1,
        max_action_chars: int = 8192,
        max_observation_chars: int = 16384,
        token_counter: Callable[[str], int] | None = None,
    ):
        owner = "The multi-agent env"
        self.roles = check_roster(roles)
        self.top_k = positive_int("top_k", top_k, owner=owner)
        self.initial_top_k = positive_int("initial_top_k", initial_top_k, allow_none=True, owner=owner) or self.top_k
        self.max_searcher_turns = positive_int("max_searcher_turns", max_searcher_turns, owner=owner)
        self.max_searches = positive_int("max_searches", max_searches, allow_none=True, owner=owner)
        self.max_action_chars = positive_int("max_action_chars", max_action_chars, owner=owner)
        self.max_observation_chars = positive_int("max_observation_chars", max_observation_chars, owner=owner)
        if answer_metric not in ANSWER_METRICS:
            raise UnknownNameError("answer metric", answer_metric, ANSWER_METRICS)
        self.answer_metric = answer_metric
        self.context_cost = _number("context_cost", context_cost, low=0.0)
        self.invalid_action_penalty = _number("invalid_action_penalty", invalid_action_penalty, high=0.0)
        if "summarizer" in self.roles and (summarizer is not None or summarizer_options):
            raise ConfigError(
                f"The summarizer is an agent in this roster {list(self.roles)}, and summarizer={summarizer!r} sets the "
                "component that condenses retrievals only when it is not; drop summarizer= or drop 'summarizer' from roles."
            )

        self.corpus, self.examples = load_task_data(
            corpus, dataset, split=split, corpus_options=corpus_options, dataset_options=dataset_options, owner=owner
        )
        self._by_id = {ex.id: i for i, ex in enumerate(self.examples)}
        self.retriever: Retriever = make_retriever(retriever, self.corpus, **dict(retriever_options or {}))
        self.summarizer: Summarizer = make_summarizer(summarizer, **dict(summarizer_options or {}))
        if generator is None:
            raise ConfigError(
                "The multi-agent env expects generator= (the frozen generator of the naive-RAG baseline, and the "
                "answerer when the generator is not an agent): a callable (question, docs) -> str, 'gold-span', a "
                "LanguageModel or a model name, got None."
            )
        # s3's own recipe scores the frozen generator and caches the naive-RAG baseline per question.
        self.recipe = S3GainBeyondRAG(make_frozen("generator", generator), None if judge is None else make_frozen("judge", judge))
        self.token_counter = token_counter or count_tokens
        self.protocols: dict[str, Protocol] = {"searcher": S3Protocol(), "summarizer": SummarizerProtocol(), "generator": GeneratorProtocol()}
        self.log = SearchLog(max_turns=self.max_searcher_turns, max_searches=self.max_searches)  # the searcher's side
        self.example: QAExample | None = None
        self.done = True
        self.current: str | None = None

    @classmethod
    def accepted_options(cls) -> list[str]:
        return [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "roles")]

    @classmethod
    def check_options(cls, options: Mapping[str, Any], owner: str) -> None:
        """A clear error for an option the game does not take (gym.make passes everything)."""
        accepted = cls.accepted_options()
        unknown = sorted(set(options) - set(accepted))
        if unknown:
            raise ConfigError(
                f"{owner} does not take {', '.join(map(repr, unknown))}; expected options among: {', '.join(accepted)}."
            )

    # ------------------------------------------------------------------ episode
    def pick_example(self, options: Mapping[str, Any] | None, rng: Any, *, strict: bool) -> QAExample:
        """The question ``options`` names, else one drawn with ``rng``. Unknown option keys
        raise when ``strict``, else warn (PettingZoo's API test passes made-up options)."""
        options = dict(options or {})
        unknown = sorted(set(options) - EXAMPLE_OPTIONS)
        if unknown:
            message = f"reset expects options among {sorted(EXAMPLE_OPTIONS)}, got {unknown}"
            if strict:
                raise ConfigError(message + ".")
            warnings.warn(message + "; ignoring them.", stacklevel=3)
        return pick_example(self.examples, self._by_id, options, rng)

    def reset(self, example: QAExample) -> None:
        """Start an episode on ``example``: the initial retrieval for the question."""
        self.example = example
        self.seats = {role: _Seat() for role in self.roles}
        for seat in self.seats.values():
            seat.last = dict(_TURN_DEFAULTS)
        self.log.reset()
        self.summary_tokens = 0
        self.search_truncated = False
        self.context: list[Hit] = []
        self.answer: str | None = None
        self.outcome: dict[str, Any] | None = None
        self._latest_ids: list[str] = []
        self.done = False
        hits = self.retriever.search([example.question], self.initial_top_k)[0]
        self._naive_docs = doc_texts(hits)
        run_play(self._retrieved(example.question, hits))

    def act(self, role: str, action: Any) -> dict[str, float]:
        """Play ``role``'s turn; returns each role's reward for this step."""
        return run_play(self.play(role, action))

    def play(self, role: str, action: Any) -> Play[dict[str, float]]:
        """:meth:`act` as a play: yields the model calls of the summarizer component and of
        the frozen generator and judge, so that envs stepped together batch them
        (:mod:`searchgym.envs.model_calls`)."""
        if self.done:
            raise SearchGymError("The multi-agent episode is over; reset the env before acting again.")
        if role != self.current:
            raise SearchGymError(f"It is the {self.current}'s turn, got an action for the {role}.")
        if isinstance(action, bytes):
            action = action.decode("utf-8", errors="replace")
        if not isinstance(action, str):
            raise SearchGymError(
                f"The {role} expects its action to be a str (one turn of text), got {type(action).__name__}."
            )
        seat = self.seats[role]
        self._consume(seat)
        seat.turns += 1
        cut = len(action) > self.max_action_chars
        if cut:
            action = action[: self.max_action_chars]
        turn = self.protocols[role].parse(action)
        seat.last = dict(_TURN_DEFAULTS, action_kinds=turn.kinds, action_truncated=cut, forged_env_tags=turn.forged_env_tags,
                         ignored_chars=turn.ignored_chars)
        self._record(seat, turn.text)
        seat.records.append(Turn(turn.text, turn.kinds))
        self._rewards = dict.fromkeys(self.roles, 0.0)
        invalid = next((a for a in turn.actions if isinstance(a, Invalid)), None)
        if invalid is not None or turn.forged_env_tags:
            seat.invalid += 1
            seat.last["invalid_reason"] = invalid.reason if invalid is not None else "the turn wrote environment-owned tags"
            self._rewards[role] += self.invalid_action_penalty
        if role == "searcher":
            yield from self._searcher_turn(turn.actions)
        elif role == "summarizer":
            self._summarizer_turn(next((a.text for a in turn.actions if isinstance(a, Summary)), None))
        else:
            yield from self._finish(next((a.text for a in turn.actions if isinstance(a, Answer)), None))
        return self._rewards

    # ------------------------------------------------------------------ turns
    def _searcher_turn(self, actions: Sequence[Any]) -> Play[None]:
        seat = self.seats["searcher"]
        protocol = self.protocols["searcher"]
        self.log.turn = seat.turns
        query = None
        complete = False
        feedback = []
        for act in actions:
            if isinstance(act, Select):
                self.log.select(act.doc_numbers)
            elif isinstance(act, Search):
                seat.last["query"] = act.query
                if self.log.final_turn:
                    continue  # as in s3, the last turn's search is not run: nothing would read it
                if self.log.budget_spent:
                    feedback.append(protocol.budget_feedback())
                    continue
                query = act.query
            elif isinstance(act, Complete):
                complete = True
                break
            elif isinstance(act, Invalid):
                feedback.append(protocol.invalid_feedback())
        if complete or self.log.final_turn:
            self.search_truncated = not complete
            yield from self._end_search()
        elif query is not None:
            hits = self.retriever.search([query], self.top_k)[0]
            self.log.num_searches += 1
            yield from self._retrieved(query, hits)
        else:
            self._show("searcher", "".join(feedback))
            self.current = "searcher"

    def _summarizer_turn(self, summary: str | None) -> None:
        window = self.windows[-1]
        if summary is None:
            # An empty summary passes the raw documents on, at their full context cost.
            window.shown = list(window.hits)
            self.summary_tokens += sum(self.token_counter(t) for t in doc_texts(window.hits))
            self._show("summarizer", self.protocols["summarizer"].invalid_feedback())
        else:
            window.shown = [self._summary_hit(window.query, summary)]
            self.summary_tokens += self.token_counter(summary)
        self._window_ready(window)

    def _retrieved(self, query: str, hits: list[Hit]) -> Play[None]:
        """A retrieval happened: the summarizer condenses it, or it goes straight to the searcher."""
        window = self.log.open_window(query, hits)
        if "summarizer" in self.roles:
            protocol: SummarizerProtocol = self.protocols["summarizer"]  # type: ignore[assignment]
            first = not self.seats["summarizer"].history
            text = protocol.first_prompt(self.example.question, query, hits) if first else protocol.render_retrieval(query, hits)
            self._show("summarizer", text, messages=[{"role": "user", "content": text}] if first else None)
            self.current = "summarizer"
            return
        if not self.summarizer.passthrough and hits:
            question = self.example.question
            summary = yield from replay(lambda: self.summarizer.summarize(question, query, hits), model_users(self.summarizer))
            window.shown = [self._summary_hit(query, summary)]
            self.summary_tokens += self.token_counter(summary)
        self._window_ready(window)

    def _window_ready(self, window: Window) -> None:
        """The searcher reads the window: in its prompt (the initial one) or as its next observation."""
        protocol = self.protocols["searcher"]
        self._latest_ids = [h.passage.id for h in window.shown]
        if len(self.windows) == 1:
            self._show("searcher", protocol.prompt(self.example, window.shown), messages=protocol.messages(self.example, window.shown))
        else:
            self._show("searcher", protocol.render_docs(window.shown))
        self.current = "searcher"

    def _end_search(self) -> Play[None]:
        """The search is over: the documents the generator gets are the kept ones, then (s3's
        rule) every document of each window the searcher never annotated."""
        self.context = context = self.log.context()
        if "generator" in self.roles:
            protocol = self.protocols["generator"]
            self._show("generator", protocol.prompt(self.example, context), messages=protocol.messages(self.example, context))
            self.current = "generator"
        else:
            yield from self._finish(None)

    def _finish(self, answer: str | None) -> Play[None]:
        ex = self.example
        episode = Episode(
            question=ex.question, answers=tuple(ex.answers), turns=tuple(self.seats["searcher"].records),
            selected_docs=doc_texts(self.context), naive_rag_docs=self._naive_docs, num_searches=self.log.num_searches,
            example_id=ex.id,
        )
        if "generator" in self.roles:
            self.answer = answer

        def judged() -> tuple[str | None, float, float]:
            # The answer, its GenAcc and the naive-RAG baseline's (the frozen models' calls).
            prediction = answer if "generator" in self.roles else call_frozen(
                self.recipe.generator, ex.question, episode.selected_docs, answers=ex.answers
            )
            return prediction, gen_acc(prediction, ex.answers, self.recipe.judge, ex.question), self.recipe.naive_rag_acc(episode)

        prediction, accuracy, baseline = yield from replay(judged, model_users(self.recipe))
        searcher_accuracy = accuracy if episode.acted else 0.0
        score = accuracy if self.answer_metric == "gen_acc" else ANSWER_METRICS[self.answer_metric](prediction, ex.answers, None, ex.question)
        cost = self.context_cost * self.summary_tokens
        components = {
            "searcher": {"gen_acc": searcher_accuracy, "naive_rag_acc": baseline, "gain_beyond_rag": searcher_accuracy - baseline},
            "summarizer": {"answer_score": score, "summary_tokens": float(self.summary_tokens), "context_cost": cost},
            "generator": {"answer_score": score},
        }
        final = {"searcher": searcher_accuracy - baseline, "summarizer": score - cost, "generator": score}
        for role in self.roles:
            self._rewards[role] += final[role]
            components[role]["num_invalid"] = float(self.seats[role].invalid)
        self.outcome = {
            "prediction": prediction,
            "answer_score": score,
            "gen_acc": accuracy,
            "team_rewards": {role: final[role] for role in self.roles},
            "reward_components": {role: components[role] for role in self.roles},
        }
        self.done = True
        self.current = None

    # ------------------------------------------------------------------ views
    @property
    def windows(self) -> list[Window]:
        """The retrievals of the episode, the initial one first."""
        return self.log.windows

    @property
    def selected(self) -> list[Hit]:
        """The documents the searcher kept, in order."""
        return self.log.selected

    @property
    def num_searches(self) -> int:
        """The searches the searcher ran (the initial retrieval is not one)."""
        return self.log.num_searches

    def observation(self, role: str) -> str:
        """What ``role`` has not read yet (its next observation), cut to ``max_observation_chars``."""
        return self.seats[role].pending[: self.max_observation_chars]

    def transcript(self, role: str) -> str:
        """Everything ``role`` has read and written, then what it has not read yet."""
        seat = self.seats[role]
        return "".join(seat.history) + self.observation(role)

    def info(self, role: str) -> dict[str, Any]:
        """``role``'s info (see :class:`~searchgym.envs.multi_agent.SearchTeamEnv`)."""
        seat = self.seats[role]
        pending = self.observation(role)
        info: dict[str, Any] = {
            "example_id": self.example.id,
            "question": self.example.question,
            "acting": self.current == role,
            "turn": seat.turns,
            **seat.last,
            "retrieved_ids": self._retrieved_ids(role),
            "selected_ids": [h.passage.id for h in self.selected],
            "num_searches": self.num_searches,
            "num_invalid": seat.invalid,
            "context_chars": seat.chars + len(pending),
            "context_tokens": seat.tokens + (self.token_counter(pending) if pending else 0),
            "summary_tokens": self.summary_tokens,
            "observation_truncated": len(seat.pending) > self.max_observation_chars,
        }
        if role == "summarizer" and self.windows:
            info["query"] = self.windows[-1].query  # the retrieval it condenses (or last condensed)
        if seat.turns == 0 and seat.prompt_messages is not None:
            info["prompt_messages"] = [dict(m) for m in seat.prompt_messages]
        if self.done:
            info.update(
                answer=self.answer,
                prediction=self.outcome["prediction"],
                answers=tuple(self.example.answers),
                reward_components=dict(self.outcome["reward_components"][role]),
                team_rewards=dict(self.outcome["team_rewards"]),
                search_truncated=self.search_truncated,
                context_ids=[h.passage.id for h in self.context],
            )
        return info

    def _retrieved_ids(self, role: str) -> list[str]:
        if role == "searcher":
            return list(self._latest_ids)  # the documents of the latest window, numbered from 1
        if role == "summarizer":
            return [h.passage.id for h in self.windows[-1].hits] if self.windows else []
        return [h.passage.id for h in self.context]

    # ------------------------------------------------------------------ helpers
    def _show(self, role: str, text: str, messages: list[dict[str, str]] | None = None) -> None:
        if role not in self.seats or not text:
            return
        seat = self.seats[role]
        seat.pending += text
        if messages is not None and seat.prompt_messages is None:
            seat.prompt_messages = messages

    def _consume(self, seat: _Seat) -> None:
        observed = seat.pending[: self.max_observation_chars]
        seat.pending = ""
        self._record(seat, observed)

    def _record(self, seat: _Seat, text: str) -> None:
        if text:
            seat.history.append(text)
            seat.chars += len(text)
            seat.tokens += self.token_counter(text)

    def _summary_hit(self, query: str, summary: str) -> Hit:
        passage = Passage(f"summary-{len(self.windows) - 1}", f"Summary of the results for: {query.strip()}", summary.strip())
        return Hit(passage, 0.0)


def _number(name: str, value: Any, *, low: float | None = None, high: float | None = None) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None and value < low:
        ok = False
    if ok and high is not None and value > high:
        ok = False
    if not ok:
        bounds = " and ".join(b for b in (f">= {low:g}" if low is not None else "", f"<= {high:g}" if high is not None else "") if b)
        raise ConfigError(f"The multi-agent env expects {name} to be a finite number {bounds}, got {value!r}.")
    return float(value)
