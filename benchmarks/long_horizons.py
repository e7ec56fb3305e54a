"""What a context policy saves on long browse episodes: tokens, peak context, wall time.

The deep-research game (deepwiki, 1,000 documents) played for 32 and for 128 calls by the
LM-free random browser (searches, opens and finds in what it was shown, then an answer once the
call budget is spent), under each context policy: ``keep`` (the conversation only grows),
``archive`` (tool results older than 2 turns become stubs) and ``summarize`` (past 4,096 words
the conversation restarts from the prompt, the question and a summary; the summary here is
written by a scripted extractive summarizer, so the figure is the policy's, not a model's).

For each: the context the agent reads at each turn, summed over the episode (what a model
without a prefix cache processes), its peak, the rewrites, and the env's wall time a turn.
The context is counted in words (the env's default ``token_counter``).
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym

import searchgym  # noqa: F401 -- registers the ids
from searchgym.agents import Task, make_agent, run_episodes
from searchgym.envs.access import search_env


def first_words(question: str, work: str) -> str:
    """A scripted summary: the first 300 words of the work so far (a stand-in for a model)."""
    return " ".join(work.split()[:300])


POLICIES = {
    "keep": {},
    "archive": {"context": "archive", "context_options": {"keep_last": 2}},
    "summarize": {"context": "summarize", "context_options": {"max_tokens": 4096, "by": "model", "model": first_words}},
}


class Meter:
    """Wraps an env: the context size after every step, and the env's time."""

    def __init__(self, env):
        self.env, self.sizes, self.seconds, self.rewrites = env, [], 0.0, 0

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self, **kwargs):
        t = time.perf_counter()
        obs, info = self.env.reset(**kwargs)
        self.seconds += time.perf_counter() - t
        self.sizes.append([info["context_tokens"]])
        return obs, info

    def step(self, action):
        t = time.perf_counter()
        out = self.env.step(action)
        self.seconds += time.perf_counter() - t
        info = out[-1]
        self.rewrites += "context_rewrite" in info
        if not (out[2] or out[3]):
            self.sizes[-1].append(info["context_tokens"])
        return out


def measure(calls: int, policy: str, episodes: int) -> dict[str, float]:
    env = gym.make("searchgym/DeepResearch-v0", max_calls=calls, max_turns=calls + 1, max_context_tokens=10**9,
                   **POLICIES[policy])
    meter = Meter(env)
    agent = make_agent("random", env, answer_probability=0.0)
    examples = search_env(env).examples[:episodes]
    t = time.perf_counter()
    results = run_episodes([meter], agent, [Task(ex.id, 0) for ex in examples], progress=False)
    wall = time.perf_counter() - t
    turns = sum(r.num_turns for r in results)
    return {
        "tokens_read": statistics.mean(sum(s) for s in meter.sizes),
        "peak": statistics.mean(max(s) for s in meter.sizes),
        "rewrites": meter.rewrites / len(results),
        "turns": turns / len(results),
        "env_ms_turn": 1000 * meter.seconds / turns,
        "wall_s_episode": wall / len(results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 episodes a cell, 32 calls only")
    parser.add_argument("--episodes", type=int, default=None, help="episodes a cell (default 5; --quick 2)")
    args = parser.parse_args()
    episodes = args.episodes or (2 if args.quick else 5)
    budgets = (32,) if args.quick else (32, 128)
    measure(8, "keep", 1)  # the world and its index are built once, outside the cells
    print(f"deepwiki (1,000 documents), the random browser, {episodes} episodes a cell; context in words")
    print("| calls | policy | turns | context read (sum over turns) | peak context | rewrites | env ms a turn | wall s an episode |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for calls in budgets:
        for policy in POLICIES:
            m = measure(calls, policy, episodes)
            print(f"| {calls} | {policy} | {m['turns']:.1f} | {m['tokens_read']:,.0f} | {m['peak']:,.0f} | {m['rewrites']:.1f} | "
                  f"{m['env_ms_turn']:.2f} | {m['wall_s_episode']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
