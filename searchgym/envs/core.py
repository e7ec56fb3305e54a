"""The search environment: one agent turn per step, retrieval and scoring inside."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from searchgym.corpora.registry import CORPORA, default_dataset_for, load_corpus, load_dataset
from searchgym.corpora.retrievers import make_retriever
from searchgym.corpora.types import Corpus, Hit, Passage, QAExample, Retriever
from searchgym.envs.frozen import make_frozen
from searchgym.envs.protocols import Protocol, make_protocol
from searchgym.envs.protocols.base import Answer, Complete, Evidence, Invalid, ParsedTurn, Search, Select
from searchgym.envs.spaces import UnicodeText
from searchgym.envs.summarizers import Summarizer, make_summarizer
from searchgym.error import ConfigError, SearchGymError, check_name
from searchgym.rewards import RECIPES, Episode, RewardRecipe, Turn, make_recipe


def count_tokens(text: str) -> int:
    """Whitespace-separated words: the token count used when no ``token_counter`` is given.

    It is cheap on purpose (it runs on every observation); pass a tokenizer's length as
    ``token_counter`` for model tokens.
    """
    return len(text.split())


def _positive_int(name: str, value: Any, allow_none: bool = False, owner: str = "SearchEnv") -> Any:
    if value is None and allow_none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{owner} expects {name} to be a positive integer, got {value!r}.")
    return value


def load_task_data(
    corpus: Any,
    dataset: Any,
    *,
    split: str,
    corpus_options: Mapping[str, Any] | None,
    dataset_options: Mapping[str, Any] | None,
    owner: str = "SearchEnv",
) -> tuple[Corpus, list[QAExample]]:
    """The corpus and the questions of an env's arguments (shared by every env over a corpus).

    ``dataset=None`` picks the built-in corpus's own questions; ``dataset_options=None``
    reuses ``corpus_options`` for a built-in dataset drawn from the same generated world.
    """
    loaded = load_corpus(corpus, **dict(corpus_options or {}))
    examples = load_examples(corpus, dataset, split=split, corpus_options=corpus_options, dataset_options=dataset_options, owner=owner)
    return loaded, examples


def load_examples(
    corpus: Any,
    dataset: Any,
    *,
    split: str,
    corpus_options: Mapping[str, Any] | None,
    dataset_options: Mapping[str, Any] | None,
    owner: str = "SearchEnv",
) -> list[QAExample]:
    """The questions of an env's arguments (:func:`load_task_data` without the corpus)."""
    corpus_options = dict(corpus_options or {})
    if dataset is None:
        if not (isinstance(corpus, str) and corpus in CORPORA):
            raise ConfigError(
                f"{owner} expects a dataset= when the corpus is not a built-in name ({', '.join(CORPORA)}); "
                "pass a built-in dataset name, a FlashRAG jsonl path or a list of QAExample."
            )
        dataset = default_dataset_for(corpus)
    if dataset_options is None:
        # A built-in dataset drawn from the same generated world needs the same options.
        same_world = isinstance(corpus, str) and isinstance(dataset, str) and dataset.startswith(corpus)
        dataset_options = corpus_options if same_world else {}
    examples = list(load_dataset(dataset, split=split, **dataset_options))
    if not examples:
        raise ConfigError(f"{owner} expects a non-empty dataset, got 0 questions from {dataset!r} (split {split!r}).")
    return examples


#: Keys of ``reset(options=...)`` that choose the question.
EXAMPLE_OPTIONS = frozenset({"example_index", "example_id", "example"})


def pick_example(examples: Sequence[QAExample], by_id: Mapping[str, int], options: Mapping[str, Any], rng: Any) -> QAExample:
    """The question ``options`` names (``example_index``, ``example_id`` or ``example``), else
    one drawn with ``rng``; keys outside :data:`EXAMPLE_OPTIONS` are the caller's to judge."""
    if "example" in options:
        ex = options["example"]
        if not isinstance(ex, QAExample):
            raise ConfigError(f"reset(options={{'example': ...}}) expects a QAExample, got {type(ex).__name__}.")
        return ex
    if "example_id" in options:
        try:
            return examples[by_id[options["example_id"]]]
        except (KeyError, TypeError):  # TypeError: an unhashable value, e.g. a list
            raise ConfigError(
                f"reset(options={{'example_id': ...}}) expects the id of a question in this env's dataset, got {options['example_id']!r}."
            ) from None
    if "example_index" in options:
        i = options["example_index"]
        if not isinstance(i, bool):
            try:
                i = operator.index(i)  # ints and NumPy integers
            except TypeError:
                pass
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(examples):
            raise ConfigError(
                f"reset(options={{'example_index': ...}}) expects an int in [0, {len(examples)}), got {i!r}."
            )
        return examples[i]
    return examples[int(rng.integers(len(examples)))]


def doc_text(p: Passage) -> str:
    """A passage as the frozen models read it: title, newline, text."""
    return f"{p.title}\n{p.text}"


class SearchEnv(gym.Env[str, str]):
    """Search-augmented question answering as a text environment.

    ## Description
    The agent receives a question and answers it by searching a corpus, one turn at a
    time, in the tag grammar of one of five published systems (the *protocol*):
    Search-R1, R1-Searcher, RECON, s3 or R-Search. The search engine, the optional
    summarizer of retrieved documents and the scoring of the answer all live inside the
    environment, so different agents can be compared on exactly the same task.

    ## Action Space
    ``UnicodeText(max_length=max_action_chars)``: one agent turn, any string. The turn is
    cut at the protocol's first stop string (as a generation engine stops there) and
    longer turns are cut to ``max_action_chars`` (``info["action_truncated"]``). Blocks of
    environment-owned tags written by the agent itself (e.g. a forged
    ``<information>…</information>``) are removed before parsing and flagged in
    ``info["forged_env_tags"]``: they are never treated as retrieval, evidence or answer.
    A malformed turn is part of the game, never an exception: the observation is the
    protocol's feedback, the turn counts, and the recipe's penalty applies.

    ## Observation Space
    ``UnicodeText(max_length=max_observation_chars)``. ``reset`` returns the protocol's
    prompt (instructions and question; for s3 also the initial documents). Each ``step``
    returns only the text the environment appends to the context after the agent's turn:
    rendered (or summarized) documents, feedback, or ``""`` once the episode has ended.
    Longer observations are cut (``info["observation_truncated"]``).

    ## Starting State
    A question drawn uniformly from the dataset with the env's seeded RNG, or chosen by
    ``options={"example_index": i}``, ``{"example_id": id}`` or ``{"example": QAExample}``.

    ## Rewards
    Given by the reward recipe (``reward=``) when the episode ends (answer, search
    complete, or turn budget); each malformed turn adds the recipe's
    ``invalid_action_penalty``. Components are reported in ``info["reward_components"]``.

    ## Episode End
    Terminated when the agent answers (or, for s3, declares its search complete).
    Truncated when ``max_turns`` turns have passed without that.

    ## Information
    Every step's ``info`` has: ``turn``, ``action_kinds``, ``query`` (or None),
    ``retrieved_ids`` and ``retrieved_scores`` (this step's search, best first),
    ``selected_ids`` (all kept so far, s3), ``num_searches``,
    ``num_invalid``, ``invalid_reason``, ``context_chars``, ``context_tokens``,
    ``action_truncated``, ``observation_truncated``, ``forged_env_tags``,
    ``ignored_chars`` (text after the stop string), ``example_id``; ``reset`` adds
    ``question`` and ``prompt_messages`` (the prompt as chat messages); at the end also
    ``answer`` (the agent's), ``prediction`` (the answer that was scored: the agent's, or
    for s3 the frozen generator's), ``evidence``, ``reward_components`` and ``answers``
    (the gold answers).

    ## Arguments
    - ``protocol``: ``"search_r1"``, ``"r1_searcher"``, ``"recon"``, ``"s3"``, ``"r_search"`` or a
      :class:`Protocol`.
    - ``corpus``: a built-in name (``"synthwiki"``, ``"wiki-vital"``), a jsonl path or a
      :class:`Corpus`; ``corpus_options`` go to its loader (synthwiki: ``seed``, ``num_passages``).
    - ``dataset``: a built-in name, a FlashRAG jsonl path or a list of :class:`QAExample`;
      default: the corpus's own questions. ``split`` and ``dataset_options`` go to its loader
      (``dataset_options`` default to ``corpus_options`` for built-ins sharing a world).
      ``limit``: keep only the first ``limit`` questions of the split (None: all).
    - ``retriever``: ``"bm25"`` (bm25s), ``"rank-bm25"``, ``"dense"``, ``"dense-hnsw"`` or a
      :class:`Retriever`; ``retriever_options`` go to its constructor. ``top_k``: documents per
      search; ``initial_top_k``: documents in the first observation of protocols that start
      from naive retrieval (s3; default ``top_k``).
    - ``max_turns``: agent turns per episode. As in the seeds, the last turn cannot search (a
      search there is not run), so at most ``max_turns - 1`` searches happen.
      ``max_searches``: a lower search budget (None: none).
    - ``summarizer``: ``None``/``"identity"``, ``"extractive"`` or a :class:`Summarizer`.
    - ``reward``: a recipe name from :data:`searchgym.rewards.RECIPES` or a recipe;
      ``reward_options`` go to its constructor. ``generator``, ``reader``, ``judge``: the
      frozen models a recipe needs, as callables or names (``"gold-span"``).
    - ``max_action_chars``, ``max_observation_chars``: the bounds above.
    - ``token_counter``: ``str -> int`` for ``context_tokens`` (e.g. a tokenizer's length);
      default counts whitespace-separated words.

    ## Version History
    - v0: initial release.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 1}

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
        retriever: str | Retriever = "bm25",
        retriever_options: Mapping[str, Any] | None = None,
        top_k: int = 3,
        initial_top_k: int | None = None,
        max_turns: int = 5,
        max_searches: int | None = None,
        summarizer: str | Summarizer | None = None,
        summarizer_options: Mapping[str, Any] | None = None,
        reward: Any = "search_r1_em",
        reward_options: Mapping[str, Any] | None = None,
        generator: Any = None,
        reader: Any = None,
        judge: Any = None,
        max_action_chars: int = 8192,
        max_observation_chars: int = 16384,
        token_counter: Callable[[str], int] | None = None,
        render_mode: str | None = None,
    ):
        self.top_k = _positive_int("top_k", top_k)
        self.initial_top_k = _positive_int("initial_top_k", initial_top_k, allow_none=True) or self.top_k
        self.max_turns = _positive_int("max_turns", max_turns)
        self.max_searches = _positive_int("max_searches", max_searches, allow_none=True)
        self.max_action_chars = _positive_int("max_action_chars", max_action_chars)
        self.max_observation_chars = _positive_int("max_observation_chars", max_observation_chars)
        if render_mode is not None:
            check_name("render mode", render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode

        self.protocol: Protocol = make_protocol(protocol)
        limit = _positive_int("limit", limit, allow_none=True)
        self.corpus, self.examples = load_task_data(
            corpus, dataset, split=split, corpus_options=corpus_options, dataset_options=dataset_options
        )
        self.examples = self.examples[:limit]
        self._by_id = {ex.id: i for i, ex in enumerate(self.examples)}
        self.retriever: Retriever = make_retriever(retriever, self.corpus, **dict(retriever_options or {}))
        self.summarizer: Summarizer = make_summarizer(summarizer, **dict(summarizer_options or {}))

        frozen = {k: v for k, v in {"generator": generator, "reader": reader, "judge": judge}.items() if v is not None}
        if isinstance(reward, RewardRecipe):
            if frozen or reward_options:
                raise ConfigError(
                    f"SearchEnv got a reward recipe object and also {sorted(frozen) + sorted(reward_options or {})}; "
                    "pass the frozen models and options to the recipe's constructor instead."
                )
            self.recipe = reward
        else:
            check_name("reward", reward, RECIPES)
            accepted = RECIPES[reward].needs | getattr(RECIPES[reward], "optional", frozenset())
            unused = sorted(set(frozen) - accepted)
            if unused:
                raise ConfigError(
                    f"The {reward!r} reward uses no {' or '.join(unused)}; expected only "
                    f"{', '.join(sorted(accepted)) or 'no frozen model'}. Drop the argument or pick a reward that uses it."
                )
            models = {k: make_frozen(k, v) for k, v in frozen.items()}
            self.recipe = make_recipe(reward, **models, **dict(reward_options or {}))
        self.token_counter = token_counter or count_tokens

        self.action_space = UnicodeText(self.max_action_chars)
        self.observation_space = UnicodeText(self.max_observation_chars)
        self.example: QAExample | None = None
        self._done = True

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict]:
        super().reset(seed=seed)
        self.example = self._choose_example(options or {})
        self._turn = 0
        self._num_searches = 0
        self._num_invalid = 0
        self._turns: list[tuple[str, str]] = []  # (cleaned agent turn, observation text)
        self._records: list[Turn] = []  # what the recipe reads of each turn
        self._well_formed: list[bool] = []
        self._retrieved: list[list[Passage]] = []
        self._windows: list[list[Passage]] = []  # documents of each observation, numbered from 1
        self._annotated: list[bool] = []  # whether the agent made a selection in each window
        self._selected: list[Passage] = []
        self._evidence: str | None = None
        self._answer: str | None = None
        self._done = False

        initial_hits = None
        if self.protocol.initial_retrieval:
            initial_hits = self.retriever.search([self.example.question], self.initial_top_k)[0]
            self._open_window(initial_hits)
        prompt = self.protocol.prompt(self.example, initial_hits)
        prompt, obs_cut = self._bound(prompt)
        self._prompt = prompt
        self._context_chars = len(prompt)
        self._context_tokens = self.token_counter(prompt)
        info = self._info(observation_truncated=obs_cut)
        info["retrieved_ids"] = [h.passage.id for h in initial_hits or []]
        info["retrieved_scores"] = [float(h.score) for h in initial_hits or []]
        info["prompt_messages"] = self.protocol.messages(self.example, initial_hits)
        info["question"] = self.example.question
        return prompt, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            raise SearchGymError("SearchEnv.step() was called on a finished episode; call reset() first.")
        if isinstance(action, bytes):
            action = action.decode("utf-8", errors="replace")
        if not isinstance(action, str):
            raise SearchGymError(f"SearchEnv.step expects the action to be a str (one agent turn), got {type(action).__name__}.")
        self._turn += 1
        action_cut = len(action) > self.max_action_chars
        if action_cut:
            action = action[: self.max_action_chars]

        turn: ParsedTurn = self.protocol.parse(action)
        reward = 0.0
        terminated = False
        pieces: list[str] = []
        kinds: list[str] = []  # the kind of each piece, for the recipe (never the text)
        query = None
        invalid_reason = None
        retrieved_ids: list[str] = []
        retrieved_scores: list[float] = []
        final_turn = self._turn >= self.max_turns
        for act in turn.actions:
            if isinstance(act, Search):
                query = act.query
                if final_turn:
                    continue  # as in the seeds, the last turn's search is not run: nothing would show it
                if self.max_searches is not None and self._num_searches >= self.max_searches:
                    pieces.append(self.protocol.budget_feedback())
                    kinds.append("budget")
                    continue
                hits = self.retriever.search([act.query], self.top_k)[0]
                self._num_searches += 1
                self._retrieved.append([h.passage for h in hits])
                retrieved_ids = [h.passage.id for h in hits]
                retrieved_scores = [float(h.score) for h in hits]
                pieces.append(self._render(act.query, hits))
                kinds.append("documents")
                self._open_window(hits)
            elif isinstance(act, Select) and self._windows:
                # Numbers outside the latest window are ignored, as s3 ignores ids it cannot resolve.
                window = self._windows[-1]
                self._annotated[-1] = True
                for n in act.doc_numbers:
                    if 1 <= n <= len(window) and window[n - 1] not in self._selected:
                        self._selected.append(window[n - 1])
            elif isinstance(act, Evidence):
                self._evidence = act.text
            elif isinstance(act, Answer):
                self._answer = act.text
                terminated = True
                break
            elif isinstance(act, Complete):
                terminated = True
                break
            elif isinstance(act, Invalid):
                invalid_reason = act.reason
                self._num_invalid += 1
                reward += self.recipe.invalid_action_penalty
                pieces.append(self.protocol.invalid_feedback())
                kinds.append("feedback")

        truncated = not terminated and final_turn
        observation = "" if terminated or truncated else "".join(pieces)
        observation, obs_cut = self._bound(observation)
        self._turns.append((turn.text, observation))
        self._records.append(Turn(turn.text, turn.kinds, () if terminated or truncated else tuple(kinds)))
        self._well_formed.append(turn.well_formed)
        self._context_chars += len(turn.text) + len(observation)
        self._context_tokens += self.token_counter(turn.text) + self.token_counter(observation)

        info = self._info(observation_truncated=obs_cut)
        info.update(
            action_kinds=turn.kinds,
            query=query,
            retrieved_ids=retrieved_ids,
            retrieved_scores=retrieved_scores,
            invalid_reason=invalid_reason,
            action_truncated=action_cut,
            forged_env_tags=turn.forged_env_tags,
            ignored_chars=turn.ignored_chars,
        )
        if terminated or truncated:
            self._done = True
            result = self.recipe.score(self.episode())
            reward += result.total
            info.update(
                answer=self._answer,
                prediction=result.prediction if result.prediction is not None else self._answer,
                evidence=self._evidence,
                answers=self.example.answers,
                reward_components=dict(result.components),
            )
        if self.render_mode == "human":
            print(self.render())
        return observation, float(reward), terminated, truncated, info

    def render(self) -> str | None:
        if self.render_mode is None or self.example is None:
            return None
        return self.transcript

    # ------------------------------------------------------------------ helpers
    @property
    def transcript(self) -> str:
        """The whole context so far: prompt, then every (cleaned) turn and its observation."""
        if self.example is None:
            return ""
        return self._prompt + "".join(a + o for a, o in self._turns)

    def _choose_example(self, options: Mapping[str, Any]) -> QAExample:
        unknown = set(options) - EXAMPLE_OPTIONS
        if unknown:
            raise ConfigError(f"SearchEnv.reset expects options among {sorted(EXAMPLE_OPTIONS)}, got {sorted(unknown)}.")
        return pick_example(self.examples, self._by_id, options, self.np_random)

    def _open_window(self, hits: Sequence[Hit]) -> None:
        self._windows.append([h.passage for h in hits])
        self._annotated.append(False)

    def generator_context(self) -> list[Passage]:
        """The documents a frozen generator answers from: those the agent selected, then
        (s3's rule) every document of each window it never annotated."""
        docs = list(self._selected)
        if self.protocol.keeps_unannotated_windows:
            for window, annotated in zip(self._windows, self._annotated):
                docs.extend(p for p in window if not annotated and p not in docs)
        return docs

    def _render(self, query: str, hits: Sequence[Hit]) -> str:
        if self.summarizer.passthrough:
            return self.protocol.render_docs(hits)
        return self.protocol.wrap_information(self.summarizer.summarize(self.example.question, query, hits))

    def _bound(self, text: str) -> tuple[str, bool]:
        if len(text) <= self.max_observation_chars:
            return text, False
        return text[: self.max_observation_chars], True

    def _info(self, observation_truncated: bool) -> dict[str, Any]:
        return {
            "example_id": self.example.id,
            "turn": self._turn,
            "action_kinds": (),
            "query": None,
            "retrieved_ids": [],
            "retrieved_scores": [],
            "selected_ids": [p.id for p in self._selected],
            "num_searches": self._num_searches,
            "num_invalid": self._num_invalid,
            "invalid_reason": None,
            "context_chars": self._context_chars,
            "context_tokens": self._context_tokens,
            "action_truncated": False,
            "observation_truncated": observation_truncated,
            "forged_env_tags": False,
            "ignored_chars": 0,
        }

    def episode(self) -> Episode:
        """The record the reward recipe scores: the agent's turns (text and observation
        kinds, no prompt, documents or feedback text) and what they retrieved, selected
        and answered, so far."""
        if self.example is None:
            raise SearchGymError("SearchEnv.episode() was called before reset(); there is no episode yet.")
        naive = None
        if self.recipe.needs_naive_rag and self.example.id not in getattr(self.recipe, "naive_rag_cache", {}):
            naive = [doc_text(h.passage) for h in self.retriever.search([self.example.question], self.initial_top_k)[0]]
        return Episode(
            question=self.example.question,
            answers=tuple(self.example.answers),
            turns=tuple(self._records),
            answer=self._answer,
            retrieved_docs=[[doc_text(p) for p in ps] for ps in self._retrieved],
            selected_docs=[doc_text(p) for p in self.generator_context()],
            evidence=self._evidence,
            naive_rag_docs=naive,
            num_searches=self._num_searches,
            num_invalid=self._num_invalid,
            format_ok=all(self._well_formed),
            example_id=self.example.id,
        )
