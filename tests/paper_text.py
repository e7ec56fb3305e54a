"""The papers' plain text (../shared/papers/ beside the checkout, or SEARCHGYM_PAPERS), for
tests that check searchgym's quotes and prompts against the papers' own words. A clean
clone has no such folder: those tests skip with ``needs_papers``."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAPERS = Path(os.environ.get("SEARCHGYM_PAPERS", ROOT.parent / "shared" / "papers"))
#: Paper name -> its text file in PAPERS.
PAPER_FILES = {"Search-R1": "search-r1.txt", "R1-Searcher": "r1-searcher.txt", "s3": "s3.txt", "R-Search": "r-search.txt", "RECON": "recon.txt"}

needs_papers = pytest.mark.skipif(not PAPERS.is_dir(), reason=f"the papers' text is not here ({PAPERS})")


def normalize(text: str) -> str:
    """Text as quotes compare it: HTML entities read, typographic quotes plain, the LaTeX
    arrow as the arrow it prints, any run of whitespace one space (the papers' text was
    extracted from PDFs, with line breaks anywhere)."""
    text = html.unescape(text).translate({0x2019: "'", 0x2018: "'", 0x201C: '"', 0x201D: '"'})
    text = text.replace("\\rightarrow", "\u2192")
    return re.sub(r"\s+", " ", text).strip()


def paper_text(name: str) -> str:
    """The normalized text of paper ``name`` (a key of :data:`PAPER_FILES`)."""
    return normalize((PAPERS / PAPER_FILES[name]).read_text(encoding="utf-8"))


def between(text: str, start: str, end: str) -> str:
    """The part of ``text`` from ``start`` (excluded) to the next ``end`` (excluded)."""
    i = text.index(start) + len(start)
    return text[i : text.index(end, i)].strip()


def squeeze(text: str) -> str:
    """``normalize``d text without any whitespace: a prompt is compared with its figure this
    way, as PDF extraction drops and adds spaces around tags (``and</think>``, ``</search> ,``)."""
    return re.sub(r"\s+", "", normalize(text))
