"""Typed errors of searchgym.

Every message says what was expected, what was received and how to fix it.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable
from types import ModuleType


class SearchGymError(Exception):
    """Base class of every error raised by searchgym."""


class UnknownNameError(SearchGymError, LookupError):
    """A corpus, dataset, protocol, reward, retriever or summarizer name is not known."""

    def __init__(self, kind: str, name: object, known: Iterable[str]):
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        message = f"Unknown {kind} {name!r}."
        close = difflib.get_close_matches(str(name), self.known, n=1) if isinstance(name, str) else []
        if close:
            message += f" Did you mean {close[0]!r}?"
        message += f" Expected one of: {', '.join(self.known)}."
        super().__init__(message)


class MissingDependencyError(SearchGymError, ImportError):
    """An optional dependency is not installed."""

    def __init__(self, package: str, extra: str, feature: str, install: str | None = None):
        self.package = package
        self.extra = extra
        self.feature = feature
        self.install = install or f"pip install 'searchgym[{extra}]'"
        super().__init__(
            f"{feature} requires the package {package!r}, which is not installed. "
            f"Install it with: {self.install} (or run `make install`)"
        )


class DataFormatError(SearchGymError, ValueError):
    """A corpus or dataset file does not have the expected format."""

    def __init__(self, path: object, line: int | None, expected: str, got: str):
        self.path = str(path)
        self.line = line
        self.expected = expected
        self.got = got
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}: expected {expected}, got {got}.")


class DataFileNotFoundError(SearchGymError, FileNotFoundError):
    """A corpus or dataset file does not exist (``FileNotFoundError(errno, message, path)``)."""


class ConfigError(SearchGymError, ValueError):
    """An argument has an invalid value."""


class BackendError(SearchGymError, RuntimeError):
    """A language-model backend failed to answer (server down, timeout, garbage reply).

    Benchmarks record it as the episode's outcome instead of stopping the run."""


class TrainingError(SearchGymError, RuntimeError):
    """A training run cannot go on (a NaN loss, an empty batch, rollout and trainer
    logprobs that disagree); the message names the last good checkpoint."""


class TrainingStopped(SearchGymError, RuntimeError):
    """A run stopped on request (Ctrl-C, SIGTERM) after saving what it had; the message
    says what was written and how to continue."""


class InvalidActionError(SearchGymError, ValueError):
    """Raised by :class:`searchgym.envs.wrappers.StrictActions` for a malformed action."""


def require(
    module: str, *, extra: str, feature: str, package: str | None = None, install: str | None = None
) -> ModuleType:
    """Import an optional dependency or raise :class:`MissingDependencyError` naming the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingDependencyError(package or module, extra, feature, install) from e


def check_name(kind: str, name: str, known: Iterable[str]) -> str:
    """Return ``name`` if it is in ``known``; otherwise raise :class:`UnknownNameError`."""
    known = list(known)
    if name not in known:
        raise UnknownNameError(kind, name, known)
    return name
