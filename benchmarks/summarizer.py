"""RECON's summarizer, measured: what the agent reads per search, and how well it answers from it.

For each held-out question (the env's ``--split``, dev by default; the distilled summarizer
trained on ``train``), the env's retriever returns its top-k documents for the question
(the query of a first search), and four contexts are built from them:

- ``raw``: the documents as the protocol shows them without a summarizer;
- ``extractive``: searchgym's extractive summarizer (the RECON id's default);
- ``llm``: RECON's prompt (``clarity`` aspect, the paper's sampling) on the base model;
- ``distilled``: the same prompt on a ``searchgym distill-summarizer`` model.

Columns: mean context tokens (the base model's tokenizer), the share of contexts holding a
gold answer (span check: ``gold in ctx``), and a reader's answer F1 and EM: the base model,
greedy, answers the question from the context alone (``reader F1``). The reader is as weak
as the base model; its F1 ranks contexts, it is not the agent's.

Without ``--distilled`` the script trains the distilled summarizer first
(``distill_summarizer`` with the base model as teacher and student: a stand-in teacher where
no stronger model is at hand) into ``OUT/distill`` and reuses it on a rerun. Every context
column (and then its reader answers) is written to ``OUT/<name>.jsonl`` as it completes and
read back on a rerun, so a stopped run keeps what it did; ``--columns`` measures some of
them (e.g. the base ones while the distilled model trains).

    python benchmarks/summarizer.py --quick      # tiny model, ~1 min on 2 CPU cores
    python benchmarks/summarizer.py --backend vllm --distilled runs/summarizer/final --limit 64
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

QUICK_ENV = {"corpus_options": {"seed": 7, "num_passages": 400}, "top_k": 2}
READER_PROMPT = (
    "Answer the question using only the context. Reply with the answer alone, a few words.\n\n"
    "Context:\n{context}\n\nQuestion: {question}\nAnswer:"
)
COLUMNS = ("raw", "extractive", "llm", "distilled")


def read_column(path: Path, ids: list[str]) -> list[dict] | None:
    """The rows (id, context, reader answer if read) saved by an earlier run for exactly these questions, else None."""
    if not path.is_file():
        return None
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows if [r["id"] for r in rows] == ids else None


def write_column(path: Path, rows: list[dict]) -> None:
    from searchgym.bench import write_atomically

    write_atomically(path, "".join(json.dumps(r) + "\n" for r in rows))


def reader_answers(lm, questions: list[str], contexts: list[str], max_new_tokens: int) -> list[str]:
    prompts = [lm.apply_chat([{"role": "user", "content": READER_PROMPT.format(context=c, question=q)}]) for q, c in zip(questions, contexts)]
    generations = lm.generate(prompts, max_new_tokens=max_new_tokens, temperature=0.0)
    return [(g.text.strip().splitlines() or [""])[0] for g in generations]


def load_weights(lm, folder: str) -> None:
    """Put the weights of the model folder ``folder`` into the vLLM engine of ``lm``."""
    import transformers

    weights = transformers.AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).state_dict()
    lm.update_weights(weights.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the tiny model on a 400-passage world, 8 questions (a smoke run)")
    parser.add_argument("--model", default=None, help="base summarizer, reader and tokenizer (default: smollm2; --quick: the tiny model)")
    parser.add_argument("--backend", default="transformers", help="backend of the summarizers and the reader: transformers or vllm")
    parser.add_argument("--distilled", default=None, help="a distill-summarizer run's final/ (default: train one into OUT/distill)")
    parser.add_argument("--env-id", default="searchgym/RECON-v0")
    parser.add_argument("--env-options", type=json.loads, default=None, help='gym.make arguments as JSON, e.g. \'{"corpus": "wiki-vital"}\'')
    parser.add_argument("--split", default="dev", help="held-out questions (default: dev)")
    parser.add_argument("--limit", type=int, default=None, help="questions evaluated (default 64; --quick 8)")
    parser.add_argument("--distill-limit", type=int, default=None, help="training questions when the script distills (default 48; --quick 4)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="most tokens per LLM summary")
    parser.add_argument("--columns", default=",".join(COLUMNS), help=f"contexts to measure, among {','.join(COLUMNS)} (default: all)")
    parser.add_argument("--out", type=Path, default=Path("results/summarizer"))
    a = parser.parse_args()
    backends = ("transformers", "vllm")
    if a.backend not in backends:
        parser.error(f"--backend expects one of {', '.join(backends)}, got {a.backend!r}")
    for flag, value in (("--limit", a.limit), ("--distill-limit", a.distill_limit), ("--max-new-tokens", a.max_new_tokens)):
        if value is not None and value < 1:
            parser.error(f"{flag} expects a positive integer, got {value}")
    columns = [c for c in a.columns.split(",") if c]
    unknown = sorted(set(columns) - set(COLUMNS))
    if unknown or not columns:
        parser.error(f"--columns expects names among {', '.join(COLUMNS)}, got {a.columns!r}")
    if a.distilled is not None and not Path(a.distilled, "config.json").is_file():
        parser.error(f"--distilled expects a model folder such as a distill-summarizer run's final/ (with config.json), got {a.distilled}")

    import gymnasium as gym

    from searchgym.envs.access import search_env
    from searchgym.envs.components.lm_summarizer import LLMSummarizer
    from searchgym.envs.components.summarizers import (
        ExtractiveSummarizer,
        IdentitySummarizer,
    )
    from searchgym.envs.registration import full_env_id
    from searchgym.lm.registry import load_lm
    from searchgym.rewards.metrics import exact_match, f1_score, span_check

    if a.quick:
        model = a.model or "tiny-random-2k"  # the tiny random model with room for RECON's prompt
        env_options = QUICK_ENV if a.env_options is None else a.env_options
        limit, distill_limit, max_new_tokens = a.limit or 8, a.distill_limit or 4, min(a.max_new_tokens, 48)
    else:
        model = a.model or "smollm2"
        env_options = a.env_options or {}
        limit, distill_limit, max_new_tokens = a.limit or 64, a.distill_limit or 48, a.max_new_tokens
    a.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    distilled = a.distilled
    if distilled is None and "distilled" in columns:
        distilled = str(a.out / "distill" / "final")
        if not Path(distilled, "config.json").is_file():
            import shutil

            from searchgym.training.distill import DistillArgs, distill_summarizer

            shutil.rmtree(a.out / "distill", ignore_errors=True)
            distill_args = DistillArgs(
                env_id=a.env_id, env_options=env_options, limit=distill_limit, teacher=model, teacher_backend=a.backend,
                teacher_max_new_tokens=max_new_tokens, student=model, out=str(a.out / "distill"), progress=False,
                **({"aspects": ["clarity"], "relevance_candidates": 4, "relevance_max_tokens": 64, "lr": 1e-3} if a.quick else {}),
            )
            result = distill_summarizer(distill_args)
            print(f"distilled {result['trained_summaries']} teacher summaries of {result['questions']} questions in {result['seconds']:.0f} s")

    env = gym.make(full_env_id(a.env_id), split=a.split, **env_options)
    inner = search_env(env)
    examples = list(inner.examples[:limit])
    ids = [ex.id for ex in examples]
    hits = inner.retriever.search([ex.question for ex in examples], inner.top_k)
    base = load_lm(model, backend=a.backend)
    swapped = []

    def distilled_lm():
        if a.backend != "vllm":
            return load_lm(distilled, backend=a.backend)
        # one vLLM engine (its start takes minutes on a CPU): the distilled weights replace the
        # base's for the distilled summaries and the base's come back for the reader
        load_weights(base, distilled)
        swapped.append(True)
        return base

    makers = {
        "raw": lambda: IdentitySummarizer(),
        "extractive": lambda: ExtractiveSummarizer(),
        "llm": lambda: LLMSummarizer(base, max_new_tokens=max_new_tokens),
        "distilled": lambda: LLMSummarizer(distilled_lm(), max_new_tokens=max_new_tokens),
    }
    rows, seconds = {}, {}
    requests = [(ex.question, ex.question, h) for ex, h in zip(examples, hits)]
    for name in columns:
        path = a.out / f"{name}.jsonl"
        rows[name] = read_column(path, ids)
        if rows[name] is not None:
            seconds[name] = None
            continue
        begin = time.perf_counter()
        summarizer = makers[name]()
        if isinstance(summarizer, LLMSummarizer):
            contexts = summarizer.summarize_many(requests)
        else:
            contexts = [summarizer.summarize(*r) for r in requests]
        seconds[name] = time.perf_counter() - begin
        rows[name] = [{"id": i, "context": c} for i, c in zip(ids, contexts)]
        write_column(path, rows[name])

    if swapped:
        from searchgym.lm.vllm import model_folder

        load_weights(base, model_folder(model))
    questions = [ex.question for ex in examples]
    table = []
    for name in columns:
        if any("answer" not in r for r in rows[name]):
            answers = reader_answers(base, questions, [r["context"] for r in rows[name]], max_new_tokens=32)
            rows[name] = [{**r, "answer": p} for r, p in zip(rows[name], answers)]
            write_column(a.out / f"{name}.jsonl", rows[name])
        contexts = [r["context"] for r in rows[name]]
        answers = [r["answer"] for r in rows[name]]
        tokens = [len(base.tokenizer(c, add_special_tokens=False)["input_ids"]) for c in contexts]
        n = len(examples)
        table.append({
            "context": name,
            "tokens": sum(tokens) / n,
            "gold_in_context": sum(span_check(c, ex.answers) for c, ex in zip(contexts, examples)) / n,
            "reader_f1": sum(f1_score(p, ex.answers) for p, ex in zip(answers, examples)) / n,
            "reader_em": sum(exact_match(p, ex.answers) for p, ex in zip(answers, examples)) / n,
            "summarize_s": seconds[name],
        })
    raw_tokens = next((row["tokens"] for row in table if row["context"] == "raw"), None)
    print(f"{a.env_id} {a.split}, {len(examples)} questions, top-{inner.top_k}, model {model} ({a.backend}), distilled {distilled}")
    print(f"{'context':<11} {'tokens':>7} {'vs raw':>7} {'gold in ctx':>12} {'reader F1':>10} {'reader EM':>10} {'summarize s':>12}")
    for row in table:
        took = "(saved)" if row["summarize_s"] is None else f"{row['summarize_s']:.1f}"
        print(
            f"{row['context']:<11} {row['tokens']:>7.1f} {(row['tokens'] / raw_tokens if raw_tokens else float('nan')):>7.2f} {row['gold_in_context']:>12.3f} "
            f"{row['reader_f1']:>10.3f} {row['reader_em']:>10.3f} {took:>12}"
        )
    (a.out / "results.json").write_text(json.dumps({"model": model, "distilled": distilled, "split": a.split, "questions": len(examples), "rows": table}, indent=2))
    print(f"total {time.perf_counter() - t0:.0f} s; wrote {a.out}/results.json")


if __name__ == "__main__":
    main()
