"""Folders built all or nothing: written beside their place, swapped in when complete.

A build of ``out`` (an index folder) holds the lock ``.<out>.build.lock`` beside it, writes
into ``.<out>.<id>.building`` and, once every file is written and synced, swaps that folder
with ``out`` in one step (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere two renames), then
removes the old one. So whatever stops a build (an error, a full disk, Ctrl-C, SIGKILL, a
power cut) leaves ``out`` as it was, and nothing half-built under a name that loads.

What a dead build leaves (its ``.building`` folder, a swapped-out ``.old`` one) is removed by
the next build of the same folder and by the next open of it, once the lock shows that no
build is running (:func:`remove_dead_builds`). A full disk, an exhausted quota or the
process's file size limit are reported as :class:`~searchgym.error.OutOfSpaceError` with
what the build had written, what it still needed and what was free when it started.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from searchgym.error import ConfigError, OutOfSpaceError

__all__ = ["SPACE_ERRNOS", "building", "folder_bytes", "free_bytes", "human_bytes", "publish", "remove_dead_builds",
           "space_error", "sync_tree"]

#: OSError numbers that mean "no room to write": a full disk, an exhausted quota, the file size limit.
SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def human_bytes(size: int | float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{int(size):,} bytes"


def folder_bytes(path: Path) -> int:
    """Bytes of disk the files under ``path`` take (0 when it is gone); a sparse file counts
    what is allocated, not its length."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                stat = os.lstat(os.path.join(root, name))
                total += stat.st_blocks * 512 if hasattr(stat, "st_blocks") else stat.st_size
    return total


def free_bytes(path: Path) -> int | None:
    """Bytes free to this user on the filesystem of ``path`` (None where unknown)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def sync_tree(folder: Path) -> None:
    """fsync every file and folder under ``folder``, so that a rename of it survives a crash."""
    for root, dirs, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for root, dirs, _ in os.walk(folder, topdown=False):
        for path in [*(os.path.join(root, d) for d in dirs), root]:
            with contextlib.suppress(OSError):  # some filesystems cannot sync a folder
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` in one step (Linux); False where the system cannot."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # an old kernel, a filesystem without it
        return False
    raise OSError(code, os.strerror(code), str(a))


def publish(tmp: Path, out: Path) -> None:
    """Put the complete folder ``tmp`` at ``out``, replacing what is there in one step."""
    if not out.exists() and not out.is_symlink():
        os.rename(tmp, out)
    elif out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
        os.rename(tmp, out)  # onto an empty folder
    elif _exchange(tmp, out):
        _remove(tmp)  # tmp now holds what out held
    else:
        old = out.with_name(f".{out.name}.{uuid.uuid4().hex[:8]}.old")
        os.rename(out, old)  # killed here: the next build or open renames it back
        os.rename(tmp, out)
        _remove(old)
    _sync_folder(out.parent)


def _remove(path: Path) -> None:
    """Remove a folder, a file or a symbolic link (not what it points to)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _lock_path(out: Path) -> Path:
    return out.with_name(f".{out.name}.build.lock")


def _leftovers(out: Path) -> list[Path]:
    if not out.parent.is_dir():
        return []
    prefix = f".{out.name}."
    return sorted(p for p in out.parent.iterdir() if p.name.startswith(prefix) and p.name.endswith((".building", ".old")))


def _clean(out: Path) -> list[tuple[Path, int]]:
    """With the build lock held: restore an ``.old`` folder a two-rename swap left without its
    place, remove every other leftover; what was removed and its size."""
    leftovers = _leftovers(out)
    olds = [p for p in leftovers if p.name.endswith(".old")]
    if olds and not out.exists():
        newest = max(olds, key=lambda p: p.stat().st_mtime)
        os.rename(newest, out)
        leftovers.remove(newest)
    removed = []
    for path in leftovers:
        size = folder_bytes(path) if path.is_dir() and not path.is_symlink() else 0
        with contextlib.suppress(OSError):
            _remove(path)
        removed.append((path, size))
    return removed


@contextlib.contextmanager
def _build_lock(out: Path) -> Iterator[Any]:
    """The build lock of ``out`` (an open file, held), or None when another process holds it.
    The lock file is removed when released; a holder checks that the file it locked is still
    the one at the path (not one a previous holder removed meanwhile)."""
    path = _lock_path(out)
    while True:
        lock = open(path, "a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = True
        except BlockingIOError:
            held = False
        if not held:
            lock.close()
            yield None
            return
        try:
            same = os.stat(path).st_ino == os.fstat(lock.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        lock.close()  # removed by the holder before us: lock the new one
    try:
        yield lock
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        lock.close()


def remove_dead_builds(out: str | os.PathLike) -> list[tuple[Path, int]]:
    """Remove what dead builds of ``out`` left beside it, unless a build of it runs now; the
    paths removed and their sizes."""
    out = Path(out)
    if not _leftovers(out):
        return []
    try:
        with _build_lock(out) as lock:
            return [] if lock is None else _clean(out)  # None: a build is running, its folder is alive
    except OSError:  # a read-only folder: nothing can be removed there anyway
        return []


def space_error(error: OSError, *, what: str, target: Path, written: int, free: int | None,
                elsewhere: str = "build elsewhere (another --out)") -> OutOfSpaceError:
    """The :class:`OutOfSpaceError` for ``error`` (an OSError of :data:`SPACE_ERRNOS`) raised by
    ``what`` (a build of ``target``) after writing ``written`` bytes, with ``free`` bytes free at
    its start; ``elsewhere`` says how to write it on another disk."""
    requested = getattr(error, "requested", None)  # a file whose whole size was reserved at once
    file = f" writing {Path(error.filename).name}" if error.filename else ""
    needed = written + requested if requested else None
    if error.errno == errno.EFBIG:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        shown = "unlimited" if limit == resource.RLIM_INFINITY else human_bytes(limit)
        cause = f"a file grew past this process's file size limit (RLIMIT_FSIZE, `ulimit -f`: {shown})"
        fix = "Raise the limit (ulimit -f unlimited)"
    else:
        room = "disk quota" if error.errno == errno.EDQUOT else "disk space"
        cause = f"it ran out of {room} on the filesystem of {target.parent}"
        fix = f"Free some space, or {elsewhere},"
    if needed is not None and not written:
        amount = f"it needed {human_bytes(needed)}"
    elif needed is not None:
        amount = f"it needed {human_bytes(needed)} at least (it had written {human_bytes(written)}, and this file takes {human_bytes(requested)})"
    else:
        amount = f"it needed more than the {human_bytes(written)} it had written"
    had = f", and had {human_bytes(free)} free when it started" if free is not None else ""
    message = (f"{what} failed{file}: {cause}: {amount}{had}. Nothing was kept: {target} is as it was before. "
               f"{fix} and run it again.")
    return OutOfSpaceError(message, needed=needed, available=free)


@contextlib.contextmanager
def building(out: Path, *, what: str = "searchgym index") -> Iterator[Path]:
    """Build the folder ``out`` all or nothing: yields the empty folder to write into, which
    replaces ``out`` when the block ends without an exception and is removed otherwise. A
    failure for want of space becomes :class:`OutOfSpaceError`. Raises :class:`ConfigError` when
    another build of ``out`` is running."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(out) as lock:
        if lock is None:
            try:
                holder = _lock_path(out).read_text().strip() or "unknown"
            except OSError:
                holder = "unknown"
            raise ConfigError(
                f"{what} expects to be the only build of {str(out)!r}, but another one is writing it now (process {holder}); "
                "wait for it to finish, or choose another folder."
            )
        lock.truncate(0)
        lock.write(str(os.getpid()))
        lock.flush()
        _clean(out)  # what dead builds left
        free = free_bytes(out.parent)
        tmp = out.with_name(f".{out.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.building")
        tmp.mkdir()
        try:
            try:
                yield tmp
                sync_tree(tmp)
                publish(tmp, out)
            except OSError as e:
                if isinstance(e, OutOfSpaceError) or e.errno not in SPACE_ERRNOS:
                    raise
                # what the build held on disk when it failed (measured there, before its scratch files went)
                written = max(folder_bytes(tmp), getattr(e, "written", 0))
                raise space_error(e, what=what, target=out, written=written, free=free) from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
