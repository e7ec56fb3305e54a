"""Checksums written with every stored file, computed while the file is written, checked
cheaply on every load and in full on demand (``searchgym index --verify``).

**sum64.** A file is read as little-endian 32-bit words ``w_k`` (the last one padded with
zero bytes) and its checksum is

    sum over k of  mix(k, w_k)  mod 2**64,   mix(k, w) = g ^ (g >> 32),  g = ((k * K1) ^ w) * K2 mod 2**64

For a fixed position ``mix`` is a bijection of the word (xor with a constant, a product with
an odd constant, an xorshift), so damage confined to one word (a flipped bit, a flipped
byte) always changes the checksum; other damage goes unnoticed only by a 64-bit chance. It is
a sum over positions, unlike a CRC or SHA-256, so a writer that fills a file out of order
adds each word when it writes it: the BM25 build scatters every shard's postings across the
whole score array and checksums them on the way, with no second pass over the file. numpy
computes it at about 1 GB/s.

**Records.** What a folder's metadata keeps of each file: ``{"bytes": size, "checksum":
"sum64:<16 hex digits>"}``, and for a ``.npy`` file its ``"dtype"`` and ``"shape"``.
:func:`check_files` compares sizes, dtypes and shapes (a ``stat`` and a header read per file:
what every load does); :func:`verify_files` reads every byte and compares checksums. The
metadata itself carries a ``"meta_checksum"`` over its other keys (:func:`seal`), checked
whenever it is read, so a changed parameter (a flipped ``k1``) is caught as well.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from searchgym.error import DamagedFileError

__all__ = [
    "ALGORITHM", "MappedNpy", "HashingWriter", "StreamSum", "Sum64", "add_scattered", "check_files", "check_npy",
    "check_seal", "file_checksum", "npy_layout", "preallocate", "save_npy", "seal", "verify_files", "write_bytes",
]

ALGORITHM = "sum64"
_MASK = (1 << 64) - 1
_K1 = 0x9E3779B97F4A7C15
_K2 = 0xBF58476D1CE4E5B9
_CHUNK = 1 << 16  # words mixed at once: the temporaries stay in the CPU's cache
_STRIDE = np.arange(_CHUNK, dtype=np.uint64) * np.uint64(_K1)  # [chunk] k * K1 for k = 0, 1, ...
_READ = 8 << 20  # bytes read at once when verifying
_SMALL_WRITE = 1 << 16  # writes below this are gathered before they are mixed
_SEAL = "meta_checksum"


def _mix_sum(keys: np.ndarray, words: np.ndarray, scratch: np.ndarray) -> int:
    """sum of mix over ``keys`` (k * K1, uint64) and ``words`` (uint32), in place in ``keys``."""
    np.bitwise_xor(keys, words, out=keys)
    np.multiply(keys, np.uint64(_K2), out=keys)
    np.right_shift(keys, np.uint64(32), out=scratch)
    np.bitwise_xor(keys, scratch, out=keys)
    return int(keys.sum(dtype=np.uint64))


class Sum64:
    """The sum64 checksum of one file, filled in any order (each word added exactly once)."""

    def __init__(self, state: int = 0):
        self.state = state & _MASK

    def add_at(self, first: int, words: np.ndarray) -> None:
        """Add ``words`` (uint32, the file's words from word index ``first`` on)."""
        words = words.reshape(-1)
        keys = np.empty(min(_CHUNK, len(words)), dtype=np.uint64)
        scratch = np.empty_like(keys)
        total = self.state
        for start in range(0, len(words), _CHUNK):
            part = words[start : start + _CHUNK]
            n = len(part)
            np.add(_STRIDE[:n], np.uint64(((first + start) * _K1) & _MASK), out=keys[:n])
            total += _mix_sum(keys[:n], part, scratch[:n])
        self.state = total & _MASK

    def add_bytes_at(self, offset: int, data: bytes) -> None:
        """Add ``data`` found at byte ``offset`` (a multiple of 4); a last partial word is zero-padded."""
        if offset % 4:
            raise ValueError(f"sum64 adds whole words: offset {offset} is not a multiple of 4")
        padded = bytes(data) + b"\0" * (-len(data) % 4)
        self.add_at(offset // 4, np.frombuffer(padded, dtype="<u4"))

    @property
    def digest(self) -> str:
        return f"{ALGORITHM}:{self.state:016x}"


def add_scattered(sums: tuple[Sum64, ...], first: int, positions: np.ndarray, *arrays: np.ndarray) -> None:
    """Add to ``sums[i]`` the 4-byte elements ``arrays[i]`` written at element ``positions`` of
    arrays whose data start at word ``first`` of their files (several arrays written at the same
    positions share the work on the positions)."""
    positions = positions.reshape(-1)
    count = len(positions)
    if not count:
        return
    base = np.empty(min(_CHUNK, count), dtype=np.uint64)
    keys = np.empty_like(base)
    scratch = np.empty_like(base)
    offset = np.uint64((first * _K1) & _MASK)
    totals = [s.state for s in sums]
    words = [a.reshape(-1).view(np.uint32) for a in arrays]
    for start in range(0, count, _CHUNK):
        part = positions[start : start + _CHUNK].view(np.uint64)
        n = len(part)
        np.multiply(part, np.uint64(_K1), out=base[:n])
        np.add(base[:n], offset, out=base[:n])
        for i, w in enumerate(words):
            np.copyto(keys[:n], base[:n])
            totals[i] += _mix_sum(keys[:n], w[start : start + n], scratch[:n])
    for s, total in zip(sums, totals):
        s.state = total & _MASK


class StreamSum:
    """The sum64 checksum of bytes written one after the other, in pieces of any size."""

    def __init__(self) -> None:
        self.sum = Sum64()
        self.size = 0
        self._word = 0  # words mixed so far
        self._pending = bytearray()  # bytes not mixed yet (small writes, a partial word)

    def update(self, data: bytes | bytearray | memoryview) -> None:
        data = memoryview(data).cast("B")
        self.size += len(data)
        if len(data) < _SMALL_WRITE:
            self._pending += data
            if len(self._pending) >= _SMALL_WRITE:
                self._drain()
            return
        if self._pending:  # complete the pending bytes to whole words, mix them
            head = -len(self._pending) % 4
            self._pending += data[:head]
            data = data[head:]
            self._drain()
        whole = len(data) // 4 * 4
        self.sum.add_at(self._word, np.frombuffer(data[:whole], dtype="<u4"))
        self._word += whole // 4
        self._pending += data[whole:]

    def _drain(self) -> None:
        whole = len(self._pending) // 4 * 4
        words = np.frombuffer(bytes(self._pending[:whole]), dtype="<u4")
        self.sum.add_at(self._word, words)
        self._word += whole // 4
        del self._pending[:whole]

    @property
    def digest(self) -> str:
        if self._pending:
            self._drain()
            if self._pending:  # a partial last word, zero-padded (not counted in size again)
                self.sum.add_bytes_at(4 * self._word, bytes(self._pending))
                self._word += 1
                self._pending.clear()
        return self.sum.digest


class HashingWriter:
    """A binary file that checksums what goes through it (for ``np.save``, ``pickle.dump``...)."""

    def __init__(self, file: BinaryIO):
        self.file = file
        self.stream = StreamSum()

    def write(self, data: Any) -> int:
        self.stream.update(data)
        return self.file.write(data)

    def flush(self) -> None:
        self.file.flush()

    def record(self) -> dict[str, Any]:
        return {"bytes": self.stream.size, "checksum": self.stream.digest}


def _synced(f: BinaryIO) -> None:
    f.flush()
    os.fsync(f.fileno())


def write_bytes(path: Path, data: bytes) -> dict[str, Any]:
    """Write ``data`` to ``path`` (synced to disk); its record."""
    with open(path, "wb") as f:
        writer = HashingWriter(f)
        writer.write(data)
        _synced(f)
    return writer.record()


def save_npy(path: Path, array: np.ndarray) -> dict[str, Any]:
    """``np.save(path, array)`` (the same bytes), synced to disk; its record with dtype and shape."""
    with open(path, "wb") as f:
        writer = HashingWriter(f)
        np.save(writer, array)
        _synced(f)
    return {**writer.record(), "dtype": array.dtype.str, "shape": list(array.shape)}


def preallocate(fd: int, size: int) -> None:
    """Reserve ``size`` bytes on disk for the file ``fd`` now, so that a full disk is an OSError
    here and not a SIGBUS later, on a page of a memory map written into a sparse file."""
    if size <= 0 or not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        import errno

        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)):
            raise  # ENOSPC, EDQUOT, EFBIG: no room


class MappedNpy:
    """A ``.npy`` file of a known dtype and shape filled through a memory map, in any order.

    Its space is reserved when it is created (a full disk fails here, with an OSError). The
    writer adds what it writes to :attr:`sum` (:meth:`write`, or :func:`add_scattered` for
    several arrays written at the same positions); :meth:`record` flushes the map and returns
    the file's record. Elements must be 4 bytes wide (float32, int32)."""

    def __init__(self, path: Path, dtype: Any, shape: tuple[int, ...]):
        self.path = Path(path)
        self.array = np.lib.format.open_memmap(self.path, mode="w+", dtype=dtype, shape=shape)
        if self.array.dtype.itemsize != 4:
            raise ValueError(f"MappedNpy checksums 4-byte elements, got dtype {self.array.dtype}")
        self.first = self.array.offset // 4  # the word of the first element
        with open(self.path, "r+b") as f:
            header = f.read(self.array.offset)
            try:
                preallocate(f.fileno(), self.array.offset + self.array.nbytes)
            except OSError as e:  # what the caller's error names: the file and the room it wanted
                e.filename, e.requested = str(self.path), self.array.offset + self.array.nbytes
                raise
        self.sum = Sum64()
        self.sum.add_bytes_at(0, header)

    def write(self, start: int, values: np.ndarray) -> None:
        """``array[start:start + len(values)] = values``, checksummed."""
        self.array[start : start + len(values)] = values
        self.sum.add_at(self.first + start, np.ascontiguousarray(values, dtype=self.array.dtype).view(np.uint32))

    def record(self) -> dict[str, Any]:
        self.array.flush()
        return {"bytes": self.array.offset + self.array.nbytes, "checksum": self.sum.digest,
                "dtype": self.array.dtype.str, "shape": list(self.array.shape)}


# ------------------------------------------------------------------------------ metadata


def _meta_digest(meta: Mapping[str, Any]) -> str:
    body = {k: v for k, v in meta.items() if k != _SEAL}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def seal(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with its own checksum (over every other key) added."""
    return {**meta, _SEAL: _meta_digest(meta)}


def check_seal(path: Path, meta: Mapping[str, Any], fix: str) -> None:
    """Raise :class:`DamagedFileError` when the metadata read from ``path`` does not match the
    checksum written with it (metadata written before checksums has none: accepted)."""
    recorded = meta.get(_SEAL)
    if recorded is not None and recorded != _meta_digest(meta):
        raise DamagedFileError(
            path, f"metadata matching the checksum written with it ({recorded})", f"{_meta_digest(meta)}: it changed after it was written", fix
        )


# ------------------------------------------------------------------------------ checking


def npy_layout(path: Path) -> tuple[np.dtype, tuple[int, ...], int]:
    """``(dtype, shape, header bytes)`` of a ``.npy`` file, from its header alone."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        return dtype, tuple(shape), f.tell()


def _size_words(size: int, expected: int) -> str:
    if size < expected:
        return f"{size:,} bytes: it was cut short (an interrupted copy, a disk that filled)"
    return f"{size:,} bytes: it is longer than what was written"


def check_npy(path: Path, dtype: Any, shape: tuple[int, ...] | None, fix: str) -> None:
    """Raise :class:`DamagedFileError` unless ``path`` is a whole ``.npy`` file of ``dtype`` and
    ``shape`` (``None``: the shape its header gives, one dimension)."""
    dtype = np.dtype(dtype)
    wanted = f"a {dtype.name} array" + (f" of shape {tuple(shape)}" if shape is not None else "")
    try:
        got_dtype, got_shape, header = npy_layout(path)
    except FileNotFoundError:
        raise DamagedFileError(path, wanted, "no such file", fix) from None
    except (OSError, ValueError, SyntaxError) as e:
        raise DamagedFileError(path, f"a .npy file holding {wanted}", f"a file whose header cannot be read ({e})", fix) from None
    if got_dtype != dtype or (got_shape != tuple(shape) if shape is not None else len(got_shape) != 1):
        raise DamagedFileError(path, wanted, f"a {got_dtype.name} array of shape {got_shape}", fix)
    expected = header + int(np.prod(got_shape, dtype=np.int64)) * got_dtype.itemsize
    size = path.stat().st_size
    if size != expected:
        raise DamagedFileError(path, f"{expected:,} bytes (a {got_dtype.name} array of shape {got_shape})", _size_words(size, expected), fix)


def check_files(folder: Path, files: Mapping[str, Mapping[str, Any]], fix: str, *, recorded_in: str) -> None:
    """The cheap check of every load: each file of ``files`` exists with the recorded size, and
    a ``.npy`` file's header has the recorded dtype and shape. Raises :class:`DamagedFileError`
    naming the first file that differs, what was expected (as ``recorded_in`` records) and ``fix``."""
    for name, record in files.items():
        path = folder / name
        expected = int(record["bytes"])
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise DamagedFileError(path, f"a file of {expected:,} bytes (as {recorded_in} records)", "no such file", fix) from None
        if size != expected:
            raise DamagedFileError(path, f"{expected:,} bytes (as {recorded_in} records)", _size_words(size, expected), fix)
        if "dtype" in record:
            check_npy(path, np.dtype(record["dtype"]), tuple(record["shape"]), fix)


def file_checksum(path: Path, on_bytes: Callable[[int], Any] | None = None) -> str:
    """The sum64 checksum of the file at ``path``, read in full."""
    stream = StreamSum()
    buffer = bytearray(_READ)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buffer)
            if not n:
                break
            stream.update(view[:n])
            if on_bytes is not None:
                on_bytes(n)
    return stream.digest


def verify_files(folder: Path, files: Mapping[str, Mapping[str, Any]], on_bytes: Callable[[int], Any] | None = None) -> list[str]:
    """Read every file of ``files`` and compare its size and checksum with the record; the
    problems found, one line per file (empty: every byte is as written)."""
    problems = []
    for name, record in files.items():
        path = folder / name
        expected = int(record["bytes"])
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            problems.append(f"{path}: missing (expected {expected:,} bytes)")
            continue
        if size != expected:
            problems.append(f"{path}: expected {expected:,} bytes, got {_size_words(size, expected)}")
            if on_bytes is not None:
                on_bytes(size)
            continue
        got = file_checksum(path, on_bytes)
        if got != record["checksum"]:
            problems.append(f"{path}: checksum {got}, expected {record['checksum']}: its bytes changed after it was written")
    return problems
