"""The search environment: a Gymnasium shell over :class:`~searchgym.envs.single.game.SearchGame`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym

from searchgym.corpora.retrievers import make_retriever
from searchgym.corpora.types import MAX_QUERY_CHARS, Corpus, Passage, QAExample, SearchEngine
from searchgym.envs.components.frozen import make_scoring
from searchgym.envs.components.model_calls import Play, run_play
from searchgym.envs.components.question_filters import QUESTION_FILTERS, filter_questions
from searchgym.envs.components.summarizers import Summarizer, make_summarizer
from searchgym.envs.protocols import Protocol, make_protocol
from searchgym.envs.single.context import make_context_policy
from searchgym.envs.single.game import SearchGame
from searchgym.envs.single.spaces import UnicodeText
from searchgym.envs.single.tasks import EXAMPLE_OPTIONS, bind_corpus, check_arguments, load_examples, load_task_data, pick_example, recorded_tools, some_questions
from searchgym.envs.tools.surface import ACTION_FORMATS, ToolSurface
from searchgym.error import ConfigError, suggest_keywords
from searchgym.rewards import Episode, RewardRecipe

__all__ = ["ACTION_FORMATS", "SearchEnv", "load_examples"]  # load_examples lives in searchgym.envs.single.tasks


class SearchEnv(gym.Env[str, str]):
    """Search-augmented question answering as a text environment.

    ## Description
    The agent receives a question and answers it by searching a corpus, one turn at a
    time, in the tag grammar of one of five published systems (the *protocol*):
    Search-R1, R1-Searcher, RECON, s3 or R-Search. The search engine, the optional
    summarizer of retrieved documents and the scoring of the answer all live inside the
    environment, so different agents can be compared on exactly the same task; every game
    is also played through native tool calls (``action_format="tools"``). The rules are played by ``env.game``, a
    :class:`~searchgym.envs.single.game.SearchGame`; code outside reaches this class under wrappers with
    :func:`searchgym.envs.search_env`. Public attributes: ``protocol``, ``examples``, ``example``, ``corpus``, ``retriever``
    (settable), ``summarizer``, ``recipe``, ``top_k``, ``initial_top_k``, ``max_turns``, ``max_searches``, ``transcript``, ``game``.

    ## Action Space
    ``UnicodeText(max_length=max_action_chars)``: one agent turn, any string (with tools also an
    OpenAI assistant message: see docs/tools.md). The turn is cut at the protocol's first stop string (as a generation engine stops there) and
    longer turns are cut to ``max_action_chars`` (``info["action_truncated"]``). Blocks of
    environment-owned tags written by the agent itself (e.g. a forged
    ``<information>…</information>``) are removed before parsing and flagged in
    ``info["forged_env_tags"]``: they are never treated as retrieval, evidence or answer.
    A malformed turn is part of the game, never an exception: the observation is the
    protocol's feedback, the turn counts, and the recipe's penalty applies. A turn that
    fails on a backend (a retrieval server or frozen model that failed after its retries
    raises :class:`~searchgym.error.BackendError`) is undone: the episode stays where it
    was, no turn spent, and the same action can be played again.

    ## Observation Space
    ``UnicodeText(max_length=max_observation_chars)``. ``reset`` returns the protocol's
    prompt (instructions and question; for s3 also the initial documents). Each ``step``
    returns only the text the environment appends to the context after the agent's turn:
    rendered (or summarized) documents, feedback, or ``""`` once the episode has ended.
    Longer observations are cut (``info["observation_truncated"]``). With tools, it is the messages
    answering the turn (``info["messages"]``), joined by a blank line and cut together.

    ## Starting State
    A question drawn uniformly from the dataset with the env's seeded RNG, or chosen by ``options={"example_index": i}``,
    ``{"example_id": id}`` or ``{"example": QAExample}``.

    ## Rewards
    The recipe's (``reward=``) score when the episode ends, its ``turn_reward`` on every step (none of
    the presets pays turns) and ``invalid_action_penalty`` per malformed turn: the step rewards add up
    to these. Components in ``info["reward_components"]`` (a turn's as ``turn`` or ``turn/<name>``). It
    reads the :class:`~searchgym.rewards.Episode`; one that fails raises :class:`~searchgym.error.RecipeError`.

    ## Episode End
    Terminated when the agent answers (or, for s3, declares its search complete); truncated when
    ``max_turns`` turns have passed without that.

    ## Information
    Every step's ``info`` has: ``turn``, ``action_kinds``, ``query`` (or None), ``retrieved_ids``
    and ``retrieved_scores`` (this step's searches, best first), ``selected_ids`` (all kept so
    far, s3), ``num_searches``, ``num_calls`` (calls run), ``num_invalid``, ``invalid_reason``, ``context_full`` (the
    context budget ended it), ``context_chars``, ``context_tokens``, ``action_truncated``, ``query_truncated``, ``observation_truncated``,
    ``forged_env_tags``, ``ignored_chars`` (text after the stop string), ``example_id``, and with tools ``tools``, ``messages``,
    ``queries``, ``ended_without_call`` (a reply without a call was the answer), ``tags_without_call`` (tags it wrote, warned);
    ``reset`` adds ``question`` and ``prompt_messages``; at the end also ``answer`` (the agent's), ``prediction`` (the scored
    answer: the agent's, or s3's frozen generator's), ``evidence``, ``reward_components`` and ``answers`` (the golds).

    ## Arguments
    - ``protocol``: ``"search_r1"``, ``"r1_searcher"``, ``"recon"``, ``"s3"``, ``"r_search"`` or a
      :class:`Protocol`; ``protocol_options`` go to its constructor (s3: ``docs_per_window``, the
      most documents one window gives the generator, 3 as in s3's App. C; None: no cap); its ``set_corpus``, if any, gets the corpus.
    - ``corpus``: a built-in name (``"synthwiki"``, ``"wiki-vital"``), a jsonl path or a
      :class:`Corpus`; ``corpus_options`` go to its loader (synthwiki: ``seed``, ``num_passages``).
    - ``dataset``: a built-in name, a FlashRAG jsonl path or a list of :class:`QAExample`;
      default: the corpus's own questions. ``split`` and ``dataset_options`` go to its loader
      (``dataset_options`` default to ``corpus_options`` for built-ins sharing a world).
      ``limit``: keep only the first ``limit`` questions of the split (None: all).
      ``question_filter``: ``"s3"`` plays only s3's training questions (§3.2, §4.1): no yes/no
      gold, and the env's own naive-RAG baseline wrong (needs ``reward="s3_gbr"``; ``limit``
      counts kept questions); None: every question.
    - ``retriever``: ``"bm25"`` (bm25s), ``"rank-bm25"``, ``"dense"``, ``"dense-hnsw"``, a registered name, ``"module:attr"``
      or any :class:`~searchgym.corpora.SearchEngine`; ``retriever_options`` go to its constructor. ``top_k``: documents per
      search; ``initial_top_k``: documents in the first observation of protocols that start from naive retrieval (s3).
    - ``max_turns``: agent turns per episode; as in Search-R1 and s3 the last turn's search is not
      run. ``max_searches``: a lower search budget (None: none; each parallel search counts). ``max_calls``: calls (searches
      and the protocol's own, e.g. ``open``) past it are not run; ``max_context_tokens``: the episode is truncated once the
      context would reach it (``info["context_full"]``); None: no bound.
    - ``summarizer``: ``None``/``"identity"``, ``"extractive"`` or a :class:`Summarizer`.
    - ``reward``: a recipe name from :data:`searchgym.rewards.RECIPES` or a recipe;
      ``reward_options`` go to its constructor; its ``set_corpus``, if any, gets the corpus. ``generator``, ``reader``, ``judge``: the
      frozen models a recipe needs, as callables, names (``"gold-span"``, a model name), a
      ``LanguageModel``, or a mapping ``{"model", "backend", <backend options>, <sampling>}``.
    - ``max_action_chars``, ``max_observation_chars``: the bounds above. ``max_query_chars``: longer
      queries are cut to it (and to a retrieval server's own limit, from its ``/info``) before
      searching (``info["query_truncated"]``); lone surrogates in a query are searched as U+FFFD.
    - ``token_counter``: ``str -> int`` for ``context_tokens`` (e.g. a tokenizer's length);
      default counts whitespace-separated words.
    - ``action_format``: ``"tags"`` (the protocol's grammar) or ``"tools"``: native tool calls, read
      from a message or by ``tool_parser`` (``"hermes"``, the default, ``"llama3_json"``, ``"mistral"``, a name
      given to :func:`~searchgym.envs.tools.parsers.register_tool_parser`, or a callable);
      ``info`` adds ``tools`` (function schemas) and ``messages`` (the conversation).
    - ``context``: ``"keep"`` (default), ``"archive"`` or ``"summarize"``, with ``context_options``: what the conversation
      becomes as it grows (:mod:`searchgym.envs.single.context`; a rewrite is in ``info["context_rewrite"]``).
    - ``record``: a folder that keeps every tool result (searches, summaries, the protocol's own calls); ``replay``:
      one that answers them byte for byte, a call it lacks refused by name (``replay_misses="pass"``: played live).

    ## Version History
    - v0: initial release.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

    @suggest_keywords  # gym.make's keywords land here: topk=5 -> "Did you mean 'top_k'?"
    def __init__(
        self,
        protocol: str | Protocol = "search_r1",
        corpus: Any = "synthwiki",
        dataset: Any = None,
        *,
        split: str = "dev",
        corpus_options: Mapping[str, Any] | None = None,
        dataset_options: Mapping[str, Any] | None = None,
        limit: int | None = None,
        question_filter: str | None = None,
        retriever: str | SearchEngine = "bm25",
        retriever_options: Mapping[str, Any] | None = None,
        top_k: int = 3,
        initial_top_k: int | None = None,
        max_turns: int = 5,
        max_searches: int | None = None,
        max_calls: int | None = None, max_context_tokens: int | None = None,
        summarizer: str | Summarizer | None = None,
        summarizer_options: Mapping[str, Any] | None = None,
        protocol_options: Mapping[str, Any] | None = None,
        reward: Any = "search_r1_em",
        reward_options: Mapping[str, Any] | None = None,
        generator: Any = None,
        reader: Any = None,
        judge: Any = None,
        max_action_chars: int = 8192,
        max_observation_chars: int = 16384,
        max_query_chars: int = MAX_QUERY_CHARS,
        token_counter: Callable[[str], int] | None = None,
        action_format: str = "tags", tool_parser: Any = None, render_mode: str | None = None,
        record: Any = None, replay: Any = None, replay_misses: str = "refuse",
        context: Any = "keep", context_options: Mapping[str, Any] | None = None,
    ):
        check_arguments(  # before the corpus loads, so a typo fails at once (SearchGame checks the budgets too)
            {"top_k": top_k, "max_turns": max_turns, "max_action_chars": max_action_chars,
             "max_observation_chars": max_observation_chars, "max_query_chars": max_query_chars},
            {"initial_top_k": initial_top_k, "max_searches": max_searches, "max_calls": max_calls, "max_context_tokens": max_context_tokens, "limit": limit},
            [("question filter", question_filter, QUESTION_FILTERS), ("action format", action_format, ACTION_FORMATS),
             ("render mode", render_mode, self.metadata["render_modes"])],
        )
        self.render_mode, self.action_format = render_mode, action_format
        self.protocol: Protocol = make_protocol(protocol, **dict(protocol_options or {}))
        tools = ToolSurface.for_env(self.protocol, action_format, tool_parser)
        self.corpus: Corpus
        self.corpus, examples = load_task_data(corpus, dataset, split=split, corpus_options=corpus_options,
                                               dataset_options=dataset_options, retriever=retriever)
        bind_corpus(self.protocol, self.corpus)  # a protocol that reads documents itself (the browse game's open)
        retriever, self.summarizer, calls = recorded_tools(  # record=, replay=: tool results kept, or answered from a folder
            record, replay, replay_misses, make_retriever(retriever, self.corpus, **dict(retriever_options or {})),
            make_summarizer(summarizer, **dict(summarizer_options or {})), self.corpus)
        self.recipe: RewardRecipe = make_scoring(reward, reward_options, self.corpus, generator=generator, reader=reader, judge=judge)
        self.game = SearchGame(
            self.protocol, retriever, self.summarizer, self.recipe, top_k=top_k, initial_top_k=initial_top_k,
            max_turns=max_turns, max_searches=max_searches, max_calls=max_calls, max_context_tokens=max_context_tokens,
            max_action_chars=max_action_chars, max_observation_chars=max_observation_chars, max_query_chars=max_query_chars,
            token_counter=token_counter, tools=tools, tool_record=calls, owner="SearchEnv", context=make_context_policy(context, context_options))
        for name in ("top_k", "initial_top_k", "max_turns", "max_searches", "max_calls", "max_context_tokens", "max_action_chars", "max_observation_chars", "token_counter"):
            setattr(self, name, getattr(self.game, name))  # the game's checked values
        self.examples: list[QAExample] = some_questions(filter_questions(
            question_filter, examples, retriever, self.recipe, initial_top_k=self.initial_top_k, limit=limit), examples, question_filter, split)
        self._by_id = {ex.id: i for i, ex in enumerate(self.examples)}
        self.action_space, self.observation_space = UnicodeText(self.max_action_chars), UnicodeText(self.max_observation_chars)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        return run_play(self.reset_play(seed=seed, options=options))

    def reset_play(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Play[tuple[str, dict]]:
        """:meth:`reset` with its search explicit (s3's first retrieval), for :func:`searchgym.envs.env_reset_play`."""
        super().reset(seed=seed)
        options = options or {}
        unknown = set(options) - EXAMPLE_OPTIONS
        if unknown:
            raise ConfigError(f"SearchEnv.reset expects options among {sorted(EXAMPLE_OPTIONS)}, got {sorted(unknown)}.")
        return (yield from self.game.reset_play(pick_example(self.examples, self._by_id, options, self.np_random)))

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict]:
        return run_play(self.play(action))

    def play(self, action: Any) -> Play[tuple[str, float, bool, bool, dict]]:
        """:meth:`step` with its model calls explicit, for :func:`searchgym.envs.step_all`
        (see :mod:`searchgym.envs.components.model_calls`)."""
        result = yield from self.game.play(action)
        if self.render_mode == "human":
            print(self.render())
        return result

    def render(self) -> str | None:
        return None if self.render_mode is None or self.example is None else self.transcript

    # ------------------------------------------------------------------ the game's state
    @property
    def example(self) -> QAExample | None:
        """The question of the current episode (None before the first reset)."""
        return self.game.example

    @property
    def retriever(self) -> SearchEngine:
        """The search engine (settable: e.g. a timing view of it)."""
        return self.game.retriever

    @retriever.setter
    def retriever(self, value: SearchEngine) -> None:
        self.game.retriever = value

    @property
    def transcript(self) -> str:
        """The whole context so far: prompt, then every (cleaned) turn and its observation."""
        return self.game.transcript

    def generator_context(self) -> list[Passage]:
        """The documents a frozen generator answers from (see :meth:`SearchGame.generator_context`)."""
        return self.game.generator_context()

    def episode(self) -> Episode:
        """The record the reward recipe scores, so far (see :meth:`SearchGame.record`)."""
        return self.game.record()

