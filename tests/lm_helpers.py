"""Helpers shared by the language-model backend tests."""

import pytest


def ascii_window(text):
    """A two-character printable ASCII piece of ``text`` after its first character (a stop
    string the greedy continuation is known to produce)."""
    for i in range(1, len(text) - 1):
        if all(" " < c < "~" for c in text[i : i + 2]):
            return text[i : i + 2]
    pytest.skip(f"no ASCII piece in {text!r}")
