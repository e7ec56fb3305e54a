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
budgets in the same :class:`~searchgym.envs.single.game.SearchLog` as a single agent, each role
its context in a :class:`~searchgym.envs.team.seats.Seat`, and the end of the episode is
scored by :mod:`searchgym.envs.team.scoring` (where the rewards are described).
:mod:`searchgym.envs.team.multi_agent` wraps it as a PettingZoo AEC and parallel env and
:mod:`searchgym.envs.team.role_env` as a single-agent Gymnasium view of one role.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from searchgym.corpora.retrievers import make_retriever
from searchgym.corpora.types import Hit, Passage, QAExample, Retriever
from searchgym.envs.components.model_calls import Play, SearchCall, model_users, replay, run_play
from searchgym.envs.components.summarizers import Summarizer, make_summarizer
from searchgym.envs.protocols import Answer, Complete, Invalid, Protocol, Search, Select
from searchgym.envs.protocols.s3 import S3Protocol
from searchgym.envs.single.game import SearchLog, Window
from searchgym.envs.single.tasks import (
    EXAMPLE_OPTIONS,
    count_tokens,
    finite_number,
    load_task_data,
    pick_example,
    positive_int,
    text_action,
)
from searchgym.envs.team.protocol import GeneratorProtocol, SummarizerProtocol, Summary, doc_texts
from searchgym.envs.team.scoring import answer_score, check_answer_metric, judge_answer, score_team, team_recipe
from searchgym.envs.team.seats import ROLES, Seat, check_roster
from searchgym.error import ConfigError, SearchGymError, did_you_mean
from searchgym.rewards import Episode


class TeamGame:
    """The state machine of one team episode (see the module docstring).

    Args:
        roles: The agents' roles, a non-empty subset of :data:`ROLES` holding the searcher.
        corpus, dataset, split, corpus_options, dataset_options, retriever,
            retriever_options: as :class:`~searchgym.envs.single.core.SearchEnv`'s.
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
        self.answer_metric = check_answer_metric(answer_metric)
        self.context_cost = finite_number("context_cost", context_cost, low=0.0, owner=owner)
        self.invalid_action_penalty = finite_number("invalid_action_penalty", invalid_action_penalty, high=0.0, owner=owner)
        if "summarizer" in self.roles and (summarizer is not None or summarizer_options):
            raise ConfigError(
                f"The summarizer is an agent in this roster {list(self.roles)}, and summarizer={summarizer!r} sets the "
                "component that condenses retrievals only when it is not; drop summarizer= or drop 'summarizer' from roles."
            )

        self.corpus, self.examples = load_task_data(
            corpus, dataset, split=split, corpus_options=corpus_options, dataset_options=dataset_options, owner=owner,
            retriever=retriever,
        )
        self._by_id = {ex.id: i for i, ex in enumerate(self.examples)}
        self.retriever: Retriever = make_retriever(retriever, self.corpus, **dict(retriever_options or {}))
        self.summarizer: Summarizer = make_summarizer(summarizer, **dict(summarizer_options or {}))
        self.recipe = team_recipe(generator, judge)
        self.token_counter = token_counter or count_tokens
        # The searcher keeps the wording and the window cap this env was built with: its reward
        # compares with the naive top-initial_top_k, so a window never annotated gives its top 3.
        searcher = S3Protocol(cap_unannotated=True, prompt="released")
        self.protocols: dict[str, Protocol] = {"searcher": searcher, "summarizer": SummarizerProtocol(), "generator": GeneratorProtocol()}
        self.log = SearchLog(  # the searcher's side
            max_turns=self.max_searcher_turns, max_searches=self.max_searches,
            docs_per_window=searcher.docs_per_window, cap_unannotated=searcher.cap_unannotated,
        )
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
                + did_you_mean(unknown[0], accepted)
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
        self.seats = {role: Seat(self.token_counter, self.max_observation_chars) for role in self.roles}
        self.log.reset()
        self.summary_tokens = 0
        self.search_truncated = False
        self.context: list[Hit] = []
        self.answer: str | None = None
        self.outcome: dict[str, Any] | None = None
        self.searcher_doc_ids: list[str] = []  # the documents the searcher read last, numbered from 1
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
        (:mod:`searchgym.envs.components.model_calls`)."""
        if self.done:
            raise SearchGymError("The multi-agent episode is over; reset the env before acting again.")
        if role != self.current:
            raise SearchGymError(f"It is the {self.current}'s turn, got an action for the {role}.")
        expected = f"The {role} expects its action to be a str (one turn of text)"
        action, cut = text_action(action, self.max_action_chars, expected=expected)
        turn = self.protocols[role].parse(action)
        self._rewards = dict.fromkeys(self.roles, 0.0)
        if self.seats[role].take_turn(turn, action_truncated=cut):
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
        """The searcher keeps documents, then searches (the next retrieval), ends the search
        (complete, or its last turn) or gets feedback and plays again."""
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
            hits = (yield SearchCall(self.retriever, (query,), self.top_k))[0]  # joined with the other envs' searches
            self.log.num_searches += 1
            yield from self._retrieved(query, hits)
        else:
            self._show("searcher", "".join(feedback))
            self.current = "searcher"

    def _summarizer_turn(self, summary: str | None) -> None:
        """The summarizer condensed the latest retrieval (None: it wrote no summary)."""
        if summary is None:
            self._show("summarizer", self.protocols["summarizer"].invalid_feedback())
        self._condense(self.windows[-1], summary)
        self._window_ready(self.windows[-1])

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
            self._condense(window, summary)
        self._window_ready(window)

    def _condense(self, window: Window, summary: str | None) -> None:
        """The searcher will read ``summary`` as the window's one document, or with None (an
        empty summary) the raw documents, which then count in full as summary tokens."""
        if summary is None:
            window.shown = list(window.hits)
            self.summary_tokens += sum(self.token_counter(t) for t in doc_texts(window.hits))
            return
        title = f"Summary of the results for: {window.query.strip()}"
        window.shown = [Hit(Passage(f"summary-{len(self.windows) - 1}", title, summary.strip()), 0.0)]
        self.summary_tokens += self.token_counter(summary)

    def _window_ready(self, window: Window) -> None:
        """The searcher reads the window: in its prompt (the initial one) or as its next observation."""
        protocol = self.protocols["searcher"]
        self.searcher_doc_ids = [h.passage.id for h in window.shown]
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
        """The answer is given (``answer``: the generator agent's): score the team."""
        ex = self.example
        episode = Episode(
            question=ex.question, answers=tuple(ex.answers), turns=tuple(self.seats["searcher"].records),
            selected_docs=doc_texts(self.context), naive_rag_docs=self._naive_docs, num_searches=self.log.num_searches,
            example_id=ex.id, candidates=ex.candidates, evidence_possible=False,
        )
        frozen = "generator" not in self.roles
        if not frozen:
            self.answer = answer
        prediction, accuracy, baseline = yield from replay(
            lambda: judge_answer(self.recipe, episode, answer, frozen_generator=frozen), model_users(self.recipe)
        )
        score = answer_score(self.answer_metric, prediction, ex.answers, ex.question, accuracy=accuracy)
        team = score_team(
            self.roles, accuracy=accuracy, naive_rag_acc=baseline, searcher_acted=episode.acted, score=score,
            summary_tokens=self.summary_tokens, context_cost=self.context_cost,
            num_invalid={role: seat.invalid for role, seat in self.seats.items()},
        )
        for role in self.roles:
            self._rewards[role] += team.rewards[role]
        self.outcome = {
            "prediction": prediction, "answer_score": score, "gen_acc": accuracy,
            "team_rewards": team.rewards, "reward_components": team.components,
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
        return self.seats[role].observation()

    def transcript(self, role: str) -> str:
        """Everything ``role`` has read and written, then what it has not read yet."""
        return self.seats[role].transcript()

    # ------------------------------------------------------------------ helpers
    def _show(self, role: str, text: str, messages: list[dict[str, str]] | None = None) -> None:
        if role in self.seats:  # a role outside the roster is played by the environment and reads nothing
            self.seats[role].show(text, messages)

