"""Hedged answers: a prediction that could contain more than one answer.

The papers' containment metrics (cover-EM, sub-EM, s3's span check) pay an answer that
*contains* a gold answer, and token F1 pays partial overlap; an answer that names both
options of a comparison (``"Meibreluvia Paevaendovo"``), a list (``"Lyon, Paris or
Nice"``), a handful of names copied from the documents, or a pasted document collects
that credit without committing to one. A sentence that states one answer (``"The capital
city of Japan is Tokyo."``) is what those metrics were made to credit. :func:`hedge_reason`
says why a prediction is a hedge, and the recipes and the bench score a hedge as a wrong
answer (0) unless asked for the paper's raw metric (``strict=False``).

A prediction is hedged when it does not equal a gold answer (after normalization) and:

1. **candidates**: it names two or more of the question's candidates: those given
   (:attr:`QAExample.candidates`), the options the question itself offers
   (:func:`question_options`: ``"..., A or B?"``, ``"Which of A and B ..."``), and
   ``yes`` / ``no`` where a gold answer is one of them. Gold answers are matched first and
   their words set aside, so a candidate that is part of the gold's name is not counted
   again;
2. **a list**: split at commas, semicolons, slashes, ``&``, ``|``, line breaks and the
   words ``and``, ``or``, ``nor``, ``versus``/``vs``, its parts name more things than
   every gold answer has parts (``"Simon and Garfunkel"`` and ``"Washington, D.C."`` have
   two each, so answering them is not a list). Parts holding the gold name it once
   (``"New York City, New York"``); a part of function, frame and question words only
   names nothing (``"Jeff Bezos, who founded the company in 1994"``);
3. **a second answer**: against every gold answer it shares a word with, its *new* words
   (those neither that gold answer nor the question has, after stripping inflections,
   and that are not :data:`FRAME_WORDS`, function words, initials of a name in the
   question, or numbers beside a gold answer without one) are at least as many as the
   gold answer's own name words (frame words such as "University" aside): room for a
   second entity the size of the gold one (``"Kyoto Tokyo"`` for ``"Tokyo"``); or, where the gold answer has a number (a month),
   it adds a number (a month) the question does not have (``"1636 1701"``);
4. **too long**: against every gold answer it shares a word with, the words it has beyond
   that answer's occurrences (function words aside) are more than a sentence's worth:
   :data:`SENTENCE_WORDS` (12), or the question's own count if larger, plus the gold
   answer's. A sentence restating the question passes; a pasted passage does not.

Which rules apply depends on what reads the answer (``check=``, :data:`HEDGE_CHECKS`):
``"containment"`` (cover-EM, the span check, GenAcc: extra words cost nothing there) all
four; ``"f1"`` rules 1-3 (F1's precision already falls with every extra word, so length
is no rule; a second answer is, since naming k candidates earns F1 2/(k+1), more than
guessing one of them); ``"frozen"`` rules 1 and 2, for the answer of a *frozen* model
that no policy trains (s3's generator, whose free-form sentences are no strategy).

What the rules cost honest answers: a sentence that brings in words of its own beyond
the question's (``"Mostokivo College is in Predisk"`` for ``"Predisk"``, naming the
bridge entity; ``"Paris is a beautiful city"``) or a second number (``"442,241 as of
2020"``), and a sentence with a comma (rule 2). Answer with the entity alone, or restate
the question around it, as the demo's SmolLM2 does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from searchgym.error import UnknownNameError
from searchgym.rewards.normalize import Normalizer, normalize_answer

__all__ = [
    "FRAME_WORDS",
    "FUNCTION_WORDS",
    "HEDGE_CHECKS",
    "LIST_SEPARATORS",
    "SENTENCE_WORDS",
    "hedge_reason",
    "hedged",
    "question_options",
]

#: The rules each reader of an answer applies (see the module docstring).
HEDGE_CHECKS: dict[str, tuple[int, ...]] = {"containment": (1, 2, 3, 4), "f1": (1, 2, 3), "frozen": (1, 2)}

#: Where a list splits: punctuation that joins items, and the words that do.
LIST_SEPARATORS = re.compile(r"[,;/&|\n]|\b(?:and|or|nor|versus|vs)\b", re.IGNORECASE)

#: Rule 4: content words a sentence may have beyond the gold answer when the question has fewer.
SENTENCE_WORDS = 12

#: Words an answer sentence uses around an entity: they never make a second entity, and
#: rule 4 does not count them.
FUNCTION_WORDS = frozenset(
    """a an the of in on at to for from by with as into about than near
    is was were are be been being has had have do does did it its he she his her him they them their
    i me my we our you your this that these those which who whom whose what when where how why
    there here so then because since after before during while if
    and or nor but not no yes also both either neither
    answer final""".split()
)

#: Rule 3: words a sentence stating one answer uses that name no entity: relations,
#: kinds, measures and the words of a statement. They are no second answer, as long as
#: no gold answer is one of them (an answer that *is* one scores as its own gold).
FRAME_WORDS = frozenset(
    """born birth birthplace died death lived founded established formed created built constructed
    located situated based headquartered lies flows rises originates source published written wrote
    released invented discovered named called known owned owner made produced directed composed
    designed developed led married won became served started began opened native home hometown
    took place held belongs part
    city capital town village country nation state province region county continent island river
    lake mountain sea ocean year date century decade month day company corporation organisation
    organization university college school person people man woman population height length size
    area name founder author inventor creator leader basin delta valley plateau coast novel book
    film song album
    tall high long large largest biggest big small old first official current currently approximately
    around over nearly roughly some m km metres meters feet ft miles inhabitants residents
    think believe probably likely certainly maybe perhaps possibly indeed therefore thus according documents document
    information context passage correct""".split()
)

_NUMBER = re.compile(r"\d")
# A date's other rival: a second month beside a gold date's month ("3 September October 1907").
_MONTHS = frozenset(
    "january february march april may june july august september october november december".split()
)
# Inflections stripped before comparing a word with the question's or the frame's
# ("originated" with "origin", "founding" with "founded"), longest first.
_SUFFIXES = ("ations", "ation", "ating", "ated", "ates", "ate", "ings", "ing", "ions", "ion", "ies",
             "ers", "er", "ors", "or", "ed", "es", "s", "y", "e")
_CAPITALIZED_RUN = re.compile(r"\b[A-Z][\w'’-]*\.?(?:\s+[A-Z][\w'’-]*\.?)+")
_OPTIONS = (
    re.compile(r",\s*(?P<a>[^,?]+?)\s+or\s+(?P<b>[^,?]+?)\s*\?\s*$"),
    re.compile(r"\b[Ww]hich of (?:the )?(?P<a>.+?)\s+(?:and|or)\s+(?P<b>.+?)\s+(?:was|is|had|has|did|does|were|are)\b"),
    re.compile(r"\bbetween (?P<a>.+?)\s+and\s+(?P<b>[^,?]+?)\s*[,?]"),
    re.compile(r"(?P<a>\b[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*)*)\s+or\s+(?P<b>[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*)*)"),
    re.compile(r"(?P<a>\b[\w'’-]+)\s+or\s+(?P<b>[\w'’-]+\b)"),  # "Is coffee or tea older?"
)


def _as_list(values: Sequence[str] | str) -> list[str]:
    return [values] if isinstance(values, str) else list(values)


def question_options(question: str | None) -> tuple[str, ...]:
    """The options a comparison question offers, as written: ``"..., A or B?"``, ``"Which
    of A and B was ..."``, ``"... between A and B?"``, capitalized names either side of
    ``or``, and the single words either side of it; ``()`` when it offers none."""
    if not question:
        return ()
    found: list[str] = []
    for pattern in _OPTIONS:
        for m in pattern.finditer(question):
            found += [_strip_opener(m.group("a")), _strip_opener(m.group("b"))]
    return tuple(dict.fromkeys(option for option in found if option))


def _strip_opener(option: str) -> str:
    """``option`` without the question's own leading words ("Is", "Which", "In")."""
    words = option.split()
    while words and words[0].lower() in FUNCTION_WORDS:
        words.pop(0)
    return " ".join(words)


def _stem(word: str) -> str:
    """``word`` without its inflections: the same stem for "originated", "originates" and
    "origin", or "founding", "founder" and "founded"."""
    for _ in range(2):
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        else:
            break
    return word


_FRAME_STEMS = frozenset(map(_stem, FRAME_WORDS))


def _initials(question: str) -> set[str]:
    """Initials of the names the question writes out ("lbj" for "Lyndon B. Johnson"): the
    short form a sentence may use for the question's subject."""
    out = set()
    for run in _CAPITALIZED_RUN.finditer(question):
        letters = [w[0].lower() for w in run.group(0).split()]
        out.update("".join(letters[i:j]) for i in range(len(letters)) for j in range(i + 2, len(letters) + 1))
    return out


def _parts(text: str, normalizer: Normalizer) -> list[str]:
    """The non-empty normalized items of ``text`` read as a list."""
    return [part for part in (normalizer(piece) for piece in LIST_SEPARATORS.split(text)) if part]


def _runs(tokens: Sequence[str], needle: Sequence[str]) -> list[int]:
    """Start positions of ``needle`` as a contiguous run of ``tokens``."""
    n = len(needle)
    if not n:
        return []
    return [i for i in range(len(tokens) - n + 1) if list(tokens[i : i + n]) == list(needle)]


def _count_candidates(pred: list[str], golds: list[list[str]], candidates: list[list[str]]) -> int:
    """How many distinct options ``pred`` names: the gold answer (any alias) counts once,
    then each other candidate found in the words no gold answer took."""
    free = [True] * len(pred)
    named = 0
    for gold in sorted(golds, key=len, reverse=True):
        for start in _runs(pred, gold):
            if all(free[start : start + len(gold)]):
                free[start : start + len(gold)] = [False] * len(gold)
                named = 1
    gold_set = {tuple(g) for g in golds}
    for cand in sorted(candidates, key=len, reverse=True):
        if tuple(cand) in gold_set:
            continue
        for start in _runs(pred, cand):
            if all(free[start : start + len(cand)]):
                free[start : start + len(cand)] = [False] * len(cand)
                named += 1
                break
    return named


class _Question:
    """What rules 3 and 4 read of the question: its words (and their stems), its numbers,
    its initials and its length."""

    def __init__(self, question: str | None, normalizer: Normalizer):
        words = normalizer(question).split() if question else []
        self.words = set(words)
        self.stems = {_stem(w) for w in words}
        self.initials = _initials(question) if question else set()
        self.length = sum(1 for w in words if w not in FUNCTION_WORDS)

    def explains(self, word: str) -> bool:
        """Whether ``word`` restates the question or frames a statement: no new entity."""
        stem = _stem(word)
        return word in self.words or stem in self.stems or stem in _FRAME_STEMS or word in self.initials


def _list_items(parts: list[str], golds: list[list[str]], question: _Question) -> int:
    """Rule 2: how many things the parts of a list name. A part holding a gold answer names
    the gold (once, however many parts do: "New York City, New York"); a part with a word
    that nothing explains (see rule 3) names another; a part of function, frame and
    question words only names nothing ("Jeff Bezos, who founded the company in 1994")."""
    gold_words = {w for g in golds for w in g}
    numeric = any(_NUMBER.search(w) for w in gold_words)
    dated = bool(gold_words & _MONTHS)
    named_gold, others = False, 0
    for part in parts:
        words = part.split()
        if any(_runs(words, g) for g in golds):
            named_gold = True
        elif any(_names(w, gold_words, numeric, dated, question) for w in words):
            others += 1
    return named_gold + others


def _names(word: str, gold_words: set[str], numeric: bool, dated: bool, question: _Question) -> bool:
    """Whether ``word`` could name something of its own: a gold word, or one that no rule of
    rule 3 explains (a number or month counts only beside a gold answer with one)."""
    if word in gold_words:
        return True
    if word in FUNCTION_WORDS or word in question.words:
        return False
    if _NUMBER.search(word):
        return numeric
    if word in _MONTHS:
        return dated
    return not question.explains(word)


def _covered(pred: list[str], gold: list[str]) -> list[bool]:
    """Which positions of ``pred`` belong to an occurrence of ``gold``."""
    covered = [False] * len(pred)
    for start in _runs(pred, gold):
        covered[start : start + len(gold)] = [True] * len(gold)
    return covered


def _second_answer(pred: list[str], gold: list[str], question: _Question) -> str | None:
    """Rule 3 against one gold answer: why ``pred`` has room for another answer, or None.

    A name is a run of words between function words and the gold's occurrences; a run that
    holds a new word counts every word of it, the question's words too ("Sonmathova
    Athletic" beside a question about Bonbrethivo Athletic is two words of a new name)."""
    gold_words = set(gold)
    numeric, dated = any(_NUMBER.search(t) for t in gold), bool(gold_words & _MONTHS)
    covered = _covered(pred, gold)
    new: list[str] = []
    rivals: list[str] = []
    run: list[str] = []
    run_is_new = False
    for word, used in zip([*pred, ""], [*covered, True]):
        if used or word in FUNCTION_WORDS:
            if run_is_new:
                new += run
            run, run_is_new = [], False
            continue
        run.append(word)
        if word in gold_words or word in question.words:
            continue
        if _NUMBER.search(word) or word in _MONTHS:
            # A second date, count or month beside a gold one; beside a name, no rival.
            if numeric and _NUMBER.search(word) or dated and word in _MONTHS:
                rivals.append(word)
        elif not question.explains(word):
            run_is_new = True
    if rivals:
        return f"it adds {rivals[0]!r} beside the gold answer's own number or month, room for another answer"
    new = list(dict.fromkeys(new))
    # The gold's own name words: "University of Zaevrolano" leaves room for one ("mostokivo").
    size = max(1, sum(1 for t in gold if t not in FUNCTION_WORDS and _stem(t) not in _FRAME_STEMS))
    if len(new) >= size:
        return (
            f"it adds {len(new)} {'word' if len(new) == 1 else 'words'} of a name that neither the gold answer nor "
            f"the question has ({' '.join(new[:4])}{' ...' if len(new) > 4 else ''}), room for another answer"
        )
    return None


def _too_long(pred: list[str], gold: list[str], question: _Question) -> str | None:
    """Rule 4 against one gold answer: why ``pred`` is longer than a sentence, or None."""
    covered = _covered(pred, gold)
    beyond = sum(1 for word, used in zip(pred, covered) if not used and word not in FUNCTION_WORDS)
    bound = max(SENTENCE_WORDS, question.length) + sum(1 for t in gold if t not in FUNCTION_WORDS)
    if beyond > bound:
        return f"it has {beyond} words beyond the gold answer, more than a sentence's {bound}"
    return None


def hedge_reason(
    prediction: str | None,
    answers: Sequence[str] | str,
    candidates: Sequence[str] | str = (),
    normalizer: Normalizer = normalize_answer,
    *,
    question: str | None = None,
    check: str = "containment",
) -> str | None:
    """Why ``prediction`` could hold more than one answer (see the module docstring), or
    ``None`` when it commits to one. ``question`` is the question asked: its options count
    as candidates, and its words restate it rather than name a second answer (without it,
    every word beyond the gold is new). ``check`` picks the rules (:data:`HEDGE_CHECKS`):
    ``"containment"`` all four, ``"f1"`` rules 1-3, ``"frozen"`` rules 1 and 2. Gold
    answers and candidates that normalize to nothing are ignored; ``None`` (never
    answered) is not a hedge."""
    if check not in HEDGE_CHECKS:
        raise UnknownNameError("hedge check", check, HEDGE_CHECKS)
    rules = HEDGE_CHECKS[check]
    if prediction is None:
        return None
    pred_text = normalizer(prediction)
    golds = [g for g in (normalizer(a) for a in _as_list(answers)) if g]
    if not pred_text or not golds or pred_text in golds:
        return None
    pred = pred_text.split()
    gold_tokens = [g.split() for g in golds]
    given = [*_as_list(candidates), *question_options(question)]
    if any(g in ("yes", "no") for g in golds):
        given += ["yes", "no"]
    options = [c.split() for c in dict.fromkeys(normalizer(c) for c in given) if c]
    if options:
        named = _count_candidates(pred, gold_tokens, options)
        if named >= 2:
            return f"it names {named} of the question's candidates"
    asked = _Question(question, normalizer)
    items = _list_items(_parts(prediction, normalizer), gold_tokens, asked)
    most = max(len(_parts(a, normalizer)) for a in _as_list(answers) if normalizer(a))
    if items > most:
        return f"it is a list of {items} items where a gold answer has at most {most}"
    if 3 not in rules:
        return None
    reasons = []
    for gold in gold_tokens:
        if not set(pred) & set(gold):
            continue  # shares no word with this gold answer: scores nothing against it
        reason = _second_answer(pred, gold, asked) or (_too_long(pred, gold, asked) if 4 in rules else None)
        if reason is None:
            return None
        reasons.append(reason)
    return reasons[0] if reasons else None  # none shared: a plain wrong answer, not a hedge


def hedged(
    prediction: str | None,
    answers: Sequence[str] | str,
    candidates: Sequence[str] | str = (),
    normalizer: Normalizer = normalize_answer,
    *,
    question: str | None = None,
    check: str = "containment",
) -> bool:
    """Whether ``prediction`` could hold more than one answer (:func:`hedge_reason` is not None)."""
    return hedge_reason(prediction, answers, candidates, normalizer, question=question, check=check) is not None
