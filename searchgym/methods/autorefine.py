"""AutoRefine (arXiv 2505.11277; released code syr-cn/AutoRefine): search, then refine.

After each retrieval the agent distills the documents in a ``<refine> ... </refine>`` block,
then searches again or answers. The reward is the answer's F1 and, when that is 0, a small
bonus (0.1) if the refined text holds a gold answer: a wrong answer reached through a
search that found the answer is paid a little more than one that found nothing.

Built as a user's method is (docs/extending.md): a protocol over Search-R1's grammar with an
action kind of its own (:class:`Refine`, a ``refine(text)`` tool in ``action_format="tools"``)
and a reward recipe that reads the refine texts from ``Turn.parsed``. Nothing here uses a
private name of searchgym.

Where searchgym departs from the released code (each with the option that restores it):

- **Cover test**: a gold answer is held by a refine when its tokens occur as a contiguous run
  of the refine's tokens (:func:`~searchgym.rewards.span_check`); the released code tests a
  character substring of the normalized text, so the gold ``no`` is found in ``not`` or
  ``know`` (``released_substring=True``).
- **What counts as a refine** (``strict=True``; ``strict=False`` reads every refine block as
  the released code does): the first refine of a turn that directly follows retrieved
  documents, no longer than ``max_refine_share`` of those documents' words (a paste is no
  refinement) and naming at most ``max_refine_names`` of their names beyond the question's (a
  list of candidates is no summary); of those, the last one (each refine summarizes "the
  existing documents", so refining more often earns nothing more). Gold answers the question
  names itself (a comparison's options) and ``yes``/``no``/``noanswer`` pay no refine. The
  answer's F1 scores a hedged answer (several candidates, a list) as 0, as searchgym's other
  F1 recipes do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.corpora import Hit, QAExample
from searchgym.envs.protocols import Action, Answer, Invalid, Search, SearchR1Protocol, ToolSpec, find_blocks, search_or_answer
from searchgym.error import ConfigError, UnknownNameError
from searchgym.rewards.hedging import FUNCTION_WORDS
from searchgym.rewards import (
    Episode,
    RewardRecipe,
    RewardResult,
    answer_in_text,
    exact_match,
    f1_score,
    hedged,
    normalize_answer,
    span_check,
    sub_exact_match,
)

__all__ = [
    "AUTOREFINE_PROMPT",
    "AUTOREFINE_TOOL_PROMPT",
    "AutoRefineProtocol",
    "AutoRefineReward",
    "AutoRefineValidation",
    "Refine",
    "document_names",
    "refine_texts",
]

#: The released prompt, quoted exactly: template ``autorefine`` of ``make_prefix``
#: (``preprocess/data_process/utils.py:5-10`` of syr-cn/AutoRefine at 86acc0a), the
#: default of its training data (NQ + HotpotQA). ``{question}`` ends with ``?``, as its
#: data preparation adds one.
AUTOREFINE_PROMPT = (
    "You are a helpful assistant excel at answering questions with multi-turn search engine calling. "
    "To answer questions, you must first reason through the available information using <think> and </think>. "
    "If you identify missing knowledge, you may issue a search request using <search> query </search> at any time. "
    "The retrieval system will provide you with the three most relevant documents enclosed in <documents> and "
    "</documents>. "
    "After each search, you need to summarize and refine the existing documents in <refine> and </refine>. "
    "You may send multiple search requests if needed. "
    "Once you have sufficient information, provide a concise final answer using <answer> and </answer>. "
    "For example, <answer> Donald Trump </answer>. Question: {question}\n"
)

#: The same instructions with tools in place of tags (``action_format="tools"``; searchgym's wording).
AUTOREFINE_TOOL_PROMPT = (
    "You are a helpful assistant excel at answering questions with multi-turn search engine calling. "
    "Reason through the available information first. If you identify missing knowledge, call the search tool "
    "with a query at any time; it returns the three most relevant documents. After each search, call the refine "
    "tool with a summary of what the documents say that bears on the question. You may search several times if "
    "needed. Once you have sufficient information, call the answer tool with a concise final answer "
    "(e.g. answer=\"Donald Trump\").\n\nQuestion: {question}"
)

DOCUMENTS = ("<documents>", "</documents>")
REFINE = ("<refine>", "</refine>")


# ---------------------------------------------------------------- the action
@dataclass(frozen=True)
class Refine(Action):
    """The agent's refinement of the documents it was just shown (a ``<refine>`` block, or a
    ``refine(text)`` call). It shows nothing back and ends nothing; the reward reads it."""

    text: str
    kind = "refine"


def _refine_call(arguments: dict[str, Any]) -> Action:
    text = arguments.get("text")
    if not isinstance(text, str) or not text.strip():
        return Invalid("refine expects text, a non-empty summary of the latest search results")
    return Refine(text.strip())


# ---------------------------------------------------------------- the protocol
class AutoRefineProtocol(SearchR1Protocol):
    """AutoRefine's grammar: ``<think>``, ``<search>``, ``<documents>``, ``<refine>``, ``<answer>``.

    Search-R1's turn rule (the first closed ``<search>`` or ``<answer>`` is the action), the
    observation in ``<documents>`` (``search_r1/llm_agent/generation.py:391``), documents
    written ``Doc 1(Title: X) text`` (``:460-469``), and every closed ``<refine>`` block of the
    turn as a :class:`Refine` before it, in order.

    The released env parses only search and answer and never enforces the refine the prompt
    asks for; searchgym neither: a turn without a refine is well formed, and a refine written
    where no documents came before (the first turn, after feedback) is recorded and earns
    nothing (:class:`AutoRefineReward`). An empty ``<refine>`` block is skipped. Forged
    ``<documents>`` (and ``<information>``) blocks are removed from the turn and mark it malformed.

    Args:
        prompt: ``"released"`` (the only one: :data:`AUTOREFINE_PROMPT`).
    """

    name = "autorefine"
    stop_strings = ("</search>", "</answer>")
    env_tags = (DOCUMENTS, ("<information>", "</information>"))
    PROMPTS = {"released": AUTOREFINE_PROMPT.split("{question}")[0]}
    DEFAULT_PROMPT = "released"
    writable = "it writes Refine actions (any number) followed by exactly one Search or Answer"

    def settings(self) -> dict[str, Any]:
        """What a resumed run must match (``searchgym.plugins.settings_of``)."""
        return {"prompt": self.prompt_style}

    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        action, start = search_or_answer(text)
        if isinstance(action, Invalid):
            return (action,), False
        refines = tuple(Refine(r) for r in find_blocks(text[:start], *REFINE) if r)
        return (*refines, action), True

    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        *refines, last = actions if actions else (None,)
        if last is None or not isinstance(last, (Search, Answer)) or not all(isinstance(r, Refine) for r in refines):
            raise self._unwritable(actions)
        head = f"<think> {thought} </think>\n" if thought else ""
        head += "".join(f"<refine> {r.text} </refine>\n" for r in refines)
        if isinstance(last, Search):
            return f"{head}<search> {last.query} </search>"
        return f"{head}<answer> {last.text} </answer>"

    def wrap_information(self, text: str) -> str:
        return f"\n\n{DOCUMENTS[0]}{text.strip()}{DOCUMENTS[1]}\n\n"

    def extra_tools(self) -> Sequence[ToolSpec]:
        return (ToolSpec(
            "refine",
            "Summarize and refine the documents of the latest search: what they say that bears on the question.",
            {"type": "object", "properties": {"text": {"type": "string", "description": "The refined summary."}},
             "required": ["text"]},
            action=Refine, to_action=_refine_call,
        ),)

    def act(self, action: Action, game: Any) -> str | None:
        # The released env shows nothing after a refine; a tool call gets a short receipt
        # (every call is answered by a tool message).
        return "Refined." if getattr(game, "tools", None) is not None else None

    def tool_messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, str]]:
        return [{"role": "user", "content": AUTOREFINE_TOOL_PROMPT.format(question=example.question.strip())}]


# ---------------------------------------------------------------- the reward
def refine_texts(episode: Episode) -> list[tuple[int, str]]:
    """Every refine of ``episode`` as ``(round, text)``, in order: the ``refine`` actions of
    ``Turn.parsed`` (any object of kind ``"refine"`` with a string ``text``)."""
    return [(turn.round, action.text) for turn in episode.turns for action in turn.parsed
            if getattr(action, "kind", None) == "refine" and isinstance(getattr(action, "text", None), str)]


_NAME_RUN = re.compile(r"\b[A-Z][\w'’-]*(?:[ \t]+[A-Z][\w'’-]*)*")


def document_names(texts: Sequence[str]) -> list[str]:
    """The names the documents ``texts`` (``"title\\ntext"``) hold: each title, and each run of
    capitalized words in the text that is not a lone capitalized word opening a sentence, nor
    function words only ("In", "Her"), without repeats."""
    names: list[str] = []
    for doc in texts:
        title, _, body = doc.partition("\n")
        names.append(title.strip())
        for m in _NAME_RUN.finditer(body):
            run = m.group(0)
            opens = m.start() == 0 or body[:m.start()].rstrip().endswith((".", "!", "?", ":"))
            words = normalize_answer(run).split()
            if (opens and len(run.split()) == 1) or not words or all(w in FUNCTION_WORDS for w in words):
                continue
            names.append(run)
    return list(dict.fromkeys(n for n in names if normalize_answer(n)))


_METRICS = {"f1": (f1_score, "f1"), "em": (exact_match, "f1"), "cem": (sub_exact_match, "containment")}
_YES_NO = ("yes", "no", "noanswer")


class AutoRefineReward(RewardRecipe):
    """AutoRefine's reward, as its released code combines them (``compute_reward``,
    ``verl/utils/reward_score/qa_em.py:163-189``; ``cmd/train.sh``: F1, ``refine_score=0.1``,
    ``format_score=0``):

    - no ``<answer>``: 0, whatever the refines hold;
    - the answer's score (``answer_metric``: ``"f1"``, SQuAD token F1 with the yes/no/noanswer
      rule, max over golds) when it is above 0;
    - else ``refine_score`` if a refine holds a gold answer, else 0.

    The refine test is searchgym's unless asked otherwise (module docstring): each paid refine
    on its own must hold a gold as a token run (``released_substring=True``: a character
    substring of all refine texts joined by spaces, ``qa_em.py:102-112, 136-145, 238-243``);
    with ``strict`` only the last refinement (:meth:`paid_refines`, :meth:`refinement_problem`)
    is read, against the golds that the question does not name and that are not yes/no, and a
    hedged answer scores 0. ``strict=False, released_substring=True`` are the released
    rules exactly.

    Components: the answer metric (``f1``, ``em`` or ``cem``), ``refine`` (1 when a paid refine
    holds a gold, whether or not the bonus was paid), ``refines`` (how many refines were read).
    """

    name = "autorefine"

    def __init__(
        self,
        *,
        refine_score: float = 0.1,
        answer_metric: str = "f1",
        strict: bool = True,
        released_substring: bool = False,
        max_refine_share: float = 0.5,
        max_refine_names: int = 3,
        invalid_action_penalty: float = 0.0,
    ):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        if answer_metric not in _METRICS:
            raise UnknownNameError("AutoRefine answer_metric", answer_metric, _METRICS)
        for label, flag in (("strict", strict), ("released_substring", released_substring)):
            if not isinstance(flag, bool):
                raise ConfigError(f"AutoRefineReward expects {label} to be True or False, got {flag!r}.")
        if not isinstance(refine_score, (int, float)) or isinstance(refine_score, bool) or not 0 <= refine_score <= 1:
            raise ConfigError(
                f"AutoRefineReward expects refine_score to be a number in [0, 1] (the released 0.1), got {refine_score!r}.")
        if not isinstance(max_refine_share, (int, float)) or isinstance(max_refine_share, bool) or not 0 < max_refine_share <= 1:
            raise ConfigError(
                "AutoRefineReward expects max_refine_share to be a number in (0, 1] (the most a refine may keep of its "
                f"documents' words; 0.5 by default), got {max_refine_share!r}.")
        if not isinstance(max_refine_names, int) or isinstance(max_refine_names, bool) or max_refine_names < 1:
            raise ConfigError(
                "AutoRefineReward expects max_refine_names to be an integer >= 1 (the most names of its documents a "
                f"refine may hold beyond the question's; 3 by default), got {max_refine_names!r}.")
        self.max_refine_names = max_refine_names
        self.refine_score = float(refine_score)
        self.answer_metric = answer_metric
        self.strict = strict
        self.released_substring = released_substring
        self.max_refine_share = float(max_refine_share)

    # -- what is read
    def paid_refines(self, episode: Episode) -> list[str]:
        """The refine texts the bonus reads: every one (``strict=False``, as released), or the
        last refinement (:meth:`refinement_problem` finds nothing wrong with it) among the
        first refines of the turns that directly follow retrieved documents: the prompt asks
        each refine to summarize "the existing documents", so the last one is the agent's own
        distillation of everything it read (and refining more often earns nothing more)."""
        refines = refine_texts(episode)
        if not self.strict:
            return [text for _, text in refines]
        firsts: dict[int, str] = {}
        for round_, text in refines:
            firsts.setdefault(round_, text)
        for round_ in sorted(firsts, reverse=True):
            if self.refinement_problem(episode, round_, firsts[round_]) is None:
                return [firsts[round_]]
        return []

    def refinement_problem(self, episode: Episode, round_: int, text: str) -> str | None:
        """Why the refine ``text`` written in turn ``round_`` (from 0) is no refinement the bonus
        reads, or None: no documents were shown right before it; it keeps more than
        ``max_refine_share`` of their words (a paste); it names more than ``max_refine_names`` of
        the names they hold that the question does not name (a list of candidates, not a summary)."""
        if not any(turn.round == round_ - 1 and "documents" in turn.observation for turn in episode.turns):
            return "no documents were shown right before it"
        texts = [t for search in episode.searches if search.round == round_ - 1 for t in search.texts]
        words = sum(len(t.split()) for t in texts)
        if len(text.split()) > self.max_refine_share * words:
            return f"it keeps more than {self.max_refine_share:g} of the {words} words of its documents"
        named = [name for name in document_names(texts) if span_check(text, [name]) and not span_check(episode.question, [name])]
        if len(named) > self.max_refine_names:
            return f"it names {len(named)} names of its documents that the question does not (at most {self.max_refine_names})"
        return None

    def refine_golds(self, episode: Episode) -> list[str]:
        """The gold answers a refine may be paid for holding: all (``strict=False``), or those
        that are not yes/no/noanswer and that the question does not name itself."""
        if not self.strict:
            return list(episode.answers)
        return [g for g in episode.answers
                if normalize_answer(g) not in _YES_NO and not span_check(episode.question, [g])]

    def refine_holds_gold(self, episode: Episode) -> bool:
        """Whether the refines read hold a gold answer (the released ``compute_refine_score_subem``
        when ``released_substring``)."""
        texts, golds = self.paid_refines(episode), self.refine_golds(episode)
        if not texts or not golds:
            return False
        if self.released_substring:
            return answer_in_text(" ".join(texts), golds)
        return any(span_check(text, golds) for text in texts)

    # -- the score
    def score(self, episode: Episode) -> RewardResult:
        metric, check = _METRICS[self.answer_metric]
        if episode.answer is None:
            return RewardResult(0.0, {self.answer_metric: 0.0, "refine": 0.0, "refines": 0.0})
        answer = metric(episode.answer, episode.answers)
        if self.strict and answer > 0 and hedged(
                episode.answer, episode.answers, episode.candidates, question=episode.question, check=check):
            answer = 0.0
        holds = self.refine_holds_gold(episode)
        total = answer if answer > 0 else (self.refine_score if holds else 0.0)
        read = len(self.paid_refines(episode))
        return RewardResult(total, {self.answer_metric: answer, "refine": float(holds), "refines": float(read)})


class AutoRefineValidation(AutoRefineReward):
    """AutoRefine's released validation reward: the answer metric alone, no refine bonus.

    The released trainer scores validation with a second reward manager built without
    ``refine_score`` (AR ``verl/trainer/main_ppo.py:272`` at 8363788; its default is 0,
    ``:43``), so a wrong answer scores 0 whatever its refines hold. The other options are
    :class:`AutoRefineReward`'s; a ``refine_score`` passed is ignored. The ``autorefine``
    preset evaluates with it (``eval_env_options``)."""

    name = "autorefine_validation"

    def __init__(self, **options: Any):
        options["refine_score"] = 0.0
        super().__init__(**options)
