"""Where searchgym keeps what it computes once (embeddings, converted models), and syncing
what it writes there."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$SEARCHGYM_CACHE`` if set, else ``~/.cache/searchgym``."""
    return Path(os.environ.get("SEARCHGYM_CACHE") or Path.home() / ".cache" / "searchgym")


def sync_folder(folder: str | os.PathLike) -> None:
    """fsync a folder, so that a rename into it survives a crash; a folder that cannot be
    opened for reading or synced (some filesystems) is left as it is: the rename itself is
    still atomic."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
