"""Does GRPO make the agent better? Learning curves with seeds, intervals and a control.

One world, one SFT start, then GRPO from it with several seeds, each run judged on held-out
questions it never trains on, beside a no-update control (the same loop at ``lr 0``: the
same rollouts, losses and evaluations, the weights never change):

- **The world**: synthwiki (WORLD passages), its single-hop questions (train split for
  training, dev split held out), Search-R1 with 3 turns and one passage per search
  (``top_k`` 1), Search-R1's format reward with a retrieval score (0.2 for well-formed
  turns, +0.3 when a retrieved passage holds the answer, 1 for an exact answer).
- **The SFT start**: a small Llama from scratch (hidden 128, 4 layers, a BPE tokenizer
  trained on the corpus), next-token pretraining on the passages, then SFT on a teacher's
  trajectories (``--teacher``): by default ``subjectless``, the oracle leaving the question's
  subject out of its search in one of each question's two episodes (benchmarks/weak_teacher.py),
  so that the start names the subject in about half its queries and GRPO has a choice to learn;
  ``oracle``, every search right, leaves it nothing of that kind. Kept in searchgym's SFT cache
  (``searchgym.training.sft_cache``), so a second run reuses it.
- **GRPO**: ``searchgym.training.Trainer`` with the settings below, one run per seed, two
  runs at a time (``--jobs``), one torch thread each, trained on ``--design``'s reward (default
  StepSearch's step rewards with turn credit; ``grpo``: the judge's own format reward) and
  judged by the format reward above. ``--rewards`` runs every design of ``DESIGNS``.

Measured on 2026-12-03 (benchmarks/RESULTS.md, "Seeds, intervals and a control"): from the
subjectless teacher's start GRPO learns to name the subject in its queries and beats its SFT
start on the held-out questions in every seed (the quick form: +0.016 ± 0.012 over 3 seeds);
from the oracle's start it does not (docs/training.md says what limits it).

Writes OUT/learning-curve.png (each seed's dev curve, their mean and its 95% interval, the
SFT start and the control, and the same for the sampled train reward), OUT/summary.md (the
table RESULTS.md quotes) and OUT/results.json; each run's files are under OUT/runs/.

    python benchmarks/learning_curve.py --quick     # the quick form: 3 seeds + control, 20 steps, 120 held-out questions: 14.6 min measured on 2 CPU cores from an empty cache (10.4 of them training the SFT start once; ~4.5 min with it cached)
    python benchmarks/learning_curve.py             # the full form (`make learn`): 120 steps: 25.4 min measured on 2 CPU cores with the SFT start cached
    python benchmarks/learning_curve.py --quick --rewards   # all four reward designs, 3 seeds each, and the control: ~15 min with the SFT start cached, estimated from the quick form's 126-s runs
    python benchmarks/learning_curve.py --replot --out DIR   # redraw DIR's chart and summary from its runs' metrics.csv
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# REWARD: Search-R1's format reward with its retrieval score (Search-R1's v0.3 scripts use r = 0; the retrieval
# score gives a model that cannot yet answer a gradient toward searches that find the answer).
from learning import REWARD, one_hop, read_rows  # noqa: E402
from weak_teacher import SubjectlessOracle  # noqa: E402

#: The synthwiki world of every form.
WORLD = {"num_passages": 2000}
#: The env of every run: Search-R1, 3 turns, one passage per search.
ENV = {"max_turns": 3, "top_k": 1, "corpus_options": WORLD, **REWARD}

#: The SFT start (searchgym.training.sft.SFTArgs fields).
#: 12 SFT epochs (--sft-epochs). 6 (the oracle's 360 optimizer steps, as the subjectless teacher plays each
#: question twice) would save the first run ~3.5 minutes, but measured (docs/training.md) that start finds half as
#: many answers and GRPO did not move it.
SFT = {"model": "scratch", "scratch_size": "small", "pretrain_epochs": 4, "epochs": 12, "batch_size": 16,
       "micro_batch_size": 16, "lr": 3e-3, "warmup_steps": 20}

#: The SFT start's teacher (--teacher): SFTArgs fields over SFT. "oracle" reads each question's solution path;
#: "subjectless" is the oracle whose searches leave out the question's subject in one of each question's two
#: episodes (benchmarks/weak_teacher.py), a teacher weaker than the task allows.
TEACHERS = {
    "oracle": {},
    "subjectless": {"teacher": f"{SubjectlessOracle.__module__}:SubjectlessOracle.for_env", "episodes_per_question": 2},
}

#: GRPO (searchgym.training.Args fields) of every run.
GRPO = {"algorithm": "grpo", "n": 8, "questions_per_step": 4, "micro_batch_size": 16, "lr": 3e-4, "temperature": 1.0,
        "max_new_tokens": 48, "num_envs": 32, "threads": 1}

#: (steps, evaluate every, dev questions per evaluation) of each form.
FORMS = {"quick": (20, 10, None), "full": (120, 20, None)}

#: The reward designs: (name, label, recipe, reward options, credit). ``--design`` picks the one the GRPO runs
#: train on (default ``stepsearch``: of the four, measured from the subjectless start with 3 seeds each, the
#: one that gained the most and most steadily); ``--rewards`` runs every one. Recipe None: the judge's own reward.
DESIGNS = (
    ("grpo", "format + retrieval (Search-R1's reward, the judge's)", None, None, "episode"),
    ("outcome", "outcome only: EM", "search_r1_em", {}, "episode"),
    ("stepsearch", "StepSearch: step rewards, turn credit", "searchgym.methods.stepsearch:StepSearchReward", {}, "turn"),
    ("parallelsearch", "ParallelSearch's reward", "searchgym.methods.parallelsearch:ParallelSearchReward", {}, "episode"),
)

#: Two-sided 97.5% quantiles of Student's t by degrees of freedom (a 95% interval of a mean of n seeds uses n - 1).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"the quick form: {FORMS['quick'][0]} GRPO steps a seed, {FORMS['quick'][2]} held-out questions an evaluation")
    parser.add_argument("--design", choices=[name for name, *_ in DESIGNS], default="stepsearch",
                        help="the reward the GRPO runs and the control train on: " + "; ".join(f"{name}: {label}" for name, label, *_ in DESIGNS)
                        + " (default stepsearch); every run is judged by the format + retrieval reward")
    parser.add_argument("--rewards", action="store_true", help="reward designs told apart: every choice of --design, each with every seed, --design's first")
    parser.add_argument("--replot", action="store_true", help="redraw OUT's chart and summary from the metrics.csv files its runs left, and exit")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/learning-curve, --rewards: results/learning-rewards)")
    parser.add_argument("--seeds", default="0,1,2", help="GRPO seeds, comma-separated (default 0,1,2; an interval needs two or more)")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps of every run (default: the form's)")
    parser.add_argument("--eval-every", type=int, default=None, help="evaluate on the held-out questions every N steps (default: the form's)")
    parser.add_argument("--eval-limit", type=int, default=None,
                        help=f"held-out questions an evaluation (default: the form's, quick {FORMS['quick'][2]}, full all 120)")
    parser.add_argument("--eval-temperature", type=float, default=0.0,
                        help="temperature of the held-out evaluations: 0 (default) is greedy; 1.0 is the policy GRPO samples from")
    parser.add_argument("--lr", type=float, default=GRPO["lr"], help=f"GRPO learning rate (default {GRPO['lr']:g})")
    parser.add_argument("--jobs", type=int, default=2, help="runs at once, one torch thread each (default 2: one a core of a 2-core CPU)")
    parser.add_argument("--no-control", action="store_true", help="leave out the no-update control")
    parser.add_argument("--teacher", choices=sorted(TEACHERS), default="subjectless",
                        help="the SFT start's teacher: subjectless (default: the oracle leaving the subject out of half its "
                        "searches, benchmarks/weak_teacher.py) or oracle (every search right: GRPO has nothing of that kind to learn)")
    parser.add_argument("--sft-epochs", type=int, default=SFT["epochs"],
                        help=f"SFT epochs of the start (default {SFT['epochs']})")
    parser.add_argument("--sft-run", type=Path, default=None, help="take the SFT start from this run folder (its final/) instead of the cache")
    opts = parser.parse_args(argv)
    try:
        opts.seeds = [int(s) for s in opts.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds expects integers separated by commas, e.g. 0,1,2; got {opts.seeds!r}")
    if not opts.seeds or len(set(opts.seeds)) != len(opts.seeds):
        parser.error(f"--seeds expects distinct integers, got {opts.seeds}")
    if opts.eval_limit is not None and opts.eval_limit < 1:
        parser.error(f"--eval-limit expects a positive integer, got {opts.eval_limit}")
    if opts.sft_epochs < 1:
        parser.error(f"--sft-epochs expects a positive integer, got {opts.sft_epochs}")
    if opts.jobs < 1:
        parser.error(f"--jobs expects a positive integer, got {opts.jobs}")
    if opts.sft_run is not None and not (opts.sft_run / "final").is_dir():
        parser.error(f"--sft-run expects an SFT run folder with final/ (what `searchgym sft --out DIR` writes), got {opts.sft_run}")
    if opts.out is None:
        opts.out = Path("results/learning-rewards" if opts.rewards else "results/learning-curve")
    return opts


def write_data(out: Path) -> tuple[Path, Path, int, int]:
    """The single-hop train questions and the held-out ones (dev and test: never trained on) as jsonl files."""
    from searchgym.corpora.datasets import write_qa

    train = one_hop("train", None, WORLD)
    held_out = one_hop("dev", None, WORLD) + one_hop("test", None, WORLD)
    out.mkdir(parents=True, exist_ok=True)
    return write_qa(train, out / "train.jsonl"), write_qa(held_out, out / "held-out.jsonl"), len(train), len(held_out)


def sft_start(train_file: Path, teacher: str = "subjectless", epochs: int = SFT["epochs"]) -> tuple[Path, float, bool]:
    """The SFT start's run folder (trained once, then taken from searchgym's SFT cache), the
    seconds it took here, and whether the cache already held it."""
    from searchgym.training.sft import SFTArgs
    from searchgym.training.sft_cache import cache_root, cached_sft, is_complete, sft_key

    args = SFTArgs(env_options={**ENV, "dataset": str(train_file)}, eval_limit=0, progress=False, **{**SFT, **TEACHERS[teacher], "epochs": epochs})
    key = sft_key(args)  # hashes every question and passage: computed once, handed to cached_sft
    cached = is_complete(cache_root() / key)
    t0 = time.perf_counter()
    run = cached_sft(args, key=key)
    return run, time.perf_counter() - t0, cached


def run_one(spec: dict) -> dict:
    """One GRPO run (a worker process): ``spec`` holds the Args fields; returns its name, metrics and seconds."""
    from searchgym.training.args import Args
    from searchgym.training.trainer import Trainer

    t0 = time.perf_counter()
    Trainer(Args(**spec["args"])).train()
    return {"name": spec["name"], "seconds": time.perf_counter() - t0}


def run_specs(opts: argparse.Namespace, model: Path, train_file: Path, held_out: Path) -> list[dict]:
    """Every run of this invocation: GRPO a seed (a reward design and a seed with --rewards), and the control."""
    steps, every, limit = FORMS["quick" if opts.quick else "full"]
    steps = opts.steps or steps
    every = opts.eval_every or every
    limit = opts.eval_limit or limit
    env = {**ENV, "dataset": str(train_file)}
    # Every run is judged by the same reward on the same held-out questions, whatever it trains on.
    evaluation = {"dataset": str(held_out), **REWARD}
    base = {**GRPO, "model": str(model), "lr": opts.lr, "total_steps": steps, "eval_every": every, "eval_limit": limit,
            "eval_temperature": opts.eval_temperature, "eval_env_options": evaluation, "save_every": steps,
            "tensorboard": False, "progress": False}
    own = {name: ({**env} if recipe is None else {**env, "reward": recipe, "reward_options": options}, credit)
           for name, _, recipe, options, credit in DESIGNS}
    designs = [opts.design] + ([name for name, *_ in DESIGNS if name != opts.design] if opts.rewards else [])
    specs = []
    for name in designs:
        run_env, credit = own[name]
        for seed in opts.seeds:
            specs.append({"name": f"{name}-seed{seed}", "design": name, "seed": seed,
                          "args": {**base, "env_options": run_env, "credit": credit, "seed": seed, "out": str(opts.out / "runs" / f"{name}-seed{seed}")}})
    if not opts.no_control:
        # The control trains on --design's reward too, so its sampled train reward is on the GRPO runs' scale.
        seed = opts.seeds[0]
        run_env, credit = own[opts.design]
        specs.append({"name": "control", "design": "control", "seed": seed,
                      "args": {**base, "env_options": run_env, "credit": credit, "seed": seed, "lr": 0.0, "out": str(opts.out / "runs" / "control")}})
    return specs


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% interval (Student's t with n - 1 degrees of freedom; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, T975.get(n - 1, 1.96) * sd / math.sqrt(n)


def moving(values: list[float], window: int = 5) -> list[float]:
    """The mean of each value and the window - 1 before it (fewer at the start)."""
    return [sum(values[max(0, i - window + 1): i + 1]) / len(values[max(0, i - window + 1): i + 1]) for i in range(len(values))]


def curves(rows: list[dict]) -> dict:
    """One run's held-out evaluations ({step: reward, EM}) and its sampled train reward a step."""
    evals = {int(r["step"]): {"reward": float(r["eval_reward"]), "em": float(r["eval_em"])} for r in rows if r.get("eval_reward") not in ("", None)}
    train = [(int(r["step"]), float(r["reward"])) for r in rows if r.get("reward") not in ("", None)]
    return {"evals": evals, "train": train}


def found_by_step(run: Path) -> dict[int, tuple[int, int]]:
    """At each evaluation the run kept (``eval/step-N/episodes.jsonl``): how many held-out
    episodes had a search retrieve the answer (the reward's ``retrieval_correct``), of how many."""
    found = {}
    for episodes in sorted(run.glob("eval/step-*/episodes.jsonl")):
        rows = [json.loads(line) for line in episodes.read_text(encoding="utf-8").splitlines() if line.strip()]
        hits = sum(1 for r in rows if (r.get("reward_components") or {}).get("retrieval_correct", 0) > 0)
        found[int(episodes.parent.name.removeprefix("step-"))] = (hits, len(rows))
    return found


def collect(out: Path, specs: list[dict]) -> dict[str, dict]:
    """Each run's curves, read from its metrics.csv, and its evaluations' found answers."""
    runs = {}
    for spec in specs:
        path = out / "runs" / spec["name"] / "metrics.csv"
        if path.is_file():
            runs[spec["name"]] = {"design": spec["design"], "seed": spec["seed"], **curves(read_rows(path)),
                                  "found": found_by_step(path.parent)}
    return runs


def by_step(runs: list[dict], key: str = "reward") -> dict[int, list[float]]:
    """The held-out ``key`` of every run at each step all of them evaluated."""
    steps = sorted(set.intersection(*(set(r["evals"]) for r in runs))) if runs else []
    return {s: [r["evals"][s][key] for r in runs] for s in steps}


def train_by_step(runs: list[dict], window: int = 5) -> dict[int, list[float]]:
    """Each run's sampled train reward a step (a moving mean of ``window`` steps), at the steps every run played."""
    smoothed = [dict(zip([s for s, _ in r["train"]], moving([v for _, v in r["train"]], window))) for r in runs]
    steps = sorted(set.intersection(*(set(m) for m in smoothed))) if smoothed else []
    return {s: [m[s] for m in smoothed] for s in steps}


def groups(runs: dict[str, dict]) -> dict[str, list[dict]]:
    """The runs by design (``grpo``, a reward design's name, ``control``), in seed order."""
    out: dict[str, list[dict]] = {}
    for run in sorted(runs.values(), key=lambda r: r["seed"]):
        out.setdefault(run["design"], []).append(run)
    return out


LABELS = {"control": "no-update control (lr 0)", **{name: label for name, label, *_ in DESIGNS}}
COLORS = {"grpo": "tab:blue", "control": "tab:gray", "outcome": "tab:purple", "stepsearch": "tab:green", "parallelsearch": "tab:orange"}


def found_share(runs: list[dict]) -> dict[int, list[float]]:
    """The share of held-out episodes whose search found the answer, of every run at each step all of them kept."""
    steps = sorted(set.intersection(*(set(r["found"]) for r in runs))) if runs else []
    return {s: [r["found"][s][0] / max(1, r["found"][s][1]) for r in runs] for s in steps}


def plot(out: Path, runs: dict[str, dict], title: str, name: str) -> Path:
    """Two panels: the held-out reward at each evaluation and the sampled train reward (5-step
    mean), each seed thin, the mean thick with its 95% interval shaded; the SFT start dashed. A
    third where the runs kept their evaluations' episodes: the share of held-out searches that
    found the answer (what the retrieval part of the reward pays)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 3 if all(r.get("found") for r in runs.values()) else 2
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4))
    start = [r["evals"][0]["reward"] for r in runs.values() if 0 in r["evals"]]
    for design, members in groups(runs).items():
        color = COLORS.get(design, "tab:red")
        n = len(members)
        label = LABELS.get(design, design) + (f" ({n} seeds, mean and 95% interval)" if n > 1 else "")
        tables = [(axes[0], by_step(members)), (axes[1], train_by_step(members))]
        if panels == 3:
            tables.append((axes[2], found_share(members)))
        for ax, table in tables:
            if not table:
                continue
            steps = list(table)
            if n > 1:
                for values in zip(*table.values()):
                    ax.plot(steps, values, color=color, alpha=0.3, lw=0.8)
            stats = [interval(v) for v in table.values()]
            means = [m for m, _ in stats]
            ax.plot(steps, means, color=color, lw=2, marker=None if ax is axes[1] else "o", ms=4, label=label)
            if n > 1:
                ax.fill_between(steps, [m - h for m, h in stats], [m + h for m, h in stats], color=color, alpha=0.15)
    if start:
        axes[0].axhline(sum(start) / len(start), color="black", ls="--", lw=1, label="SFT start (step 0)")
    axes[0].set_title("held-out questions (never trained on), greedy", fontsize=9)
    axes[0].set_ylabel("reward (Search-R1 format + retrieval, max 1)")
    axes[0].set_ylim(0, 1)  # the whole reward, so a gain is drawn at its size
    axes[1].set_title("sampled train batches (5-step mean; each run's own reward)", fontsize=9)
    axes[1].set_ylabel("train reward")
    if panels == 3:
        axes[2].set_title("held-out: a search found the answer, greedy", fontsize=9)
        axes[2].set_ylabel("share of held-out episodes")
        axes[2].set_ylim(0, None)
    for ax in axes:
        ax.set_xlabel("GRPO step")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=2, frameon=False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.06 + 0.035 * ((len(labels) + 1) // 2), 1, 1))
    path = out / name
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def summary(runs: dict[str, dict], header: str) -> str:
    """The table RESULTS.md quotes: by design, the held-out reward and EM at the first and last
    evaluation (mean and 95% interval over seeds, each seed's), the gain, and the train reward."""
    lines = [header, "",
             "| run | seeds | held-out reward, step 0 | last step | held-out reward, last (mean ± 95%) | gain (mean ± 95%) | each seed's gain | held-out EM, first → last | held-out searches that found the answer, first → last (each seed) | train reward, first 10 → last 10 steps |",
             "|---|---:|---:|---:|---:|---:|---|---:|---|---:|"]
    for design, members in groups(runs).items():
        table = by_step(members)
        if not table:
            continue
        first, last = min(table), max(table)
        gains = [b - a for a, b in zip(table[first], table[last])]
        m0, _ = interval(table[first])
        m1, h1 = interval(table[last])
        g, hg = interval(gains)
        em = by_step(members, "em")
        trains = [[v for _, v in r["train"]] for r in members]
        early = sum(sum(t[:10]) / max(1, len(t[:10])) for t in trains) / len(trains)
        late = sum(sum(t[-10:]) / max(1, len(t[-10:])) for t in trains) / len(trains)
        lines.append(f"| {LABELS.get(design, design)} | {len(members)} | {m0:.3f} | {last} | {m1:.3f} ± {h1:.3f} | {g:+.3f} ± {hg:.3f} | "
                     f"{', '.join(f'{x:+.3f}' for x in gains)} | {interval(em[first])[0]:.3f} → {interval(em[last])[0]:.3f} | "
                     f"{found_text(members, first, last)} | {early:.3f} → {late:.3f} |")
    paired = paired_text(runs)
    return "\n".join(lines + ([] if not paired else ["", paired]))


def paired_text(runs: dict[str, dict], window: int = 10) -> str:
    """The sampled train reward of each run that shares the control's seed, minus the control's
    on the same questions (a seed fixes the question order), over the first ``window`` steps and
    the last: the train reward with the questions' own difficulty taken out. "" without a control."""
    control = next((r for r in runs.values() if r["design"] == "control"), None)
    if control is None:
        return ""
    theirs = dict(control["train"])
    parts = []
    for run in sorted(runs.values(), key=lambda r: r["design"]):
        if run["design"] == "control" or run["seed"] != control["seed"]:
            continue
        diffs = [v - theirs[s] for s, v in run["train"] if s in theirs]
        if diffs:
            head, tail = diffs[:window], diffs[-window:]
            parts.append(f"{LABELS.get(run['design'], run['design'])}, seed {run['seed']}: "
                         f"{sum(head) / len(head):+.3f} over the first {len(head)} steps, {sum(tail) / len(tail):+.3f} over the last {len(tail)}")
    return "" if not parts else "Sampled train reward minus the control's on the same questions (same seed, same order): " + "; ".join(parts) + "."


def found_text(members: list[dict], first: int, last: int) -> str:
    """"10 → 25, 25, 21 of 120": the found answers at the first evaluation (the same start for
    every seed, so its first seed's) and at the last, each seed's; "n/a" where a run kept no episodes."""
    if not all(first in r["found"] and last in r["found"] for r in members):
        return "n/a"
    start, total = members[0]["found"][first]
    return f"{start} → {', '.join(str(r['found'][last][0]) for r in members)} of {total}"


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(argv)
    form = "quick" if opts.quick else "full"
    if opts.replot:
        recorded = opts.out / "results.json"
        if not recorded.is_file():
            sys.exit(f"--replot reads {recorded} and the runs' metrics.csv beside it; it does not exist (run the benchmark with --out {opts.out} first)")
        results = json.loads(recorded.read_text())
        # Runs recorded before --design trained the GRPO runs on the judge's reward ("grpo").
        finish(opts, results["specs"], results["header"], results.get("teacher", "oracle"), results.get("design", "grpo"))
        return
    t_all = time.perf_counter()
    shutil.rmtree(opts.out / "runs", ignore_errors=True)
    train_file, held_out, n_train, n_held = write_data(opts.out)
    print(f"synthwiki ({WORLD['num_passages']} passages): {n_train} single-hop train questions, {n_held} held-out (dev + test)", flush=True)
    if opts.sft_run is not None:
        model, sft_seconds = opts.sft_run / "final", 0.0
        print(f"SFT start: {model}")
    else:
        run, sft_seconds, cached = sft_start(train_file, opts.teacher, opts.sft_epochs)
        model = run / "final"
        print(f"SFT start: {model} ({sft_seconds:.0f} s{'; from the cache' if cached else ''})", flush=True)
    specs = run_specs(opts, model, train_file, held_out)
    print(f"{len(specs)} GRPO runs, {opts.jobs} at a time: {', '.join(s['name'] for s in specs)}", flush=True)
    t0 = time.perf_counter()
    seconds = {}
    with ProcessPoolExecutor(max_workers=opts.jobs, mp_context=get_context("spawn")) as pool:
        for done in pool.map(run_one, specs):
            seconds[done["name"]] = done["seconds"]
            print(f"  {done['name']}: {done['seconds']:.0f} s", flush=True)
    grpo_seconds = time.perf_counter() - t0
    steps = specs[0]["args"]["total_steps"]
    header = (f"{'Reward designs' if opts.rewards else 'GRPO'} from one SFT start ({opts.teacher} teacher, {opts.sft_epochs} SFT epochs), {form} form: "
              f"{'' if opts.rewards else LABELS[opts.design] + ', '}{steps} steps of "
              f"{GRPO['questions_per_step']} questions x {GRPO['n']} samples, lr {opts.lr:g}; held-out reward at temperature "
              f"{opts.eval_temperature:g} on {min(n_held, specs[0]['args']['eval_limit'] or n_held)} questions; "
              f"SFT start {sft_seconds:.0f} s, GRPO runs {grpo_seconds:.0f} s ({opts.jobs} at a time), "
              f"total {time.perf_counter() - t_all:.0f} s")
    results = {"specs": specs, "header": header, "seconds": seconds, "teacher": opts.teacher, "design": opts.design}
    (opts.out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    finish(opts, specs, header, opts.teacher, opts.design)


def finish(opts: argparse.Namespace, specs: list[dict], header: str, teacher: str = "subjectless", design: str = "stepsearch") -> None:
    runs = collect(opts.out, specs)
    charts = [plot(opts.out, {k: r for k, r in runs.items() if r["design"] in (design, "control")},
                   f"GRPO ({LABELS[design]}) from an SFT start ({teacher} teacher): synthwiki single-hop Search-R1, scratch Llama (hidden 128, 4 layers), CPU",
                   "learning-curve.png")]
    if len({r["design"] for r in runs.values()} - {"control"}) > 1:
        charts.append(plot(opts.out, {k: r for k, r in runs.items() if r["design"] != "control"},
                           "reward designs from one SFT start, each judged by the same reward on the same held-out questions",
                           "learning-rewards.png"))
    text = summary(runs, header)
    (opts.out / "summary.md").write_text(text + "\n", encoding="utf-8")
    print(text)
    print(f"wrote {', '.join(str(c) for c in charts)}, {opts.out / 'summary.md'}")


if __name__ == "__main__":
    main()
