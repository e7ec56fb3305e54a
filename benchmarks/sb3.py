"""Classic RL beside LLM baselines: Stable-Baselines3 policies on synthwiki.

1. Trains SB3 PPO and DQN template policies (``searchgym train --algorithm sb3-ppo|sb3-dqn``
   through :func:`searchgym.sb3.train_sb3`) on synthwiki's train split.
2. LM-free table on the held-out dev split, every policy through the same wrapper and the
   perfect ``gold-span`` reader: uniformly random templates, the naive-RAG template policy
   (search the question, answer from its top-k) and the trained policies. "answered right"
   is then whether the passages answered from hold a gold answer.
3. ``searchgym bench`` on the held-out dev and test splits with SmolLM2 as the reader: the
   random agent, the naive-RAG baseline (SmolLM2 reads the top-k for the question) and the
   PPO policy (SmolLM2 reads the passages it chose, with the same prompt); then the PPO
   policy against naive RAG question by question (GenAcc wins and losses over both splits,
   with a one-sided sign test).

    python benchmarks/sb3.py                          # ~12 minutes on 2 CPU cores
    python benchmarks/sb3.py --timesteps 20000 --skip-bench
    python benchmarks/sb3.py --quick                  # a smoke run of all three parts

--quick plays every part small: 4,096 timesteps of each algorithm (2 evaluations), the
first 10 questions of each held-out split, and in part 3 the tiny random test model as the
reader (16 tokens a turn) instead of SmolLM2, on one torch thread, into results/sb3-quick
(its run folders started afresh); sizes given on the command line win. Nothing is judged at that size: 4,096 timesteps do not train
PPO past naive RAG (the full form's comparison), and a random reader answers nothing, so
part 3 checks that the bench plays the trained policy, not GenAcc (it exits 1 if an
episode there did not finish).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np


class RandomTemplates:
    """Uniformly random templates (seeded)."""

    def __init__(self, n: int, seed: int = 0):
        self.n = n
        self.rng = np.random.default_rng(seed)

    def predict(self, obs, deterministic=True):
        return self.rng.integers(self.n), None


class NaiveTemplates:
    """Search the question, then answer from its passages: naive RAG as templates."""

    def __init__(self, question_searched_feature: int, final: int):
        self.feature = question_searched_feature
        self.final = final

    def predict(self, obs, deterministic=True):
        return (0 if obs[self.feature] == 0 else self.final), None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default="SearchR1-v0", help="env of every part (default SearchR1-v0)")
    parser.add_argument("--timesteps", type=int, default=None, help="SB3 timesteps per algorithm (default 60000; --quick: 4096)")
    parser.add_argument("--algorithms", nargs="+", default=["sb3-ppo", "sb3-dqn"], help="algorithms to train")
    parser.add_argument("--limit", type=int, default=None, help="questions of each held-out split in the tables (default 100: all; --quick: 10)")
    parser.add_argument("--seed", type=int, default=0, help="training seed")
    parser.add_argument("--passage-cost", type=float, default=0.05, help="reward cost per passage answered from, in training and the LM-free table (default 0.05)")
    parser.add_argument("--bench-splits", nargs="+", default=["dev", "test"], help="held-out splits of part 3 (default dev test)")
    parser.add_argument("--skip-bench", action="store_true", help="skip part 3 (the bench with an LM reader)")
    parser.add_argument("--bench-options", default='{"dtype": "bfloat16"}', help="backend options of part 3's reader (JSON)")
    parser.add_argument("--model", default=None,
                        help="reader of part 3, a load_lm name or folder (default smollm2; --quick: the tiny random test model)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="most tokens per reader turn in part 3 (default 256; --quick: 16)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/sb3; --quick: results/sb3-quick)")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads of the process (default torch's own, one per core; --quick: 1: the policies' small "
                        "MLPs gain nothing from more, and on a shared CPU the waiting threads spin)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run of every part: 4096 timesteps each, 10 questions per split, the tiny random test model reading "
                        "in part 3, into results/sb3-quick (sizes given on the command line win)")
    opts = parser.parse_args()
    q = opts.quick
    opts.timesteps = opts.timesteps if opts.timesteps is not None else (4096 if q else 60_000)
    opts.limit = opts.limit if opts.limit is not None else (10 if q else 100)
    opts.max_new_tokens = opts.max_new_tokens if opts.max_new_tokens is not None else (16 if q else 256)
    fresh_runs = q and opts.out is None  # the quick form's own folder: its runs are started afresh
    opts.out = opts.out if opts.out is not None else Path("results/sb3-quick" if q else "results/sb3")
    if q and not fresh_runs:
        held = [a for a in opts.algorithms if (opts.out / a / "policy.json").is_file()]
        if held:
            parser.error(f"--quick with --out {opts.out}: it holds {' and '.join(held)} runs, which training would continue; "
                         "give an empty folder, or leave --out out (results/sb3-quick, started afresh each time)")
    opts.threads = opts.threads if opts.threads is not None else (1 if q else None)
    for name in ("timesteps", "limit", "max_new_tokens") + (("threads",) if opts.threads is not None else ()):
        if getattr(opts, name) < 1:
            parser.error(f"--{name.replace('_', '-')} expects a positive integer, got {getattr(opts, name)}")
    try:
        bench_options = json.loads(opts.bench_options)
    except json.JSONDecodeError as e:
        parser.error(f"--bench-options expects a JSON object like '{{\"dtype\": \"bfloat16\"}}', got {opts.bench_options!r} ({e})")
    if not isinstance(bench_options, dict):
        parser.error(f"--bench-options expects a JSON object like '{{\"dtype\": \"bfloat16\"}}', got {opts.bench_options!r}")
    if opts.model is None and q:
        from searchgym.lm.testing import tiny_model_folder

        opts.model = str(tiny_model_folder())
    reader = "SmolLM2" if opts.model is None else ("tiny random model" if q and "tiny-random" in opts.model else opts.model)
    opts.model = opts.model or "smollm2"
    evaluations = 2 if q else 6  # each also redraws the run's curves.png
    if q:
        print(f"--quick: {opts.timesteps} timesteps per algorithm ({evaluations} evaluations), {opts.limit} questions per held-out split, "
              f"{reader} reading in part 3 ({opts.max_new_tokens} tokens a turn), {opts.threads} torch thread(s), into {opts.out}; "
              "nothing is judged at this size (too few timesteps to train past naive RAG, and a random reader answers nothing): "
              "it checks that every part runs")

    from searchgym.sb3 import GLOBAL_FEATURES, SB3Args, evaluate_template_policy, make_template_env, train_sb3

    if opts.threads is not None:
        import torch

        torch.set_num_threads(opts.threads)

    opts.out.mkdir(parents=True, exist_ok=True)
    report: dict = {"timesteps": opts.timesteps, "env_id": opts.env_id}

    print(f"== 1. training on {opts.env_id} (train split), {opts.timesteps} timesteps each")
    runs = {}
    for algorithm in opts.algorithms:
        run = opts.out / algorithm
        if fresh_runs and run.exists():
            # train_sb3 continues a run it finds; a smoke run starts afresh each time.
            shutil.rmtree(run)
        t0 = time.perf_counter()
        rows = train_sb3(SB3Args(algorithm=algorithm, env_id=opts.env_id, total_timesteps=opts.timesteps, eval_every=max(opts.timesteps // evaluations, 1),
                                 eval_limit=opts.limit, out=str(run), seed=opts.seed, passage_cost=opts.passage_cost, progress=False))
        seconds = time.perf_counter() - t0
        runs[algorithm] = run
        print(f"  {algorithm}: {seconds:.0f} s; eval reward by timestep: " + ", ".join(f"{r['step']}: {r['eval_reward']:.3f}" for r in rows))
        report[f"{algorithm}_train_seconds"] = seconds
        report[f"{algorithm}_curve"] = [{k: r[k] for k in ("step", "eval_reward", "eval_success")} for r in rows]

    print(f"\n== 2. LM-free, dev split (first {opts.limit}), gold-span reader")
    from searchgym.sb3 import load_policy

    env = make_template_env(opts.env_id, {}, split="dev", limit=opts.limit, generator="gold-span", passage_cost=opts.passage_cost)
    policies = {
        "random templates": RandomTemplates(env.action_space.n, seed=opts.seed),
        "naive RAG (search the question, answer)": NaiveTemplates(GLOBAL_FEATURES.index("question_searched"), env.action_space.n - 1),
        **{algorithm: load_policy(run)[0] for algorithm, run in runs.items()},
    }
    table = ["| policy | answered right | reward | searches | passages answered from | invalid templates |", "|---|---:|---:|---:|---:|---:|"]
    lm_free = {}
    for name, policy in policies.items():
        stats = evaluate_template_policy(policy, env)
        lm_free[name] = stats
        table.append(f"| {name} | {stats['success']:.2f} | {stats['reward']:.3f} | {stats['searches']:.2f} | {stats['passages']:.2f} | {stats['invalid']:.2f} |")
    print("\n".join(table))
    report["lm_free"] = lm_free
    (opts.out / "lm_free.md").write_text("\n".join(table) + "\n")

    if not opts.skip_bench and "sb3-ppo" in runs:
        from searchgym.bench import BenchConfig, run_bench

        labels = ["random agent", f"naive RAG ({reader} reads top-3)", f"SB3 PPO policy ({reader} reads its passages)"]
        paired = []
        report["bench"] = {}
        for split in opts.bench_splits:
            print(f"\n== 3. searchgym bench, {split} split (first {opts.limit}), {reader} reads the passages")
            config = BenchConfig(
                runs=[(opts.env_id, "random"), (opts.env_id, "naive-rag"), (opts.env_id, "sb3")], split=split, limit=opts.limit,
                model=opts.model, max_new_tokens=opts.max_new_tokens, backend_options=bench_options,
                agent_options={"sb3": {"policy": str(runs["sb3-ppo"])}}, labels=labels,
            )
            results = run_bench(config, opts.out / f"bench-{split}", resume=False)
            print(results.markdown())
            report["bench"][split] = results.rows
            failed = {r["label"]: r["failures"] for r in results.rows if r.get("failures", "-") != "-"}
            if failed and opts.quick:
                print(f"--quick: FAIL: episodes that did not finish on the {split} split: {failed}")
                raise SystemExit(1)
            (opts.out / f"bench-{split}.md").write_text(results.markdown() + "\n")
            naive = {r["example_id"]: r["gen_acc"] for r in results.episodes[labels[1]]}
            paired += [(r["gen_acc"], naive[r["example_id"]]) for r in results.episodes[labels[2]]]
        wins, losses = sum(a > b for a, b in paired), sum(a < b for a, b in paired)
        p = sign_test(wins, losses)
        print(f"\nSB3 PPO vs naive RAG, {len(paired)} held-out questions ({' + '.join(opts.bench_splits)}): GenAcc "
              f"{sum(a for a, _ in paired) / len(paired):.3f} vs {sum(b for _, b in paired) / len(paired):.3f}; "
              f"PPO right where naive RAG is wrong on {wins}, the reverse on {losses} (one-sided sign test p = {p:.2g})")
        report["paired"] = {"questions": len(paired), "wins": wins, "losses": losses, "sign_test_p": p}
    (opts.out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"\nwrote {opts.out}/report.json, lm_free.md, bench-<split>.md, and the run folders")


def sign_test(wins: int, losses: int) -> float:
    """P(at least ``wins`` successes in ``wins + losses`` fair coin flips): the one-sided sign test."""
    from math import comb

    n = wins + losses
    return sum(comb(n, i) for i in range(wins, n + 1)) / 2**n if n else 1.0


if __name__ == "__main__":
    main()
