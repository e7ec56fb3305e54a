"""``searchgym view``: one HTML page to read bench and training runs (docs/view.md).

    from searchgym.view import write_page
    path, data = write_page(["results/bench"])   # results/bench/view.html

:mod:`~searchgym.view.load` reads run folders, :mod:`~searchgym.view.page` writes the
self-contained page (``page.html`` holds its script and style), :mod:`~searchgym.view.server`
serves it on 127.0.0.1.
"""

from searchgym.view.load import folder_kind, load_runs
from searchgym.view.page import render_page, size_text, write_page

__all__ = ["folder_kind", "load_runs", "render_page", "size_text", "write_page"]
