"""Benchmark several policies on the same environments: ``searchgym bench``.

A benchmark is a list of *runs*, each an (env id, agent) pair, played on the same
questions (the first ``limit`` of a split) and seeds. Every finished episode is appended
to ``out_dir/episodes.jsonl`` at once (flushed and synced), so an interrupted benchmark
resumes where it stopped; the summary is written as ``summary.json``, ``summary.csv``, a
markdown table and ``summary.png``. Every file the bench rewrites (``config.json``, the
repaired ``episodes.jsonl``, the summary) is replaced atomically (:func:`write_atomically`),
so a kill at any moment leaves a folder that the same command resumes.

    from searchgym.bench import BenchConfig, run_bench
    results = run_bench(BenchConfig(runs=[("SearchR1-v0", "naive-rag"), ("SearchR1-v0", "lm")], limit=20))
    print(results.markdown())

An agent is a name (a built-in, one given to :func:`searchgym.agents.register_agent`, or
``module:factory``), an :class:`~searchgym.agents.Agent` instance, or a factory (an
``Agent`` subclass or a function returning one; see ``register_agent`` for its arguments).
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from searchgym.agents import LM_FREE, Agent, EpisodeResult, Task, make_agent, run_episodes
from searchgym.agents.driver import RAW_SCORES, check_mode, check_scheduling
from searchgym.agents.registry import (
    CHAT_AGENTS,
    agent_action_format,
    agent_label,
    build_agent,
    check_agent,
    describe_agent,
    factory_needs_lm,
    registered_factory,
)
from searchgym.agents.registry import needs_lm as agent_needs_lm
from searchgym.cache import sync_folder
from searchgym.envs.access import search_env
from searchgym.envs.registration import NAMESPACE, full_env_id, with_frozen_models
from searchgym.error import ConfigError, CtrlC, DataFormatError, Interrupted, check_keywords, check_name, install_command, interrupt_in
from searchgym.lm.models import RANDOM_WEIGHT_NAMES
from searchgym.plugins import apply_wrappers, check_imports, check_wrappers, describe_object, recorded_settings, settings_changes, settings_of, without_secrets

#: Columns of the summary table: (key, header, format). F1, cover-EM and GenAcc score a
#: hedged answer (one naming more than one candidate) as 0; the "raw" column beside each is
#: the paper's metric, which pays hedges (EM cannot be hedged).
COLUMNS = (
    ("label", "run", "{}"),
    ("n", "n", "{}"),
    ("em", "EM", "{:.3f}"),
    ("f1", "F1", "{:.3f}"),
    ("f1_raw", "F1 raw", "{:.3f}"),
    ("cover_em", "cover-EM", "{:.3f}"),
    ("cover_em_raw", "cover-EM raw", "{:.3f}"),
    ("gen_acc", "GenAcc", "{:.3f}"),
    ("gen_acc_raw", "GenAcc raw", "{:.3f}"),
    ("reward", "reward", "{:.3f}"),
    ("searches", "searches", "{:.2f}"),
    ("context_tokens", "context tokens", "{:.0f}"),
    ("generated_tokens", "generated tokens", "{:.0f}"),
    ("seconds_per_episode", "s/episode", "{:.2f}"),
    ("failures", "failures", "{}"),
)

#: Columns added by ``judge_model`` (``--judge``): s3's GenAcc with its LLM judge (the span
#: check, then the judge when it fails) and R1-Searcher's LLM-as-judge accuracy (ACC_L).
#: Both are strict: a hedged answer scores 0 and never reaches the judge.
JUDGE_COLUMNS = (
    ("gen_acc_judge", "GenAcc+judge", "{:.3f}"),
    ("acc_judge", "ACC_L judge", "{:.3f}"),
)

#: Columns of runs whose episodes carry the browse game's metrics in ``reward_components``
#: (``searchgym/DeepResearch-v0``, :mod:`searchgym.deepresearch.scoring`): accuracy (mean
#: ``correct``), evidence and gold recall, citation precision and recall, calls per episode,
#: and the run's calibration error over the answers that stated a confidence ("-" when none did).
BROWSE_COLUMNS = (
    ("accuracy", "accuracy", "{:.3f}"),
    ("evidence_recall", "evidence recall", "{:.3f}"),
    ("gold_recall", "gold recall", "{:.3f}"),
    ("citation_precision", "citation precision", "{:.3f}"),
    ("citation_recall", "citation recall", "{:.3f}"),
    ("calls", "calls", "{:.2f}"),
    ("calibration_error", "calibration error", "{:.3f}"),
)


@dataclass
class BenchConfig:
    """What to benchmark. Every field is stored in ``out_dir/config.json``."""

    runs: list[tuple[str, Any]]
    """(env id, agent) pairs; env ids with or without the ``searchgym/`` namespace. An
    agent is a name (built-in, registered, or ``module:factory``), an ``Agent`` instance or
    an agent factory (see :func:`searchgym.agents.register_agent`)."""
    split: str = "dev"
    """Dataset split of every env."""
    limit: int | None = None
    """Play the first ``limit`` questions of the split (all when None)."""
    seeds: tuple[int, ...] = (0,)
    """Each question is played once per seed (env reset seed and the agent's sampling seed)."""
    model: Any = "smollm2"
    """The policy model of LM agents: a name for :func:`searchgym.lm.registry.load_lm`, or a
    loaded :class:`~searchgym.lm.base.LanguageModel`."""
    backend: str = "transformers"
    """Backend of every model: ``transformers``, ``vllm``, ``vllm-async`` or ``openai``."""
    backend_options: dict[str, Any] = field(default_factory=dict)
    """Options of the backend (e.g. ``{"dtype": "bfloat16"}``, ``{"base_url": ...}``)."""
    frozen_model: str | None = None
    """Model for the env's frozen generator / reader (S3, RSearch) instead of ``gold-span``;
    ``"policy"`` means the policy model itself."""
    summarizer: str | None = None
    """Summarizer of RECON envs (e.g. ``"llm"``: RECON's prompt with the frozen model)."""
    env_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra ``gym.make`` arguments per env id, and under ``"*"`` for every env."""
    agent_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Extra constructor arguments per agent name (e.g. ``{"naive-rag": {"k": 5}}``,
    ``{"sb3": {"policy": "runs/sb3"}}``); a factory's options go under its label's name
    (its ``name`` attribute or ``__name__``)."""
    num_envs: int = 16
    """Episodes live at once (the LM batch size)."""
    driver: str = "rounds"
    """How the live episodes are played: ``"rounds"`` (one batched call per turn of all of
    them, then every env steps; reproducible) or ``"async"`` (each episode's next turn
    starts when its own step ends: for ``backend="vllm-async"``, or a served model with
    ``backend="openai"``; see :func:`searchgym.agents.run_episodes`). Either plays the same episodes, so a benchmark
    resumes under the other."""
    concurrency: int | None = None
    """``driver="async"``: most turns in flight at once (default ``num_envs``)."""
    scheduling: str = "turns"
    """How the live episodes share the model: ``"turns"``, the only scheduling (one batched
    call per turn of all of them; reproducible). Kept so that earlier benchmarks resume."""
    temperature: float = 0.0
    """Sampling temperature of LM agents (0: greedy)."""
    max_new_tokens: int = 256
    """Most tokens per agent turn."""
    judge_model: Any = None
    """Model of the LLM judges (``"policy"``: the policy model), which add the columns
    :data:`JUDGE_COLUMNS`; None: no judge. Loaded with ``backend`` like every model."""
    judge_batch: int = 64
    """Verdicts asked per ``generate`` call of a judge."""
    labels: list[str] | None = None
    """A label per run (default ``"agent @ env"``, with a factory's or instance's ``name``
    attribute or ``__name__`` as the agent)."""
    imports: list[str] = field(default_factory=list)
    """Modules imported before any name is checked (``--import``): a user module that fills
    the registries (reward recipes, protocols, ``register_retriever``) or registers env ids."""
    wrappers: list[Any] = field(default_factory=list)
    """Env wrappers (``module:attr`` or callables ``wrapper(env) -> env``) applied in order to
    every env of the benchmark (``--wrapper``)."""
    retriever_per_env: bool = False
    """Build one retriever for each env instead of one shared by every env over the corpus
    (``--retriever-per-env``); the env's retriever must then be a name or ``module:attr``."""

    def __post_init__(self) -> None:
        self.runs = [tuple(r) for r in self.runs]  # type: ignore[misc]
        self.seeds = tuple(self.seeds)
        if not self.runs:
            raise ConfigError("BenchConfig expects at least one (env id, agent) run, got none.")
        if self.limit is not None and (isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1):
            raise ConfigError(f"BenchConfig expects limit to be a positive integer or None, got {self.limit!r}.")
        if isinstance(self.num_envs, bool) or not isinstance(self.num_envs, int) or self.num_envs < 1:
            raise ConfigError(f"BenchConfig expects num_envs to be a positive integer, got {self.num_envs!r}.")
        check_scheduling(self.scheduling, "BenchConfig")
        check_mode(self.driver, self.concurrency, "BenchConfig", [], field="driver")
        if not self.seeds:
            raise ConfigError("BenchConfig expects at least one seed, got none.")
        bad = [s for s in self.seeds if isinstance(s, bool) or not isinstance(s, int) or s < 0]
        if bad:
            raise ConfigError(f"BenchConfig expects seeds to be non-negative integers, got {bad[0]!r}.")
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"BenchConfig expects distinct seeds (each plays every question once), got {list(self.seeds)}.")
        if isinstance(self.judge_batch, bool) or not isinstance(self.judge_batch, int) or self.judge_batch < 1:
            raise ConfigError(f"BenchConfig expects judge_batch to be a positive integer, got {self.judge_batch!r}.")
        if self.labels is not None and len(self.labels) != len(self.runs):
            raise ConfigError(f"BenchConfig expects one label per run, got {len(self.labels)} labels for {len(self.runs)} runs.")

    def run_labels(self) -> list[str]:
        labels = self.labels or [f"{agent_label(agent)} @ {env_id.removeprefix(NAMESPACE)}" for env_id, agent in self.runs]
        seen = {label for label in labels if labels.count(label) > 1}
        if seen:
            raise ConfigError(f"BenchConfig expects distinct run labels, got {sorted(seen)} more than once; give each run its own label.")
        return labels


def cross(envs: Sequence[str], agents: Sequence[str]) -> list[tuple[str, str]]:
    """Every agent on every env."""
    return [(e, a) for e in envs for a in agents]


def check_config(config: BenchConfig) -> None:
    """Every name in ``config`` is known (called before any model loads)."""
    from searchgym.envs.components.summarizers import SUMMARIZERS
    from searchgym.lm.registry import BACKENDS, backend_class

    check_imports(config.imports, owner="BenchConfig.imports")  # first: a module may fill the registries
    for env_id, agent in config.runs:
        full_env_id(env_id)
        if isinstance(agent, str):
            check_agent(agent)
        elif isinstance(agent, type) and not issubclass(agent, Agent) or not (isinstance(agent, Agent) or callable(agent)):
            raise ConfigError(
                f"BenchConfig runs expect an agent name, an Agent instance or an agent factory (an Agent subclass or a "
                f"function returning an Agent), got {type(agent).__name__} {agent!r} for env {env_id!r}."
            )
    if any(agent == "sb3" for _, agent in config.runs) and "policy" not in config.agent_options.get("sb3", {}):
        raise ConfigError(
            "The sb3 agent needs the policy to play: agent_options={'sb3': {'policy': 'runs/sb3'}} "
            "(command line: --agent-option sb3:policy=runs/sb3), a run folder of `searchgym train --algorithm sb3-ppo`."
        )
    check_name("language-model backend", config.backend, BACKENDS)
    if config.driver == "async" and any(_run_needs_lm(config, env_id, agent) for env_id, agent in config.runs):
        from searchgym.lm.base import LanguageModel

        model = config.model
        if not (model.concurrent if isinstance(model, LanguageModel) else backend_class(config.backend).concurrent):
            served = type(model).__name__ if isinstance(model, LanguageModel) else f"backend={config.backend!r}"
            raise ConfigError(
                f"BenchConfig(driver='async') sends each episode's turn as a call of its own, for a model that serves "
                f"concurrent calls (backend='vllm-async', vLLM's async engine in this process, or backend='openai', a served "
                f"model; command line: --backend vllm-async, or --backend openai --backend-option base_url=http://HOST:PORT/v1); "
                f"{served} generates one call at a time. Leave driver out (rounds batch every live episode's turn in one call)."
            )
    _check_env_options(config)
    _check_user_pieces(config)
    _check_action_formats(config)
    if config.summarizer is not None:
        check_name("summarizer", config.summarizer, SUMMARIZERS)
    from searchgym.lm.base import LanguageModel

    if config.judge_model is not None and not (isinstance(config.judge_model, LanguageModel) or (isinstance(config.judge_model, str) and config.judge_model)):
        raise ConfigError(
            f"BenchConfig expects judge_model to be a model name ('policy': the policy model) or a LanguageModel, "
            f"got {type(config.judge_model).__name__} {config.judge_model!r}."
        )
    config.run_labels()


def _check_env_options(config: BenchConfig) -> None:
    """The corpus and dataset names and, for the single-agent envs, the keyword names of every
    run's env options, checked before the resume check compares configurations (a typo is then
    reported as a typo, not as "a different configuration") and before any model loads."""
    import inspect

    from searchgym.corpora.registry import check_data_name
    from searchgym.envs.registration import ENV_SPECS, GAME_ENV_SPECS, METHOD_ENV_SPECS
    from searchgym.envs.single.core import SearchEnv

    accepted = inspect.signature(SearchEnv).parameters
    for env_id, _ in config.runs:
        options = _run_env_options(config, env_id)
        check_data_name("corpus", options.get("corpus"))
        check_data_name("dataset", options.get("dataset"))
        if full_env_id(env_id) in ENV_SPECS or full_env_id(env_id) in METHOD_ENV_SPECS or full_env_id(env_id) in GAME_ENV_SPECS:
            check_keywords(f"{env_id}'s env options", options, accepted)


def _check_user_pieces(config: BenchConfig) -> None:
    """The reward recipe, protocol and retriever every run's env options name resolve, and
    the wrappers import (a bad ``module:attr`` is refused by name before any model loads)."""
    from searchgym.corpora.retrievers import check_retriever
    from searchgym.envs.protocols import protocol_source
    from searchgym.rewards.recipes import recipe_source

    for env_id, _ in config.runs:
        options = _run_env_options(config, env_id)
        if options.get("reward") is not None:
            recipe_source(options["reward"])
        if options.get("protocol") is not None:
            protocol_source(options["protocol"])
        check_retriever(options.get("retriever"))
        if config.retriever_per_env and options.get("retriever") is not None and not isinstance(options["retriever"], str):
            raise ConfigError(
                f"BenchConfig(retriever_per_env=True) builds a retriever for each env and expects {env_id}'s retriever as a "
                f"name or module:attr, got a {type(options['retriever']).__name__} object."
            )
    check_wrappers(config.wrappers, owner="BenchConfig.wrappers")


def _make_env(config: BenchConfig, env_id: str, frozen: Any, action_format: str, *, probe: bool = False) -> Any:
    """One env of a run: ``gym.make`` with the run's arguments, a retriever of its own with
    ``retriever_per_env``, then the config's wrappers. ``probe``: without the frozen models
    and the summarizer (an env to count questions with, never played)."""
    import gymnasium as gym

    from searchgym.envs.registration import own_retriever

    kwargs = _env_kwargs(config, env_id, frozen, action_format, probe=probe)
    if config.retriever_per_env:
        kwargs["retriever"] = own_retriever(env_id, kwargs)
        kwargs.pop("retriever_options", None)  # it was built with them
    return apply_wrappers(gym.make(env_id, **kwargs), config.wrappers)


def run_action_format(config: BenchConfig, env_id: str, agent: Any) -> str:
    """The ``action_format`` a run's env is made with: the one its env options name, else
    ``"tools"`` when its agent plays tool calls (:func:`~searchgym.agents.registry.agent_action_format`:
    ``chat-tools``), else the env id's own default (``gym.make``'s: ``"tools"`` for
    ``DeepResearch-v0``, ``"tags"`` for the others)."""
    from searchgym.envs.registration import env_spec

    options = _run_env_options(config, env_id)
    plays = agent_action_format(agent)
    return options.get("action_format") or (plays if plays == "tools" else env_spec(env_id).get("action_format", "tags"))


def _run_env_options(config: BenchConfig, env_id: str) -> dict[str, Any]:
    return {**config.env_options.get("*", {}), **config.env_options.get(env_id.removeprefix(NAMESPACE), config.env_options.get(env_id, {}))}


def _check_action_formats(config: BenchConfig) -> None:
    """An agent that plays tool calls is not given a tag env, and a chat agent gets a
    chat-completions model (checked before any model loads)."""
    from searchgym.lm.base import LanguageModel

    for env_id, agent in config.runs:
        plays = agent_action_format(agent)
        given = _run_env_options(config, env_id).get("action_format")
        if plays == "tools" and given not in (None, "tools"):
            raise ConfigError(
                f"The run {env_id}:{agent_label(agent)} plays native tool calls, but the env options set action_format={given!r}; "
                "drop that option (the bench makes the env with action_format='tools' for this agent)."
            )
        if isinstance(agent, str) and agent in CHAT_AGENTS:
            if isinstance(config.model, LanguageModel) and not callable(getattr(config.model, "chat", None)):
                raise ConfigError(
                    f"The {agent!r} agent needs a chat-completions model (an OpenAILM), got {type(config.model).__name__} as the model."
                )
            if not isinstance(config.model, LanguageModel) and config.backend != "openai":
                raise ConfigError(
                    f"The {agent!r} agent talks to a chat-completions server: use backend 'openai' with its base_url "
                    f"(--backend openai --backend-option base_url=http://HOST:PORT/v1, --model the served name), got backend {config.backend!r}."
                )


# ---------------------------------------------------------------- storage
def write_atomically(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` so that a reader (or a process started after a kill)
    sees either the old file or the new one, never a part: the bytes go to a temporary
    file beside it, which is flushed, synced and renamed over ``path``; the folder is synced
    so the rename itself survives a power cut."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except Exception:  # a full disk, say: the old file stays, the part written goes
        tmp.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)


def append_line(path: Path, line: str) -> None:
    """Append one line and sync it: a kill leaves at most this line cut, which
    :func:`read_episodes` drops (that episode is played again)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        view = memoryview((line + "\n").encode("utf-8"))
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


#: What every line of ``episodes.jsonl`` holds (besides the scores).
_RECORD_KEYS = ("run", "example_id", "seed", "outcome")
_EXPECTED = "one JSON episode record per line (an object with run, example_id, seed, outcome, ...)"


def read_episodes(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """The episode records of ``path``, each (run, example_id, seed) once.

    The last line may be cut by an interruption (unfinished JSON, with or without its
    newline): it is dropped, and that episode is played again; with ``repair`` it is also
    removed from the file, so records appended next start on a line of their own. A
    damaged line anywhere else is a :class:`DataFormatError`."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    records: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    keep = len(lines)
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if number == len(lines):
                warnings.warn(f"{path}: ignoring the unfinished last line {number} (an interrupted write); that episode is played again.", stacklevel=2)
                keep = number - 1
                break
            raise DataFormatError(path, number, _EXPECTED, line[:80]) from e
        if not isinstance(record, dict) or any(k not in record for k in _RECORD_KEYS):
            raise DataFormatError(path, number, _EXPECTED, line[:80])
        records.setdefault((record["run"], record["example_id"], record["seed"]), record)
    if repair and (keep < len(lines) or (data and not data.endswith(b"\n"))):
        write_atomically(path, "".join(line + "\n" for line in lines[:keep]))
    return list(records.values())


def _read_config(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataFormatError(path, None, "the benchmark's configuration as a JSON object", f"damaged JSON ({e})") from None
    if not isinstance(previous, dict):
        raise DataFormatError(path, None, "the benchmark's configuration as a JSON object", type(previous).__name__)
    return previous


def _config_record(config: BenchConfig) -> dict[str, Any]:
    # Not asdict(): it deep-copies, and the config may hold loaded models (described instead).
    record = {f.name: getattr(config, f.name) for f in fields(config)}
    # User objects are recorded by their settings, never their repr (a memory address, or no weights at all).
    for name in ("env_options", "agent_options", "wrappers"):
        record[name] = recorded_settings(record[name])
    record["runs"] = [
        [env_id, describe_agent(agent), *([settings_of(agent)] if callable(getattr(agent, "settings", None)) and not isinstance(agent, type) else [])]
        for env_id, agent in config.runs
    ]
    record["seeds"] = list(config.seeds)
    record["model"] = _describe_model(config.model)
    record["judge_model"] = None if config.judge_model is None else _describe_model(config.judge_model)
    return without_secrets(json.loads(json.dumps(record, default=str)))


#: Fields of a benchmark's config that say how its episodes are scheduled, not which are played.
_SCHEDULE_FIELDS = ("driver", "concurrency")


def _played(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A config record without :data:`_SCHEDULE_FIELDS`: what a resumed benchmark must match."""
    return None if record is None else {k: v for k, v in record.items() if k not in _SCHEDULE_FIELDS}


def _describe_model(model: Any) -> Any:
    """A loaded model as the same text in every process (its class and where it came
    from), not ``repr``'s memory address, so a run with it can resume."""
    if isinstance(model, str):
        return model
    inner = getattr(model, "model", None)
    source = getattr(model, "name", None) or getattr(inner, "name_or_path", None) or getattr(getattr(inner, "config", None), "_name_or_path", None)
    dtype = getattr(inner, "dtype", None)
    parts = [str(p) for p in (source, dtype) if p]
    return f"{type(model).__name__}({', '.join(parts)})"


# ---------------------------------------------------------------- running
@dataclass
class BenchResults:
    """The summary rows (one per run) and every episode record, by run label."""

    config: BenchConfig
    rows: list[dict[str, Any]]
    episodes: dict[str, list[dict[str, Any]]]
    out_dir: Path | None = None
    files: list[str] = field(default_factory=list)
    """The summary files written in ``out_dir`` (``summary.png`` only where matplotlib drew it)."""

    def wrote(self) -> str:
        """The line saying which files are in ``out_dir``: only those written."""
        if self.out_dir is None:
            return "wrote no files (no output folder)"
        names = [*self.files, "episodes.jsonl"]
        return f"wrote {self.out_dir}/{names[0]}, {', '.join(names[1:-1])} and {names[-1]}"

    def columns(self) -> tuple[tuple[str, str, str], ...]:
        """The table's columns (:func:`table_columns`)."""
        return table_columns(judged=self.config.judge_model is not None, browse=browses(self.rows))

    def markdown(self) -> str:
        columns = self.columns()
        head = "| " + " | ".join(h for _, h, _ in columns) + " |"
        rule = "|" + "|".join("---" if k == "label" else "---:" for k, _, _ in columns) + "|"
        body = ["| " + " | ".join("-" if row.get(k) is None else f.format(row[k]) for k, _, f in columns) + " |" for row in self.rows]
        return "\n".join([head, rule, *body])

    def notes(self) -> list[str]:
        """The lines printed under the table: what each row's reward is made of (one line per
        recipe), the failed episodes of each row with the first error, and the tool-format
        episodes that ended on a reply with no tool call."""
        return run_notes(self.rows)

    def all_failed(self) -> list[dict[str, Any]]:
        """The rows whose every episode failed (``searchgym bench`` then exits with 1)."""
        return [row for row in self.rows if row["n"] and row.get("failed", 0) == row["n"]]


def run_notes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """:meth:`BenchResults.notes` of summary rows."""
    lines = []
    by_recipe: dict[tuple[Any, Any], list[str]] = {}
    for row in rows:
        if row.get("reward_parts"):
            by_recipe.setdefault((row["reward_recipe"], row["reward_parts"]), []).append(row["label"])
    for (name, parts), labels in by_recipe.items():
        lines.append(f"reward of {', '.join(labels)}: {name}: {parts}")
    for row in rows:
        if row.get("protocol_given"):
            lines.append(f"protocol of {row['label']}: {row['protocol_given']} ({row.get('protocol')}), overriding {row['env']}'s own")
    if any(row.get("failed") for row in rows):
        lines.append("reward column: the mean over the episodes that did not fail (a failed episode is never scored); "
                     "the score columns count a failed episode as 0")
    for row in rows:
        failed, n = row.get("failed", 0), row["n"]
        if failed:
            kinds = row["failures"]
            error = _short(row.get("first_error") or "no message")
            lines.append(f"{row['label']}: {failed} of {n} episodes failed ({kinds}), not answered; first error: {error}")
        ended = row.get("ended_without_call", 0)
        if ended:
            tags = row.get("other_grammar_tags", 0)
            wrote = f"; {tags} of them wrote a tag grammar's tags (such as <search>) instead of a call" if tags else ""
            lines.append(
                f"{row['label']}: {ended} of {n} episodes ended on a reply with no tool call, read as the final answer{wrote}"
            )
    return lines


def _short(text: str, most: int = 300) -> str:
    """``text`` on one line, cut to ``most`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= most else line[: most - 3] + "..."


def table_columns(*, judged: bool, browse: bool = False) -> tuple[tuple[str, str, str], ...]:
    """The summary table's columns: :data:`COLUMNS`, with :data:`JUDGE_COLUMNS` when the
    benchmark has a judge (``judged``) and :data:`BROWSE_COLUMNS` when a run played the browse
    game (``browse``, :func:`browses`), both before the reward."""
    at = [k for k, _, _ in COLUMNS].index("reward")
    extra = (JUDGE_COLUMNS if judged else ()) + (BROWSE_COLUMNS if browse else ())
    return COLUMNS[:at] + extra + COLUMNS[at:] if extra else COLUMNS


def browses(rows: Sequence[dict[str, Any]]) -> bool:
    """Whether some summary row has the browse game's columns (:data:`BROWSE_COLUMNS`)."""
    return any("evidence_recall" in row for row in rows)


def browse_scores(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The :data:`BROWSE_COLUMNS` of a run from its episodes' ``reward_components`` (empty
    when no episode carries the browse metrics). The scores are means over every episode (a
    failed one, never scored, counts 0, as in the other score columns); ``calls`` is the mean
    over the scored episodes; ``calibration_error`` is over the answers that stated a confidence
    (:func:`searchgym.deepresearch.scoring.calibration_error`; None when none did)."""
    parts = [r.get("reward_components") or {} for r in records]
    scored = [p for p in parts if "evidence_recall" in p]
    if not scored:
        return {}
    from searchgym.deepresearch.scoring import calibration_error

    n = len(records)
    mean = lambda key: sum(float(p.get(key, 0.0)) for p in parts) / n  # noqa: E731
    stated = [p for p in scored if p.get("confidence") is not None]
    return {
        "accuracy": mean("correct"),
        **{key: mean(key) for key in ("evidence_recall", "gold_recall", "citation_precision", "citation_recall")},
        "calls": sum(float(p.get("calls", 0.0)) for p in scored) / len(scored),
        "calibration_error": calibration_error([float(p["confidence"]) for p in stated], [float(p.get("correct", 0.0)) for p in stated]),
    }


#: Every score of a summary row: the strict ones and the papers' raw ones.
SCORE_KEYS = ("em", "f1", "cover_em", "gen_acc", "f1_raw", "cover_em_raw", "gen_acc_raw")


def zero_scores_note(rows: Sequence[dict[str, Any]], model: Any = None, *, noun: str = "row") -> str | None:
    """One plain sentence for a table whose every score (:data:`SCORE_KEYS`) is 0 in every
    row, saying why, in place of a ranking of zeros; None when some row scores. ``model``
    is the benchmark's policy model (a name), which the reason names; ``noun`` names the rows."""
    if not rows or any(row.get(key) for row in rows for key in SCORE_KEYS):
        return None
    played = [row for row in rows if row.get("failed", 0) < row.get("n", 0)]
    if not played:  # every episode failed: nothing was answered, right or wrong (the failures are said above)
        return None
    failed = sum(row.get("failed", 0) for row in rows)
    n = max(int(row.get("n", 0)) for row in rows)
    head = f"Every score is 0 in every {noun} ({n} question{'s' if n != 1 else ''} per row), so there is nothing to rank: "
    if isinstance(model, str) and model in RANDOM_WEIGHT_NAMES and not failed:
        return head + (
            f"the policy {model!r} is a tiny model of random weights, which writes noise and never answers right; "
            "these rows show the pipeline running, not what an agent can do (the LM-free oracle, "
            "`--agents oracle` on synthwiki, shows a full score; a trained model shows a real one)."
        )
    questions = "the question" if n == 1 else f"all {n} questions"
    # An episode that never answered (its turns ran out) or failed did not answer wrong: each is said as what it was.
    unanswered = sum(row.get("outcomes", {}).get("truncated", 0) for row in rows)
    if unanswered or failed:
        answered = sum(row.get("n", 0) for row in rows) - unanswered - failed
        parts = [f"{answered} episode{'s' if answered != 1 else ''} answered wrong"] if answered else []
        if unanswered:
            parts.append(f"{unanswered} never answered (the turns ran out first)")
        if failed:
            parts.append(f"{failed} failed (above)")
        said = f"no row answered {'the question' if n == 1 else f'any of the {n} questions'} right: {', '.join(parts)}"
    else:
        said = f"every row answered {questions} wrong"
    if n < 4:
        return head + f"{said}, and {n} question{'s are' if n != 1 else ' is'} too few to tell the rows apart; play more with --limit."
    return head + f"{said}; this model does not answer these questions yet."


#: Outcomes of an episode that failed (see :data:`~searchgym.agents.driver.OUTCOMES`): it
#: ended on an error, not on the agent's play, and was never scored.
FAILED_OUTCOMES = ("prompt_too_long", "backend_error", "error")


def summarize(label: str, env_id: str, agent: str, records: Sequence[dict[str, Any]], *, action_format: str = "tags") -> dict[str, Any]:
    """One summary row: means over the run's episodes and counts of failed outcomes; the
    run's ``action_format`` (``"tags"`` or ``"tools"``) is kept beside its agent.

    The scores are means over every episode (a failed one scores 0: it answered nothing);
    ``reward`` is the mean over the episodes that did not fail (:data:`FAILED_OUTCOMES`),
    None when every one failed, since a failed episode was never scored. ``failed`` counts
    the failed episodes and ``first_error`` is the error of the first of them;
    ``ended_without_call`` counts the tool-format episodes that ended on a reply with no
    tool call, ``other_grammar_tags`` those whose reply without a call wrote a tag
    grammar's tags (``<search>``) instead."""
    n = len(records)
    mean = lambda key: sum(float(r[key]) for r in records) / n if n else 0.0  # noqa: E731
    # Episodes recorded before the strict scores existed hold the raw ones only.
    raw_mean = lambda key: sum(float(r.get(key) if r.get(key) is not None else r[RAW_SCORES[key]]) for r in records) / n if n else 0.0  # noqa: E731
    outcomes: dict[str, int] = {}
    flags: dict[str, int] = {}
    for r in records:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
        for f in r.get("flags", []):
            flags[f] = flags.get(f, 0) + 1
    failed = {k: v for k, v in outcomes.items() if k in FAILED_OUTCOMES}
    # A failed episode was never scored: what its turns were paid is no episode reward.
    scored = [float(r["reward"]) for r in records if r["outcome"] not in FAILED_OUTCOMES]
    first_error = next((r.get("error") for r in records if r["outcome"] in FAILED_OUTCOMES and r.get("error")), None)
    return {
        "label": label,
        "env": env_id,
        "agent": agent,
        "action_format": action_format,
        "n": n,
        "em": mean("em"),
        "f1": mean("f1"),
        "cover_em": mean("cover_em"),
        "gen_acc": mean("gen_acc"),
        **{key: raw_mean(key) for key in RAW_SCORES},
        **({key: mean(key) for key, _, _ in JUDGE_COLUMNS} if all(key in r for r in records for key, _, _ in JUDGE_COLUMNS) else {}),
        **browse_scores(records),
        "reward": sum(scored) / len(scored) if scored else None,
        "searches": mean("num_searches"),
        "turns": mean("num_turns"),
        "context_tokens": mean("context_tokens"),
        "generated_tokens": mean("generated_tokens"),
        "seconds_per_episode": mean("wall_time"),
        "outcomes": outcomes,
        "flags": flags,
        "failures": ", ".join(f"{k} {v}" for k, v in sorted(failed.items())) or "-",
        "failed": sum(failed.values()),
        "first_error": first_error,
        "ended_without_call": flags.get("ended_without_call", 0),
        "other_grammar_tags": flags.get("other_grammar_tags", 0),
    }


def reward_parts(recipe: Any) -> dict[str, Any]:
    """A row's ``reward_recipe`` (the recipe's name) and ``reward_parts`` (what its reward is
    made of: :meth:`~searchgym.rewards.RewardRecipe.describe`, with the penalty of a malformed
    turn when there is one); both None without a recipe."""
    if recipe is None:
        return {"reward_recipe": None, "reward_parts": None}
    describe = getattr(recipe, "describe", None)
    parts = describe() if callable(describe) else type(recipe).__name__
    penalty = float(getattr(recipe, "invalid_action_penalty", 0.0) or 0.0)
    if penalty:
        parts += f"; {penalty:+g} per malformed turn"
    return {"reward_recipe": getattr(recipe, "name", type(recipe).__name__), "reward_parts": parts}


def run_protocol(config: BenchConfig, env_id: str, name: str | None) -> dict[str, Any]:
    """A row's ``protocol`` (the name of its env's protocol) and ``protocol_given`` (the
    ``protocol`` its env options set, overriding the env's own; None when they set none)."""
    given = _run_env_options(config, env_id).get("protocol")
    return {"protocol": name, "protocol_given": None if given is None else given if isinstance(given, str) else describe_object(given)}


def _env_kwargs(config: BenchConfig, env_id: str, frozen: Any, action_format: str = "tags", *, probe: bool = False) -> dict[str, Any]:
    from searchgym.envs.registration import env_spec

    kwargs: dict[str, Any] = {"split": config.split}
    if action_format != "tags":  # tag envs keep gym.make's default, so earlier benchmarks resume as they were
        kwargs["action_format"] = action_format
    kwargs.update(_run_env_options(config, env_id))
    # The summarizer applies to RECON envs only: other envs of the same benchmark keep raw documents.
    recon = env_spec(env_id).get("protocol") == "recon"
    summarizer = config.summarizer if recon and not probe else None
    return with_frozen_models(env_id, kwargs, frozen=frozen, summarizer=summarizer, summarizer_model=frozen)


def run_bench(config: BenchConfig, out_dir: str | Path | None = "results/bench", *, progress: bool = True, resume: bool = True) -> BenchResults:
    """Play every run of ``config`` and summarize it (see the module docstring).

    With ``resume`` (default) the episodes already in ``out_dir/episodes.jsonl`` are not
    played again (one line on stderr says how many); ``out_dir/config.json`` must then
    describe the same benchmark. Without it, earlier results in ``out_dir`` are replaced.
    Ctrl-C raises :class:`~searchgym.error.Interrupted` saying how many episodes were kept.
    """
    check_config(config)
    labels = config.run_labels()
    out = Path(out_dir) if out_dir is not None else None
    done: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    if out is not None:
        if out.exists() and not out.is_dir():
            raise ConfigError(f"The benchmark's output folder {out} is a file; pick another --out.")
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"The benchmark's output folder {out} cannot be created ({e.strerror}); pick another --out.") from None
        config_path, episodes_path = out / "config.json", out / "episodes.jsonl"
        for stale in out.glob(".*.tmp"):  # left by a process killed in write_atomically; never read
            stale.unlink(missing_ok=True)
        record = _config_record(config)
        previous = _read_config(config_path) if resume else None
        if previous is not None:  # written before the judges existed: a benchmark without one
            previous = {"judge_model": None, "judge_batch": BenchConfig.judge_batch, **previous}
            previous = {"imports": [], "wrappers": [], "retriever_per_env": False, **previous}  # and before user pieces
        # Episodes of a different benchmark are never mixed in, nor silently deleted.
        recorded = read_episodes(episodes_path, repair=True) if resume else []
        if recorded and previous is None:
            raise ConfigError(
                f"{out} holds episodes but no config.json describing them; pick another --out, "
                "or pass --no-resume to replace them."
            )
        if recorded and _played(previous) != _played(record):
            changed = sorted(k for k in _played(record) if previous.get(k) != record[k])  # type: ignore[union-attr]
            details = [line for k in changed for line in settings_changes(previous.get(k), record[k])]  # type: ignore[union-attr]
            raise ConfigError(
                f"{out} holds a benchmark with a different configuration (changed: {', '.join(changed)})"
                f"{''.join('; ' + line for line in details)}; "
                "resume it with the same arguments, pick another --out, or pass --no-resume to start over."
            )
        kept = [r for r in recorded if r["outcome"] != "backend_error"]
        if len(kept) < len(recorded):  # a server that failed may answer now: those episodes are played again
            recorded = kept
            write_atomically(episodes_path, "".join(json.dumps(r) + "\n" for r in recorded))
        for r in recorded:
            if r["run"] in done:
                done[r["run"]].append(r)
        if not resume and episodes_path.exists():
            episodes_path.unlink()
        write_atomically(config_path, json.dumps(record, indent=2))
        if recorded:  # said before any model loads (minutes, for some)
            print(f"resuming: {len(recorded)} episodes done in {out} (--no-resume plays them again)", file=sys.stderr, flush=True)

    needs_lm = any(_run_needs_lm(config, env_id, agent) for env_id, agent in config.runs)
    needs_frozen = config.frozen_model is not None or config.summarizer == "llm"
    # A resumed benchmark may have nothing left to play: the envs, made without the frozen
    # model, say so before any model loads (seconds to minutes). Not under a question filter,
    # whose questions the frozen model picks.
    probe = needs_frozen and any(done.values()) and not any(_run_env_options(config, e).get("question_filter") for e, _ in config.runs)
    judged: list[tuple[dict[str, Any], Any]] = []  # (episode record, its question) for the judges
    total: int | None = None  # episodes of the whole benchmark, known once every run's env is made
    recipes: dict[str, Any] = {}  # label -> the reward recipe of its env
    protocols: dict[str, Any] = {}  # label -> the name of its env's protocol
    ctrl_c = CtrlC()
    try:
        with ctrl_c:
            lm = frozen = None
            if needs_frozen and not probe:
                lm, frozen = _load_models(config, needs_lm)
            plans = _plans(config, labels, frozen, probe=probe)
            total = sum(len(examples) for *_, examples in plans) * len(config.seeds)
            left = sum(len(_tasks(config, examples, done[label])) for label, *_, examples in plans)
            if out is not None and total and not left:
                print(f"reusing: all {total} episodes were done in {out}; nothing to play", file=sys.stderr, flush=True)
            elif probe:  # episodes to play: the envs are made again, with the frozen model
                lm, frozen = _load_models(config, needs_lm)
                plans = _plans(config, labels, frozen)
            elif needs_lm and not needs_frozen:
                lm = _load(config.model, config)
            recipes = {label: getattr(search_env(env), "recipe", None) for label, _, _, _, env, _ in plans}
            protocols = {label: getattr(getattr(search_env(env), "protocol", None), "name", None) for label, _, _, _, env, _ in plans}

            for label, env_id, agent_name, action_format, env, examples in plans:
                by_id = {ex.id: ex for ex in examples}
                tasks = _tasks(config, examples, done[label])
                if config.judge_model is not None:
                    judged.extend((r, by_id[r["example_id"]]) for r in done[label] if r["example_id"] in by_id)
                if not tasks:
                    continue
                # As many envs as episodes can be live at once: no more than there are tasks.
                envs = [env] + [_make_env(config, env_id, frozen, action_format) for _ in range(min(config.num_envs, len(tasks)) - 1)]
                agent = _make_agent(config, agent_name, envs[0], lm)

                def write(result: EpisodeResult, label: str = label, by_id: dict[str, Any] = by_id) -> None:
                    record = {"run": label, **result.to_dict()}
                    if record["outcome"] in FAILED_OUTCOMES:  # never scored: null, as its row's reward in summary.json
                        record["reward"] = None
                    done[label].append(record)
                    if config.judge_model is not None:
                        judged.append((record, by_id[record["example_id"]]))
                    if out is not None:
                        append_line(out / "episodes.jsonl", json.dumps(record))
                    ctrl_c.check()  # a Ctrl-C that Python could not raise where it came: stop once this episode is kept

                run_episodes(envs, agent, tasks, on_result=write, progress=progress, desc=label, mode=config.driver, concurrency=config.concurrency)

            if config.judge_model is not None:
                waiting = [(r, ex) for r, ex in judged if not all(key in r for key, _, _ in JUDGE_COLUMNS)]
                if waiting:
                    judge_lm = lm if config.judge_model == "policy" and lm is not None else _load(config.model if config.judge_model == "policy" else config.judge_model, config)
                    judge_records(waiting, judge_lm, batch=config.judge_batch)
                    if out is not None:  # the verdicts are kept with the episodes, so a resumed bench asks no judge again
                        write_atomically(out / "episodes.jsonl", "".join(json.dumps(r) + "\n" for label in labels for r in done[label]))
    except BaseException as e:  # Ctrl-C (or SIGTERM), also when Python wrapped it in another exception
        stop = interrupt_in(e)
        if stop is None:
            raise
        raise Interrupted(_stopped(sum(map(len, done.values())), total, out, str(stop))) from None
    rows = [
        summarize(label, env_id, describe_agent(agent), done[label], action_format=run_action_format(config, env_id, agent))
        | reward_parts(recipes.get(label)) | run_protocol(config, env_id, protocols.get(label))
        for label, (env_id, agent) in zip(labels, config.runs)
    ]
    results = BenchResults(config, rows, done, out)
    if out is not None:
        results.files = write_summary(results, out)
    return results


def _load_models(config: BenchConfig, needs_lm: bool) -> tuple[Any, Any]:
    """The policy model (None when no run needs one) and the frozen model (None when none is
    asked for: ``frozen_model``, or ``summarizer="llm"``, whose model is the policy's)."""
    lm = _load(config.model, config) if needs_lm else None
    if config.frozen_model is None and config.summarizer != "llm":
        return lm, None
    name = config.frozen_model or "policy"
    # load_lm shares one instance when the frozen model is the policy model.
    return lm, lm if name == "policy" and lm is not None else _load(config.model if name == "policy" else name, config)


def _plans(config: BenchConfig, labels: Sequence[str], frozen: Any, *, probe: bool = False) -> list[tuple[Any, ...]]:
    """(label, env id, agent, action format, first env, questions) of every run. ``probe``
    makes the envs without their frozen models, only to count the questions."""
    plans = []
    for label, (env_id, agent_name) in zip(labels, config.runs):
        action_format = run_action_format(config, env_id, agent_name)
        env_id = full_env_id(env_id)
        env = _make_env(config, env_id, frozen, action_format, probe=probe)
        plans.append((label, env_id, agent_name, action_format, env, search_env(env).examples[: config.limit]))
    return plans


def _tasks(config: BenchConfig, examples: Sequence[Any], records: Sequence[dict[str, Any]]) -> list[Task]:
    """The episodes of a run not in ``records`` yet: each question once per seed."""
    played = {(r["example_id"], r["seed"]) for r in records}
    return [Task(ex.id, seed) for seed in config.seeds for ex in examples if (ex.id, seed) not in played]


def _stopped(kept: int, total: int | None, out: Path | None, by: str) -> str:
    """The line of a benchmark stopped by Ctrl-C (or SIGTERM): what was kept and how to go on."""
    by = "SIGTERM" if by == "SIGTERM" else "Ctrl-C"
    of = f" of {total}" if total is not None else ""
    if out is None:
        return f"{kept}{of} episodes played when {by} stopped the benchmark (no output folder: nothing kept)"
    return f"{kept}{of} episodes kept in {out}; run the same command to go on"


def judge_records(items: Sequence[tuple[dict[str, Any], Any]], lm: Any, *, batch: int = 64) -> None:
    """Add the judge columns (:data:`JUDGE_COLUMNS`) to episode records, in place.

    ``items`` are (record, its :class:`~searchgym.corpora.types.QAExample`). A record without
    a prediction, or whose prediction is hedged (:func:`~searchgym.rewards.hedging.hedged`,
    with the question and its candidates), scores 0 on both without a call; GenAcc+judge is 1
    without a call when s3's span check passes. The rest go to the two judges
    (:class:`~searchgym.envs.components.lm_frozen.LMJudge` over ``lm``, s3's and R1-Searcher's prompt),
    ``batch`` prompts per ``generate`` call, each distinct (question, prediction) once.
    """
    from searchgym.envs.components.lm_frozen import LMJudge
    from searchgym.rewards.hedging import hedged
    from searchgym.rewards.metrics import span_check
    from searchgym.rewards.normalize import normalize_answer

    s3_judge, r1_judge = LMJudge(lm, prompt="s3"), LMJudge(lm, prompt="r1-searcher")
    asks: dict[str, list[tuple[dict[str, Any], tuple[str, str, list[str]]]]] = {"gen_acc_judge": [], "acc_judge": []}
    for record, example in items:
        prediction = record.get("prediction")
        golds = [a for a in example.answers if normalize_answer(a)]
        if not prediction or not prediction.strip() or not golds or hedged(
            prediction, example.answers, example.candidates, question=example.question
        ):
            record["gen_acc_judge"] = record["acc_judge"] = 0.0
            continue
        item = (example.question, prediction, golds)
        if span_check(prediction, golds):
            record["gen_acc_judge"] = 1.0
        else:
            asks["gen_acc_judge"].append((record, item))
        asks["acc_judge"].append((record, item))
    for key, judge in (("gen_acc_judge", s3_judge), ("acc_judge", r1_judge)):
        pending = asks[key]
        for start in range(0, len(pending), batch):
            chunk = pending[start : start + batch]
            for (record, _), verdict in zip(chunk, judge.judge_many([item for _, item in chunk])):
                record[key] = float(verdict)


#: Agents that answer in one short turn: their answers need few tokens.
_ONE_SHOT = ("no-retrieval", "naive-rag", "naive-rag-dense", "gold-passage", "sb3")


def _run_needs_lm(config: BenchConfig, env_id: str, agent: Any) -> bool:
    if isinstance(agent, Agent):
        return False  # an instance holds what it needs
    if isinstance(agent, str):
        return agent_needs_lm(agent, env_id, config.agent_options.get(agent))
    return factory_needs_lm(agent)


def _make_agent(config: BenchConfig, agent: Any, env: Any, lm: Any) -> Agent:
    """The run's agent: an instance as is, a built-in by name with the benchmark's
    settings, a user's factory with the settings it takes (see ``register_agent``)."""
    if isinstance(agent, Agent):
        return agent
    factory = registered_factory(agent) if isinstance(agent, str) else agent
    if factory is None:
        return make_agent(agent, env, lm=lm, **_agent_options(config, agent))
    settings = {"seed": config.seeds[0], "temperature": config.temperature, "max_new_tokens": config.max_new_tokens}
    return build_agent(factory, env, lm, dict(config.agent_options.get(agent_label(agent), {})), bench=settings)


def _agent_options(config: BenchConfig, agent: str) -> dict[str, Any]:
    if agent == "random":
        options: dict[str, Any] = {"seed": config.seeds[0]}
    elif agent in LM_FREE:
        options = {}
    else:
        max_new_tokens = min(config.max_new_tokens, 64) if agent in _ONE_SHOT else config.max_new_tokens
        options = {"max_new_tokens": max_new_tokens, "temperature": config.temperature, "seed": config.seeds[0]}
        if agent == "naive-rag-dense" and "dtype" in config.backend_options:
            # The encoder runs in the dtype asked for the language models (bf16 is ~2.5x faster on CPU).
            options["retriever_options"] = {"dtype": config.backend_options["dtype"]}
    return options | dict(config.agent_options.get(agent, {}))


def _load(name: Any, config: BenchConfig) -> Any:
    from searchgym.lm.base import LanguageModel
    from searchgym.lm.registry import load_lm

    if isinstance(name, LanguageModel):
        return name
    return load_lm(name, backend=config.backend, **config.backend_options)


# ---------------------------------------------------------------- output
def write_summary(results: BenchResults, out: Path) -> list[str]:
    """``summary.json``, ``summary.csv`` and (with matplotlib) ``summary.png`` in ``out``,
    each replaced atomically; returns the names of those written. Without matplotlib an
    earlier run's ``summary.png`` is removed: it would show other numbers."""
    write_atomically(out / "summary.json", json.dumps({"config": _config_record(results.config), "runs": results.rows}, indent=2))
    keys = [k for k in dict.fromkeys(k for row in results.rows for k in row) if k not in ("outcomes", "flags")]
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=keys, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(results.rows)
    write_atomically(out / "summary.csv", table.getvalue())
    if plot(results.rows, out / "summary.png") is None:
        (out / "summary.png").unlink(missing_ok=True)
        return ["summary.json", "summary.csv"]
    return ["summary.json", "summary.csv", "summary.png"]


#: The score series of the chart: (key, legend name).
SCORE_SERIES = (("em", "EM"), ("f1", "F1"), ("cover_em", "cover-EM"), ("gen_acc", "GenAcc"))


def chart_series(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """The score series worth drawing as bars: those above zero in some row (EM and F1 when
    every score is zero, so the chart still shows the runs). :func:`zero_series` names the
    others on the chart."""
    drawn = [(key, name) for key, name in SCORE_SERIES if any(r[key] for r in rows)]
    return drawn or list(SCORE_SERIES[:2])


def zero_series(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Legend names of the score series that are zero in every run: the chart says so
    instead of leaving them out silently."""
    return [name for key, name in SCORE_SERIES if not any(r[key] for r in rows)]


def chart(rows: Sequence[dict[str, Any]]) -> Any:
    """The matplotlib figure of :func:`plot` (matplotlib must be importable)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["label"] for r in rows]
    fig, (ax1, ax_reward, ax2, ax3) = plt.subplots(
        1, 4, figsize=(17, 0.5 * len(rows) + 2.8), gridspec_kw={"width_ratios": [3, 1.2, 1.2, 1.2]}
    )
    series = chart_series(rows)
    height = 0.8 / len(series)
    for i, (key, name) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * height
        ax1.barh([y + offset for y in range(len(rows))], [r[key] for r in rows], height, label=name)
    ax1.set_yticks(range(len(rows)), labels)
    ax1.invert_yaxis()
    ax1.set_xlim(0, 1)
    ax1.set_xlabel("score (mean over questions)")
    zeros = zero_series(rows)
    ax1.legend(loc="best", title=f"0 in every run: {', '.join(zeros)}" if zeros else None, title_fontsize="small")
    panels = (
        (ax_reward, "reward", "tab:green", "episode reward (mean)"),
        (ax2, "searches", "tab:gray", "searches per episode"),
        (ax3, "context_tokens", "tab:purple", "context tokens"),
    )
    for ax, key, color, xlabel in panels:
        values = [r.get(key) or 0.0 for r in rows]  # a reward of None: every episode failed
        ax.barh(range(len(rows)), values, color=color)
        ax.set_yticks(range(len(rows)), [""] * len(rows))
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        if min(values) < 0:  # invalid-turn penalties
            ax.axvline(0, color="black", linewidth=0.8)
        if not any(values):
            ax.text(0.5, 0.5, "0 in every run", transform=ax.transAxes, ha="center", va="center", color="dimgray")
    n = max(r["n"] for r in rows)
    fig.suptitle(f"searchgym bench ({n} question{'s' if n != 1 else ''} per run)")
    fig.tight_layout()
    return fig


def plot(rows: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """Grouped bars of EM / F1 / cover-EM / GenAcc per run (series that are zero in every
    run named in the legend's title instead of drawn), beside the mean episode reward,
    searches and context tokens (a panel that is zero in every run says so)."""
    try:
        fig = chart(rows)  # sets the Agg backend before pyplot is imported
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed ({install_command('plot')}): no chart written.", file=sys.stderr)
        return None
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=120)
    plt.close(fig)
    write_atomically(Path(path), image.getvalue())
    return path

