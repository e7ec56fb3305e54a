"""Tool calls: the env's own time per step in tools format against tags, and fuzzed tool turns.

    python benchmarks/tools_env.py            # 40 questions a game, 100,000 fuzzed turns a game (~2 min of CPU)
    python benchmarks/tools_env.py --quick    # 10 questions, 5,000 fuzzed turns a game (~5 s of CPU)

1. ``overhead``: every registered single-agent game plays the oracle's decisions on the
   same questions three ways, side by side in one process: written in the protocol's tags,
   as OpenAI assistant messages (arguments as dicts) and as hermes text (parsed by the
   env). Retrieval is replayed (each query's hits recorded beforehand), so the times are
   the env's own work per step: parsing, the rules, the summarizer of RECON, the records,
   the replies, ``info``, the recipe at the end (frozen models: the gold-span reader). The
   three forms are timed interleaved episode by episode, in a rotating order (a burst of load
   hits all alike), each step in the process's CPU time; a step's time is its best over the
   rounds. Target: tools at most 1.2x tags (judged by the full form; ``--quick`` reports it).
2. ``fuzz``: ``--fuzz-turns`` random and hostile tool turns a game (messages of any shape,
   arguments of any JSON and of no JSON, forged tool results, raw text of every public
   format's fragments), each checked: no exception, an observation within the bound, a
   float reward, a conversation whose tool messages answer its calls one to one. Prints the
   count and the time; exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
try:
    import searchgym  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym

from searchgym.agents.oracle import SynthWikiOracle
from searchgym.corpora.types import Retriever
from searchgym.envs.registration import ENV_SPECS
from searchgym.rewards import RECIPES, GoldSpanReader

GAMES = sorted(ENV_SPECS)
WORLD = {"seed": 7, "num_passages": 2000}
FORMS = ("tags", "message", "hermes")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class ReplayRetriever(Retriever):
    """``retriever``'s hits, each query searched once and then replayed: an env over it
    times its own work, with no search in it."""

    def __init__(self, retriever: Retriever):
        self.inner, self.corpus = retriever, retriever.corpus
        self.max_query_chars = getattr(retriever, "max_query_chars", None)
        self.hits: dict[tuple[str, int], Any] = {}
        self.misses = 0

    def search(self, queries, k):
        missing = [q for q in dict.fromkeys(queries) if (q, k) not in self.hits]
        if missing:
            self.misses += len(missing)
            for q, hits in zip(missing, self.inner.search(missing, k)):
                self.hits[(q, k)] = hits
        return [self.hits[(q, k)] for q in queries]


def make(env_id: str, action_format: str, base=None, retriever=None, **kwargs):
    spec = ENV_SPECS[env_id]
    frozen = {role: GoldSpanReader() for role in RECIPES[spec["reward"]].needs}
    if base is not None:
        kwargs.update(corpus=base.corpus, dataset=base.examples, retriever=retriever)
    else:
        kwargs.update(corpus_options=WORLD)
    return gym.make(env_id, action_format=action_format, **frozen, **kwargs)


# ---------------------------------------------------------------------- overhead
class Recording:
    """The oracle's protocol, remembering the decisions it wrote."""

    def __init__(self, protocol):
        self.protocol, self.last = protocol, None

    def write(self, actions, thought=None):
        self.last = (list(actions), thought)
        return self.protocol.write(actions, thought)

    def __getattr__(self, name):
        return getattr(self.protocol, name)


def oracle_episodes(env, questions: int) -> list[tuple[int, list[tuple[list, str | None]]]]:
    """The oracle's decisions on the first ``questions`` questions (played once in tags)."""
    oracle = SynthWikiOracle.for_env(env)
    oracle.protocol = Recording(oracle.protocol)
    episodes = []
    for index in range(min(questions, len(env.unwrapped.examples))):
        obs, info = env.reset(options={"example_index": index})
        decisions = []
        while True:
            text = oracle.act([obs], [info])[0]
            decisions.append(oracle.protocol.last)
            obs, _, terminated, truncated, info = env.step(text)
            if terminated or truncated:
                break
        episodes.append((index, decisions))
    return episodes


def bench_overhead(env_id: str, questions: int, rounds: int) -> dict[str, Any]:
    base = make(env_id, "tags").unwrapped
    replay = ReplayRetriever(base.retriever)
    envs = {"tags": make(env_id, "tags", base, replay), "message": make(env_id, "tools", base, replay),
            "hermes": make(env_id, "tools", base, replay)}
    episodes = oracle_episodes(envs["tags"], questions)
    surface = envs["message"].unwrapped.game.tools
    protocol = envs["tags"].unwrapped.protocol
    written = {
        "tags": [[protocol.write(a, t) for a, t in ds] for _, ds in episodes],
        "message": [[surface.write(a, t, turn=n) for n, (a, t) in enumerate(ds, 1)] for _, ds in episodes],
        "hermes": [[surface.write_text(a, t) for a, t in ds] for _, ds in episodes],
    }

    def play(form: str, index: int, turns: list) -> tuple[list[int], float]:
        """One episode in ``form``: each step's CPU time (ns) and the episode's reward."""
        env, times, total = envs[form], [], 0.0
        env.reset(options={"example_index": index})
        for action in turns:
            start = time.process_time_ns()
            _, reward, _, _, _ = env.step(action)
            times.append(time.process_time_ns() - start)
            total += reward
        return times, total

    rewards = {form: [play(form, index, turns)[1] for (index, _), turns in zip(episodes, written[form])] for form in FORMS}
    if not rewards["tags"] == rewards["message"] == rewards["hermes"]:  # (the warm-up fills the replay)
        raise RuntimeError(f"{env_id}: the same decisions scored differently in tags and tools")
    misses = replay.misses
    # Each step's best time over the rounds, the three forms interleaved episode by episode (in
    # a rotating order), so that a burst of load on a shared machine hits the three alike.
    best = {form: [[float("inf")] * len(turns) for turns in written[form]] for form in FORMS}
    for r in range(rounds):
        for e, (index, _) in enumerate(episodes):
            for form in FORMS[r % 3:] + FORMS[: r % 3]:
                times, _ = play(form, index, written[form][e])
                best[form][e] = [min(a, b) for a, b in zip(best[form][e], times)]
    if replay.misses != misses:
        raise RuntimeError(f"{env_id}: the timed rounds searched ({replay.misses - misses} queries); the replay is incomplete")
    steps = sum(len(turns) for turns in written["tags"])
    return {"env_id": env_id, "episodes": len(episodes), "steps": steps,
            **{f"{form}_us": sum(map(sum, best[form])) / steps / 1e3 for form in FORMS},
            "mean_reward": sum(rewards["tags"]) / len(episodes)}


# ---------------------------------------------------------------------- fuzz
FRAGMENTS = [
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<|im_start|>tool\n", "<|im_end|>",
    "<|start_header_id|>ipython<|end_header_id|>", "<|eot_id|>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]",
    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "<think>", "</think>", "<search>", "</search>", "<answer>", "</answer>",
    "<information>", "</information>", "<observation>", "</observation>", "<|begin_of_documents|>", "<|end_of_documents|>",
    "<|begin_of_query|>", "<|end_of_query|>", "<query>", "</query>", "<important_info>", "<original_evidence>",
    '{"name": "search", "arguments": {"query": "born"}}', '{"name": "answer", "arguments": {"answer": "Paris"}}',
    '{"name": "select", "arguments": {"doc_ids": [1, 2]}}', '{"name": "finish", "arguments": {}}',
    '{"name": "search", "parameters": {"query": "x"}}', 'search[ARGS]{"query": "y"}', '[{"name": "search", "arguments": ',
    '"query"', "{", "}", "[", "]", ",", ":", ";", "\ud800", "\x00", "北京 🚀", "{" * 200, "[" * 200, "born city", "Paris",
]
HOSTILE = ["", " ", "\ud800", "born \udfff city", "\x00 river", "a" * 3000, "born city " * 400, "x" * 9000,
           "<tool_response>Paris</tool_response>", "</answer><answer>Paris", "<|end_of_query|>", '"}]}', "\\", "{" * 1000]
NAMES = ["search", "search", "search", "answer", "select", "finish", "lookup", "", "Search", None, 5, ["search"]]
KEYS = ["query", "answer", "evidence", "doc_ids", "k", ""]


class Fuzzer:
    """Random and hostile tool turns from a seeded stream."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def text(self) -> str:
        rng = self.rng
        if rng.random() < 0.2:
            return rng.choice(HOSTILE)
        parts = [rng.choice(FRAGMENTS) if rng.random() < 0.7 else "".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randrange(8)))
                 for _ in range(rng.randrange(10))]
        return "".join(parts)

    def value(self, depth: int = 0) -> Any:
        rng = self.rng
        kind = rng.randrange(10 if depth < 3 else 7)
        if kind == 7:
            return [self.value(depth + 1) for _ in range(rng.randrange(4))]
        if kind == 8:
            return {rng.choice(KEYS): self.value(depth + 1) for _ in range(rng.randrange(4))}
        if kind == 9:
            return [rng.randrange(-1, 10) for _ in range(rng.randrange(5))]
        if kind == 4:
            return self.text()
        return (None, True, rng.randrange(-3, 12), rng.random() * 10, None, "born city", 2**70)[kind]

    def arguments(self) -> Any:
        rng = self.rng
        roll = rng.random()
        args = {rng.choice(KEYS[:4]): (self.text() if rng.random() < 0.5 else "born city") for _ in range(rng.randrange(3))}
        if rng.random() < 0.3:
            args[rng.choice(KEYS)] = self.value()
        if roll < 0.6:
            return args
        if roll < 0.8:
            return json.dumps(args, ensure_ascii=rng.random() < 0.5)
        if roll < 0.9:
            return json.dumps(args)[: rng.randrange(1, 20)]
        return self.value()

    def valid(self) -> dict[str, Any]:
        """A call every game reads as well formed (its own tools; others get "no such tool")."""
        rng = self.rng
        name = rng.choice(["search", "search", "search", "select", "answer", "finish"])
        arguments = {"search": {"query": rng.choice(["born city", "founded", "river", "university", self.text() or "x"])},
                     "select": {"doc_ids": rng.sample(range(1, 9), rng.randrange(4))},
                     "answer": {"answer": rng.choice(["Paris", "Predisk", self.text() or "y"])}, "finish": {}}[name]
        if name == "answer" and rng.random() < 0.5:
            arguments["evidence"] = self.text()
        return {"id": f"v{rng.randrange(10**6)}", "type": "function", "function": {"name": name, "arguments": arguments}}

    def entry(self) -> Any:
        rng = self.rng
        if rng.random() < 0.35:
            return self.valid()
        if rng.random() < 0.1:
            return self.value()
        entry: dict[str, Any] = {"function": {"name": rng.choice(NAMES), "arguments": self.arguments()}}
        if rng.random() < 0.7:
            entry["id"] = rng.choice(["c0", "c1", "call_1_0", "", "x" * 200, 7])
        if rng.random() < 0.7:
            entry["type"] = "function" if rng.random() < 0.9 else "code"
        if rng.random() < 0.05:
            del entry["function"]
        return entry

    def action(self) -> Any:
        rng = self.rng
        roll = rng.random()
        if roll < 0.12:  # raw text (in the answer games, a reply without a call is the answer: it ends the episode)
            return self.text()
        if roll < 0.3:  # hermes text with real calls and noise around
            calls = "".join(f"<tool_call>{json.dumps({'name': rng.choice(NAMES[:6]), 'arguments': self.arguments()})}</tool_call>"
                            for _ in range(rng.randrange(1, 4)))
            return (self.text() if rng.random() < 0.5 else "") + calls + (self.text() if rng.random() < 0.3 else "")
        message: dict[str, Any] = {"role": "assistant" if rng.random() < 0.9 else rng.choice(["user", "tool", None, 3])}
        if rng.random() < 0.8:
            message["content"] = self.text() if rng.random() < 0.8 else rng.choice([None, [{"type": "text", "text": self.text()}], 5])
        if rng.random() < 0.92:
            message["tool_calls"] = [self.entry() for _ in range(rng.choice([0, 1, 1, 1, 2, 3, 9]))] if rng.random() < 0.95 \
                else self.value()
        return message


def check_step(env, step, bound: int) -> None:
    obs, reward, terminated, truncated, info = step
    if not isinstance(obs, str) or len(obs) > bound:
        raise AssertionError(f"observation of {len(obs)} characters past the bound {bound}")
    if not isinstance(reward, float) or reward != reward:
        raise AssertionError(f"reward {reward!r} is not a float")
    messages = info["messages"]
    i = 1
    while i < len(messages):
        ids = [c["id"] for c in messages[i].get("tool_calls", [])]
        if messages[i]["role"] != "assistant" or len(set(ids)) != len(ids):
            raise AssertionError("a turn is not one assistant message with unique call ids")
        i += 1
        answered = []
        while i < len(messages) and messages[i]["role"] == "tool":
            answered.append(messages[i]["tool_call_id"])
            i += 1
        if i < len(messages) and messages[i]["role"] == "user":
            i += 1
        if answered not in ([], ids):
            raise AssertionError(f"tool messages answer {answered}, the calls are {ids}")


def bench_fuzz(env_id: str, turns: int, seed: int) -> dict[str, Any]:
    bound = 4000
    env = make(env_id, "tools", max_observation_chars=bound, max_action_chars=4000, corpus_options={"seed": 7, "num_passages": 400})
    fuzzer = Fuzzer(seed)
    failures, episodes, steps, searches = [], 0, 0, 0
    start = time.perf_counter()
    env.reset(seed=seed)
    while steps < turns:
        action = fuzzer.action()
        steps += 1
        try:
            step = env.step(action)
            check_step(env, step, bound)
        except Exception as e:  # counted and shown, never hidden
            failures.append((repr(action)[:300], f"{type(e).__name__}: {e}", traceback.format_exc()))
            env.reset()
            continue
        searches += len(step[4]["queries"])
        if step[2] or step[3]:
            json.dumps(step[4]["messages"])  # the whole conversation serializes
            episodes += 1
            env.reset()
    return {"env_id": env_id, "turns": steps, "episodes": episodes, "seconds": time.perf_counter() - start,
            "failures": failures, "searches": searches}  # searches: the search calls read (run, or past a budget)


# ---------------------------------------------------------------------- report
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=40, help="oracle episodes a game in the overhead section (default 40)")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds of each form (default 7; each step's best is kept)")
    parser.add_argument("--fuzz-turns", type=int, default=100_000, help="fuzzed tool turns a game (default 100,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="10 questions, 3 rounds, 5,000 fuzzed turns a game (~5 s of CPU)")
    parser.add_argument("--sections", nargs="+", choices=["overhead", "fuzz"], default=["overhead", "fuzz"])
    args = parser.parse_args(argv)
    if args.questions < 1 or args.rounds < 1 or args.fuzz_turns < 1:
        parser.error("--questions, --rounds and --fuzz-turns must be >= 1")
    questions, rounds, fuzz_turns = (10, 3, 5000) if args.quick else (args.questions, args.rounds, args.fuzz_turns)
    status = 0
    if "overhead" in args.sections:
        rows = []
        for env_id in GAMES:
            log(f"overhead: {env_id}")
            rows.append(bench_overhead(env_id, questions, rounds))
        print("Env's own time per step, oracle decisions, retrieval replayed (CPU us, each step's best of "
              f"{rounds} interleaved rounds; ratio = tools / tags):")
        print(f"{'game':<26}{'episodes':>9}{'steps':>7}{'tags us':>10}{'message us':>12}{'hermes us':>11}"
              f"{'message x':>11}{'hermes x':>10}")
        for r in rows:
            print(f"{r['env_id']:<26}{r['episodes']:>9}{r['steps']:>7}{r['tags_us']:>10.1f}{r['message_us']:>12.1f}"
                  f"{r['hermes_us']:>11.1f}{r['message_us'] / r['tags_us']:>11.2f}{r['hermes_us'] / r['tags_us']:>10.2f}")
        steps = sum(r["steps"] for r in rows)
        mean = {form: sum(r[f"{form}_us"] * r["steps"] for r in rows) / steps for form in FORMS}
        worst = max(max(r["message_us"], r["hermes_us"]) / r["tags_us"] for r in rows)
        print(f"{'all games':<26}{sum(r['episodes'] for r in rows):>9}{steps:>7}{mean['tags']:>10.1f}{mean['message']:>12.1f}"
              f"{mean['hermes']:>11.1f}{mean['message'] / mean['tags']:>11.2f}{mean['hermes'] / mean['tags']:>10.2f}")
        if args.quick:  # 3 rounds of 10 episodes: at the target's edge, a verdict would be the load's
            print(f"The largest ratio of a game is {worst:.2f}x (target: at most 1.2x; judged by the full form only)\n")
        else:
            verdict = "OK" if worst <= 1.2 else "ABOVE TARGET"
            print(f"{verdict}: the largest ratio of a game is {worst:.2f}x (target: at most 1.2x)\n")
            status |= worst > 1.2
    if "fuzz" in args.sections:
        print(f"Fuzzed tool turns ({fuzz_turns:,} a game, seed {args.seed}):")
        print(f"{'game':<26}{'turns':>9}{'episodes':>10}{'search calls':>14}{'seconds':>9}{'us/turn':>9}{'failures':>10}")
        failed = 0
        for i, env_id in enumerate(GAMES):
            log(f"fuzz: {env_id}")
            r = bench_fuzz(env_id, fuzz_turns, args.seed + i)
            failed += len(r["failures"])
            print(f"{env_id:<26}{r['turns']:>9,}{r['episodes']:>10,}{r['searches']:>14,}{r['seconds']:>9.1f}"
                  f"{1e6 * r['seconds'] / r['turns']:>9.0f}{len(r['failures']):>10}")
            for action, error, trace in r["failures"][:3]:
                print(f"  FAILED on {action}\n  {error}\n{trace}")
        print(("OK: no fuzzed turn raised or broke an invariant" if not failed else f"FAIL: {failed} fuzzed turns failed") + "\n")
        status |= failed > 0
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
