"""Format checks of Search-R1, s3, R1-Searcher, R-Search and RECON, read from an episode's turns.

Each check reads the agent's own turns (:class:`~searchgym.rewards.base.Turn`: its text
and the *kinds* of what the environment answered), never the prompt, the documents or
the feedback text. The original reward functions read prompt + response, where the
environment's text sits between the agent's turns; the rules below say where an
observation's kind stands in for its text. The differences that follow are listed per
function.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from searchgym.error import ConfigError
from searchgym.rewards.base import Turn

# ---------------------------------------------------------------- Search-R1
_SR1_TAG = re.compile(r"(</?(?:think|search|information|answer)>)")
# Allowed moves of Search-R1's is_valid_sequence (qa_em_format.py):
# <think>…</think> then <search>…</search><information>…</information> and think again,
# or <answer>…</answer> to finish.
_SR1_MOVES = {
    ("start", "<think>"): "in_think",
    ("information", "<think>"): "in_think",
    ("in_think", "</think>"): "after_think",
    ("after_think", "<search>"): "in_search",
    ("in_search", "</search>"): "after_search",
    ("after_search", "<information>"): "in_information",
    ("in_information", "</information>"): "information",
    ("after_think", "<answer>"): "in_answer",
    ("in_answer", "</answer>"): "end",
}
_SR1_INSIDE = frozenset({"in_think", "in_search", "in_information", "in_answer"})


def search_r1_sequence(turns: Sequence[Turn]) -> tuple[bool, str]:
    """Search-R1 v0.3 ``is_valid_sequence``: ``(valid, reason)``.

    The episode must read ``<think>…</think>`` then either ``<search>…</search>`` and the
    environment's documents (its ``<information>…</information>`` block; think again) or
    ``<answer>…</answer>``, which ends it. Between tags only whitespace may appear; after
    ``</answer>`` nothing but whitespace. ``<information>`` tags are the environment's:
    the agent writing one fails (the env strips such forged blocks before recording).

    Differences: a ``"documents"`` observation stands for its ``<information>`` block, and
    a ``"feedback"`` or ``"budget"`` observation for the seed's feedback text, which sits
    outside any tag and so makes the sequence invalid, as in Search-R1. The seed first
    looks for the chat template's ``<|im_start|>assistant`` marker in prompt + response;
    the turns hold no prompt. Its separate open/close count test is implied by the state
    machine (only balanced sequences reach the final state).
    """
    state = "start"
    for number, turn in enumerate(turns, 1):
        for part in _SR1_TAG.split(turn.text):
            if not part.strip():
                continue
            if part in ("<information>", "</information>"):
                return False, f"the agent wrote {part} itself"
            if _SR1_TAG.fullmatch(part):
                nxt = _SR1_MOVES.get((state, part))
                if nxt is None:
                    return False, f"unexpected tag {part} in state {state}"
                state = nxt
            elif state not in _SR1_INSIDE:
                return False, f"unexpected text {part.strip()[:40]!r} outside tags (state {state})"
        for kind in turn.observation:
            if kind != "documents":
                return False, f"the environment's {kind} after turn {number} is text outside tags (state {state})"
            if state != "after_search":
                return False, f"documents after turn {number} in state {state}"
            state = "information"
    if state != "end":
        return False, f"incomplete sequence, ended in state {state}"
    return True, "valid"


# ---------------------------------------------------------------- R1-Searcher
_ANSWER_BLOCK = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_CJK = re.compile("[\u4e00-\u9fff]")


def r1_searcher_format_errors(turns: Sequence[Turn], max_answer_words: int = 10) -> list[str]:
    """R1-Searcher's format rules; an empty list means the format is correct.

    The rules of its released reward server (``train/reward_server_qwen_zero.py``, the
    one its README starts and the one with the paper's -2 penalty), on the agent's text:

    1. as many ``<|begin_of_query|>`` and ``<|end_of_query|>`` as retrievals the
       environment showed (``"documents"`` observations), and no document tags of the
       agent's own: every query got exactly one rendered result;
    2. no ``assistant`` or ``Assistant`` (the model began a new chat turn);
    3. exactly one ``</think>`` and no ``<think>`` (the seed's prompt opens the think
       block: ``Assistant: <think>``);
    4. exactly one ``<answer>`` and one ``</answer>``;
    5. the answer holds no query or document tag and at most ``max_answer_words`` words;
    6. no CJK characters;
    7. no invalid turn (``"feedback"`` observation): the seed ends the episode there, so
       its transcript fails the rules above.

    Differences: rule 1 counts retrievals by kind (the seed counts the tags and the
    ``(1)`` of each rendered block, so an empty retrieval fails there); rules 2 and 6
    read the agent's text only, as documents are corpus text, not the model's; rule 3
    also accepts one ``<think>`` before ``</think>``, for prompts that let the agent open
    the block itself.
    """
    text = "".join(turn.text for turn in turns)
    errors: list[str] = []
    counts = {
        "<|begin_of_query|>": text.count("<|begin_of_query|>"),
        "<|end_of_query|>": text.count("<|end_of_query|>"),
        "retrievals shown": sum(turn.observation.count("documents") for turn in turns),
    }
    if len(set(counts.values())) != 1:
        errors.append("queries and retrievals do not pair up: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    if "<|begin_of_documents|>" in text or "<|end_of_documents|>" in text:
        errors.append("the agent wrote document tags itself")
    if "assistant" in text or "Assistant" in text:
        errors.append("the role word 'assistant' appears in the agent's text")
    opens, closes = text.count("<think>"), text.count("</think>")
    if closes != 1 or opens > 1 or (opens == 1 and text.find("<think>") > text.find("</think>")):
        errors.append(
            f"expected one </think> (and at most one <think> before it), got {opens} <think> and {closes} </think>"
        )
    n_open, n_close = text.count("<answer>"), text.count("</answer>")
    if n_open != 1 or n_close != 1:
        errors.append(f"expected one <answer> and one </answer>, got {n_open} and {n_close}")
    else:
        answer = text.split("<answer>")[-1].split("</answer>")[0].strip()
        if "begin_of_query" in answer or "begin_of_documents" in answer:
            errors.append("the answer contains a query or document tag")
        if len(answer.split()) > max_answer_words:
            errors.append(f"the answer has {len(answer.split())} words, more than {max_answer_words}")
    if _CJK.search(text):
        errors.append("CJK characters in the agent's text")
    invalid = sum(turn.observation.count("feedback") for turn in turns)
    if invalid:
        errors.append(f"{invalid} invalid turn(s) got the environment's feedback")
    return errors


# ---------------------------------------------------------------- R-Search
_EVIDENCE = re.compile(r"<original_evidence>(.*?)</original_evidence>", re.DOTALL)
_EVIDENCE_TAG = re.compile(r"</?original_evidence>")

#: How :func:`r_search_format` judges evidence written in an episode without a retrieval.
#: ``"eq5"``: the paper's Eq. 5, whose evidence-format term asks for evidence only when the
#: agent searched, so the flag is 1 without a search whatever the agent wrote; ``"seed"``:
#: the released ``extract_solution``, for which evidence written without a search is a
#: wrong format (the prompt says to omit it). Evidence without a search is scored by neither.
R_SEARCH_EVIDENCE_RULES = ("eq5", "seed")


@dataclass(frozen=True)
class RSearchFormat:
    """R-Search's two format flags, whether the evidence is scored, and the last evidence.

    ``split_block``: an evidence tag was opened in one turn and closed in another (or left
    unclosed, or closed without an opening in its turn): the evidence is then invalid.
    """

    answer_ok: bool
    evidence_ok: bool
    evidence_scored: bool
    evidence: str | None = None
    split_block: bool = False


def _split_evidence_block(text: str) -> bool:
    """Whether ``text`` (one turn) holds an evidence tag that does not pair inside it."""
    depth = 0
    for tag in _EVIDENCE_TAG.findall(text):
        if tag.startswith("</"):
            if depth == 0:
                return True
            depth = 0
        else:
            depth = 1
    return depth != 0


def r_search_format(turns: Sequence[Turn], *, evidence_rule: str = "eq5") -> RSearchFormat:
    """R-Search's format flags (paper Eq. 5; ``src/verl/utils/reward_score/qa_f1.py``).

    - answer: exactly one closed, non-empty ``<answer>`` block, and no invalid turn;
    - evidence without any retrieval: not scored; the flag is 1 under Eq. 5
      (``evidence_rule="eq5"``, the default) and 1 only if no evidence block was written
      under the seed's ``extract_solution`` (``evidence_rule="seed"``);
    - evidence after at least one retrieval (``"documents"``): correct if exactly one
      non-empty ``<original_evidence>`` block; the last non-empty one is scored even if
      there are several;
    - a block is read inside one turn only: an evidence tag that does not pair within its
      turn (opened in one turn and closed in a later one) makes the evidence wrong and
      unscored, with or without a retrieval (``split_block``).

    :class:`~searchgym.rewards.RSearchReward` pays these flags only to an episode that
    answered (``paper_format_rule=True`` pays them as the seed does).

    Differences: the seed counts blocks in prompt + response and subtracts the one
    example of each tag in its prompt (which also makes it reject the answer ``"and"``,
    the word between the prompt's example tags); here blocks are counted in the agent's
    text as they are. The seed's invalid-turn feedback holds one ``<answer>`` pair, so an
    episode with an invalid turn has two and loses the answer-format score: here a
    ``"feedback"`` observation does the same. The seed matches evidence blocks across the
    whole transcript, so a block opened before a search and closed after it would wrap
    the documents; here it is invalid.
    """
    if evidence_rule not in R_SEARCH_EVIDENCE_RULES:
        raise ConfigError(f"r_search_format expects evidence_rule to be one of {R_SEARCH_EVIDENCE_RULES}, got {evidence_rule!r}.")
    text = "".join(turn.text for turn in turns)
    answers = _ANSWER_BLOCK.findall(text)
    invalid = any("feedback" in turn.observation for turn in turns)
    answer_ok = len(answers) == 1 and bool(answers[0].strip()) and not invalid
    retrievals = sum(turn.observation.count("documents") for turn in turns)
    if any(_split_evidence_block(turn.text) for turn in turns):
        return RSearchFormat(answer_ok, evidence_ok=False, evidence_scored=False, split_block=True)
    evidences = [block for turn in turns for block in _EVIDENCE.findall(turn.text)]
    if retrievals == 0:
        return RSearchFormat(answer_ok, evidence_ok=evidence_rule == "eq5" or not evidences, evidence_scored=False)
    if not evidences:
        return RSearchFormat(answer_ok, evidence_ok=False, evidence_scored=False)
    last = evidences[-1].strip()
    evidence_ok = len(evidences) == 1 and bool(last)
    return RSearchFormat(answer_ok, evidence_ok, evidence_scored=bool(last), evidence=last or None)
