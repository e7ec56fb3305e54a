"""Writing a deepwiki world to its folder, once, whichever process gets there first.

The folder is written as a hidden temporary folder beside its final place and renamed into
place when whole, under a lock file (``fcntl``), so two processes asking for the same world
at once build it once, and a build killed half-way leaves nothing that a later call reads.
Articles are written as they are generated: memory holds the world's columns and the
questions, never the texts.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.cache import sync_folder
from searchgym.corpora.deepwiki.kinds import kind_values
from searchgym.corpora.deepwiki.prose import Pools, write_article
from searchgym.corpora.deepwiki.questions import (
    ALL_KINDS, Plan, check_plan, metadata, plant_questions, question_text, spare_questions,
)
from searchgym.corpora.deepwiki.world import ENTITY_KINDS, World, build_world, counts
from searchgym.error import ConfigError
from searchgym.progress import Progress

__all__ = ["SPLITS", "ensure_folder", "plan_world", "split_sizes"]

SPLITS = ("train", "dev", "test")
_PROGRESS_DOCUMENTS = 5000  # larger worlds show a progress bar
_PROGRESS_EVERY = 500


def split_sizes(count: int) -> dict[str, int]:
    """80/10/10, with at least three dev and three test questions."""
    held = max(3, round(0.1 * count))
    return {"train": count - 2 * held, "dev": held, "test": held}


def ensure_folder(folder: Path, knobs: Mapping[str, Any]) -> None:
    """Build ``folder`` unless a complete one is there (see the module docstring)."""
    if (folder / "meta.json").is_file():
        return
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(f".{folder.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (folder / "meta.json").is_file():  # another process built it while we waited
            return
        for stale in folder.parent.glob(f".{folder.name}.*.tmp"):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.mkdir()
        try:
            _write(tmp, knobs)
            if folder.exists():  # a folder without meta.json: left by hand, not ours to keep
                shutil.rmtree(folder)
            os.rename(tmp, folder)
            sync_folder(folder.parent)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def plan_world(knobs: Mapping[str, Any]) -> tuple[World, list[Plan], np.random.Generator, np.random.Generator]:
    """The world of ``knobs`` (resolved) with its checked questions, and the random streams that
    write its articles and split its questions: what :func:`ensure_folder` writes, rebuilt in
    memory (the tests check the world's questions on it)."""
    n, q = knobs["num_documents"], knobs["num_questions"]
    root = np.random.SeedSequence([knobs["seed"], n, knobs["constraints"], knobs["hops"], knobs["distractors"],
                                   knobs["words_per_document"], q])
    world_rng, plant_rng, prose_rng, split_rng = (np.random.default_rng(s) for s in root.spawn(4))
    planted = (q + spare_questions(q)) * (1 + knobs["distractors"])
    world = build_world(world_rng, knobs["seed"], n, planted)
    plans = plant_questions(plant_rng, world, q + spare_questions(q), knobs["constraints"], knobs["hops"], knobs["distractors"])
    values = kind_values(world, list(ALL_KINDS))
    plans = [p for p in plans if check_plan(world, p, values)][:q]
    if len(plans) < q:
        raise ConfigError(f"deepwiki expects to find {q} questions with exactly one answer, got {len(plans)}; "
                          "ask for fewer questions or more documents.")
    return world, plans, prose_rng, split_rng


def _write(tmp: Path, knobs: Mapping[str, Any]) -> None:
    started = time.perf_counter()
    n, q = knobs["num_documents"], knobs["num_questions"]
    world, plans, prose_rng, split_rng = plan_world(knobs)
    _write_questions(tmp / "questions.jsonl", world, plans, knobs["hops"], split_rng)
    _write_corpus(tmp / "corpus.jsonl", world, prose_rng, knobs["words_per_document"])
    meta = {"format_version": 1, "knobs": dict(knobs), "entities": counts(n), "questions": split_sizes(q),
            "build_seconds": round(time.perf_counter() - started, 2)}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    for name in ("questions.jsonl", "corpus.jsonl", "meta.json"):
        with open(tmp / name, "rb") as f:
            os.fsync(f.fileno())
    sync_folder(tmp)


def _write_questions(path: Path, world: World, plans: list[Plan], hops: int, rng: np.random.Generator) -> None:
    sizes = split_sizes(len(plans))
    order = rng.permutation(len(plans)).tolist()
    split_of = {}
    for position, k in enumerate(order):
        split_of[k] = "dev" if position < sizes["dev"] else "test" if position < sizes["dev"] + sizes["test"] else "train"
    with open(path, "w", encoding="utf-8") as f:
        for k, plan in enumerate(plans):
            line = {"id": f"dw-q{k:05d}", "question": question_text(world, plan.clauses),
                    "golden_answers": [world.person_name(plan.answer)], "split": split_of[k],
                    "metadata": metadata(world, plan, hops)}
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


def _write_corpus(path: Path, world: World, rng: np.random.Generator, words: int) -> None:
    pools = Pools(rng)
    n = world.num_documents
    targets = rng.integers(int(0.75 * words), int(1.2 * words) + 1, size=n).tolist()
    names = {kind: world.names(kind) for kind in ENTITY_KINDS}
    bar = Progress(n, "deepwiki: writing articles", "doc") if n >= _PROGRESS_DOCUMENTS else None
    dumps = json.JSONEncoder(ensure_ascii=False).encode
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as f:
        for number, (code, index) in enumerate(zip(world.order_kind.tolist(), world.order_index.tolist())):
            kind = ENTITY_KINDS[code]
            text = write_article(world, kind, index, rng, pools, targets[number])
            f.write(dumps({"id": world.doc(kind, index), "title": names[kind][index], "text": text}) + "\n")
            if bar is not None and number % _PROGRESS_EVERY == _PROGRESS_EVERY - 1:
                bar.update(_PROGRESS_EVERY)
    if bar is not None:
        bar.update(n - bar.n)
        bar.close()
