"""Training metrics: one CSV row per step, TensorBoard when installed, a PNG of the curves."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class MetricsLog:
    """Append-only ``metrics.csv`` whose columns are fixed when it is created.

    On resume, rows after the checkpoint's step are dropped (they belong to steps that
    will be played again). Unknown keys are an error, so a typo never silently vanishes.
    """

    def __init__(self, path: str | os.PathLike, columns: Sequence[str], *, resume_step: int | None = None, tensorboard_dir: str | os.PathLike | None = None):
        self.path = Path(path)
        self.columns = list(columns)
        rows: list[dict[str, str]] = []
        if resume_step is not None and self.path.is_file():
            with open(self.path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                if reader.fieldnames is not None:
                    self.columns = list(reader.fieldnames) + [c for c in self.columns if c not in reader.fieldnames]
                for row in reader:
                    try:
                        if int(row["step"]) <= resume_step:
                            rows.append(row)
                    except (KeyError, TypeError, ValueError):
                        break  # a row cut by a kill: everything after it is dropped
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, self.path)
        self.rows: list[dict[str, Any]] = [{k: _number(v) for k, v in r.items()} for r in rows]
        self._tb = None
        if tensorboard_dir is not None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional
                SummaryWriter = None
            if SummaryWriter is not None:
                self._tb = SummaryWriter(log_dir=str(tensorboard_dir), purge_step=None if resume_step is None else resume_step + 1)

    def log(self, row: Mapping[str, Any]) -> None:
        unknown = sorted(set(row) - set(self.columns))
        if unknown:
            raise KeyError(f"MetricsLog got columns it was not created with: {unknown}")
        with open(self.path, "a", newline="", encoding="utf-8") as f:
            csv.DictWriter(f, fieldnames=self.columns).writerow({k: _format(v) for k, v in row.items()})
            f.flush()
        self.rows.append(dict(row))
        if self._tb is not None:
            step = int(row["step"])
            for k, v in row.items():
                if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def _format(v: Any) -> Any:
    return f"{v:.6g}" if isinstance(v, float) else v


def _number(v: str | None) -> Any:
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


#: (title, [(column, label)]) panels of :func:`plot_curves`.
PANELS = (
    ("reward", [("reward", "train (sampled)"), ("eval_reward", "eval (greedy)")]),
    ("answer score", [("em", "train EM"), ("f1", "train F1"), ("eval_em", "eval EM"), ("eval_f1", "eval F1")]),
    ("response tokens", [("response_tokens", "generated per episode")]),
    ("searches", [("searches", "per episode (train)"), ("eval_searches", "eval")]),
    ("learning signal", [("group_reward_std", "reward std in a group"), ("equal_reward_groups", "groups all equal"),
                         ("adv_std", "advantage std"), ("trained_token_share", "tokens trained")]),
    ("stability", [("empty_turns", "empty turns"), ("repeated_output", "repeated output"), ("invalid_turns", "invalid turns")]),
)


def plot_curves(rows: Sequence[Mapping[str, Any]], path: str | os.PathLike, *, title: str = "", panels: Sequence[Any] = PANELS) -> Path | None:
    """A PNG of reward, answer score, length and searches per step (``None`` without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
    for ax, (name, series) in zip(axes, panels):
        for column, label in series:
            points = [(r["step"], r[column]) for r in rows if isinstance(r.get(column), (int, float)) and r.get(column) is not None]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o" if len(points) < 30 else None, markersize=3, label=label)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return path
