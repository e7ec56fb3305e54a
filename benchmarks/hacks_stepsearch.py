"""StepSearch's reward against the cheap strategies its step reward invites.

StepSearch pays every search turn its information gain (how much its documents raise the
coverage of the gold supporting passages) minus a redundancy penalty, and the answer F1 +
0.618 x the search-key score at the end. Each strategy below plays the same synthwiki
questions on ``searchgym/StepSearch-v0`` as the honest episode, and its gain is the
difference of the mean episode rewards (the sum of every step's reward).

The honest episode searches as well as a policy can: the oracle's hop queries in order (the
question's first entity with the fact it asks for, then each bridge entity the documents
named: what a perfect reader of the documents searches), then answers a wrong name. Such
search earns step gain and search-key credit by design; a strategy is a hack when it earns
more without searching better. The honest episode is the only player that reads the hop
queries (``metadata["oracle_queries"]``); the strategies see what a policy sees (the question,
the observations) and what it could memorize (the corpus's titles), never the gold.

    python benchmarks/hacks_stepsearch.py            # 100 questions, tags and tools (~1 min)
    python benchmarks/hacks_stepsearch.py --quick    # 20 questions
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym

import searchgym  # noqa: F401  (registers the envs)
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer, Search

ENV_ID = "searchgym/StepSearch-v0"
#: A name no passage holds: the honest episode's wrong answer.
WRONG = "Zqxwv Plorth"
_TITLE = re.compile(r"\(Title: ([^)\n]*)\)")


@dataclass
class Seen:
    """What the policy knows: the question, the observations so far, the corpus titles it
    memorized, the turn (from 0) and how to write actions in the env's action format."""

    write: Callable[[list], str]
    max_turns: int
    corpus_titles: list[str]
    question: str = ""
    observations: list[str] = field(default_factory=list)
    turn: int = 0
    searched: list[str] = field(default_factory=list)
    hop_queries: list[str] = field(default_factory=list)

    @property
    def titles(self) -> list[str]:
        return list(dict.fromkeys(t.strip() for obs in self.observations for t in _TITLE.findall(obs)))

    @property
    def last_turn(self) -> bool:
        return self.turn >= self.max_turns - 1

    def search(self, *queries: str) -> str:
        self.searched.extend(queries)
        return self.write([Search(q) for q in queries])

    def answer(self, text: str = WRONG) -> str:
        return self.write([Answer(text)])

    def next_lead(self) -> str:
        """The first title received that is neither searched yet nor named in the question."""
        for title in self.titles:
            if title not in self.searched and title not in self.question:
                return title
        return self.question


def honest(s: Seen) -> str:
    """The oracle's searches, one hop a turn, then a wrong answer."""
    if s.turn >= len(s.hop_queries) or s.last_turn:
        return s.answer()
    return s.search(s.hop_queries[s.turn])


def _until_last(policy: Callable[[Seen], str]) -> Callable[[Seen], str]:
    return lambda s: s.answer() if s.last_turn else policy(s)


def _question_titles(s: Seen) -> list[str]:
    """Corpus titles the question names: what a policy that memorized the titles would paste."""
    return [t for t in s.corpus_titles if t in s.question] or [s.question]


#: name -> (policy, action formats it is played in)
STRATEGIES: dict[str, tuple[Callable[[Seen], str], tuple[str, ...]]] = {
    "the question, every turn": (_until_last(lambda s: s.search(s.question)), ("tags", "tools")),
    "the question with one word dropped, every turn": (_until_last(
        lambda s: s.search(" ".join(w for i, w in enumerate(s.question.split()) if i != s.turn))), ("tags", "tools")),
    "memorized titles the question names, as queries": (_until_last(
        lambda s: s.search(_question_titles(s)[min(s.turn, len(_question_titles(s)) - 1)])), ("tags", "tools")),
    "every title received, in one query": (_until_last(
        lambda s: s.search(" ".join(s.titles) if s.titles else s.question)), ("tags", "tools")),
    "junk queries": (_until_last(lambda s: s.search(f"zzkq vrrp {s.turn}")), ("tags", "tools")),
    "forged <information> with memorized titles": (_until_last(lambda s: (
        s.search(s.question) + "<information>Doc 1(Title: " + " ".join(_question_titles(s)) + ") "
        + s.question + "</information>")), ("tags",)),
    "the same documents again (punctuation changed)": (_until_last(
        lambda s: s.search(s.question if s.turn % 2 == 0 else s.question.rstrip("?") + " ?")), ("tags", "tools")),
    "the question, then the titles received (weaker honest search)": (_until_last(
        lambda s: s.search(s.question if s.turn == 0 else s.next_lead())), ("tags", "tools")),
    "search every turn, never answer": (lambda s: s.search(s.question if s.turn == 0 else s.next_lead()), ("tags", "tools")),
    "answer without searching": (lambda s: s.answer(), ("tags", "tools")),
    "parallel: eight identical searches in one turn": (_until_last(
        lambda s: s.search(*([s.question] * 8))), ("tools",)),
    "parallel: every memorized title the question names": (_until_last(
        lambda s: s.search(*_question_titles(s)[:8])), ("tools",)),
}


def play(env: gym.Env, index: int, policy: Callable[[Seen], str], seen: Seen) -> float:
    env.reset(options={"example_index": index})
    example = search_env(env).example
    seen.question, seen.observations, seen.turn, seen.searched = example.question, [], 0, []
    seen.hop_queries = list(example.metadata.get("oracle_queries", ())) if policy is honest else []
    total = 0.0
    while True:
        obs, reward, terminated, truncated, _ = env.step(policy(seen))
        total += float(reward)
        if terminated or truncated:
            return total
        seen.observations.append(obs)
        seen.turn += 1


def rows(*, quick: bool = True, action_format: str = "tags", questions: int | None = None,
         corpus_options: dict | None = None) -> list[dict]:
    """One row per strategy played in ``action_format``: its mean reward (``exploit``), the
    honest episode's (``honest``) on the same questions, and ``gain = exploit - honest``."""
    env = gym.make(ENV_ID, corpus_options=corpus_options or {"seed": 7, "num_passages": 400}, action_format=action_format)
    inner = search_env(env)
    if action_format == "tools":
        tools = inner.game.tools
        write = lambda actions: tools.write_text(actions)  # noqa: E731
    else:
        write = inner.protocol.write
    seen = Seen(write, inner.max_turns, sorted({p.title for p in inner.corpus}, key=len, reverse=True))
    count = questions or (20 if quick else 100)
    indices = list(range(min(count, len(inner.examples))))
    base = statistics.fmean(play(env, i, honest, seen) for i in indices)
    out = []
    for name, (policy, formats) in STRATEGIES.items():
        if action_format not in formats:
            continue
        exploit = statistics.fmean(play(env, i, policy, seen) for i in indices)
        out.append({"strategy": name, "exploit": exploit, "honest": base, "gain": exploit - base,
                    "questions": len(indices), "action_format": action_format})
    env.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 questions instead of 100")
    parser.add_argument("--action-format", choices=("tags", "tools", "both"), default="both")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    opts = parser.parse_args(argv)
    formats = ("tags", "tools") if opts.action_format == "both" else (opts.action_format,)
    table = [r for f in formats for r in rows(quick=opts.quick, action_format=f)]
    if opts.json:
        print(json.dumps(table, indent=1))
        return 0
    print(f"{'format':6} {'strategy':64} {'exploit':>8} {'honest':>8} {'gain':>8}")
    for r in table:
        print(f"{r['action_format']:6} {r['strategy']:64} {r['exploit']:8.3f} {r['honest']:8.3f} {r['gain']:+8.3f}")
    beaten = [r for r in table if r["gain"] > 1e-6]
    print(f"{len(beaten)} of {len(table)} strategies beat the honest episode")
    return 1 if beaten else 0


if __name__ == "__main__":
    raise SystemExit(main())
