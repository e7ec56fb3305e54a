"""The verdicts of s3's training filter, computed once per setting and kept.

``question_filter="s3"`` asks the env's naive-RAG baseline (the recipe's generator, and its
judge, on the top-``initial_top_k`` documents of each question) whether it already answers;
that is one generator call per question of the split. Every env of a vector env, every
rollout slot of a trainer and every re-run would ask again, so the baseline GenAcc of each
question is kept per *setting*: the dataset's fingerprint (ids, questions, golds and
options of every example), the generator, the judge, the recipe's scoring options, the
retriever and the top-n, and searchgym's version.

- In memory, for the process: a later env with the same setting asks nothing.
- On disk, under ``cache_dir()/s3-filter/`` (``$SEARCHGYM_CACHE``), one JSON file per
  setting, written atomically: used only when every part of the setting can be named the
  same way in another process (:func:`stable_identity`): a model loaded by name
  (:func:`~searchgym.lm.registry.load_lm`; a local folder also by its files' sizes and
  times), a retriever made by name (:func:`~searchgym.corpora.retrievers.make_retriever`),
  a stateless built-in such as ``gold-span``. A model or retriever passed as an object
  is cached in memory only, under its identity.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchgym.cache import cache_dir, sync_folder
from searchgym.corpora.types import QAExample
from searchgym.envs.components.lifetimes import LifetimeRegistry

#: The sampling settings and prompt of a frozen LM role that change its answers.
_ROLE_SETTINGS = ("max_new_tokens", "temperature", "top_p")


def _path_signature(spec: str) -> list[Any] | None:
    """Sizes and modification times of the files of a local model folder (None if not a path)."""
    path = Path(spec)
    if not path.exists():
        return None
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return [[str(p.relative_to(path)) if p != path else p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in files]


def stable_identity(obj: Any) -> Any:
    """A JSON-able description of a frozen model, judge or retriever that is the same in
    every process that builds it the same way; None when there is none (an object built
    by hand, whose behaviour its name does not fix)."""
    from searchgym.corpora.retrievers import retriever_made_as
    from searchgym.corpora.types import Retriever
    from searchgym.lm.base import LanguageModel
    from searchgym.lm.registry import loaded_as

    if obj is None:
        return "none"
    if isinstance(obj, LanguageModel):
        loaded = loaded_as(obj)
        if loaded is None:
            return None
        spec, backend, options = loaded
        return ["lm", spec, backend, [list(o) for o in options], _path_signature(spec)]
    if isinstance(obj, Retriever):
        made = retriever_made_as(obj)
        if made is None:
            return None
        name = made[0]
        return ["retriever", json.loads(json.dumps(made, default=repr)), _path_signature(name) if isinstance(name, str) else None]
    lm = getattr(obj, "lm", None)
    if isinstance(lm, LanguageModel):
        base = stable_identity(lm)
        return None if base is None else _role_identity(obj, base)
    cls = type(obj)
    if cls.__module__.startswith("searchgym.") and getattr(obj, "__dict__", None) == {}:
        return f"{cls.__module__}.{cls.__qualname__}"  # stateless: its class fixes what it does
    return None


def _role_identity(role: Any, lm_identity: Any) -> list[Any]:
    """A frozen LM role (generator, judge) described by its model's identity and its settings."""
    settings = {k: getattr(role, k) for k in _ROLE_SETTINGS if hasattr(role, k)}
    prompt = getattr(role, "prompt", None)
    if prompt is not None:
        settings["prompt"] = getattr(prompt, "name", repr(prompt))
    return [type(role).__qualname__, lm_identity, settings]


def process_identity(obj: Any) -> Any:
    """:func:`stable_identity`, or else one that holds in this process only (object ids:
    the roles of several envs played by one model object are the same)."""
    from searchgym.lm.base import LanguageModel

    stable = stable_identity(obj)
    if stable is not None:
        return stable
    lm = getattr(obj, "lm", None)
    if isinstance(lm, LanguageModel):
        return _role_identity(obj, ["object", id(lm)])
    return ["object", id(obj)]


def dataset_fingerprint(examples: Sequence[QAExample]) -> str:
    """A hash of the ids, questions, gold answers and options of ``examples``, in order."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(json.dumps([ex.id, ex.question, list(ex.answers), list(ex.candidates)]).encode("utf-8", "surrogatepass"))
        h.update(b"\n")
    return h.hexdigest()[:24]


class FilterVerdicts:
    """The naive-RAG GenAcc of the questions of one setting: a dict example key -> GenAcc,
    read from and written to disk when the setting has a stable identity (``path``)."""

    def __init__(self, path: Path | None, setting: Any):
        self.path = path
        self.setting = setting
        self.scores: dict[str, float] = {}
        self._lock = threading.Lock()
        self._loaded = False

    def load(self) -> dict[str, float]:
        """The verdicts known so far (read from disk the first time)."""
        with self._lock:
            if not self._loaded and self.path is not None and self.path.is_file():
                try:
                    stored = json.loads(self.path.read_text())["scores"]
                    self.scores.update({str(k): float(v) for k, v in stored.items()})
                except (OSError, ValueError, KeyError, TypeError, AttributeError):
                    pass  # a damaged file is computed again and replaced
            self._loaded = True
            return dict(self.scores)

    def save(self, new: dict[str, float]) -> None:
        """Add ``new`` verdicts; write the file again (atomically) when there is one."""
        if not new:
            return
        with self._lock:
            self.scores.update(new)
            if self.path is None:
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
                with os.fdopen(fd, "w") as f:
                    json.dump({"setting": self.setting, "scores": self.scores}, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
                sync_folder(self.path.parent)
            except OSError:
                pass  # a read-only cache folder costs the next process the calls, nothing else


_VERDICTS: LifetimeRegistry[FilterVerdicts] = LifetimeRegistry()


def filter_verdicts(examples: Sequence[QAExample], retriever: Any, recipe: Any, *, initial_top_k: int) -> FilterVerdicts:
    """The verdict store of s3's filter for this setting (see the module docstring)."""
    import searchgym

    parts = {
        "generator": getattr(recipe, "generator", None),
        "judge": getattr(recipe, "judge", None),
        "retriever": retriever,
    }
    identities = {name: stable_identity(obj) for name, obj in parts.items()}
    stable = all(v is not None for v in identities.values())
    setting = {
        "searchgym": searchgym.__version__,
        "dataset": dataset_fingerprint(examples),
        "recipe": [type(recipe).__qualname__, getattr(recipe, "name", None), getattr(recipe, "strict", None)],
        "top_n": initial_top_k,
        **{name: identities[name] if identities[name] is not None else process_identity(obj) for name, obj in parts.items()},
    }
    digest = hashlib.sha256(json.dumps(setting, sort_keys=True, default=repr).encode()).hexdigest()[:32]
    path = cache_dir() / "s3-filter" / f"{digest}.json" if stable else None
    # Objects known by id() drop the store when they go (so a reused id finds nothing); one
    # that cannot be referenced weakly stays alive with it.
    owners = [
        obj if setting[name][0] == "object" else obj.lm  # see process_identity
        for name, obj in parts.items()
        if identities[name] is None
    ]
    return _VERDICTS.get((digest, str(path)), lambda: FilterVerdicts(path, setting), owners=owners, unbound="keep")


def clear_filter_cache() -> None:
    """Forget the verdicts kept in memory (the files on disk stay)."""
    _VERDICTS.clear()
