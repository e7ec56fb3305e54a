"""Tool results recorded once and replayed byte for byte: episodes that replay on any machine.

A :class:`ToolRecord` is a folder of what the env's tools returned: each search (the hits'
ids, titles, texts and scores), each summary, each result of a protocol's own call (the browse
game's ``open`` and ``find``), and each simulated engine's documents (a retriever that
answers from a model is a search like any other). Each result is keyed by the tool, its
arguments and the identity of what answered it: the corpus's fingerprint and the engine's
class and settings (a server's URL with its token shown as ``***``). Under
``mode="replay"`` the same call returns the recorded result, equal to the byte; a call never
recorded is refused by name (:class:`~searchgym.error.ReplayMissError`), or passed through to the
live tool with ``misses="pass"``.

The folder holds ``tools.jsonl`` (one record a line: ``key``, ``tool``, ``arguments``,
``identity``, ``result``) and ``meta.json``. It holds only what the tools returned in this run
and the arguments the agent gave them (no credentials: the identity keeps no token, and no
option of the env is written), so it can be shared and moved: copy the folder and replay it
elsewhere. It is bounded (``max_bytes``, 1 GiB by default): past it, new results are not
recorded and a warning says so once; a replay of such a run then misses those calls by name.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from searchgym.corpora.types import Hit, Passage, SearchContext
from searchgym.error import ConfigError, SearchGymError

__all__ = ["RECORD_MODES", "RecordedProtocolCalls", "RecordedRetriever", "RecordedSummarizer", "ReplayMissError", "ToolRecord",
           "engine_identity", "open_record"]

RECORD_MODES = ("record", "replay")
MISS_POLICIES = ("refuse", "pass")
RECORD_FILE = "tools.jsonl"
#: An engine's settings that change how fast it answers, or where its files are on this machine,
#: never what it answers (its pruning keeps the exact top k): not part of its identity, so a
#: record made on one machine replays on another.
MACHINE_SETTINGS = frozenset({"n_threads", "query_threads", "threads", "in_memory", "folder", "path", "pruning", "prune_from", "batch_size",
                              "device", "max_query_chars", "timeout", "retries"})
_FORMAT = 1


class ReplayMissError(SearchGymError):
    """A replayed run asked a tool for something the record does not hold."""


def _canonical(value: Any) -> Any:
    """``value`` as plain JSON data (dataclasses as their fields, tuples as lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def engine_identity(engine: Any) -> dict[str, Any]:
    """What identifies a search engine's answers: its class, its settings, its corpus's
    fingerprint (when it has a corpus) and, for a server, its URL with any token hidden."""
    from searchgym.plugins import recorded_settings

    identity: dict[str, Any] = {"class": f"{type(engine).__module__}:{type(engine).__qualname__}"}
    corpus = getattr(engine, "corpus", None)
    fingerprint = getattr(corpus, "known_fingerprint", None)
    if callable(fingerprint):
        identity["corpus"] = fingerprint()
    elif corpus is not None and getattr(corpus, "fingerprint", None) is not None:
        identity["corpus"] = corpus.fingerprint
    url = getattr(engine, "shown_url", None)
    if isinstance(url, str):
        identity["url"] = url
    elif callable(getattr(engine, "settings", None)) or dataclasses.is_dataclass(engine):
        identity["settings"] = recorded_settings(engine)
    else:  # its public plain settings (BM25's k1 and b, a dense model's name), never a secret
        from searchgym.plugins import SECRET_OPTIONS

        identity["settings"] = {k: v for k, v in sorted(vars(engine).items()) if not k.startswith("_") and k not in MACHINE_SETTINGS
                                and k.lower() not in SECRET_OPTIONS and (v is None or isinstance(v, (bool, int, float, str)))}
    return identity


class ToolRecord:
    """A folder of recorded tool results (see the module's docstring).

    Args:
        folder: Where the record lives (created when recording).
        mode: ``"record"`` (call the tools, keep what they return; results already in the
            folder are reused, so a rerun records only what is new) or ``"replay"`` (answer
            from the folder only).
        misses: Under replay, ``"refuse"`` (default) a call the folder does not hold with a
            :class:`ReplayMissError` naming it, or ``"pass"`` it to the live tool (and keep
            its result out of the folder).
        max_bytes: The most bytes ``tools.jsonl`` may grow to.
    """

    def __init__(self, folder: str | os.PathLike, mode: str = "record", *, misses: str = "refuse", max_bytes: int = 1 << 30):
        if mode not in RECORD_MODES:
            raise ConfigError(f"ToolRecord expects mode to be one of {', '.join(RECORD_MODES)}, got {mode!r}.")
        if misses not in MISS_POLICIES:
            raise ConfigError(f"ToolRecord expects misses to be one of {', '.join(MISS_POLICIES)}, got {misses!r}.")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ConfigError(f"ToolRecord expects max_bytes to be a positive integer, got {max_bytes!r}.")
        self.folder, self.mode, self.misses, self.max_bytes = Path(folder), mode, misses, max_bytes
        self.path = self.folder / RECORD_FILE
        if mode == "replay" and not self.path.is_file():
            raise ConfigError(
                f"ToolRecord cannot replay {str(self.folder)!r}: it holds no {RECORD_FILE}; record a run into it first "
                "(record=DIR, --record DIR)."
            )
        self._lock = threading.Lock()
        self._results: dict[str, Any] = {}
        self._size = 0
        self._full_warned = False
        self.hits = self.misses_count = self.recorded = 0
        if self.path.is_file():
            self._load()
        elif mode == "record":
            self.folder.mkdir(parents=True, exist_ok=True)
            (self.folder / "meta.json").write_text(json.dumps({"format": _FORMAT, "file": RECORD_FILE}) + "\n", encoding="utf-8")

    def __reduce__(self) -> tuple[Any, ...]:
        return ToolRecord, (str(self.folder), self.mode), {"misses": self.misses, "max_bytes": self.max_bytes}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.misses, self.max_bytes = state["misses"], state["max_bytes"]

    def _load(self) -> None:
        with open(self.path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                self._size += len(line.encode("utf-8"))
                if not line.endswith("\n"):
                    break  # a line cut by a killed process: not a record
                try:
                    record = json.loads(line)
                    self._results[record["key"]] = record["result"]
                except (ValueError, KeyError, TypeError) as e:
                    raise ConfigError(f"ToolRecord: {self.path}:{number} is not a tool record ({type(e).__name__}); "
                                      "the folder was written by something else, or damaged.") from e

    @staticmethod
    def key(tool: str, arguments: Any, identity: Any) -> str:
        """The record's key: a hash of the tool, its arguments and what answered it."""
        blob = json.dumps([tool, _canonical(arguments), _canonical(identity)], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    def lookup(self, tool: str, arguments: Any, identity: Any) -> tuple[str, Any, bool]:
        """``(key, result, found)``; under replay with ``misses="refuse"``, a miss raises."""
        key = self.key(tool, arguments, identity)
        with self._lock:
            if key in self._results:
                self.hits += 1
                return key, self._results[key], True
            self.misses_count += 1
        if self.mode == "replay" and self.misses == "refuse":
            shown = json.dumps(_canonical(arguments), ensure_ascii=False)
            raise ReplayMissError(
                f"The replayed record {str(self.folder)!r} holds no {tool} call with arguments {shown[:300]} "
                f"(answered by {json.dumps(_canonical(identity))[:200]}): the run asks what the recorded one did not. Replay "
                "the same run (same questions, seeds, agent, corpus and index), record again, or pass replay_misses='pass'."
            )
        return key, None, False

    def store(self, key: str, tool: str, arguments: Any, identity: Any, result: Any) -> None:
        """Keep a result (recording only; a replay passing a miss through keeps nothing)."""
        if self.mode != "record":
            return
        line = json.dumps({"key": key, "tool": tool, "arguments": _canonical(arguments), "identity": _canonical(identity),
                           "result": result}, ensure_ascii=False) + "\n"
        data = line.encode("utf-8", "surrogatepass")
        with self._lock:
            if key in self._results:
                return
            if self._size + len(data) > self.max_bytes:
                if not self._full_warned:
                    self._full_warned = True
                    warnings.warn(f"ToolRecord {str(self.folder)!r} reached max_bytes ({self.max_bytes:,}): later tool results "
                                  "are not recorded, and a replay of this run will miss them.", stacklevel=3)
                return
            with open(self.path, "ab") as f:
                fcntl.flock(f, fcntl.LOCK_EX)  # processes recording into one folder append whole lines
                f.write(data)
                fcntl.flock(f, fcntl.LOCK_UN)
            self._size += len(data)
            self._results[key] = result
            self.recorded += 1


_OPEN: dict[tuple[str, str, str], ToolRecord] = {}
_OPEN_LOCK = threading.Lock()


def open_record(record: Any = None, replay: Any = None, misses: str = "refuse") -> ToolRecord | None:
    """The :class:`ToolRecord` of an env's ``record=`` / ``replay=`` options (at most one): one
    per folder and mode in a process, shared by every env that names it (a bench's, a trainer's)."""
    if record is not None and replay is not None:
        raise ConfigError("SearchEnv expects record= or replay=, not both: record into one folder, replay from another.")
    if misses not in MISS_POLICIES:
        raise ConfigError(f"SearchEnv expects replay_misses to be one of {', '.join(MISS_POLICIES)}, got {misses!r}.")
    if isinstance(record, ToolRecord) or isinstance(replay, ToolRecord):
        return record or replay
    if record is None and replay is None:
        return None
    folder, mode = (record, "record") if record is not None else (replay, "replay")
    if not isinstance(folder, (str, os.PathLike)):
        raise ConfigError(f"SearchEnv expects {mode}= to be a folder path or a ToolRecord, got {type(folder).__name__}.")
    key = (str(Path(folder).resolve()), mode, misses)
    with _OPEN_LOCK:
        if key not in _OPEN:
            _OPEN[key] = ToolRecord(folder, mode, misses=misses)
        return _OPEN[key]


def _hit_data(hit: Hit) -> list[Any]:
    return [hit.passage.id, hit.passage.title, hit.passage.text, float(hit.score)]


def _hit(data: Sequence[Any]) -> Hit:
    return Hit(Passage(data[0], data[1], data[2]), data[3])


class RecordedRetriever:
    """A search engine whose answers go through a :class:`ToolRecord`: a batch asks the live
    engine only for the queries the record lacks (all at once), or none under replay."""

    def __init__(self, engine: Any, record: ToolRecord):
        self.engine, self.record = engine, record
        self.identity = engine_identity(engine)
        self.max_query_chars = getattr(engine, "max_query_chars", None)
        self.corpus = getattr(engine, "corpus", None)
        if callable(getattr(engine, "set_step", None)):
            self.set_step = engine.set_step

    def __getattr__(self, name: str) -> Any:  # the engine's other attributes (a server's limits, ...)
        if name in ("engine", "record"):
            raise AttributeError(name)
        return getattr(self.engine, name)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return self._search(queries, k, None)

    def search_with_context(self, queries: Sequence[str], k: int, contexts: Sequence[SearchContext]) -> list[list[Hit]]:
        return self._search(queries, k, contexts)

    def _search(self, queries: Sequence[str], k: int, contexts: Sequence[SearchContext] | None) -> list[list[Hit]]:
        # A context changes the answer only for an engine that reads it (a simulated engine).
        reads_context = contexts is not None and callable(getattr(self.engine, "search_with_context", None))
        found: list[list[Hit] | None] = []
        todo: list[tuple[int, str, dict[str, Any]]] = []
        for i, query in enumerate(queries):
            arguments = {"query": query, "k": k}
            if reads_context:
                arguments["context"] = contexts[i]
            key, result, hit = self.record.lookup("search", arguments, self.identity)
            found.append([_hit(h) for h in result] if hit else None)
            if not hit:
                todo.append((i, key, arguments))
        if todo:
            asked = [queries[i] for i, _, _ in todo]
            if reads_context:
                live = self.engine.search_with_context(asked, k, [contexts[i] for i, _, _ in todo])
            else:
                live = self.engine.search(asked, k)
            for (i, key, arguments), hits in zip(todo, live):
                data = [_hit_data(h) for h in hits]
                self.record.store(key, "search", arguments, self.identity, data)
                found[i] = [_hit(h) for h in data]  # what a replay will give: the same values, rebuilt the same way
        return found  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"RecordedRetriever({self.engine!r}, {self.record.mode} {str(self.record.folder)!r})"


class RecordedSummarizer:
    """A summarizer whose summaries go through a :class:`ToolRecord` (keyed by the question,
    the query and the hits' ids); a passthrough summarizer is not wrapped (nothing to record)."""

    def __init__(self, summarizer: Any, record: ToolRecord):
        from searchgym.plugins import recorded_settings

        self.summarizer, self.record = summarizer, record
        self.passthrough = bool(getattr(summarizer, "passthrough", False))
        self.identity = {"class": f"{type(summarizer).__module__}:{type(summarizer).__qualname__}",
                         "settings": recorded_settings(summarizer)}

    def __getattr__(self, name: str) -> Any:
        if name in ("summarizer", "record"):
            raise AttributeError(name)
        return getattr(self.summarizer, name)

    def summarize(self, question: str, query: str, hits: Sequence[Hit]) -> str:
        arguments = {"question": question, "query": query, "hits": [h.passage.id for h in hits]}
        key, result, hit = self.record.lookup("summarize", arguments, self.identity)
        if hit:
            return result
        text = self.summarizer.summarize(question, query, hits)
        self.record.store(key, "summarize", arguments, self.identity, text)
        return text


class RecordedProtocolCalls:
    """What a protocol's own calls show (``Protocol.act``: the browse game's ``open`` and
    ``find``), through a :class:`ToolRecord`, keyed by the action and the corpus's fingerprint."""

    def __init__(self, record: ToolRecord, corpus: Any):
        self.record = record
        fingerprint = getattr(corpus, "known_fingerprint", None)
        self.identity = {"corpus": fingerprint() if callable(fingerprint) else getattr(corpus, "fingerprint", None)}

    def play(self, protocol: Any, action: Any, live: Callable[[], str | None], *, as_tool: bool) -> str | None:
        identity = {**self.identity, "protocol": f"{type(protocol).__module__}:{type(protocol).__qualname__}",
                    "as_tool": as_tool}
        arguments = {"kind": action.kind, "action": action}
        key, result, hit = self.record.lookup(action.kind, arguments, identity)
        if hit:
            return result
        shown = live()
        self.record.store(key, action.kind, arguments, identity, shown)
        return shown
