"""Atomic checkpoints (a run killed at any moment resumes from its last complete one), the
run folder's ``args.json`` (a resume with other settings is refused) and exported policy
folders.

A checkpoint is written into a temporary folder, flushed to disk, marked complete and
only then renamed to ``checkpoints/step-NNNNNN``; the ``latest`` pointer is replaced
atomically afterwards. A kill before the rename leaves a ``.tmp-*`` folder that the next
run deletes; a kill between the rename and the pointer update is found by scanning.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

from searchgym.cache import sync_folder
from searchgym.error import ConfigError
from searchgym.plugins import recorded_settings, settings_changes, without_secrets
from searchgym.training.args import Args

#: Args fields a resumed run may change (they do not alter what is computed).
RESUMABLE_CHANGES = frozenset(
    {"total_steps", "out", "resume", "progress", "eval_every", "eval_limit", "eval_env_options", "save_every", "keep_checkpoints", "tensorboard", "threads"}
)

COMPLETE = "COMPLETE"
STATE = "state.pt"
_NAME = re.compile(r"^step-(\d+)$")


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def save_checkpoint(run_dir: str | os.PathLike, step: int, state: dict[str, Any], *, keep: int = 2) -> Path:
    """Write ``state`` (anything ``torch.save`` takes) as the checkpoint of ``step``; keep the
    newest ``keep`` checkpoints. Returns the checkpoint folder."""
    import torch

    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    with open(tmp / STATE, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    _write_file(tmp / COMPLETE, f"{step}\n".encode())
    sync_folder(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    sync_folder(root)
    pointer = root / f".latest-{os.getpid()}"
    _write_file(pointer, f"{final.name}\n".encode())
    os.replace(pointer, root / "latest")
    sync_folder(root)
    for old in complete_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def checkpoint_step(path: str | os.PathLike) -> int | None:
    """The step of checkpoint folder ``path`` (``step-000012``: 12); None for another name."""
    m = _NAME.match(Path(path).name)
    return int(m.group(1)) if m else None


def complete_checkpoints(run_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoint folders of ``run_dir``, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        step = checkpoint_step(p)
        if step is not None and (p / COMPLETE).is_file() and (p / STATE).is_file():
            found.append((step, p))
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint (``None`` if there is none); deletes half-written ones."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return None
    for p in root.iterdir():
        if p.name.startswith((".tmp-", ".latest-")):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    complete = complete_checkpoints(run_dir)
    return complete[-1] if complete else None


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The state saved in checkpoint folder ``path``."""
    import torch

    path = Path(path)
    if not (path / COMPLETE).is_file():
        raise ConfigError(f"{path} is not a complete checkpoint (no {COMPLETE} marker); resume from latest_checkpoint().")
    with open(path / STATE, "rb") as f:
        return torch.load(f, map_location="cpu", weights_only=False)


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch random states (CUDA too when available)."""
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def merged_weights(model: Any, peft_model: Any = None) -> dict[str, Any]:
    """The weights of ``model`` in the base model's names, with the LoRA deltas of
    ``peft_model`` (the peft wrapper around ``model``, if any) added in."""
    import torch

    if peft_model is None:
        return {n: t.detach() for n, t in model.state_dict().items()}
    out: dict[str, Any] = {}
    with torch.no_grad():
        for module_name, module in model.named_modules():
            if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer"):
                base = module.base_layer.weight
                delta = sum((module.get_delta_weight(a) for a in module.active_adapters), torch.zeros_like(base))
                out[f"{module_name}.weight"] = base + delta
                if getattr(module.base_layer, "bias", None) is not None:
                    out[f"{module_name}.bias"] = module.base_layer.bias
        for name, tensor in model.state_dict().items():
            if "lora_" in name:
                continue
            out.setdefault(name.replace(".base_layer.", "."), tensor.detach())
    return out


def export_policy(folder: str | os.PathLike, model: Any, tokenizer: Any, peft_model: Any = None) -> Path:
    """Save the policy (LoRA merged into a copy when ``peft_model`` is given) with its
    tokenizer as a transformers folder, atomically: ``folder`` holds the old export or the
    new one, never half of one."""
    import copy

    import torch

    folder = Path(folder)
    tmp = folder.parent / f".tmp-{folder.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    if peft_model is None:
        model.save_pretrained(tmp)
    else:
        with torch.no_grad():
            copy.deepcopy(peft_model).merge_and_unload().save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    return folder


def args_record(args: Args) -> dict[str, Any]:
    """``args`` as the JSON object written to ``args.json`` and into checkpoints: plain
    values as they are, a user object by its settings (``settings()``, dataclass fields;
    :func:`searchgym.plugins.recorded_settings`), never its ``repr``."""
    record = {f.name: recorded_settings(getattr(args, f.name)) for f in dataclasses.fields(args)}
    return without_secrets(json.loads(json.dumps(record, default=str)))


def prepare_run_folder(out: Path, args: Args) -> Path | None:
    """Refuse a foreign run folder, write ``args.json``; return the checkpoint to resume from."""
    args_file = out / "args.json"
    checkpoint = latest_checkpoint(out) if out.exists() else None
    if out.exists() and any(out.iterdir()):
        if not args.resume:
            raise ConfigError(f"{out} is not empty; pick another --out, or resume the run in it (drop --no-resume).")
        if args_file.is_file():
            previous = json.loads(args_file.read_text())
            mine = args_record(args)
            # A field added since the run started was, for that run, at its default.
            defaults = args_record(type(args)())
            recorded = {k: previous[k] if k in previous else defaults.get(k) for k in mine}
            changed = sorted(k for k in mine if k not in RESUMABLE_CHANGES and recorded[k] != mine[k])
            if changed:
                details = "".join(f"; {line}" for k in changed for line in settings_changes(recorded[k], mine[k]))
                raise ConfigError(
                    f"{out} holds a run with different settings (changed: {', '.join(changed)}){details}; resume it with "
                    "the same settings or pick another --out."
                )
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "args.json.tmp"
    tmp.write_text(json.dumps(args_record(args), indent=2))
    os.replace(tmp, args_file)
    return checkpoint
