"""One self-contained HTML page of run folders: the template with the data inside.

The data goes into a ``<script type="application/json">`` block, written so that no text
of it can end that block or open a comment (every ``<`` is written ``\\u003c``, which
``JSON.parse`` reads back as ``<``); the page's script puts every text into the page as
text, never as HTML. The page fetches nothing: it opens from the file, offline.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

from searchgym.view.load import load_runs

#: Where the template's data goes.
PLACEHOLDER = "__SEARCHGYM_DATA__"


def finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None (``JSON.parse`` accepts neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def embed(data: Any) -> str:
    """``data`` as JSON that is safe inside a ``<script>`` element."""
    text = json.dumps(finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # U+2028/2029 are JSON but were line ends to older JavaScript; "<" could close the element.
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render_page(data: dict[str, Any]) -> str:
    """The HTML page of ``data`` (:func:`~searchgym.view.load.load_runs`)."""
    template = resources.files("searchgym.view").joinpath("page.html").read_text(encoding="utf-8")
    before, found, after = template.partition(PLACEHOLDER)
    assert found, "the page template lost its data placeholder"
    return before + embed(data) + after


def default_output(paths: list[Path]) -> Path:
    """Where the page goes without ``-o``: ``view.html`` in the one folder, else in the current one."""
    return paths[0] / "view.html" if len(paths) == 1 else Path("searchgym-view.html")


def write_page(paths: list[str | Path], out: str | Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Write the page of the run folders ``paths`` to ``out`` (default :func:`default_output`);
    returns its path and the data it shows."""
    from searchgym.bench import write_atomically

    data = load_runs(paths)
    target = Path(out) if out is not None else default_output([Path(p) for p in paths])
    write_atomically(target, render_page(data))
    return target, data


def size_text(n: int) -> str:
    """A byte count as people read it (``"2.4 MB"``)."""
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} bytes"  # never reached
