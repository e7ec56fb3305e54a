"""Rollout benchmark: the vectorized driver against one episode at a time, vLLM against
transformers, and RECON's summaries against raw documents.

    python benchmarks/rollout.py                 # SmolLM2 on wiki-vital (~20 min on 2 CPU cores)
    python benchmarks/rollout.py --quick         # fewer episodes, a smoke run
    python benchmarks/rollout.py --skip-vllm     # without the vLLM engine

Every comparison runs side by side in one process, so the ratios are what matter on a
noisy machine. Targets, checked at the end:

1. Generated tokens/s of the vectorized driver (``--episodes`` envs live at once, one
   batched ``generate`` per turn of all live episodes, as ``run_episodes`` plays) versus
   the same episodes one at a time, with the transformers backend: >= 4x at 16
   episodes, on each workload: greedy (as benchmarks run) and sampled at temperature 1
   (as RL rollouts do); ``--temperature`` picks others. The script reports how many
   episodes came out identical (all of them should: sampled turns draw from per-episode
   seeds, so every run plays the same episodes and compares the same work), and where
   each run's time went (prefill, decode steps, everything else: retrieval, env,
   Python). All use the backend's prefix cache (a turn encodes only the tokens new since
   the episode's last turn; ``--prefix-cache-mb 0`` turns it off), as vLLM does with its own.
   The LM alone on generation-bound work (long answers, one batched call versus one call
   per prompt) is reported beside it: it separates what batching buys in decoding from
   what the rollout spends in prefill.
2. vLLM versus transformers, both batched turn by turn through the same driver
   (reported, no target; the engine's start-up time is reported apart).
3. RECON: for the same questions and the same top-k BM25 documents, the tokens of the
   LLM summary (RECON's prompt, ``clarity`` aspect) versus the raw documents, and the F1
   of the same reader answering from each. The RECON paper reports -35% context.
4. A shared CPU (``--sections shared``): the vectorized greedy rollout alone, then beside
   one competing CPU-bound process (``python -c "while True: pass"``, started and killed
   here). Target: at most 2.5x the solo time, with the library's default thread count
   (``threads="auto"``, :mod:`searchgym.lm.threads`). The same pair of runs with the
   thread count fixed at ``torch.get_num_threads()`` (what OpenMP does by itself) is
   reported beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
try:
    import searchgym  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym

from searchgym.agents import Task, run_episodes
from searchgym.agents.lm_agents import policy_agent
from searchgym.lm.registry import load_lm


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def make_envs(args, n: int, lm) -> list:
    count = lambda text: len(lm.tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    return [
        gym.make(
            f"searchgym/{args.env}",
            corpus="wiki-vital",
            dataset="wiki-vital-answerable",
            max_turns=args.max_turns,
            token_counter=count,
        )
        for _ in range(n)
    ]


class ForwardTimer:
    """Times a transformers model's forward passes, split into prefill (more than one new
    column) and decode steps, while inside ``with``; leaves other backends alone."""

    def __init__(self, lm):
        self.model = getattr(lm, "model", None) if hasattr(lm, "stats") else None
        self.prefill = self.decode = 0.0

    def __enter__(self):
        if self.model is not None:
            forward = self.model.forward

            def timed(*a, **kw):
                start = time.perf_counter()
                try:
                    return forward(*a, **kw)
                finally:
                    seconds = time.perf_counter() - start
                    if kw["input_ids"].shape[1] > 1:
                        self.prefill += seconds
                    else:
                        self.decode += seconds

            self.model.forward = timed
        return self

    def __exit__(self, *exc):
        if self.model is not None:
            del self.model.forward


def rollout(args, lm, num_envs: int, tasks, temperature: float = 0.0, note: str = "") -> tuple[float, int, list]:
    envs = make_envs(args, num_envs, lm)
    agent = policy_agent(envs[0], lm, max_new_tokens=args.max_new_tokens, temperature=temperature, seed=args.seed)
    cache = getattr(lm, "prefix_cache", None)
    if cache is not None:
        cache.clear()  # each run starts cold: nothing reused from the previous one
        before = (cache.stats.lookups, cache.stats.hits, cache.stats.reused_tokens)
    work = dataclasses.replace(lm.stats) if hasattr(lm, "stats") else None
    label = f"{num_envs} live" + (", turns" if num_envs > 1 else "") + f", {workload(temperature)}" + (f", {note}" if note else "")
    with ForwardTimer(lm) as timer:
        start = time.perf_counter()
        results = run_episodes(envs, agent, tasks, progress=True, desc=label)
        seconds = time.perf_counter() - start
    if cache is not None:
        lookups, hits, reused = (now - then for now, then in zip((cache.stats.lookups, cache.stats.hits, cache.stats.reused_tokens), before))
        log(f"{label}: prefix cache served {hits}/{lookups} prompts, {reused} prompt tokens not re-encoded")
    if work is not None:
        d = {f.name: getattr(lm.stats, f.name) - getattr(work, f.name) for f in dataclasses.fields(work)}
        log(
            f"{label}: prefill {d['prefill_tokens']} tokens (+{d['prefill_padding']} padding) in {d['prefills']} passes, "
            f"{timer.prefill:.1f} s; decode {d['decode_steps']} steps of {d['decode_rows'] / max(1, d['decode_steps']):.1f} rows "
            f"on average, {timer.decode:.1f} s; other {seconds - timer.prefill - timer.decode:.1f} s"
        )
        args.results.setdefault("work", []).append(
            (label, d["prefill_tokens"], d["prefill_padding"], timer.prefill, d["decode_steps"], d["decode_rows"], timer.decode, seconds)
        )
    return seconds, sum(r.generated_tokens for r in results), results


def same(a, b) -> bool:
    return (a.prediction, a.num_turns, a.num_searches, a.generated_tokens) == (b.prediction, b.num_turns, b.num_searches, b.generated_tokens)


def workload(temperature: float) -> str:
    return "greedy" if temperature == 0 else f"T={temperature:g}"


def compare_driver(args, lm, tasks, rows: list, temperature: float) -> None:
    name = workload(temperature)
    log(f"driver ({name}): {len(tasks)} episodes one at a time, then {args.episodes} live at once, turn by turn")
    t1, g1, r1 = rollout(args, lm, 1, tasks, temperature=temperature)
    rows.append((f"{name}: one episode at a time (transformers)", f"{t1:.1f} s", f"{g1}", f"{g1 / t1:.1f}"))
    results = args.results.setdefault("driver", {})[temperature] = {}
    tn, gn, rn = rollout(args, lm, args.episodes, tasks, temperature)
    rate = gn / tn
    rows.append((f"{name}: vectorized, {args.episodes} live, turns (transformers)", f"{tn:.1f} s", f"{gn}", f"{rate:.1f}"))
    results["turns_speedup"] = rate / (g1 / t1)
    results["turns_identical"] = f"{sum(same(a, b) for a, b in zip(r1, rn))}/{len(tasks)}"
    results["turns_rate"] = rate


def compare_decode(args, lm, tasks, rows: list) -> None:
    """The LM alone on generation-bound work: 16 chat prompts that ask for long answers,
    one batched call versus one call per prompt (same prompts, greedy)."""
    envs = make_envs(args, 1, lm)
    examples = {ex.id: ex for ex in envs[0].unwrapped.examples}
    prompts = [lm.apply_chat([{"role": "user", "content": f"Explain in detail, step by step: {examples[t.example_id].question}"}]) for t in tasks]
    log(f"decode: {len(prompts)} prompts x {args.decode_tokens} tokens, one call per prompt, then one batched call")
    start = time.perf_counter()
    single = [lm.generate([p], max_new_tokens=args.decode_tokens, temperature=0)[0] for p in prompts]
    t1 = time.perf_counter() - start
    start = time.perf_counter()
    batched = lm.generate(prompts, max_new_tokens=args.decode_tokens, temperature=0)
    tn = time.perf_counter() - start
    g1, gn = sum(len(g.token_ids) for g in single), sum(len(g.token_ids) for g in batched)
    rows.append(("LM only, one prompt at a time (transformers)", f"{t1:.1f} s", f"{g1}", f"{g1 / t1:.1f}"))
    rows.append((f"LM only, {len(prompts)} prompts in one call (transformers)", f"{tn:.1f} s", f"{gn}", f"{gn / tn:.1f}"))
    args.results["decode_speedup"] = (gn / tn) / (g1 / t1)


def compare_vllm(args, tasks, rows: list) -> None:
    log("vLLM: starting the engine")
    start = time.perf_counter()
    lm = load_lm(args.model, backend="vllm", **({"dtype": args.dtype} if args.dtype else {}))
    args.results["vllm_start"] = time.perf_counter() - start
    temperature = args.temperature[0]
    tn, gn, _ = rollout(args, lm, args.episodes, tasks, temperature=temperature)
    rows.append((f"{workload(temperature)}: vectorized, {args.episodes} live, turns (vLLM)", f"{tn:.1f} s", f"{gn}", f"{gn / tn:.1f}"))
    args.results["vllm_vs_transformers"] = (gn / tn) / args.results["driver"][temperature]["turns_rate"]


def compare_recon(args, lm, rows: list) -> None:
    from searchgym.corpora.registry import load_corpus, load_dataset
    from searchgym.corpora.retrievers import make_retriever
    from searchgym.envs.lm_frozen import LMGenerator
    from searchgym.envs.model_calls import play_all, replay
    from searchgym.envs.summarizers import make_summarizer
    from searchgym.rewards.metrics import f1_score

    corpus = load_corpus("wiki-vital")
    questions = load_dataset("wiki-vital-answerable")[: args.recon_questions]
    retriever = make_retriever("bm25", corpus)
    summarizer = make_summarizer("llm", model=lm, aspect="clarity")
    reader = LMGenerator(lm)
    hits = retriever.search([q.question for q in questions], args.top_k)
    raw_docs = [[f"{h.passage.title}\n{h.passage.text}" for h in hs] for hs in hits]
    log(f"RECON: summarizing top-{args.top_k} documents of {len(questions)} questions")
    # Each list is one round: the summaries (answers) of every question become one batched generate call.
    summaries = play_all([replay(lambda q=q, h=h: summarizer.summarize(q.question, q.question, h), [summarizer]) for q, h in zip(questions, hits)])
    answers_raw = play_all([replay(lambda q=q, d=d: reader(q.question, d), [reader]) for q, d in zip(questions, raw_docs)])
    answers_sum = play_all([replay(lambda q=q, s=s: reader(q.question, [s]), [reader]) for q, s in zip(questions, summaries)])
    for value in (*summaries, *answers_raw, *answers_sum):
        if isinstance(value, BaseException):
            raise value
    tokens = lambda text: len(lm.tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    raw_tokens = sum(tokens(protocol_docs(d)) for d in raw_docs) / len(questions)
    sum_tokens = sum(tokens(s) for s in summaries) / len(questions)
    f1_raw = sum(f1_score(a, q.answers) for a, q in zip(answers_raw, questions)) / len(questions)
    f1_sum = sum(f1_score(a, q.answers) for a, q in zip(answers_sum, questions)) / len(questions)
    args.results.update(recon_raw_tokens=raw_tokens, recon_summary_tokens=sum_tokens, recon_f1_raw=f1_raw, recon_f1_summary=f1_sum)
    args.results["recon_example"] = summaries[0]


#: Most slowdown allowed beside one competing CPU-bound process.
SHARED_TARGET = 2.5


def compare_shared(args, lm, tasks, rows: list) -> None:
    """The greedy vectorized rollout alone and beside one busy process, with the default
    thread tuning and with the count fixed."""
    import subprocess

    if not hasattr(lm, "new_tuner"):
        log("shared CPU: the thread tuning applies to the transformers backend only; skipped")
        return
    import torch

    threads = torch.get_num_threads()
    results = args.results["shared"] = {"threads": threads}
    for mode in ("auto", "fixed"):
        lm.threads = "auto" if mode == "auto" else threads
        lm.tuner = lm.new_tuner()  # each pair of runs starts untuned
        for where in ("solo", "shared"):
            name = f"threads {'auto' if mode == 'auto' else f'fixed at {threads}'}, {where}"
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if where == "shared" else None
            try:
                seconds, generated, _ = rollout(args, lm, args.episodes, tasks, note=name)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
            rows.append((f"greedy: vectorized, {args.episodes} live, {name} (transformers)", f"{seconds:.1f} s", f"{generated}", f"{generated / seconds:.1f}"))
            results[f"{mode}_{where}"] = seconds
            if mode == "auto":
                tuner = lm.tuner
                results[f"auto_{where}_threads"] = tuner.choice if tuner is not None else threads
    lm.threads = "auto"
    lm.tuner = lm.new_tuner()


def protocol_docs(docs: list[str]) -> str:
    """The raw documents as Search-R1 renders them for the agent (what the summary replaces)."""
    return "\n".join(f"Doc {i}(Title: {d.split(chr(10), 1)[0]}) {d.split(chr(10), 1)[-1]}" for i, d in enumerate(docs, 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", help="policy model name (default: smollm2)")
    parser.add_argument("--dtype", default="float32", help="weights dtype for both backends (default: float32; on a CPU without native "
                        "bfloat16, bfloat16 prefill is ~6x slower and a 16-row decode step ~1.4x slower than float32)")
    parser.add_argument("--prefix-cache-mb", type=float, default=1024, help="transformers prefix cache budget in MiB, 0 turns it off (default: 1024; vLLM always caches prefixes)")
    parser.add_argument("--env", default="SearchR1-v0", help="registered env id without namespace (default: SearchR1-v0)")
    parser.add_argument("--episodes", type=int, default=16, help="episodes live at once (default: 16)")
    parser.add_argument("--played", type=int, default=None,
                        help="episodes played in each run (default: --episodes, one wave; more lets the driver refill live slots "
                        "as episodes end, as a benchmark over many questions does)")
    parser.add_argument("--max-turns", type=int, default=3, help="turns per episode (default: 3)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per turn (default: 64)")
    parser.add_argument("--recon-questions", type=int, default=32, help="questions in the RECON comparison (default: 32)")
    parser.add_argument("--top-k", type=int, default=3, help="documents per retrieval in the RECON comparison (default: 3)")
    parser.add_argument("--temperature", type=float, nargs="+", default=[0.0, 1.0],
                        help="sampling temperatures of the driver comparison, each a workload of its own (default: 0 1: greedy, "
                        "as benchmarks run, and sampled at 1.0, as RL rollouts do); vLLM is compared on the first")
    parser.add_argument("--seed", type=int, default=0, help="seed of the agent's sampling when --temperature > 0 (default: 0)")
    parser.add_argument("--decode-tokens", type=int, default=128, help="new tokens per prompt in the LM-only comparison (default: 128)")
    parser.add_argument("--sections", default="driver,decode,vllm,recon,shared", help="comma-separated sections to run (default: all five)")
    parser.add_argument("--skip-vllm", action="store_true", help="leave out the vLLM comparison")
    parser.add_argument("--quick", action="store_true", help="8 episodes, 8 RECON questions, 2 turns of 32 tokens")
    args = parser.parse_args()
    if args.quick:
        args.episodes, args.recon_questions, args.max_turns, args.max_new_tokens = 8, 8, 2, 32
    if any(t < 0 for t in args.temperature):
        parser.error("--temperature values must be >= 0 (0 is greedy)")
    if len(set(args.temperature)) < len(args.temperature):
        parser.error(f"--temperature got a value twice ({' '.join(f'{t:g}' for t in args.temperature)}); each is one workload, run once")
    args.results = {}
    lm = load_lm(args.model, dtype=args.dtype, prefix_cache_mb=args.prefix_cache_mb)
    examples = make_envs(args, 1, lm)[0].unwrapped.examples
    played = args.played if args.played is not None else args.episodes
    if not 1 <= played <= len(examples) or args.episodes < 1:
        parser.error(f"--episodes must be >= 1 and --played between 1 and {len(examples)} (the dataset's questions)")
    tasks = [Task(ex.id, 0) for ex in examples[:played]]
    rows: list[tuple[str, str, str, str]] = []
    sections = set(args.sections.split(","))
    unknown = sections - {"driver", "decode", "vllm", "recon", "shared"}
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; expected among driver, decode, vllm, recon, shared")
    if args.skip_vllm:
        sections.discard("vllm")
    if "vllm" in sections:
        sections.add("driver")  # vLLM is compared with the batched transformers run
    if "driver" in sections:
        for temperature in args.temperature:
            compare_driver(args, lm, tasks, rows, temperature)
    if "decode" in sections:
        compare_decode(args, lm, tasks, rows)
    if "vllm" in sections:
        compare_vllm(args, tasks, rows)
    if "recon" in sections:
        compare_recon(args, lm, rows)
    if "shared" in sections:
        compare_shared(args, lm, tasks, rows)

    r = args.results
    print(f"\nRollouts: {args.model} ({args.dtype}) on {args.env}, wiki-vital answerable, {len(tasks)} episodes ({args.episodes} live), "
          f"{args.max_turns} turns x {args.max_new_tokens} new tokens\n")
    print("| run | wall | generated tokens | tokens/s |\n|---|---:|---:|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if r.get("work"):
        print("\n| run (transformers) | prefill tokens (+padding) | prefill s | decode steps | rows/step | decode s | other s |\n|---|---:|---:|---:|---:|---:|---:|")
        for label, tokens, padding, prefill, steps, rows_, decode, total in r["work"]:
            print(f"| {label} | {tokens} (+{padding}) | {prefill:.1f} | {steps} | {rows_ / max(1, steps):.1f} | {decode:.1f} | {total - prefill - decode:.1f} |")
    verdict = "PASS"
    if r.get("driver"):
        print()
    for temperature, d in r.get("driver", {}).items():
        name = workload(temperature)
        if args.episodes == 16:
            passed = d["turns_speedup"] >= 4
            verdict = verdict if passed else "FAIL"
            target = f"target >= 4x: {'PASS' if passed else 'FAIL'}"
        else:
            target = "the target is set at 16 live episodes"
        print(f"{name}: vectorized (turn by turn) / one at a time: {d['turns_speedup']:.2f}x ({target}); identical episodes: {d['turns_identical']}")
    if "decode_speedup" in r:
        print(f"LM only, batched / one at a time: {r['decode_speedup']:.2f}x")
    if "vllm_vs_transformers" in r:
        print(f"vLLM / transformers, both batched: {r['vllm_vs_transformers']:.2f}x (engine start {r['vllm_start']:.1f} s, not counted)")
    if "recon_raw_tokens" in r:
        change = r["recon_summary_tokens"] / r["recon_raw_tokens"] - 1
        print(
            f"RECON summary vs raw top-{args.top_k} documents ({args.recon_questions} questions): "
            f"{r['recon_summary_tokens']:.0f} vs {r['recon_raw_tokens']:.0f} tokens ({change:+.0%}; paper: -35%); "
            f"reader F1 {r['recon_f1_summary']:.3f} from summaries vs {r['recon_f1_raw']:.3f} from raw documents"
        )
        print(f"\nfirst summary: {r['recon_example'][:400]!r}")
    if "shared" in r:
        d = r["shared"]
        slowdown, fixed = d["auto_shared"] / d["auto_solo"], d["fixed_shared"] / d["fixed_solo"]
        passed = slowdown <= SHARED_TARGET
        verdict = verdict if passed else "FAIL"
        print(
            f"shared CPU, beside one busy process / alone: {slowdown:.2f}x with threads auto "
            f"(target <= {SHARED_TARGET}x: {'PASS' if passed else 'FAIL'}; it ran {d['auto_shared_threads']} of {d['threads']} threads "
            f"when shared, {d['auto_solo_threads']} alone); {fixed:.2f}x with the count fixed at {d['threads']}"
        )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
