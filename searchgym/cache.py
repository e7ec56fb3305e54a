"""Where searchgym keeps what it computes once: embeddings, converted models."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$SEARCHGYM_CACHE`` if set, else ``~/.cache/searchgym``."""
    return Path(os.environ.get("SEARCHGYM_CACHE") or Path.home() / ".cache" / "searchgym")
