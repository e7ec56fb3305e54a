"""ParallelSearch's hack suite: the cheap strategies its reward invites, against honest play.

Each strategy plays the same questions of ``searchgym/ParallelSearch-v0`` as the honest wrong
episode of benchmarks/reward_hacking.py: it searches the question in the first turn and then
answers a wrong name. A strategy's gain is the difference of the two mean rewards. Under the
default reward (``shaping="checked"``) no strategy may gain. Under the released reward
(``--released``) some do: any ``##`` earns the comparison bonus, and a sequential question
pays two searches of anything.

    python benchmarks/hacks_parallelsearch.py                      # 100 questions of a 2000-passage world, ~1 min
    python benchmarks/hacks_parallelsearch.py --quick              # 20 questions of a 400-passage world, ~10 s
    python benchmarks/hacks_parallelsearch.py --quick --released   # the released reward: the exploits pay
    python benchmarks/hacks_parallelsearch.py --quick --action-format tools

Strategies see what a policy sees (the question, the protocol, the observations); none
reads the gold answer.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gymnasium as gym

import searchgym  # noqa: F401  (registers the envs)
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer, Search

ENV_ID = "searchgym/ParallelSearch-v0"
#: A name no corpus of searchgym holds: the honest episode's wrong answer (as benchmarks/reward_hacking.py).
WRONG = "Zqxwv Plorth"
TOLERANCE = 1e-6
_COMPARISON = (
    re.compile(r",\s*(?P<a>[^,?]+?) or (?P<b>[^,?]+?)\?\s*$"),
    re.compile(r"^Which of (?P<a>.+?) and (?P<b>.+?) (?:was|is|had|has|did|were)\b"),
)


def _options(question: str) -> list[str]:
    """The two options a comparison question names (as benchmarks/reward_hacking.py reads them)."""
    for pattern in _COMPARISON:
        m = pattern.search(question)
        if m:
            return [m.group("a").strip(), m.group("b").strip()]
    return [question]


@dataclass
class Seen:
    """What the policy knows: the question, the turn (from 0), the last turn, and how it writes."""

    question: str
    turn: int
    last_turn: bool
    write_actions: Callable[[list], str]
    write_calls: Callable[[list[tuple[str, dict]]], str] | None

    def write(self, *actions) -> str:
        return self.write_actions(list(actions))

    def words(self) -> list[str]:
        return [w.strip("?,.") for w in self.question.split() if w.strip("?,.")]

    @property
    def comparison(self) -> bool:
        """Whether the question reads as a comparison of two options (what a policy can tell)."""
        return any(p.search(self.question) for p in _COMPARISON)


def honest_wrong(s: Seen) -> str:
    """Search the question, then answer a wrong name."""
    return s.write(Search(s.question)) if s.turn == 0 else s.write(Answer(WRONG))


def _first(search: Callable[[Seen], str]) -> Callable[[Seen], str]:
    return lambda s: search(s) if s.turn == 0 else s.write(Answer(WRONG))


def _on_comparisons(search: Callable[[Seen], str]) -> Callable[[Seen], str]:
    """``search`` in the first turn of a question that reads as a comparison, honest play elsewhere:
    what a policy learns when only comparisons pay for a split."""
    return lambda s: (search(s) if s.comparison else s.write(Search(s.question))) if s.turn == 0 else s.write(Answer(WRONG))


def _tags(text: Callable[[Seen], str]) -> Callable[[Seen], str]:
    """A raw ``<search>`` block (what the tags can write and the protocol's ``write`` will not)."""
    return lambda s: f"<search> {text(s)} </search>"


#: name -> (policy, action formats it is played in)
STRATEGIES: dict[str, tuple[Callable[[Seen], str], tuple[str, ...]]] = {
    "split: the question and junk sub-queries": (
        _on_comparisons(lambda s: s.write(Search(s.question), Search("a"), Search("b"), Search("c"))), ("tags", "tools")),
    "split: the question's words as sub-queries": (
        _on_comparisons(lambda s: s.write(*(Search(w) for w in dict.fromkeys(s.words())))), ("tags",)),
    "split: the question repeated": (_on_comparisons(_tags(lambda s: " ## ".join([s.question] * 4))), ("tags",)),
    "split: fifty ## sub-queries": (
        _on_comparisons(_tags(lambda s: " ## ".join(f"{s.question} {i}" for i in range(50)))), ("tags",)),
    "split: empty sub-queries around the question": (
        _on_comparisons(_tags(lambda s: "## ## " + s.question + " ## ##")), ("tags",)),
    "split: both options, then a wrong answer": (
        _on_comparisons(lambda s: s.write(*(Search(o) for o in _options(s.question)))), ("tags", "tools")),
    "split: every question, junk sub-queries": (
        _first(lambda s: s.write(Search(s.question), Search("a"), Search("b"))), ("tags", "tools")),
    "no search: answer at once": (lambda s: s.write(Answer(WRONG)), ("tags", "tools")),
    "the same search every turn": (
        lambda s: s.write(Search(s.question)) if not s.last_turn else s.write(Answer(WRONG)), ("tags", "tools")),
    "two rounds of the question, then answer": (
        lambda s: s.write(Search(s.question)) if s.turn < 2 else s.write(Answer(WRONG)), ("tags", "tools")),
    "no search unless the question is a comparison": (
        lambda s: s.write(Search(s.question)) if s.turn == 0 and s.comparison else s.write(Answer(WRONG)), ("tags", "tools")),
    "two rounds where a comparison is not asked": (
        lambda s: s.write(Search(s.question)) if s.turn < (1 if s.comparison else 2) else s.write(Answer(WRONG)),
        ("tags", "tools")),
    "tools: eight parallel identical search calls": (
        _on_comparisons(lambda s: s.write_calls([("search", {"query": s.question})] * 8)), ("tools",)),
    "tools: parallel calls of the question's words": (
        _on_comparisons(lambda s: s.write_calls([("search", {"query": w}) for w in s.words()[:8]])), ("tools",)),
    "tools: one call holding '##' sub-queries": (
        _on_comparisons(lambda s: s.write_calls([("search", {"query": f"{s.question} ## a ## b"})])), ("tools",)),
}


def _calls_text(calls: list[tuple[str, dict]]) -> str:
    import json

    return "".join(f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>" for n, a in calls)


def _play(env: gym.Env, index: int, policy: Callable[[Seen], str], action_format: str) -> float:
    inner = search_env(env)
    env.reset(options={"example_index": index})
    tools = inner.game.tools
    write = (lambda actions: tools.write_text(actions)) if tools is not None else inner.protocol.write
    seen = Seen(inner.example.question, 0, inner.max_turns <= 1, write, _calls_text if tools is not None else None)
    total = 0.0
    while True:
        _, reward, terminated, truncated, _ = env.step(policy(seen))
        total += float(reward)
        if terminated or truncated:
            return total
        seen.turn += 1
        seen.last_turn = seen.turn >= inner.max_turns - 1


def rows(*, quick: bool = True, action_format: str = "tags", shaping: str = "checked", questions: int | None = None,
         corpus_options: dict | None = None) -> list[dict]:
    """One row per strategy played in ``action_format``: ``strategy``, ``exploit`` (its mean
    reward), ``honest`` (the honest wrong episode's on the same questions) and ``gain``.
    ``quick``: 20 questions of a 400-passage world (else 100 of a 2000-passage one);
    ``shaping``: the reward's mode (``"released"``: the released code's terms)."""
    corpus_options = corpus_options or ({"seed": 7, "num_passages": 400} if quick else {"seed": 7, "num_passages": 2000})
    env = gym.make(ENV_ID, corpus_options=corpus_options, action_format=action_format, reward_options={"shaping": shaping})
    try:
        count = questions or (20 if quick else 100)
        indices = range(min(count, len(search_env(env).examples)))
        types = [search_env(env).examples[i].metadata.get("type", "na") for i in indices]
        honest = [_play(env, i, honest_wrong, action_format) for i in indices]
        out = []
        for name, (policy, formats) in STRATEGIES.items():
            if action_format not in formats:
                continue
            exploit = [_play(env, i, policy, action_format) for i in indices]
            by_type = {t: statistics.fmean(e - h for e, h, u in zip(exploit, honest, types) if u == t) for t in sorted(set(types))}
            out.append({"strategy": name, "exploit": statistics.fmean(exploit), "honest": statistics.fmean(honest),
                        "gain": statistics.fmean(exploit) - statistics.fmean(honest), "gain_by_type": by_type})
        return out
    finally:
        env.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="20 questions of a 400-passage world")
    parser.add_argument("--action-format", choices=["tags", "tools"], default="tags")
    parser.add_argument("--released", action="store_true", help="the released reward (shaping='released'): exploits pay")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    table = rows(quick=args.quick, action_format=args.action_format, shaping="released" if args.released else "checked")
    types = list(table[0]["gain_by_type"]) if table else []
    print(f"{'strategy':<52}{'exploit':>9}{'honest':>9}{'gain':>9}" + "".join(f"{'gain ' + t:>17}" for t in types))
    for r in table:
        print(f"{r['strategy']:<52}{r['exploit']:>9.3f}{r['honest']:>9.3f}{r['gain']:>+9.3f}"
              + "".join(f"{r['gain_by_type'][t]:>+17.3f}" for t in types))
    beaten = [r for r in table if r["gain"] > TOLERANCE]
    print(f"\n{len(table)} strategies in {args.action_format} in {time.perf_counter() - start:.0f} s; "
          f"{len(beaten)} beat the honest wrong answer")
    return 1 if beaten and not args.released else 0


if __name__ == "__main__":
    sys.exit(main())
