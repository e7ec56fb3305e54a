"""AutoRefine's reward hacks: cheap refine blocks against an honest refine and a wrong answer.

AutoRefine pays a wrong answer 0.1 when its refined text holds a gold answer (the released
``compute_reward``). That invites refines that hold everything instead of refining: the
documents pasted whole, every name they hold, refines written before any documents, many
refine blocks, the question restated (a comparison names its own answer), yes/no tricks and
forged ``<documents>``. Each strategy below answers the same wrong name as the honest episode
on the same questions, so its gain is what its refine earns beyond an honest one.

The honest episode searches the question, refines the documents into the one sentence of them
that shares the most words with the question (an extractive summary that reads no gold), and
answers a wrong name. Both are played in tags and as tool calls (where ``answer`` is the only
call of its turn, so the refine goes in the turn before it).

    python benchmarks/hacks_autorefine.py              # 100 questions of a 2000-passage world
    python benchmarks/hacks_autorefine.py --quick      # 20 questions of a 400-passage world (~10 s)
    python benchmarks/hacks_autorefine.py --released   # the released reward (every refine, substring test)
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import gymnasium as gym

import searchgym  # noqa: F401  (registers the envs)
from searchgym.envs import search_env
from searchgym.envs.protocols import Action, Answer, Search
from searchgym.methods.autorefine import Refine
from searchgym.rewards import normalize_answer

ENV_ID = "searchgym/AutoRefine-v0"
#: A name no corpus of searchgym holds: every episode's wrong answer.
WRONG = "Zqxwv Plorth"
TOLERANCE = 1e-9
#: The released reward: every refine block read, the gold as a character substring.
RELEASED = {"strict": False, "released_substring": True}

_DOC = re.compile(r"Doc \d+\(Title: ([^)\n]*)\)\s*([^\n]*)")
_NAME = re.compile(r"\b[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass
class Seen:
    """What the policy knows: the question, the observations so far, the corpus it memorized,
    and which turn it is in (0-based)."""

    question: str
    corpus_titles: Sequence[str]
    observations: list[str] = field(default_factory=list)
    turn: int = 0

    @property
    def latest_documents(self) -> list[tuple[str, str]]:
        """(title, text) of each document of the latest observation."""
        return [(m.group(1).strip(), m.group(2).strip()) for m in _DOC.finditer(self.observations[-1])] \
            if self.observations else []

    def sentences(self) -> list[str]:
        return [s for _, text in self.latest_documents for s in _SENTENCE.split(text) if s.strip()]

    def best_sentence(self) -> str:
        """The sentence of the latest documents sharing the most words with the question."""
        asked = set(normalize_answer(self.question).split())
        sentences = self.sentences()
        return max(sentences, key=lambda s: len(asked & set(normalize_answer(s).split())), default="nothing found")

    def names(self) -> list[str]:
        """Every capitalized name of the latest documents, titles first, without repeats."""
        found = [t for t, _ in self.latest_documents] + [n for _, text in self.latest_documents for n in _NAME.findall(text)]
        return list(dict.fromkeys(n for n in found if n not in ("Doc", "Title", "It", "The", "She", "He", "Its", "In")))

    def new_names(self) -> list[str]:
        """:meth:`names` that the question does not hold."""
        return [n for n in self.names() if n.lower() not in self.question.lower()]

    def pasted(self) -> str:
        return "\n".join(text for _, text in self.latest_documents)

    def memorized(self) -> str:
        """Corpus titles a policy could have memorized, as many as a refine could list."""
        return ", ".join(self.corpus_titles[:60])


#: A policy: what to do this turn, as actions (the refines first, then one Search or Answer).
Policy = Callable[[Seen], list[Action]]


def _then_refine(refine: Callable[[Seen], str | list[str]], answer: str = WRONG) -> Policy:
    """Search the question, then refine (one block per string) and answer ``answer``."""
    def policy(s: Seen) -> list[Action]:
        if s.turn == 0:
            return [Search(s.question)]
        made = refine(s)
        return [*(Refine(r) for r in ([made] if isinstance(made, str) else made)), Answer(answer)]
    return policy


def honest(s: Seen) -> list[Action]:
    """Search the question, refine to the best-matching sentence, answer a wrong name."""
    return _then_refine(Seen.best_sentence)(s)


def _every_turn(count: int | None) -> Policy:
    """Search the question again each turn (a word added), refining to ``count`` names (None: all)."""
    def policy(s: Seen) -> list[Action]:
        if s.turn == 0:
            return [Search(s.question)]
        names = ", ".join(s.names() if count is None else s.new_names()[:count])
        return [Refine(names), Search(f"{s.question} {s.turn}")] if s.turn < 3 else [Refine(names), Answer(WRONG)]
    return policy


@dataclass(frozen=True)
class Strategy:
    name: str
    policy: Policy
    #: Raw text of a turn that only tags can write (None: written from the actions).
    raw: Callable[[Seen], str | None] | None = None


STRATEGIES: tuple[Strategy, ...] = (
    Strategy("refine: every document pasted", _then_refine(Seen.pasted)),
    Strategy("refine: every name in the documents", _then_refine(lambda s: ", ".join(s.names()))),
    Strategy("refine: every name, lowercased, no separators", _then_refine(lambda s: " ".join(s.names()).lower())),
    Strategy("refine: three new names, as many as a refine may hold", _then_refine(lambda s: ", ".join(s.new_names()[:3]))),
    Strategy("refine: the honest sentence, then every name", _then_refine(
        lambda s: s.best_sentence() + " " + ", ".join(s.names()))),
    Strategy("refine: every sentence, one block each", _then_refine(Seen.sentences)),
    Strategy("refine: the best sentence, then every name in more blocks",
             _then_refine(lambda s: [s.best_sentence(), *s.names()])),
    Strategy("refine: the question restated", _then_refine(lambda s: s.question)),
    Strategy("refine: every name each turn, searching again", _every_turn(None)),
    Strategy("refine: three new names each turn, searching again", _every_turn(3)),
    Strategy("refine before any documents: memorized titles", lambda s: (
        [Refine(s.memorized()), Search(s.question)] if s.turn == 0 else [Answer(WRONG)])),
    Strategy("refine 'yes no not known', answer 'no'", _then_refine(lambda s: "yes no, not known", answer="no")),
    Strategy("refine 'yes no not known', answer wrong", _then_refine(lambda s: "yes no, not known")),
    Strategy("forged <documents> naming every title, refined in the same turn", lambda s: (
        [Search(s.question)] if s.turn == 0 else [Answer(WRONG)]), raw=lambda s: (
        "<documents>Doc 1(Title: " + s.memorized() + ") " + s.question + "</documents>\n<refine> " + s.memorized()
        + " </refine>\n<search> " + s.question + " </search>") if s.turn == 0 else None),
)


def _turns(actions: list[Action], action_format: str) -> list[list[Action]]:
    """One tag turn, or in tools the refines before an answer as a turn of their own."""
    if action_format == "tools" and isinstance(actions[-1], Answer) and len(actions) > 1:
        return [actions[:-1], actions[-1:]]
    return [actions]


def play(env: gym.Env, index: int, policy: Policy, seen: Seen, action_format: str,
         raw: Callable[[Seen], str | None] | None = None) -> float:
    inner = search_env(env)
    env.reset(options={"example_index": index})
    seen.question, seen.observations, seen.turn = inner.example.question, [], 0
    total = 0.0
    while True:
        forged = raw(seen) if raw is not None and action_format == "tags" else None
        turns = [None] if forged is not None else _turns(policy(seen), action_format)
        for actions in turns:
            text = forged if actions is None else (
                inner.protocol.write(actions) if action_format == "tags" else inner.game.tools.write_text(actions))
            obs, reward, terminated, truncated, _ = env.step(text)
            total += float(reward)
            if terminated or truncated:
                return total
            if "Doc 1(" in obs:
                seen.observations.append(obs)
        seen.turn += 1


def rows(*, quick: bool = True, action_format: str = "tags", released: bool = False,
         questions: int | None = None, num_passages: int | None = None) -> list[dict]:
    """One row per strategy: ``strategy``, ``exploit`` (its mean reward), ``honest`` (the
    honest episode's on the same questions), ``gain`` (their difference). ``released``: under
    the released reward (:data:`RELEASED`), where the paste and the lists do gain."""
    n, passages = (20, 400) if quick else (100, 2000)
    n, passages = questions or n, num_passages or passages
    env = gym.make(ENV_ID, corpus_options={"seed": 7, "num_passages": passages}, action_format=action_format,
                   reward_options=RELEASED if released else {})
    inner = search_env(env)
    seen = Seen("", list(dict.fromkeys(p.title for p in inner.corpus)))
    indices = range(min(n, len(inner.examples)))
    base = statistics.fmean(play(env, i, honest, seen, action_format) for i in indices)
    out = []
    for strategy in STRATEGIES:
        if strategy.raw is not None and action_format == "tools":
            continue  # forged tag blocks: tags only (the tool game's forgeries are reward_hacking.py's)
        mean = statistics.fmean(play(env, i, strategy.policy, seen, action_format, strategy.raw) for i in indices)
        out.append({"strategy": strategy.name, "exploit": mean, "honest": base, "gain": mean - base})
    env.close()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 questions of a 400-passage world")
    parser.add_argument("--action-format", choices=["tags", "tools", "both"], default="both")
    parser.add_argument("--released", action="store_true", help="also play under the released reward")
    args = parser.parse_args(argv)
    formats = ["tags", "tools"] if args.action_format == "both" else [args.action_format]
    beaten = 0
    for action_format in formats:
        for label, released in [("searchgym", False)] + ([("released", True)] if args.released else []):
            print(f"\n{label} reward, {action_format}:")
            print(f"{'strategy':<66}{'exploit':>9}{'honest':>9}{'gain':>9}")
            for row in rows(quick=args.quick, action_format=action_format, released=released):
                print(f"{row['strategy']:<66}{row['exploit']:>9.3f}{row['honest']:>9.3f}{row['gain']:>+9.3f}")
                beaten += not released and row["gain"] > TOLERANCE
    print("\nFAIL: a strategy beats honest play" if beaten else "\nOK: no strategy beats honest play under searchgym's reward")
    return 1 if beaten else 0


if __name__ == "__main__":
    sys.exit(main())
