"""The search game without any Gymnasium API around it.

:class:`SearchLog` holds the rules every searcher plays by (s3's, shared by all
protocols): the windows of documents it has read, the documents it kept, its turn and
search budgets, and the context a frozen generator answers from. :class:`SearchGame`
plays one episode of a :class:`~searchgym.envs.single.core.SearchEnv`: it parses the agent's
turn, runs searches, scores the end with the reward recipe and reports ``info``.
:class:`~searchgym.envs.team.game.TeamGame` and the templates of classic RL policies
(:mod:`searchgym.sb3.templates`) keep their searcher's side in a :class:`SearchLog` too.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from searchgym.corpora.types import MAX_QUERY_CHARS, Hit, Passage, QAExample, Retriever, SearchContext
from searchgym.envs.components.frozen import doc_text
from searchgym.envs.components.model_calls import Play, SearchCall, model_users, replay, run_play
from searchgym.envs.components.summarizers import Summarizer
from searchgym.envs.protocols import Protocol
from searchgym.envs.protocols.base import (
    BUILT_IN_KINDS, Answer, Complete, Evidence, Invalid, ParsedTurn, Search, Select, accepts_keyword, play_action, render_turn,
)
from searchgym.envs.single.context import ContextPolicy, ContextView, context_text, rewrite_record
from searchgym.envs.single.tasks import count_tokens, positive_int, text_action
from searchgym.envs.tools.no_call import warn_once
from searchgym.envs.tools.surface import ToolSurface, ToolTurn
from searchgym.error import SearchGymError
from searchgym.rewards import (
    Budgets, Episode, RewardRecipe, SearchRecord, Turn, checked_score, checked_turn_reward, join_components, pays_turns,
)


@dataclass
class Window:
    """One retrieval as the searcher reads it.

    ``hits`` are what the retriever returned; ``shown`` the documents the searcher reads,
    numbered from 1 (the hits themselves, or one summary document); ``annotated``
    whether the searcher selected any of them; ``kept`` how many of them it kept.
    """

    query: str
    hits: list[Hit]
    shown: list[Hit] = field(default_factory=list)
    annotated: bool = False
    kept: int = 0


#: Code points UTF-8 cannot encode (lone surrogates): no retrieval server could receive them.
_SURROGATE = re.compile("[\ud800-\udfff]")


class SearchLog:
    """What a searcher read and kept in one episode, and its budgets.

    Args:
        max_turns: The searcher's turns; as in Search-R1 and s3 its last turn
            cannot search (a search there is not run).
        max_searches: A lower search budget (None: none).
        docs_per_window: The most documents a selection keeps of one window (s3's App. C:
            "up to 3"): the first that many numbers it names. None: no cap (s3's released
            code: every selected number).
        cap_unannotated: Whether a window never annotated gives only its top
            ``docs_per_window`` documents; False: all of them (s3's App. A.5).
    """

    def __init__(
        self, *, max_turns: int, max_searches: int | None = None, docs_per_window: int | None = None, cap_unannotated: bool = False
    ):
        self.max_turns = max_turns
        self.max_searches = max_searches
        self.docs_per_window = positive_int("docs_per_window", docs_per_window, allow_none=True, owner="SearchLog")
        self.cap_unannotated = bool(cap_unannotated)
        self.reset()

    def reset(self) -> None:
        """A new episode: no turn, no window, nothing kept."""
        self.turn = 0
        self.num_searches = 0
        self.windows: list[Window] = []
        self.selected: list[Hit] = []

    def snapshot(self) -> Any:
        """The state of the episode so far, for :meth:`restore`."""
        marks = [(w.annotated, w.kept) for w in self.windows]
        return (self.turn, self.num_searches, list(self.windows), marks, list(self.selected))

    def restore(self, state: Any) -> None:
        """Go back to a :meth:`snapshot` (a turn that failed on a backend is undone)."""
        self.turn, self.num_searches, windows, marks, selected = state
        self.windows, self.selected = list(windows), list(selected)
        for window, (annotated, kept) in zip(self.windows, marks):
            window.annotated, window.kept = annotated, kept

    @property
    def final_turn(self) -> bool:
        """Whether the turn being played is the last one (its search is not run)."""
        return self.turn >= self.max_turns

    @property
    def budget_spent(self) -> bool:
        """Whether ``max_searches`` searches have run."""
        return self.max_searches is not None and self.num_searches >= self.max_searches

    def can_search_next(self) -> bool:
        """Whether a search in the next turn would run: not the last turn, within budget."""
        return self.turn + 1 < self.max_turns and not self.budget_spent

    def open_window(self, query: str, hits: Sequence[Hit], shown: Sequence[Hit] | None = None) -> Window:
        """A retrieval the searcher will read (``shown``, default the hits themselves)."""
        window = Window(query, list(hits), list(hits if shown is None else shown))
        self.windows.append(window)
        return window

    def select(self, numbers: Iterable[int]) -> list[Hit]:
        """Keep documents of the latest window by number (from 1); returns the newly kept.

        Numbers outside the window are ignored, as s3 ignores ids it cannot resolve; a
        selection, even of nothing valid, marks the window annotated. Once a window has
        given ``docs_per_window`` documents, further numbers for it are ignored.
        """
        if not self.windows:
            return []
        window = self.windows[-1]
        window.annotated = True
        kept = []
        for n in numbers:
            if self.docs_per_window is not None and window.kept >= self.docs_per_window:
                break
            if 1 <= n <= len(window.shown) and not self.is_selected(window.shown[n - 1].passage):
                self.selected.append(window.shown[n - 1])
                kept.append(window.shown[n - 1])
                window.kept += 1
        return kept

    def is_selected(self, passage: Passage) -> bool:
        return any(h.passage.id == passage.id for h in self.selected)

    def context(self, *, keep_unannotated: bool = True) -> list[Hit]:
        """The documents a frozen generator answers from: the kept ones, then (s3's rule,
        with ``keep_unannotated``) the documents of each window never annotated (all of
        them, or its top ``docs_per_window`` with ``cap_unannotated``)."""
        docs = list(self.selected)
        if keep_unannotated:
            seen = {h.passage.id for h in docs}
            cap = self.docs_per_window if self.cap_unannotated else None
            for window in self.windows:
                if window.annotated:
                    continue
                for h in window.shown[:cap]:
                    if h.passage.id not in seen:
                        docs.append(h)
                        seen.add(h.passage.id)
        return docs


class SearchGame:
    """One agent's search episode (see :class:`~searchgym.envs.single.core.SearchEnv` for the
    game's rules and every ``info`` key).

    Args:
        protocol, retriever, summarizer, recipe: The tag grammar, the search engine, the
            condenser of retrievals and the reward recipe.
        top_k, initial_top_k, max_turns, max_searches, max_calls, max_context_tokens,
            max_action_chars, max_observation_chars, token_counter: as SearchEnv's.
        tools: The tool surface when the game is played through tool calls
            (``action_format="tools"``); None: the protocol's tag grammar.
        context: The :class:`~searchgym.envs.single.context.ContextPolicy` that may rewrite the
            conversation after a step (None: keep everything).
        tool_record: Plays the protocol's own calls through a tool record (``record=`` /
            ``replay=``: :class:`~searchgym.envs.components.replay.RecordedProtocolCalls`); None: live.
        owner: The name errors give the game (the env that wraps it).

    Public state (read it, do not write it): ``example``, ``turn``, ``num_searches``,
    ``num_invalid``, ``log`` (windows and selection), ``selected``, ``evidence``, ``answer``,
    ``prompt``, ``turns`` (cleaned turn and observation of each step), ``done``, and with
    tools ``messages`` (the conversation so far).
    """

    def __init__(
        self,
        protocol: Protocol,
        retriever: Retriever,
        summarizer: Summarizer,
        recipe: RewardRecipe,
        *,
        top_k: int = 3,
        initial_top_k: int | None = None,
        max_turns: int = 5,
        max_searches: int | None = None,
        max_calls: int | None = None,
        max_context_tokens: int | None = None,
        max_action_chars: int = 8192,
        max_observation_chars: int = 16384,
        max_query_chars: int = MAX_QUERY_CHARS,
        token_counter: Callable[[str], int] | None = None,
        tools: ToolSurface | None = None,
        tool_record: Any = None,
        owner: str = "SearchGame",
        context: ContextPolicy | None = None,
    ):
        self.owner = owner
        self.context_policy = context if context is not None else ContextPolicy()
        self.tools = tools
        self.tool_record = tool_record  # plays the protocol's own calls through a record (searchgym.envs.components.replay)
        self.top_k = positive_int("top_k", top_k, owner=owner)
        self.initial_top_k = positive_int("initial_top_k", initial_top_k, allow_none=True, owner=owner) or self.top_k
        self.max_turns = positive_int("max_turns", max_turns, owner=owner)
        self.max_searches = positive_int("max_searches", max_searches, allow_none=True, owner=owner)
        self.max_calls = positive_int("max_calls", max_calls, allow_none=True, owner=owner)
        self.max_context_tokens = positive_int("max_context_tokens", max_context_tokens, allow_none=True, owner=owner)
        self.max_action_chars = positive_int("max_action_chars", max_action_chars, owner=owner)
        self.max_observation_chars = positive_int("max_observation_chars", max_observation_chars, owner=owner)
        self.max_query_chars = positive_int("max_query_chars", max_query_chars, owner=owner)
        self.protocol = protocol
        self.retriever = retriever
        self.summarizer = summarizer
        self.recipe = recipe
        self.token_counter = token_counter or count_tokens
        self.log = SearchLog(
            max_turns=self.max_turns, max_searches=self.max_searches, docs_per_window=protocol.docs_per_window,
            cap_unannotated=protocol.cap_unannotated,
        )
        self.example: QAExample | None = None
        self.prompt = ""
        self.turns: list[tuple[str, str]] = []
        self.done = True

    # ------------------------------------------------------------------ state
    @property
    def turn(self) -> int:
        return self.log.turn

    @property
    def num_searches(self) -> int:
        return self.log.num_searches

    @property
    def selected(self) -> list[Passage]:
        return [h.passage for h in self.log.selected]

    @property
    def transcript(self) -> str:
        """The whole context so far: prompt, then every (cleaned) turn and its observation."""
        return self.prompt + "".join(a + o for a, o in self.turns)

    def generator_context(self) -> list[Passage]:
        """The documents a frozen generator answers from: those the agent selected, then
        (s3's rule) every document of each window it never annotated."""
        return [h.passage for h in self.log.context(keep_unannotated=self.protocol.keeps_unannotated_windows)]

    # ------------------------------------------------------------------ play
    def reset(self, example: QAExample) -> tuple[str, dict[str, Any]]:
        """Start an episode on ``example``; the prompt and the reset ``info``."""
        return run_play(self.reset_play(example))

    def reset_play(self, example: QAExample) -> Play[tuple[str, dict[str, Any]]]:
        """:meth:`reset` as a play: s3's initial retrieval is a yielded search, so that envs
        reset together search together (:mod:`searchgym.envs.components.model_calls`)."""
        self.example = example
        self.log.reset()
        self.num_invalid = 0
        self.num_calls = 0  # searches run and actions of the protocol's own kinds played (max_calls)
        self.turns = []
        self.records: list[Turn] = []  # what the recipe reads of each turn
        self.well_formed: list[bool] = []
        self.retrieved: list[list[Passage]] = []  # the documents of each search the agent ran
        self.searched: list[SearchRecord] = []  # and each such search as the recipe reads it
        self.observed: list[str] = []  # the text of each retrieval as the agent saw it
        self.evidence: str | None = None
        self.answer: str | None = None
        self.done = False
        initial_hits = None
        if self.protocol.initial_retrieval:
            found, _ = yield from self.search_many([example.question], self.initial_top_k)
            initial_hits = found[0]
            self.log.open_window(example.question, initial_hits)
        if self.tools is None:
            prompt, messages = self.protocol.prompt(example, initial_hits), self.protocol.messages(example, initial_hits)
        else:
            messages = self.tools.prompt_messages(example, initial_hits)
            prompt = messages[-1]["content"]
        self.messages: list[dict[str, Any]] = [dict(m) for m in messages]
        self.prompt, obs_cut = self._bound(prompt)
        if self.tools is not None and obs_cut:
            self.messages[-1]["content"] = self.prompt  # the conversation holds what the agent was shown
        self.context_chars = len(self.prompt)
        self.context_tokens = self.token_counter(self.prompt)
        # The conversation as the context policy leaves it (keep: the prompt and every step, always).
        self.first_messages = [dict(m) for m in self.messages] if self.tools is not None else [dict(m) for m in messages]
        self.context_view = ContextView(self.prompt, [dict(m) for m in self.first_messages])
        self.context_policy.reset()
        info = self._info(observation_truncated=obs_cut)
        info["retrieved_ids"] = [h.passage.id for h in initial_hits or []]
        info["retrieved_scores"] = [float(h.score) for h in initial_hits or []]
        info["prompt_messages"] = [dict(m) for m in messages]
        info["question"] = example.question
        return self.prompt, info

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play one agent turn (any string); observation, reward, terminated, truncated, info."""
        return run_play(self.play(action))

    def search(self, query: str, k: int) -> tuple[list[Hit], bool]:
        """The hits of ``query`` and whether it was cut: longer than ``max_query_chars`` (or
        the retriever's own limit, e.g. a server's) it is cut to it, and characters UTF-8
        cannot carry (lone surrogates) become U+FFFD, the same in-process and over HTTP."""
        hits, cut = run_play(self.search_many([query], k))
        return hits[0], cut[0]

    def search_many(self, queries: Sequence[str], k: int) -> Play[tuple[list[list[Hit]], list[bool]]]:
        """:meth:`search` of several queries (a turn's parallel searches) as a play: one
        yielded :class:`~searchgym.envs.components.model_calls.SearchCall`, which envs stepped
        together join with theirs."""
        limits = [n for n in (self.max_query_chars, getattr(self.retriever, "max_query_chars", None)) if isinstance(n, int)]
        longest = min(limits)
        cut = tuple(_SURROGATE.sub("\ufffd", q[:longest]) for q in queries)
        # Whose queries these are, for an engine that conditions on the question (search_with_context).
        contexts = None if self.example is None else (
            (SearchContext(example_id=self.example.id, question=self.example.question, turn=self.turn,
                           answers=tuple(self.example.answers)),) * len(cut))
        hits = yield SearchCall(self.retriever, cut, k, contexts)
        return hits, [len(q) > longest for q in queries]

    def play(self, action: Any) -> Play[tuple[str, float, bool, bool, dict[str, Any]]]:
        """:meth:`step` as a play: yields the model calls of the summarizer and of the
        recipe's frozen models, so that envs stepped together batch them
        (:mod:`searchgym.envs.components.model_calls`).

        A turn that raises (a retrieval server or a frozen model failing after its retries:
        :class:`~searchgym.error.BackendError`) is undone: the episode is where it was
        before it, its turn not spent, and the same action can be played again."""
        if self.done:
            raise SearchGymError(f"{self.owner}.step() was called on a finished episode; call reset() first.")
        if self.tools is None:
            expected = f"{self.owner}.step expects the action to be a str (one agent turn)"
            action, action_cut = text_action(action, self.max_action_chars, expected=expected)
        else:
            if isinstance(action, bytes):
                action = action.decode("utf-8", errors="replace")
            if not isinstance(action, (str, Mapping)):
                raise SearchGymError(
                    f"{self.owner}.step expects the action to be an assistant message (a dict with content and "
                    f"tool_calls) or the model's text, got {type(action).__name__}."
                )
            action_cut = False  # the surface cuts it
        if self.context_policy.wants_summary(self):  # the turn the policy asked for: a summary, never an action
            return self._summary_turn(action)
        saved = self._save()
        try:
            return (yield from self._play(action, action_cut))
        except BaseException:  # also GeneratorExit: a play abandoned half-way spends nothing either
            self._restore(saved)
            raise

    def _save(self) -> tuple[Any, ...]:
        return (self.log.snapshot(), self.num_invalid, len(self.turns), len(self.records), len(self.well_formed),
                len(self.retrieved), self.evidence, self.answer, self.done, self.context_chars, self.context_tokens,
                len(self.messages), len(self.searched), self.num_calls)

    def _restore(self, saved: tuple[Any, ...]) -> None:
        log, self.num_invalid, turns, records, well_formed, retrieved, self.evidence, self.answer, self.done, \
            self.context_chars, self.context_tokens, messages, searched, self.num_calls = saved
        self.log.restore(log)
        del self.turns[turns:], self.records[records:], self.well_formed[well_formed:], self.retrieved[retrieved:]
        del self.messages[messages:], self.searched[searched:]

    def _play(self, action: Any, action_cut: bool) -> Play[tuple[str, float, bool, bool, dict[str, Any]]]:
        self.log.turn += 1
        turn: ParsedTurn | ToolTurn
        if self.tools is None:
            turn = self.protocol.parse(action, **self._previous_observation())
        else:
            window = len(self.log.windows[-1].shown) if self.log.windows else 0
            turn, action_cut = self.tools.parse(action, turn=self.log.turn, window_size=window, max_chars=self.max_action_chars,
                                                previous_observation=self.turns[-1][1] if self.turns else self.prompt)
        surface = self.tools or self.protocol
        reward = 0.0
        terminated = False
        results: list[str | None] = []  # what each action got back, in order (None: nothing)
        kinds: list[tuple[str, ...]] = []  # and its kind, for the recipe (never the text)
        queries, query_cut, invalid_reason = [], False, None
        hits: list[Hit] = []
        searched_all, own_outcomes = yield from self._turn_searches(turn.actions)
        found, own = iter(searched_all), iter(own_outcomes)
        for act in turn.actions:
            result, kind = None, ()
            if isinstance(act, Search):
                queries.append(act.query)
                query_cut = query_cut or len(act.query) > self.max_query_chars
                searched = next(found)
                if searched == "final":
                    pass  # as in Search-R1 and s3, the last turn's search is not run: nothing would show it
                elif searched == "budget":
                    result, kind = surface.budget_feedback(), ("budget",)
                elif searched == "calls":
                    result, kind = self._calls_feedback(), ("budget",)
                else:
                    found_hits, cut, result = searched
                    hits += found_hits
                    query_cut = query_cut or cut
                    self.log.num_searches += 1
                    self.num_calls += 1
                    self.retrieved.append([h.passage for h in found_hits])
                    self.searched.append(SearchRecord(
                        self.log.turn, self.log.turn - 1, act.query,
                        tuple(h.passage.id for h in found_hits), tuple(doc_text(h.passage) for h in found_hits)))
                    self.log.open_window(act.query, found_hits)
                    kind = ("documents",)
            elif isinstance(act, Select):
                kept = self.log.select(act.doc_numbers)
                if self.tools is not None:
                    result = self.tools.selected_text(act.doc_numbers, kept, self.log.windows[-1].shown if self.log.windows else [])
            elif isinstance(act, Evidence):
                self.evidence = act.text
            elif isinstance(act, Answer):
                self.answer = act.text
                terminated = True
            elif isinstance(act, Complete):
                terminated = True
            elif not isinstance(act, Invalid):
                # A kind of the protocol's own (a user's Refine, the browse game's Open): the protocol
                # says what the env shows after it (Protocol.act); its class says whether it ends the
                # episode. One that does not end it is a call of the budget (max_calls).
                outcome = "play" if getattr(act, "ends_episode", False) else next(own)
                if outcome == "budget":
                    result, kind = self._calls_feedback(), ("budget",)
                elif outcome == "play":
                    result = self._play_own(act)
                    terminated = bool(getattr(act, "ends_episode", False))
                    self.num_calls += not terminated
            else:
                if act.selects:  # the window was annotated, with nothing valid: its documents are not all given
                    self.log.select(())
                invalid_reason = act.reason
                self.num_invalid += 1
                reward += self.recipe.invalid_action_penalty
                kind = ("feedback",)
                result = self.protocol.invalid_feedback() if self.tools is None else self.tools.error_text(act.reason, self.recipe.invalid_action_penalty)
            results.append(result)
            kinds.append(kind)
            if terminated:
                break
        query = queries[-1] if queries else None

        context_full = not terminated and self._context_full(turn.text, results)
        truncated = not terminated and (self.log.final_turn or context_full)
        ended = terminated or truncated
        if ended:
            kinds = [()] * len(kinds)
        if self.tools is None:
            notice = self._last_search_notice(kinds, ended)
            observation, obs_cut = self._bound("" if ended else "".join(r for r in results if r) + notice)
            self.records.append(Turn(turn.text, turn.kinds, tuple(k for ks in kinds for k in ks), self.log.turn - 1, turn.actions))
            if any("documents" in k for k in kinds) and observation:
                # What a recipe's grounding may find quoted: the documents as shown, never the text a
                # protocol's own act() showed beside them (it may echo the agent's words).
                documents = "".join(r for r, k in zip(results, kinds) if r and "documents" in k)
                whole = documents == "".join(r for r in results if r)
                self.observed.append(observation if whole else self._bound(documents)[0])
        else:
            # Each call's reply within the observation bound; what R-Search's grounding may find
            # quoted is the search results as shown, never an error or a note (which can echo the agent).
            replies, observation, obs_cut, shown = ([], "", False, []) if ended else \
                self.tools.reply(turn, results, kinds, self.max_observation_chars)
            self.observed += shown
            self.records.extend(self.tools.records(turn, kinds + [()] * (len(turn.actions) - len(kinds)), round=self.log.turn - 1))
            self.context_view.tool_messages[len(self.turns)] = [len(self.messages) + 1 + j for j, m in enumerate(replies) if m.get("role") == "tool"]
            self.messages += [turn.message, *replies]
        self.turns.append((turn.text, observation))
        self.well_formed.append(turn.well_formed)
        self.context_chars += len(turn.text) + len(observation)
        self.context_tokens += self.token_counter(turn.text) + self.token_counter(observation)

        # The recipe's pay for this turn, read from the episode so far (none built for a recipe
        # that pays only the end).
        turn_paid: dict[str, float] = {}
        paying = pays_turns(self.recipe)
        if paying:
            so_far = self.record(naive_search=False)
            turn_paid = yield from replay(lambda: checked_turn_reward(self.recipe, so_far), model_users(self.recipe))
            reward += sum(turn_paid.values())

        info = self._info(observation_truncated=obs_cut)
        if self.tools is not None:
            info["queries"] = queries
            # A reply with no call that ended the episode as its answer: counted, and named when it
            # wrote a tag grammar (a model prompted for tags), never silent.
            without_call = isinstance(turn, ToolTurn) and turn.without_call
            info["ended_without_call"] = bool(without_call and terminated)
            info["tags_without_call"] = turn.grammar_tags if without_call else ()
            if without_call and turn.grammar_tags:
                warn_once(turn.grammar_tags, ended=terminated)
        if paying:
            info["reward_components"] = turn_paid
        info.update(
            action_kinds=turn.kinds,
            query=query,
            retrieved_ids=[h.passage.id for h in hits],
            retrieved_scores=[float(h.score) for h in hits],
            invalid_reason=invalid_reason,
            action_truncated=action_cut,
            query_truncated=query_cut,
            forged_env_tags=turn.forged_env_tags,
            ignored_chars=turn.ignored_chars,
            context_full=context_full,
        )
        if ended:
            self.done = True
            naive = self._naive_rag_search()
            if naive is not None:
                found, _ = yield from self.search_many([self.example.question], naive)
                naive = [doc_text(h.passage) for h in found[0]]
            episode = self.record(naive_docs=naive)
            result = yield from replay(lambda: checked_score(self.recipe, episode), model_users(self.recipe))
            reward += result.total
            info.update(
                answer=self.answer,
                prediction=result.prediction if result.prediction is not None else self.answer,
                evidence=self.evidence,
                answers=self.example.answers,
                reward_components=join_components(self.recipe, episode, result.components, turn_paid),
            )
        if not ended:
            rewrite = yield from self.context_policy.after_step(self, observation)
            if rewrite is not None:
                observation = self._apply_rewrite(rewrite, observation, info)
        return observation, float(reward), terminated, truncated, info

    # ------------------------------------------------------------------ context policies
    def _summary_turn(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The agent's summary turn (``context="summarize"``, ``by="policy"``): the text is the
        summary, never parsed as an action (an answer in it answers nothing) nor read by the
        recipe; the conversation restarts from the prompt, the question and the summary, which
        is the observation. It counts as a turn and earns nothing."""
        if isinstance(action, bytes):
            action = action.decode("utf-8", errors="replace")
        if isinstance(action, Mapping):
            action = str(action.get("content") or "")
        if not isinstance(action, str):
            raise SearchGymError(f"{self.owner}.step expects the summary turn as text or an assistant message, got {type(action).__name__}.")
        text = action[: self.max_action_chars]
        self.log.turn += 1
        self.turns.append((text, ""))
        rewrite = self.context_policy.summary_turn(self, text)
        observation, cut = self._bound(self.context_view.prompt)
        self.turns[-1] = (text, observation)
        info = self._info(observation_truncated=cut)
        info["action_kinds"] = ("summary",)
        self._apply_rewrite(rewrite, observation, info)
        return observation, 0.0, False, False, info

    def _apply_rewrite(self, rewrite: dict[str, Any], observation: str, info: dict[str, Any]) -> str:
        """Show what the context policy did (a summary asked for, results archived, a restart)
        in the step's observation and ``info``; the observation, and the context's size anew."""
        if rewrite["kind"] == "summary_request":
            request = rewrite["request"]
            if self.tools is None:
                observation = f"{observation}\n\n{request}\n\n"
            else:
                self.messages.append({"role": "user", "content": request})
                observation = f"{observation}\n\n{request}" if observation else request
            self.turns[-1] = (self.turns[-1][0], observation)
            info["context_request"] = {"policy": self.context_policy.name, "turn": self.turn, "kind": "summary", "request": request}
        else:
            if rewrite["kind"] == "restart":
                observation, cut = self._bound(self.context_view.prompt)
                self.turns[-1] = (self.turns[-1][0], observation)
                info["observation_truncated"] = cut
            info["context_rewrite"] = rewrite_record(self, rewrite)
        text = context_text(self)
        self.context_chars, self.context_tokens = len(text), self.token_counter(text)
        info["context_chars"], info["context_tokens"] = self.context_chars, self.context_tokens
        if self.tools is not None:
            info["messages"] = list(self.messages)
        return observation

    def _naive_rag_size(self) -> int | None:
        """How many documents the recipe's naive-RAG baseline reads (None: it has none). s3_gbr's
        "matched" baseline reads as many documents as the searcher's context."""
        if not self.recipe.needs_naive_rag:
            return None
        size = getattr(self.recipe, "naive_rag_size", None)
        return size(len(self.generator_context()), self.initial_top_k) if size else self.initial_top_k

    def _naive_rag_search(self) -> int | None:
        """The ``k`` of the naive-RAG search the recipe still needs for this question (None:
        it needs none, or it has the baseline cached)."""
        naive_k = self._naive_rag_size()
        cached = getattr(self.recipe, "has_naive_rag", None)
        if naive_k is None or (cached is not None and cached(self.example.id, self.example.question, naive_k)):
            return None
        return naive_k

    def record(self, naive_docs: list[str] | None = None, *, naive_search: bool = True) -> Episode:
        """The record the reward recipe scores: the example (question, answers, metadata), the
        agent's turns (text, parsed actions, observation kinds and round; no prompt, documents
        or feedback text), each search that ran (turn, round, query, retrieved ids and texts),
        and what was selected and answered, so far. ``naive_docs``: the naive-RAG baseline's
        documents when the caller searched them already (else they are searched here, if the
        recipe needs them, unless ``naive_search`` is False: a turn reward's record)."""
        if self.example is None:
            raise SearchGymError(f"{self.owner}.episode() was called before reset(); there is no episode yet.")
        context = self.generator_context()
        naive, naive_k = naive_docs, self._naive_rag_size()
        if naive is None and naive_search and self._naive_rag_search() is not None:
            naive = [doc_text(h.passage) for h in self.search(self.example.question, naive_k)[0]]
        return Episode(
            question=self.example.question,
            answers=tuple(self.example.answers),
            turns=tuple(self.records),
            answer=self.answer,
            retrieved_docs=[[doc_text(p) for p in ps] for ps in self.retrieved],
            selected_docs=[doc_text(p) for p in context],
            evidence=self.evidence,
            observations=list(self.observed),
            naive_rag_docs=naive,
            num_searches=self.num_searches,
            num_invalid=self.num_invalid,
            format_ok=all(self.well_formed),
            example_id=self.example.id,
            candidates=tuple(self.example.candidates),
            evidence_possible=self.protocol.writes_evidence,
            naive_rag_size=naive_k,
            metadata=copy.deepcopy(dict(self.example.metadata)),  # a recipe that edits it changes no example
            searches=tuple(self.searched),
            budgets=Budgets(self.max_turns, self.top_k, self.initial_top_k, self.max_searches, self.max_calls, self.max_context_tokens),
        )

    # ------------------------------------------------------------------ helpers
    def _turn_searches(self, actions: Sequence[Any]) -> Play[tuple[list[Any], list[str]]]:
        """What each search of a turn gets, in order: ``"final"`` (the last turn's search is
        not run), ``"budget"`` (past the search or call budget) or its hits, whether its query was
        cut, and its rendered text (``"calls"``: past ``max_calls``). The searches that run are retrieved in one call. Also what
        each action of the protocol's own kinds that does not end the episode gets, in order:
        ``"play"``, ``"final"`` (not played on the last turn, as a search) or ``"budget"`` (past
        ``max_calls``, which searches and these actions share in the order written)."""
        outcome: list[Any] = []
        own: list[str] = []
        run: list[int] = []  # where in ``outcome`` the searches that run stand
        budget = None if self.max_searches is None else self.max_searches - self.num_searches
        calls = None if self.max_calls is None else self.max_calls - self.num_calls
        for act in actions:
            if getattr(act, "ends_episode", False):  # Answer, Complete, or a protocol's own ending kind
                break
            if isinstance(act, Search):
                if self.log.final_turn:
                    outcome.append("final")
                elif budget is not None and budget <= 0:
                    outcome.append("budget")
                elif calls is not None and calls <= 0:
                    outcome.append("calls")
                else:
                    run.append(len(outcome))
                    outcome.append(act.query)
                    budget = None if budget is None else budget - 1
                    calls = None if calls is None else calls - 1
            elif not isinstance(act, tuple(BUILT_IN_KINDS.values())):
                if self.log.final_turn:
                    own.append("final")
                elif calls is not None and calls <= 0:
                    own.append("budget")
                else:
                    own.append("play")
                    calls = None if calls is None else calls - 1
        if run:
            found, cut = yield from self.search_many([outcome[i] for i in run], self.top_k)
            if self.tools is None and self.summarizer.passthrough:  # the protocol renders the turn's searches together
                texts = render_turn(self.protocol, found)
            else:
                texts = []
                for i, hits in zip(run, found):
                    texts.append((yield from self._render(outcome[i], hits)))
            for i, hits, was_cut, text in zip(run, found, cut, texts):
                outcome[i] = (hits, was_cut, text)
        return outcome, own

    def _play_own(self, action: Any) -> str | None:
        """What the env shows after an action of the protocol's own kind (through the tool record, if any)."""
        as_tool = self.tools is not None
        live = lambda: play_action(self.protocol, action, self, as_tool=as_tool)  # noqa: E731
        return live() if self.tool_record is None else self.tool_record.play(self.protocol, action, live, as_tool=as_tool)

    def _last_search_notice(self, kinds: Sequence[Sequence[str]], ended: bool) -> str:
        """The protocol's ``last_search_notice`` (tags) after the documents of the last turn that
        may search, when it has one (StepSearch's released ``<warning>``): only the answer turn is left."""
        notice = getattr(self.protocol, "last_search_notice", None)
        if not notice or ended or self.log.turn != self.max_turns - 1 or not any("documents" in k for k in kinds):
            return ""
        return notice

    def _calls_feedback(self) -> str:
        """What a call past ``max_calls`` gets back (it was not run)."""
        if self.tools is None:
            return self.protocol.budget_feedback()
        return f"The call budget ({self.max_calls} calls) is spent: this call was not run. Now call {self.tools.terminal}."

    def _context_full(self, text: str, results: Sequence[str | None]) -> bool:
        """Whether the context would reach ``max_context_tokens`` with this turn and what the
        env answers it (counted by ``token_counter``): the episode then ends, truncated."""
        if self.max_context_tokens is None:
            return False
        added = self.token_counter(text) + sum(self.token_counter(r) for r in results if r)
        return self.context_tokens + added >= self.max_context_tokens

    def _render(self, query: str, hits: Sequence[Hit]) -> Play[str]:
        surface = self.tools or self.protocol
        if self.summarizer.passthrough:
            return surface.render_docs(hits)
        question = self.example.question
        summary = yield from replay(lambda: self.summarizer.summarize(question, query, hits), model_users(self.summarizer))
        return surface.wrap_information(summary)

    def _previous_observation(self) -> dict[str, Any]:
        """``previous_observation=`` (what the env showed last: the prompt before the first turn)
        for a protocol whose ``parse`` takes it (a protocol overriding ``parse`` may not)."""
        if not accepts_keyword(type(self.protocol).parse, "previous_observation"):
            return {}
        return {"previous_observation": self.turns[-1][1] if self.turns else self.prompt}

    def _bound(self, text: str) -> tuple[str, bool]:
        return text[: self.max_observation_chars], len(text) > self.max_observation_chars

    def _info(self, observation_truncated: bool) -> dict[str, Any]:
        info = self._base_info(observation_truncated)
        if self.tools is not None:
            info["tools"], info["messages"] = self.tools.tools, list(self.messages)
        return info

    def _base_info(self, observation_truncated: bool) -> dict[str, Any]:
        return {
            "example_id": self.example.id,
            "turn": self.turn,
            "action_kinds": (),
            "query": None,
            "retrieved_ids": [],
            "retrieved_scores": [],
            "selected_ids": [p.id for p in self.selected],
            "num_searches": self.num_searches,
            "num_calls": self.num_calls,
            "num_invalid": self.num_invalid,
            "invalid_reason": None,
            "context_chars": self.context_chars,
            "context_tokens": self.context_tokens,
            "action_truncated": False,
            "query_truncated": False,
            "observation_truncated": observation_truncated,
            "forged_env_tags": False,
            "ignored_chars": 0,
            "context_full": False,
        }
