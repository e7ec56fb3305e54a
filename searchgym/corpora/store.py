"""Passage files in the formats retrieval-RL users already have, and a document chunker.

Two JSON-lines layouts are read (plain or gzip-compressed, detected from the file's
first bytes, one object per line, blank lines ignored):

* Search-R1 / FlashRAG: ``{"id": "0", "contents": "\\"Title\\"\\ntext"}``. The first line of
  ``contents`` is the title (one pair of surrounding double quotes is stripped), the rest
  is the text. ``contents`` without a newline is a passage without title.
* title/text: ``{"id": "0", "title": "Title", "text": "text"}``.
* document (the BrowseComp-Plus corpus, ``Tevatron/browsecomp-plus-corpus`` exported as
  JSON lines): ``{"docid": "37403", "text": "---\\ntitle: ...\\n---\\n...", "url": "https://..."}``
  on a line without ``id``. The passage id is ``docid``; its title is a ``title`` field if
  the line has one, else :func:`document_title` of the text (the front matter's ``title:``,
  else the first non-empty line, else the url); its text is ``text`` unchanged. See
  :mod:`searchgym.corpora.browsecomp`.

The layout is detected per line, so a file may mix them (a line with ``title`` and
``text`` uses them even if it also has ``contents``; a line with ``id`` is never read as a
document). ``id`` (or a document's ``docid``) is required (a string or an integer, which is
converted to its decimal string) and must be unique in the file. Other keys are ignored.

Whatever a file holds, reading it either succeeds or raises
:class:`~searchgym.error.DataFormatError` naming the file (and the line, for a bad line):
a line that is not UTF-8, not JSON, nested more than :data:`MAX_JSON_DEPTH` levels, holding
an integer too long for Python to convert or a lone surrogate, or not an object of the
layout; a directory, a named pipe or another file that is not a regular file; and a file
of another kind (Parquet, zip, a JSON array, UTF-16 text, ...), named as what it is.
"""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from searchgym.corpora.types import Passage
from searchgym.error import ConfigError, DataFileNotFoundError, DataFormatError

__all__ = ["MAX_JSON_DEPTH", "PASSAGE_FORMATS", "check_data_file", "chunk_documents", "document_title", "write_passages"]

PASSAGE_FORMATS = ("flashrag", "title_text")

PASSAGE_LINE_FORMAT = (
    'a JSON object with "id" and either "contents" ("title"\\ntext, the Search-R1/FlashRAG '
    'layout) or "title" and "text"'
)

#: What a line of the document layout (a BrowseComp-Plus corpus line, no ``id``) must hold.
DOCUMENT_LINE_FORMAT = (
    'a JSON object with "docid" (a string or an integer) and "text" (a string), optionally "url" and "title" '
    '(strings): the BrowseComp-Plus corpus layout'
)

#: The longest title :func:`document_title` takes from a document's first line.
TITLE_CHARS = 200

_GZIP_MAGIC = b"\x1f\x8b"

#: Deepest nesting of arrays and objects a line may have (records are flat; deeper nesting
#: is refused before it can reach Python's recursion limit anywhere else).
MAX_JSON_DEPTH = 100

# Files that are something else, by their first bytes (after gzip, if compressed).
_OTHER_KINDS = (
    (b"PK\x03\x04", "a zip archive; unpack it and pass the .jsonl file inside"),
    (b"BZh", "a bzip2-compressed file; decompress it or recompress it with gzip"),
    (b"\xfd7zXZ\x00", "an xz-compressed file; decompress it or recompress it with gzip"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file; decompress it or recompress it with gzip"),
    (b"SQLite format 3\x00", "an SQLite database; export its rows as JSON lines"),
    (b"\x93NUMPY", "a NumPy array file"),
    (b"ARROW1", "an Arrow file; export it as JSON lines"),
    (b"\x89HDF", "an HDF5 file; export it as JSON lines"),
    (b"\xff\xfe", "UTF-16 text (little-endian byte-order mark); save it as UTF-8"),
    (b"\xfe\xff", "UTF-16 text (big-endian byte-order mark); save it as UTF-8"),
)


# ---------------------------------------------------------------------------- JSON lines


def describe_value(value: Any, limit: int = 80) -> str:
    """A short description of a parsed JSON value for error messages."""
    if isinstance(value, dict):
        keys = list(value)
        shown = ", ".join(repr(k) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")
        return f"an object with keys [{shown}]"
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(value).__name__} {text}"


#: The built-in corpora ("passage") and datasets ("QA dataset"), by what a data file holds:
#: the names an error for a missing file offers (:mod:`searchgym.corpora.registry` loads them).
BUILT_IN_NAMES = {"passage": ("wiki-vital", "synthwiki", "deepwiki"),
                  "QA dataset": ("wiki-vital", "wiki-vital-answerable", "synthwiki", "deepwiki")}


class _MissingFileError(DataFileNotFoundError):
    """A :class:`DataFileNotFoundError` whose message names its path already: ``str()`` does
    not add ``: 'path'`` again (``filename`` still holds it)."""

    def __str__(self) -> str:
        return f"[Errno {self.errno}] {self.strerror}"


def missing_file_error(path: str | os.PathLike, what: str) -> DataFileNotFoundError:
    """A ``FileNotFoundError`` that says which file was expected and how to get one: the
    built-in names that could stand in its place."""
    names = BUILT_IN_NAMES.get(what)
    kind = {"passage": "corpus", "QA dataset": "dataset"}.get(what, "")
    instead = f"pass a built-in {kind} name instead ({', '.join(names)})" if names else "pass a built-in name instead"
    return _MissingFileError(
        errno.ENOENT,
        f"No such {what} file: {str(path)!r}; expected an existing .jsonl or .jsonl.gz file. Check the path, or {instead}.",
        str(path),
    )


def text_folder_hint(folder: Path, what: str) -> str | None:
    """What to do with a folder of ``.txt`` files given as data: a passage file made of it
    (one passage per file, its title the file's name) by a one-line command; for a dataset,
    the line a question takes. None when the folder holds no ``.txt`` file."""
    import shlex

    texts = sum(1 for p in folder.glob("*.txt") if p.is_file())
    if not texts:
        return None
    if what != "passage":
        return (
            f"a directory of {texts} .txt file{'s' if texts != 1 else ''}; a QA dataset is one JSON-lines file, one question "
            'per line: {"id": "q1", "question": "...", "golden_answers": ["..."]}'
        )
    # Single quotes around the program (a POSIX shell keeps it as it is), double quotes inside it.
    program = (
        'import json, pathlib, sys; [print(json.dumps({"id": p.stem, "title": p.stem, "text": p.read_text(encoding="utf-8").strip()})) '
        'for p in sorted(pathlib.Path(sys.argv[1]).glob("*.txt"))]'
    )
    target = folder.parent / f"{folder.name}.jsonl"
    return (
        f"a directory of {texts} .txt file{'s' if texts != 1 else ''}; a corpus is one JSON-lines file, one passage per line "
        '({"id": "...", "title": "...", "text": "..."}): make it from these files (each a passage, titled by its file name) with '
        f"`python -c {shlex.quote(program)} {shlex.quote(str(folder))} > {shlex.quote(str(target))}` and pass {target}"
    )


_PARQUET_MAGIC = b"PAR1"


def _parquet_footer(path: Path, most: int = 1 << 20) -> bytes:
    """The metadata at the end of a Parquet file (its schema: the column names in plain bytes),
    at most ``most`` bytes; empty when the file has no readable footer."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size < 12:
                return b""
            f.seek(size - 8)
            tail = f.read(8)
            if tail[4:] != _PARQUET_MAGIC:
                return b""
            length = min(int.from_bytes(tail[:4], "little"), most, size - 12)
            f.seek(size - 8 - length)
            return f.read(length)
    except OSError:
        return b""


def parquet_hint(path: Path, what: str) -> str:
    """What to do with a Parquet file given where JSON lines are read: Search-R1's processed QA
    parquet has a converter (verl's integration, which needs pyarrow); a BrowseComp-Plus corpus
    shard (columns ``docid``, ``text``, ``url``) gets the one-line command that exports it as the
    JSON lines the passage store reads; the (obfuscated) BrowseComp-Plus queries parquet points
    to the repository's decryption script."""
    import shlex

    footer = _parquet_footer(path)
    if what == "passage" and b"docid" in footer and b"text" in footer:
        target = path.with_suffix(".jsonl")
        program = (
            'import sys, pandas; pandas.read_parquet(sys.argv[1]).to_json(sys.argv[2], orient="records", lines=True, '
            "force_ascii=False)"
        )
        return (
            "a Parquet file with the BrowseComp-Plus corpus columns (docid, text, url); the passage store reads JSON lines: "
            f"convert it once with `python -c {shlex.quote(program)} {shlex.quote(str(path))} {shlex.quote(str(target))}` "
            f"and pass {target} (docs/browsecomp-plus.md exports the whole corpus, all its shards, to one file)"
        )
    if what == "QA dataset" and b"query_id" in footer and b"evidence_docs" in footer:
        return (
            "a Parquet file of the BrowseComp-Plus queries, which are obfuscated; decrypt them with the BrowseComp-Plus "
            "repository's `python scripts_build_index/decrypt_dataset.py --output data/browsecomp_plus_decrypted.jsonl` "
            "and pass that file (see docs/browsecomp-plus.md)"
        )
    if what == "QA dataset":
        return (
            "a Parquet file; Search-R1's processed parquet (nq_search.py and its siblings) converts to QA jsonl with "
            f"`python -m searchgym.integrations.verl from-search-r1 {path} --out {path.with_suffix('.jsonl')}`"
        )
    return "a Parquet file; export it as JSON lines (pandas: df.to_json(path, orient='records', lines=True))"


def _open_binary(path: Path):
    with path.open("rb") as f:
        compressed = f.read(2) == _GZIP_MAGIC
    return gzip.open(path, "rb") if compressed else path.open("rb")


def _expected_file(what: str) -> str:
    return f"a JSON-lines {what} file (one JSON object per line, plain or gzip-compressed)"


def check_data_file(path: str | os.PathLike, what: str) -> Path:
    """``path`` if it is a regular file; else the error saying what it is instead.

    :class:`DataFileNotFoundError` when nothing is there; :class:`DataFormatError` for a
    directory (naming the JSON-lines files in it, if any), a named pipe, a socket or a
    device: a data file is read more than once (its kind is sniffed, a passage file is
    hashed and then read), so a stream must first be saved to a file.
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise missing_file_error(path, what) from None
    except NotADirectoryError:  # a file used as a folder on the way
        raise missing_file_error(path, what) from None
    if stat.S_ISREG(mode):
        return path
    if stat.S_ISDIR(mode):
        inside = data_files_in(path, what)
        if inside:
            got = f"a directory; pass one of the JSON-lines files in it ({', '.join(str(p) for p in inside)})"
        else:
            got = text_folder_hint(path, what) or "a directory; pass the .jsonl or .jsonl.gz file itself"
        raise DataFormatError(path, None, _expected_file(what), got)
    kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else "not a regular file")
    raise DataFormatError(path, None, _expected_file(what), f"{kind}, which can be read only once; save what it sends to a regular file and pass that")


#: Words in a file name that say what it holds: passages, or questions.
_NAME_HINTS = {"passage": ("corpus", "passage", "wiki", "doc"), "QA dataset": ("qa", "question", "dev", "train", "test", "val")}


def data_files_in(folder: Path, what: str, most: int = 4) -> list[Path]:
    """The JSON-lines files (``.jsonl``, ``.jsonl.gz``) a user may have meant in ``folder``,
    those whose names fit ``what`` ("passage" or "QA dataset") first; never a hidden file
    (searchgym's own lock files and temporaries are hidden)."""
    found = [p for p in folder.iterdir() if not p.name.startswith(".") and p.name.endswith((".jsonl", ".jsonl.gz")) and p.is_file()]
    hints = _NAME_HINTS.get(what, ())
    return sorted(found, key=lambda p: (not any(h in p.name.lower() for h in hints), p.name))[:most]


def _check_kind(path: Path, what: str) -> None:
    """Refuse a file of another kind (by its first bytes) before its lines are read."""
    with _open_binary(path) as f:
        try:
            head = f.read(512)
        except (EOFError, OSError, zlib.error):
            return  # a damaged gzip file: reported when its lines are read
    if head.startswith(_PARQUET_MAGIC):
        raise DataFormatError(path, None, _expected_file(what), parquet_hint(path, what))
    for magic, kind in _OTHER_KINDS:
        if head.startswith(magic):
            raise DataFormatError(path, None, _expected_file(what), kind)
    if head[257:262] == b"ustar":
        raise DataFormatError(path, None, _expected_file(what), "a tar archive; unpack it and pass the .jsonl file inside")
    first = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
    line = first.split(b"\n", 1)[0].strip()
    if first.startswith(b"[") and first[1:].lstrip(b" \t\r\n")[:1] in (b"{", b""):  # an array of objects
        raise DataFormatError(
            path, None, _expected_file(what),
            f"a JSON array (one document, not one object per line); convert it with: jq -c '.[]' {path.name} > {default_corpus_name(path)}-lines.jsonl",
        )
    if line == b"{" and b"\n" in first:
        raise DataFormatError(
            path, None, _expected_file(what),
            f"a JSON document spread over several lines (its first line is '{{'); convert it with: jq -c . {path.name} > {default_corpus_name(path)}-lines.jsonl",
        )


def _json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in a parsed JSON value (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _parse_line(line: str, path: Path, line_number: int, expected: str) -> Any:
    """A line's JSON value; any way it fails to be one is a DataFormatError naming the line."""
    too_deep = f"JSON nested more than {MAX_JSON_DEPTH} levels deep"
    try:
        obj = json.loads(line.rstrip())  # a line cut short ends where its text ends, not after its newline
    except json.JSONDecodeError as e:
        snippet = line.strip()
        snippet = snippet if len(snippet) <= 60 else snippet[:57] + "..."
        # The column counts from the line's start (colno would count on from its newline).
        message = e.msg.removesuffix(" at")  # "Invalid control character at"
        raise DataFormatError(path, line_number, expected, f"invalid JSON ({message} at column {e.pos + 1}): {snippet!r}") from e
    except RecursionError:
        raise DataFormatError(path, line_number, expected, too_deep) from None
    except ValueError as e:  # an integer longer than Python converts (sys.get_int_max_str_digits())
        limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
        got = f"an integer of more than {limit} digits" if "digits" in str(e) else f"a value JSON cannot hold ({e})"
        raise DataFormatError(path, line_number, expected, got) from None
    # Only a line with that many brackets can be that deep: most lines skip the walk.
    if line.count("[") + line.count("{") > MAX_JSON_DEPTH and _json_depth(obj) > MAX_JSON_DEPTH:
        raise DataFormatError(path, line_number, expected, too_deep)
    return obj


def iter_jsonl_objects(
    path: str | os.PathLike, *, expected: str, what: str = "data", on_bytes: Callable[[int], Any] | None = None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for every non-blank line of a (gzipped) JSON-lines file.

    Line numbers are 1-based. A line that is not UTF-8, not JSON or not a JSON object
    raises :class:`DataFormatError` naming the file, the line and ``expected``.
    ``on_bytes``, if given, is called with the size of every line read (for progress bars).
    """
    path = check_data_file(path, what)
    _check_kind(path, what)
    with _open_binary(path) as f:
        try:
            for line_number, raw in enumerate(f, start=1):
                if on_bytes is not None:
                    on_bytes(len(raw))
                try:
                    line = raw.decode("utf-8-sig" if line_number == 1 else "utf-8")  # -sig: a byte-order mark
                except UnicodeDecodeError as e:
                    raise DataFormatError(
                        path, line_number, expected, f"bytes that are not UTF-8 at column {e.start + 1}"
                    ) from e
                if not line.strip():
                    continue
                obj = _parse_line(line, path, line_number, expected)
                if not isinstance(obj, dict):
                    raise DataFormatError(path, line_number, expected, describe_value(obj))
                if "\\ud" in line.lower() and _has_lone_surrogate(obj):
                    raise DataFormatError(
                        path, line_number, expected,
                        "a lone UTF-16 surrogate escape (\\ud800-\\udfff) that no UTF-8 text can hold; re-export the file as UTF-8",
                    )
                yield line_number, obj
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise DataFormatError(path, None, "a complete gzip file", f"a damaged one ({e})") from e


def _has_lone_surrogate(obj: Any) -> bool:
    """Whether a parsed JSON value holds a string with an unpaired surrogate."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def read_id(obj: dict[str, Any], path: Path, line_number: int, expected: str, key: str = "id") -> str:
    """The ``id`` of a record (or the id under ``key``: a BrowseComp-Plus ``docid`` or
    ``query_id``) as a string (integers are accepted as their decimal form)."""
    if key not in obj:
        raise DataFormatError(path, line_number, expected, f"{describe_value(obj)} (no {key!r})")
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataFormatError(path, line_number, expected, f"{key!r} = {describe_value(value)}")
    return str(value)


# ------------------------------------------------------------------------------- passages


def split_contents(contents: str) -> tuple[str, str]:
    """Split a Search-R1/FlashRAG ``contents`` string into ``(title, text)``.

    The first line is the title with one pair of surrounding double quotes removed;
    without a newline the whole string is the text and the title is empty.
    """
    if "\n" not in contents:
        return "", contents
    title, text = contents.split("\n", 1)
    title = title.strip()
    if len(title) >= 2 and title.startswith('"') and title.endswith('"'):
        title = title[1:-1]
    return title, text


def _clean_title(line: str) -> str:
    """A title line without surrounding whitespace, one pair of surrounding quotes, or the
    ``#`` marks of a Markdown heading."""
    line = line.strip()
    if len(line) >= 2 and line[0] == line[-1] and line[0] in "\"'":
        line = line[1:-1].strip()
    if line.startswith("#"):
        line = line.lstrip("#").strip()
    return line


def _first_lines(text: str, start: int = 0) -> Iterator[tuple[int, str]]:
    """``(end, line)`` for the lines of ``text`` from ``start``, without splitting the whole
    text (documents run to hundreds of thousands of characters; titles sit at the top)."""
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        yield end + 1, text[start:end].rstrip("\r")
        start = end + 1


def document_title(text: str, url: str = "", most: int = TITLE_CHARS) -> str:
    """The title of a web document as BrowseComp-Plus documents carry it.

    Most documents of the BrowseComp-Plus corpus open with a YAML-like front matter
    (``---\\ntitle: ...\\nauthor: ...\\ndate: ...\\n---\\n``; the repository's own tools read
    the title from it: ``searcher/search_r1_server.py:35-41`` and
    ``search_agent/tongyi_utils/tool_search.py:39-46``). The title is, in order: the front
    matter's ``title:`` value (one pair of quotes stripped); else the first non-empty line
    of the text after any front matter (quotes and Markdown ``#`` marks stripped), cut at a
    word boundary to at most ``most`` characters with ``...`` appended; else ``url``; else ``""``.
    """
    lines = _first_lines(text)
    start = 0
    first = next(lines, None)
    if first is not None and first[1].strip() == "---":
        for count, (end, line) in enumerate(lines):
            if line.strip() == "---":
                start = end  # the body starts after the closing line
                break
            key, sep, value = line.partition(":")
            if sep and key.strip().lower() == "title":
                title = _clean_title(value)
                if title:
                    return title if len(title) <= most else _cut(title, most)
            if count > 50:  # no closing line near the top: not a front matter
                break
        if start == 0:  # unclosed: read the text from its second line
            start = first[0]
    for _end, line in _first_lines(text, start):
        title = _clean_title(line)
        if title and title != "---":
            return title if len(title) <= most else _cut(title, most)
    return url.strip() if isinstance(url, str) else ""


def _cut(title: str, most: int) -> str:
    head = title[: most - 3]
    space = head.rfind(" ")
    return (head[:space] if space > most // 2 else head).rstrip() + "..."


def _document_passage(obj: dict[str, Any], path: Path, line_number: int) -> Passage:
    """The :class:`Passage` of a line of the document layout (BrowseComp-Plus: docid, text, url)."""
    passage_id = read_id(obj, path, line_number, DOCUMENT_LINE_FORMAT, key="docid")
    if "text" not in obj:
        raise DataFormatError(path, line_number, DOCUMENT_LINE_FORMAT, f"{describe_value(obj)} (no 'text')")
    for key in ("text", "url", "title"):
        if key in obj and not isinstance(obj[key], str) and not (key == "url" and obj[key] is None):
            raise DataFormatError(path, line_number, DOCUMENT_LINE_FORMAT, f"{key!r} = {describe_value(obj[key])}")
    text = obj["text"]
    title = obj["title"] if "title" in obj else document_title(text, obj.get("url") or "")
    return Passage(passage_id, title, text)


def passage_from(obj: dict[str, Any], path: Path, line_number: int) -> Passage:
    """The :class:`Passage` of one parsed line of a passage file (any layout)."""
    if "id" not in obj and "docid" in obj:
        return _document_passage(obj, path, line_number)
    passage_id = read_id(obj, path, line_number, PASSAGE_LINE_FORMAT)
    if "title" in obj and "text" in obj:
        title, text = obj["title"], obj["text"]
        if not isinstance(title, str) or not isinstance(text, str):
            bad = "title" if not isinstance(title, str) else "text"
            raise DataFormatError(path, line_number, PASSAGE_LINE_FORMAT, f"{bad!r} = {describe_value(obj[bad])}")
        return Passage(passage_id, title, text)
    if "contents" in obj:
        contents = obj["contents"]
        if not isinstance(contents, str):
            raise DataFormatError(path, line_number, PASSAGE_LINE_FORMAT, f"'contents' = {describe_value(contents)}")
        return Passage(passage_id, *split_contents(contents))
    raise DataFormatError(path, line_number, PASSAGE_LINE_FORMAT, describe_value(obj))


def default_corpus_name(path: Path) -> str:
    """A passage file's name without ``.jsonl`` / ``.json`` / ``.gz``."""
    name = path.name
    for suffix in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(suffix)
    return name or path.name


def check_new_id(first_line: dict[str, int], item_id: str, path: Path, line_number: int, what: str) -> None:
    """Record that ``item_id`` is on ``line_number``; ``DataFormatError`` if an earlier line had it."""
    if item_id in first_line:
        raise repeated_id_error(item_id, path, line_number, first_line[item_id], what)
    first_line[item_id] = line_number


def repeated_id_error(item_id: str, path: Path, line_number: int, first_line: int, what: str) -> DataFormatError:
    """The error for an id on ``line_number`` that ``first_line`` already had."""
    return DataFormatError(
        path, line_number, f"unique {what} ids", f"id {item_id!r} again (first on line {first_line}); rename or drop one"
    )


def _open_for_writing(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0 keeps gzip output byte-identical across runs.
    return gzip.GzipFile(path, "wb", mtime=0) if path.suffix == ".gz" else path.open("wb")


def write_jsonl(records: Iterable[dict[str, Any]], path: str | os.PathLike) -> Path:
    """Write one JSON object per line (gzip-compressed if ``path`` ends in ``.gz``)."""
    path = Path(path)
    with _open_for_writing(path) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
    return path


def write_passages(
    corpus: Iterable[Passage],
    path: str | os.PathLike,
    format: Literal["flashrag", "title_text"] = "flashrag",
) -> Path:
    """Write passages as JSON lines that :func:`~searchgym.corpora.mapped.read_passages` reads back unchanged.

    ``format="flashrag"`` writes ``{"id", "contents"}`` with ``contents = "\\"title\\"\\ntext"``
    (what Search-R1 and FlashRAG retrievers index); ``"title_text"`` writes
    ``{"id", "title", "text"}``. A path ending in ``.gz`` is gzip-compressed.
    """
    if format == "flashrag":
        records = ({"id": p.id, "contents": p.contents} for p in corpus)
    elif format == "title_text":
        records = ({"id": p.id, "title": p.title, "text": p.text} for p in corpus)
    else:
        raise ConfigError(f"write_passages expects format to be one of {PASSAGE_FORMATS}, got {format!r}.")
    return write_jsonl(records, path)


# -------------------------------------------------------------------------------- chunking

# Tokens ending in a period that do not end a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs etc e.g i.e vol fig ca c approx gen col lt sgt rev mt ft inc ltd co corp".split()
)
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*$")
_SENTENCE_START = re.compile(r"^[\"'“‘(\[]*[A-Z0-9À-Ý]")


def _ends_sentence(word: str, next_word: str | None) -> bool:
    if next_word is None:
        return True
    if not _SENTENCE_END.search(word) or not _SENTENCE_START.match(next_word):
        return False
    if word.endswith("."):
        stem = word.rstrip(".").lower()
        # Initials ("C.", "J.R.R.") and listed abbreviations are followed by capitals too.
        if stem in _ABBREVIATIONS or re.fullmatch(r"([a-z]\.)*[a-z]", stem):
            return False
    return True


def split_sentences(text: str) -> list[list[str]]:
    """Split text into sentences, each a list of whitespace-separated words."""
    words = text.split()
    sentences: list[list[str]] = []
    current: list[str] = []
    for i, word in enumerate(words):
        current.append(word)
        if _ends_sentence(word, words[i + 1] if i + 1 < len(words) else None):
            sentences.append(current)
            current = []
    return sentences


def _units(text: str, words: int) -> list[list[str]]:
    """Sentences, with any sentence longer than ``words`` cut into word runs of that size."""
    units: list[list[str]] = []
    for sentence in split_sentences(text):
        units.extend(sentence[i : i + words] for i in range(0, len(sentence), words))
    return units


def _pack(units: list[list[str]], words: int, overlap: int) -> list[list[str]]:
    chunks: list[list[list[str]]] = []
    current: list[list[str]] = []
    size = 0
    for unit in units:
        if current and size + len(unit) > words:
            chunks.append(current)
            # Carry whole trailing units of the previous chunk, up to `overlap` words,
            # as long as the new unit still fits after them.
            carried: list[list[str]] = []
            carried_size = 0
            for previous in reversed(current):
                if carried_size + len(previous) > overlap or carried_size + len(previous) + len(unit) > words:
                    break
                carried.insert(0, previous)
                carried_size += len(previous)
            current, size = carried, carried_size
        current.append(unit)
        size += len(unit)
    if current:
        chunks.append(current)
    return [[w for unit in chunk for w in unit] for chunk in chunks]


def chunk_documents(
    documents: Iterable[tuple[str, str, str] | Passage], words: int = 100, overlap: int = 0
) -> list[Passage]:
    """Cut long documents into passages of at most ``words`` words with the title attached.

    Every document is ``(doc_id, title, text)`` or a :class:`Passage`. The rule:

    * A document of at most ``words`` words becomes one passage with its text unchanged.
    * Longer text is split into sentences (at ``.``/``!``/``?`` followed by a capitalised
      word or a digit, not after initials or common abbreviations such as "Dr."), and
      consecutive sentences are packed greedily while the passage stays within ``words``
      words. A sentence longer than ``words`` is cut into runs of ``words`` words, so a
      cut never falls inside a word. Whitespace inside a split passage becomes one space.
    * With ``overlap > 0`` a passage starts with the whole trailing sentences of the
      previous one that total at most ``overlap`` words (fewer if they would not leave
      room for the next sentence).
    * Passage ``i`` of document ``doc_id`` (counting from 0, also for a document kept
      whole) has id ``f"{doc_id}#{i}"`` and the document's title. Documents whose text is
      empty or only whitespace produce no passage.

    Raises :class:`ConfigError` for ``words < 1``, ``overlap`` outside ``[0, words)`` or a
    repeated document id.
    """
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise ConfigError(f"chunk_documents expects words to be a positive integer, got {words!r}.")
    if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < words:
        raise ConfigError(
            f"chunk_documents expects overlap to be an integer in [0, words={words}), got {overlap!r}."
        )
    passages: list[Passage] = []
    seen: set[str] = set()
    for document in documents:
        if isinstance(document, Passage):
            doc_id, title, text = document.id, document.title, document.text
        else:
            doc_id, title, text = document
        if doc_id in seen:
            raise ConfigError(f"chunk_documents got document id {doc_id!r} twice; expected unique ids.")
        seen.add(doc_id)
        if not text.strip():
            continue
        if len(text.split()) <= words:
            passages.append(Passage(f"{doc_id}#0", title, text))
            continue
        for i, chunk in enumerate(_pack(_units(text, words), words, overlap)):
            passages.append(Passage(f"{doc_id}#{i}", title, " ".join(chunk)))
    return passages
