"""A thread pool made on first use, per process: what the BM25 retriever's batches and the
compiled engine's split queries run on.

A process forked from one that made a pool has none of its threads: a task handed to the
inherited pool would wait for ever. :meth:`LazyThreadPool.get` therefore remembers which
process made the pool and makes a new one in any other.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["LazyThreadPool"]


class LazyThreadPool:
    """A :class:`~concurrent.futures.ThreadPoolExecutor` named ``name``, made when first asked
    for and again in a forked process, or when asked for more threads than it has."""

    def __init__(self, name: str):
        self.name = name
        self._pool: ThreadPoolExecutor | None = None
        self._size = 0
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def get(self, workers: int) -> ThreadPoolExecutor:
        """This process's pool of at least ``workers`` threads."""
        pool = self._pool
        if pool is not None and self._size >= workers and self._pid == os.getpid():
            return pool
        with self._lock:
            if self._pool is None or self._size < workers or self._pid != os.getpid():
                old = self._pool if self._pid == os.getpid() else None  # another process's: not ours to stop
                self._pool = ThreadPoolExecutor(workers, thread_name_prefix=self.name)
                self._size, self._pid = workers, os.getpid()
                if old is not None:
                    old.shutdown(wait=False)  # what it was given still runs
            return self._pool
