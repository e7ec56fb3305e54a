"""Read run folders into the data one page shows (:func:`load_runs`).

A *bench folder* is what ``searchgym bench`` writes (``config.json``, ``episodes.jsonl``,
``summary.json``); a *training folder* is what ``searchgym train`` writes (``args.json``,
``metrics.csv``, ``eval/step-N/`` bench folders of its evaluations, ``rollouts.jsonl`` with
the token records of a few rollouts per step). The result is plain JSON-able data:

- ``folders``: per folder its kind, path, settings, the summary table as the bench prints
  it (header and formatted cells, :func:`searchgym.bench.table_columns`), and for training
  the metric curves and one table row per evaluation;
- ``runs``: every run (a bench row, an evaluation's row, the training rollouts) with its
  folder, label, env and agent;
- ``docs``: every retrieved document once (id, title, text), which episodes name by index;
- ``episodes``: every episode record, its run an index into ``runs``.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from searchgym.bench import FAILED_OUTCOMES, browses, read_episodes, run_notes, summarize, table_columns
from searchgym.error import ConfigError, DataFormatError

#: Episode keys the page shows (the rest of a record stays in episodes.jsonl).
EPISODE_KEYS = (
    "example_id", "seed", "question", "answers", "prediction", "reward", "reward_components", "em", "f1",
    "cover_em", "gen_acc", "num_turns", "num_searches", "num_invalid", "outcome", "flags", "error", "step",
)


def folder_kind(path: Path) -> str:
    """``"bench"`` or ``"train"``; a folder that is neither is a :class:`ConfigError`."""
    if not path.is_dir():
        raise ConfigError(f"searchgym view expects a run folder (written by searchgym bench or train), got {str(path)!r}: no such folder.")
    if (path / "args.json").is_file() or (path / "metrics.csv").is_file():
        return "train"
    if (path / "episodes.jsonl").is_file() or (path / "summary.json").is_file():
        return "bench"
    raise ConfigError(
        f"searchgym view expects a run folder: a bench folder (episodes.jsonl, summary.json) or a training folder "
        f"(args.json, metrics.csv), got {str(path)!r}, which holds neither; pass the --out folder of searchgym bench or train."
    )


class _Collector:
    """The page data as it is gathered: runs, documents (each once) and episodes."""

    def __init__(self) -> None:
        self.folders: list[dict[str, Any]] = []
        self.runs: list[dict[str, Any]] = []
        self.docs: list[list[str]] = []
        self.doc_index: dict[tuple[str, str, str], int] = {}
        self.episodes: list[dict[str, Any]] = []

    def run(self, folder: int, label: str, env: str, agent: str) -> int:
        self.runs.append({"folder": folder, "label": label, "env": env, "agent": agent})
        return len(self.runs) - 1

    def doc(self, doc: dict[str, Any]) -> int:
        key = (str(doc.get("id", "")), str(doc.get("title", "")), str(doc.get("text", "")))
        if key not in self.doc_index:
            self.doc_index[key] = len(self.docs)
            self.docs.append(list(key))
        return self.doc_index[key]

    def episode(self, run: int, record: dict[str, Any]) -> None:
        shown: dict[str, Any] = {k: record[k] for k in EPISODE_KEYS if k in record}
        shown["run"] = run
        for key in ("reward", "em", "f1"):  # a record from elsewhere may hold NaN, which JSON cannot carry
            if isinstance(shown.get(key), float) and not math.isfinite(shown[key]):
                shown[key] = None
        turns = record.get("turns")
        if isinstance(turns, list):
            shown["turns"] = [self._turn(t) for t in turns if isinstance(t, dict)]
            marks = citation_marks(turns)
            if marks is not None:
                shown["citations"] = marks
        if isinstance(record.get("tokens"), list):
            shown["tokens"] = record["tokens"]
        self.episodes.append(shown)

    def _turn(self, turn: dict[str, Any]) -> dict[str, Any]:
        out = dict(turn)
        if isinstance(turn.get("searches"), list):
            out["searches"] = [
                {"query": s.get("query", ""), "docs": [self.doc(d) for d in s.get("docs", []) if isinstance(d, dict)]}
                for s in turn["searches"] if isinstance(s, dict)
            ]
        return out

    def data(self) -> dict[str, Any]:
        return {"version": 1, "folders": self.folders, "runs": self.runs, "docs": self.docs, "episodes": self.episodes}


#: How a cited or an evidence document of a browse-game episode is marked (:func:`citation_marks`).
CITATION_MARKS = ("cited-and-evidence", "cited-not-evidence", "evidence-not-cited")


def citation_marks(turns: Sequence[Any]) -> list[dict[str, Any]] | None:
    """The final answer's citations checked against the question's evidence and gold documents
    (an episode recorded with ``labels`` on its prompt entry and described ``calls``, as the
    browse game's are: :func:`searchgym.agents.transcript.add_calls`): each cited id marked
    ``cited-and-evidence`` or ``cited-not-evidence``, in the answer's order, then each evidence
    or gold id not cited, marked ``evidence-not-cited``; with its title where a search or a
    read of the episode showed it. None for an episode without labels."""
    entries = [t for t in turns if isinstance(t, dict)]
    labels = next((t.get("labels") for t in entries if "prompt" in t and isinstance(t.get("labels"), dict)), None)
    if not labels:
        return None
    evidence = [str(i) for key in ("evidence_ids", "gold_ids") for i in labels.get(key) or ()]
    titles: dict[str, str] = {}
    answer: dict[str, Any] | None = None
    for turn in entries:
        for search in turn.get("searches") or ():
            for doc in search.get("docs") or ():
                titles.setdefault(str(doc.get("id", "")), str(doc.get("title", "")))
        for call in turn.get("calls") or ():
            if call.get("title"):
                titles.setdefault(str(call.get("doc_id", "")), str(call["title"]))
            if call.get("kind") == "answer" and call.get("ran", True):
                answer = call
    cited = [str(c) for c in (answer or {}).get("citations") or ()]
    wanted = set(evidence)
    marks = [{"id": c, "mark": "cited-and-evidence" if c in wanted else "cited-not-evidence"} for c in dict.fromkeys(cited)]
    marks += [{"id": e, "mark": "evidence-not-cited"} for e in dict.fromkeys(evidence) if e not in set(cited)]
    for mark in marks:
        mark["title"] = titles.get(mark["id"])
    return marks


def load_runs(paths: Sequence[str | Path]) -> dict[str, Any]:
    """The page data of the run folders ``paths`` (see the module docstring)."""
    if not paths:
        raise ConfigError("searchgym view expects at least one run folder (the --out of searchgym bench or train).")
    collector = _Collector()
    for path in map(Path, paths):
        if folder_kind(path) == "bench":
            _load_bench(collector, path, name=str(path))
        else:
            _load_training(collector, path)
    return collector.data()


def _read_json(path: Path, expected: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataFormatError(path, None, expected, f"damaged JSON ({e})") from None


def _split_label(label: str) -> tuple[str, str]:
    """(env, agent) of a bench's default label ``"agent @ env"``; a custom label is its own agent."""
    agent, sep, env = label.rpartition(" @ ")
    return (env, agent) if sep else ("", label)


def bench_rows(path: Path, records: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(config, summary rows) of a bench folder: its ``summary.json``, or for a bench stopped
    before its summary, rows summarized from its episodes as the bench would."""
    summary = path / "summary.json"
    if summary.is_file():
        data = _read_json(summary, "the benchmark's summary as a JSON object with config and runs")
        if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
            raise DataFormatError(summary, None, "the benchmark's summary as a JSON object with config and runs", type(data).__name__)
        return data.get("config") or {}, data["runs"]
    config = _read_json(path / "config.json", "the benchmark's configuration as a JSON object") if (path / "config.json").is_file() else {}
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_run.setdefault(r["run"], []).append(r)
    rows = []
    for label, recs in by_run.items():
        env, agent = _split_label(label)
        rows.append(summarize(label, env, agent, recs))
    return config if isinstance(config, dict) else {}, rows


def table(config: dict[str, Any], rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summary table as ``searchgym bench`` prints it: headers and formatted cells."""
    columns = table_columns(judged=config.get("judge_model") is not None, browse=browses(rows))
    return {
        "headers": [header for _, header, _ in columns],
        "cells": [["-" if row.get(key) is None else fmt.format(row[key]) for key, _, fmt in columns] for row in rows],
    }


def failure_notes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The lines ``searchgym bench`` prints under its table about failed episodes: per row with
    failures, how many failed and the first error (:func:`searchgym.bench.run_notes`)."""
    failed = [row for row in rows if row.get("failed")]
    return [line for line in run_notes(failed) if not line.startswith("reward of ")] if failed else []


def chart_values(row: dict[str, Any]) -> dict[str, float]:
    """The figures the page's bar chart draws for one summary row."""
    failed = sum(v for k, v in (row.get("outcomes") or {}).items() if k in FAILED_OUTCOMES)
    value = lambda key: None if row.get(key) is None else float(row[key])  # noqa: E731
    # A row whose every episode failed has no reward (None: the page draws no bar and writes "-").
    return {"reward": value("reward"), "em": value("em") or 0.0, "f1": value("f1") or 0.0,
            "searches": value("searches") or 0.0, "failures": float(failed)}


def _load_bench(collector: _Collector, path: Path, *, name: str, step: int | None = None, folder: int | None = None) -> None:
    records = read_episodes(path / "episodes.jsonl")
    config, rows = bench_rows(path, records)
    if folder is None:
        collector.folders.append({"kind": "bench", "path": name, "settings": config, "table": table(config, rows),
                                  "notes": failure_notes(rows), "chart": [{"label": r["label"], **chart_values(r)} for r in rows]})
        folder = len(collector.folders) - 1
    run_of: dict[str, int] = {}
    for row in rows:
        # a training run labels its evaluations by their step already
        label = row["label"] if step is None or row["label"] == f"step {step}" else f"step {step}: {row['label']}"
        run_of[row["label"]] = collector.run(folder, label, row.get("env", ""), row.get("agent", ""))
    for record in records:
        if record["run"] not in run_of:  # episodes of a run the summary does not list (a newer bench)
            env, agent = _split_label(record["run"])
            run_of[record["run"]] = collector.run(folder, record["run"], env, agent)
        collector.episode(run_of[record["run"]], {**record, **({"step": step} if step is not None else {})})


def read_metrics(path: Path) -> dict[str, Any]:
    """``metrics.csv`` as curves: the steps and, per numeric column, its value at each step
    (None where a row left it empty)."""
    if not path.is_file():
        return {"steps": [], "series": {}}
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    steps = [_number(r.get("step")) for r in rows]
    series: dict[str, list[float | None]] = {}
    for column in (rows[0].keys() if rows else ()):
        if column == "step":
            continue
        values = [_number(r.get(column)) for r in rows]
        if any(v is not None for v in values):
            series[column] = values
    return {"steps": steps, "series": series}


def _number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _eval_folders(path: Path) -> Iterable[tuple[int, Path]]:
    for folder in sorted((path / "eval").glob("step-*")):
        step = folder.name.removeprefix("step-")
        if folder.is_dir() and step.isdigit() and (folder / "episodes.jsonl").is_file():
            yield int(step), folder


def _load_training(collector: _Collector, path: Path) -> None:
    args = _read_json(path / "args.json", "the run's settings as a JSON object") if (path / "args.json").is_file() else {}
    evals = []
    folder = len(collector.folders)
    entry = {"kind": "train", "path": str(path), "settings": args, "curves": read_metrics(path / "metrics.csv"), "evals": evals}
    collector.folders.append(entry)
    for step, eval_folder in _eval_folders(path):
        records = read_episodes(eval_folder / "episodes.jsonl")
        config, rows = bench_rows(eval_folder, records)
        shown = table(config, rows)
        entry.setdefault("table", {"headers": ["step", *shown["headers"]], "cells": []})
        entry["table"]["cells"] += [[str(step), *cells] for cells in shown["cells"]]
        evals.append(step)
        _load_bench(collector, eval_folder, name=str(eval_folder), step=step, folder=folder)
    rollouts = read_episodes(path / "rollouts.jsonl")
    if rollouts:
        run = collector.run(folder, "training rollouts", str(args.get("env_id", "")), str(args.get("algorithm", "")))
        for record in sorted(rollouts, key=lambda r: (r.get("step", 0), str(r["example_id"]), r.get("seed") or 0)):
            collector.episode(run, record)
