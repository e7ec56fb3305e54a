"""The demo's RL row: GRPO on top of `make demo`'s SFT row, judged on the same real questions.

`make demo`'s trained row is SmolLM2 after a short SFT on the synthwiki oracle's play
(``searchgym.demo.DemoSFT``: 16 single-hop questions, 4 steps), judged on the first 32
answerable FanOutQA questions of wiki-vital. This script takes that same checkpoint (from
searchgym's SFT cache, trained first if the cache lacks it), trains it further with GRPO on
synthwiki questions the SFT never saw (the same world, the next single-hop train questions),
and plays both checkpoints on the demo's 32 questions with the demo's settings, one row
each: the SFT row and the RL row, side by side.

A GRPO step of SmolLM2 on a 2-core CPU takes about a minute or more (vLLM rollouts, then the
update through the whole model), so this does not fit in `make demo`'s time: `make learn`
runs it, and docs/demo.md shows its result with this command.

- **GRPO** (``searchgym.training.Trainer``): the settings of ``GRPO`` (those of
  benchmarks/learning.py's SmolLM2 run: lr 5e-6, a k3 KL of 0.01 against the SFT model,
  rollouts at temperature 0.7), Search-R1's format reward with a retrieval score (0.2 for
  well-formed turns, +0.3 when a retrieved passage holds the answer, 1 for an exact answer),
  one passage a search as in the SFT; rollouts on vLLM where it is installed.
- **The rows**: ``searchgym bench`` of each checkpoint as the Search-R1 agent on wiki-vital
  with FanOutQA's answerable questions (the demo's env, limit, 64 new tokens a turn, greedy,
  the demo's backend), so the SFT row here is the demo's trained row played again.

Writes OUT/summary.md (the table docs/demo.md quotes), OUT/demo-rl.png (the sampled train
reward a step; each row's EM, F1, cover-EM and searches) and OUT/results.json; the GRPO run
is OUT/grpo/, the two benchmarks OUT/bench-sft/ and OUT/bench-rl/ (``searchgym view`` reads them).

    python benchmarks/demo_rl.py             # 12 GRPO steps, 32 questions: 55 min measured on 2 CPU cores (benchmarks/RESULTS.md, "The RL row")
    python benchmarks/demo_rl.py --quick     # a smoke run: 1 step of 2 x 2 episodes, 2 questions, transformers: 4.6 min measured
    python benchmarks/demo_rl.py --replot --out DIR   # redraw DIR's chart and summary from its files
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Search-R1's format reward with its retrieval score (REWARD), the single-hop questions of a world, metrics.csv rows.
from learning import REWARD, one_hop, read_rows  # noqa: E402

#: GRPO on top of the demo's SFT (searchgym.training.Args fields; the samples and questions a step are the form's).
GRPO = {"algorithm": "grpo", "micro_batch_size": 2, "lr": 5e-6, "kl_coef": 0.01,
        "temperature": 0.7, "max_new_tokens": 48, "num_envs": 16, "eval_every": 0}

#: vLLM's engine options for SmolLM2 on a CPU (a 4,096-token context is more than an episode needs).
ENGINE_OPTIONS = {"dtype": "float32", "max_model_len": 4096}

#: (GRPO steps, questions per step, samples a question, demo questions, backend or None for the demo's) of each form.
FORMS = {"full": (12, 4, 4, 32, None), "quick": (1, 2, 2, 2, "transformers")}

#: Single-hop synthwiki train questions GRPO may draw from (after the SFT's own).
TRAIN_QUESTIONS = 128

SFT_LABEL = "Search-R1 agent after SFT"
RL_LABEL = "Search-R1 agent after SFT + GRPO"
#: The columns of the table and the chart: (row key, header).
COLUMNS = (("em", "EM"), ("f1", "F1"), ("cover_em", "cover-EM"), ("reward", "reward"), ("searches", "searches"), ("answered", "answered"))


#: The stages main runs, each in a process of its own: GRPO, then the two rows.
STAGES = ("grpo", "bench-sft", "bench-rl")

#: The one line of a run stopped by Ctrl-C (exit status 130).
STOPPED = ("demo_rl.py: stopped; run the same command to go on (each row resumes from its episodes.jsonl; "
           "GRPO saves its checkpoint at its last step, so a stopped GRPO starts again)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 GRPO step of 2 x 2 episodes, 2 questions a row, transformers")
    parser.add_argument("--steps", type=int, default=None, help=f"GRPO steps (default {FORMS['full'][0]}; --quick {FORMS['quick'][0]})")
    parser.add_argument("--limit", type=int, default=None, help=f"demo questions a row (default {FORMS['full'][3]}, the demo's; at most 79)")
    parser.add_argument("--backend", choices=("transformers", "vllm"), default=None,
                        help="engine of the GRPO rollouts and of both rows (default: the demo's, vLLM where installed)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default results/demo-rl, --quick: results/demo-rl-quick)")
    parser.add_argument("--replot", action="store_true", help="redraw OUT's chart and summary from its files, and exit")
    # One stage in a process of its own (what main runs): a vLLM engine is freed with the process that held it.
    parser.add_argument("--stage", choices=STAGES, default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    for name in ("steps", "limit"):
        value = getattr(opts, name)
        if value is not None and value < 1:
            parser.error(f"--{name} expects a positive integer, got {value}")
    if opts.limit is not None and opts.limit > 79:
        parser.error(f"--limit expects at most 79 (the answerable FanOutQA questions of wiki-vital), got {opts.limit}")
    if opts.out is None:
        opts.out = Path("results/demo-rl-quick" if opts.quick else "results/demo-rl")
    return opts


def settings(opts: argparse.Namespace) -> dict:
    """The run's steps, questions, samples, demo questions and backend, from the form and the options."""
    steps, questions, n, limit, backend = FORMS["quick" if opts.quick else "full"]
    if backend is None:
        from searchgym.demo import default_backend

        backend = default_backend()
    return {"steps": opts.steps or steps, "questions_per_step": questions, "n": n, "limit": opts.limit or limit,
            "backend": opts.backend or backend}


def train_questions(sft: object, out: Path) -> Path:
    """The single-hop train questions of the SFT's synthwiki world that its SFT did not play, as a jsonl file."""
    from searchgym.corpora.datasets import write_qa

    single = one_hop("train", sft.questions + TRAIN_QUESTIONS, {"seed": sft.world_seed, "num_passages": sft.num_passages})
    fresh = single[sft.questions:]
    if not fresh:
        raise SystemExit(f"The SFT's world ({sft.num_passages} passages) has no single-hop train questions beyond the SFT's {sft.questions}.")
    out.mkdir(parents=True, exist_ok=True)
    return write_qa(fresh, out / "grpo-train.jsonl")


def sft_checkpoint() -> tuple[Path, object, float]:
    """The demo's SFT checkpoint (its cache run folder's final/), the DemoSFT settings and the seconds it took here."""
    from searchgym.demo import DemoSFT, sft_args
    from searchgym.training.sft_cache import cached_sft, sft_key

    sft = DemoSFT()
    args = sft_args(sft, progress=True)
    t0 = time.perf_counter()
    run = cached_sft(args, key=sft_key(args))
    return run / "final", sft, time.perf_counter() - t0


def grpo(model: Path, sft: object, run: dict, out: Path) -> tuple[Path, float, bool]:
    """GRPO from ``model`` on the SFT world's fresh questions; its final checkpoint, the seconds it
    took and whether ``out`` already held the finished run (then nothing was trained)."""
    from searchgym.training.args import Args
    from searchgym.training.trainer import Trainer

    dataset = train_questions(sft, out)
    env = {"corpus_options": {"seed": sft.world_seed, "num_passages": sft.num_passages}, "dataset": str(dataset),
           "top_k": sft.top_k, **REWARD}
    engine = {"engine": "vllm", "engine_options": ENGINE_OPTIONS} if run["backend"] == "vllm" else {}
    args = Args(model=str(model), env_options=env, **{**GRPO, "n": run["n"], "questions_per_step": run["questions_per_step"]},
                total_steps=run["steps"], save_every=run["steps"], out=str(out / "grpo"), tensorboard=False, **engine)
    t0 = time.perf_counter()
    reused = finished(args)
    if reused:
        print(f"GRPO: {args.out} already holds this run's {args.total_steps} steps; its final/ is used", flush=True)
    else:
        Trainer(args).train()
    return out / "grpo" / "final", time.perf_counter() - t0, reused


def finished(args: object) -> bool:
    """Whether ``args.out`` holds a finished run of exactly these settings (its args.json equal
    to ``args``'s record, its newest complete checkpoint at the last step): resuming it would
    only start an engine."""
    from searchgym.training.checkpoint import args_record, checkpoint_step, complete_checkpoints

    folder = Path(args.out)
    recorded = folder / "args.json"
    checkpoints = complete_checkpoints(folder)
    if not (folder / "final").is_dir() or not checkpoints or checkpoint_step(checkpoints[-1]) != args.total_steps or not recorded.is_file():
        return False
    return json.loads(recorded.read_text(encoding="utf-8")) == args_record(args)


def bench_row(model: Path, label: str, run: dict, out: Path) -> tuple[dict, float]:
    """``model`` as the Search-R1 agent on the demo's questions with the demo's settings: its summary row and seconds."""
    from searchgym.bench import BenchConfig, run_bench
    from searchgym.demo import DEFAULT_MAX_NEW_TOKENS, DEFAULT_NUM_ENVS, default_dtype

    config = BenchConfig(
        runs=[("SearchR1-v0", "lm")], labels=[label], limit=run["limit"], model=str(model), backend=run["backend"],
        backend_options={"dtype": default_dtype(run["backend"])},
        env_options={"*": {"corpus": "wiki-vital", "dataset": "wiki-vital-answerable"}},
        num_envs=DEFAULT_NUM_ENVS, max_new_tokens=DEFAULT_MAX_NEW_TOKENS,
    )
    t0 = time.perf_counter()
    results = run_bench(config, out, resume=True)
    return results.rows[0], time.perf_counter() - t0


def stage(opts: argparse.Namespace, argv: list[str], name: str) -> dict:
    """Run the stage ``name`` in a fresh Python process (this script with ``--stage``) and read
    what it wrote. A vLLM engine started in a process is shut down when that process exits;
    two stages in one process would hold two engines, and the second would not find the memory
    its KV cache asks for."""
    # Ctrl-C reaches the stage too: this process waits for it to stop (a handler, unlike an ignored
    # signal, is not inherited: the stage gets Python's own) and then says so in one line.
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    try:
        done = subprocess.run([sys.executable, __file__, *argv, "--stage", name])
    finally:
        signal.signal(signal.SIGINT, previous)
    if done.returncode == 130:
        raise KeyboardInterrupt
    if done.returncode != 0:
        raise SystemExit(f"demo_rl.py: the stage {name!r} failed (exit status {done.returncode}); its output is above. "
                         f"The same command goes on: a finished GRPO run is reused, each row resumes from its episodes.jsonl.")
    return json.loads((opts.out / f"stage-{name}.json").read_text(encoding="utf-8"))


def run_stage(opts: argparse.Namespace) -> None:
    """One stage (``--stage``), its result written to OUT/stage-NAME.json."""
    run = settings(opts)
    model, sft, _ = sft_checkpoint()
    if opts.stage == "grpo":
        checkpoint, seconds, reused = grpo(model, sft, run, opts.out)
        result = {"model": str(checkpoint), "seconds": seconds, "reused": reused}
    else:
        label, checkpoint = (SFT_LABEL, model) if opts.stage == "bench-sft" else (RL_LABEL, opts.out / "grpo" / "final")
        row, seconds = bench_row(checkpoint, label, run, opts.out / opts.stage)
        result = {"row": row, "seconds": seconds}
    (opts.out / f"stage-{opts.stage}.json").write_text(json.dumps(result, default=str), encoding="utf-8")


def answered(row: dict) -> float:
    """The share of a row's episodes that ended with an answer (the rest ran out of turns or failed)."""
    return row.get("outcomes", {}).get("answered", 0) / row["n"] if row.get("n") else float("nan")


def value(row: dict, key: str) -> float:
    """A column of a summary row as a number (NaN where the row has none)."""
    if key == "answered":
        return answered(row)
    got = row.get(key)
    return float("nan") if got is None else float(got)


def table(rows: dict[str, dict], header: str) -> str:
    """The table docs/demo.md quotes: one line a checkpoint, the demo's columns, and the change."""
    lines = [header, "", "| row | " + " | ".join(h for _, h in COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    for label, row in rows.items():
        lines.append(f"| {label} | " + " | ".join(f"{value(row, k):.3f}" for k, _ in COLUMNS) + " |")
    if SFT_LABEL in rows and RL_LABEL in rows:
        before, after = rows[SFT_LABEL], rows[RL_LABEL]
        lines.append("| change | " + " | ".join(f"{value(after, k) - value(before, k):+.3f}" for k, _ in COLUMNS) + " |")
    return "\n".join(lines)


def plot(out: Path, train: list[tuple[int, float]], rows: dict[str, dict], title: str) -> Path:
    """Left: GRPO's sampled train reward a step; right: each row's scores on the demo's questions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    if train:
        axes[0].plot([s for s, _ in train], [v for _, v in train], marker="o", ms=3)
    axes[0].set_title("GRPO on synthwiki questions the SFT never saw: sampled train reward", fontsize=8)
    axes[0].set_xlabel("GRPO step")
    axes[0].set_ylabel("reward (format + retrieval, max 1)")
    axes[0].set_ylim(0, 1)
    axes[0].grid(alpha=0.3)
    keys = [k for k, _ in COLUMNS if k not in ("reward", "searches")]
    width = 0.8 / max(1, len(rows))
    for i, (label, row) in enumerate(rows.items()):
        xs = [j + i * width for j in range(len(keys))]
        axes[1].bar(xs, [value(row, k) for k in keys], width=width, label=label)
    axes[1].set_xticks([j + width * (len(rows) - 1) / 2 for j in range(len(keys))], [h for k, h in COLUMNS if k in keys])
    axes[1].set_title("the demo's FanOutQA questions (wiki-vital), greedy", fontsize=8)
    axes[1].legend(fontsize=7)
    axes[1].grid(alpha=0.3, axis="y")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path = out / "demo-rl.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def finish(out: Path, results: dict) -> None:
    metrics = out / "grpo" / "metrics.csv"
    train = [(int(r["step"]), float(r["reward"])) for r in read_rows(metrics) if r.get("reward") not in ("", None)] if metrics.is_file() else []
    text = table(results["rows"], results["header"])
    if train:
        text += f"\n\nGRPO's sampled train reward: steps 1-3 {sum(v for _, v in train[:3]) / len(train[:3]):.3f}, last 3 {sum(v for _, v in train[-3:]) / len(train[-3:]):.3f} ({len(train)} steps)"
    (out / "summary.md").write_text(text + "\n", encoding="utf-8")
    chart = plot(out, train, results["rows"], "SmolLM2-135M: the demo's SFT row, then GRPO on top, on a 2-core CPU")
    print(text)
    print(f"wrote {chart}, {out / 'summary.md'}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse_args(argv)
    out = opts.out
    if opts.stage is not None:
        from searchgym.error import TrainingStopped

        try:
            run_stage(opts)
        except (KeyboardInterrupt, TrainingStopped):
            sys.exit(130)  # the main process says it, in one line
        return
    if opts.replot:
        recorded = out / "results.json"
        if not recorded.is_file():
            sys.exit(f"--replot reads {recorded}; it does not exist (run the benchmark with --out {out} first)")
        finish(out, json.loads(recorded.read_text()))
        return
    run = settings(opts)
    t_all = time.perf_counter()
    model, sft, sft_seconds = sft_checkpoint()
    print(f"SFT start (the demo's trained row): {model} ({sft_seconds:.0f} s)", flush=True)
    trained = stage(opts, argv, "grpo")
    grpo_seconds = trained["seconds"]
    print(f"GRPO: {run['steps']} steps of {run['questions_per_step']} questions x {run['n']} samples in {grpo_seconds:.0f} s", flush=True)
    rows, seconds = {}, {}
    for label, name in ((SFT_LABEL, "bench-sft"), (RL_LABEL, "bench-rl")):
        played = stage(opts, argv, name)
        rows[label], seconds[label] = played["row"], played["seconds"]
        print(f"{label}: played in {seconds[label]:.0f} s", flush=True)
    header = (f"The demo's SFT row and GRPO on top ({run['steps']} step{'s' if run['steps'] != 1 else ''} of {run['questions_per_step']} synthwiki questions x "
              f"{run['n']} samples, lr {GRPO['lr']:g}, KL {GRPO['kl_coef']:g}, T {GRPO['temperature']:g}), each played on the "
              f"first {run['limit']} answerable FanOutQA questions of wiki-vital ({run['backend']}, greedy); SFT {sft_seconds:.0f} s, "
              f"GRPO {grpo_seconds:.0f} s{' (reused: an earlier run of this command had finished it)' if trained['reused'] else ''}, rows {sum(seconds.values()):.0f} s, total {time.perf_counter() - t_all:.0f} s")
    results = {"rows": rows, "header": header, "settings": run, "seconds": {"sft": sft_seconds, "grpo": grpo_seconds, **seconds}}
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str), encoding="utf-8")
    finish(out, results)


if __name__ == "__main__":
    from searchgym.error import TrainingStopped

    try:
        main()
    except (KeyboardInterrupt, TrainingStopped):
        print(STOPPED, file=sys.stderr)
        sys.exit(130)
