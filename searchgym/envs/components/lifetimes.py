"""Process-wide values that live as long as the objects they were made for.

The judge's verdict caches (:mod:`~searchgym.envs.components.lm_frozen`) and s3's filter
verdicts (:mod:`~searchgym.envs.components.filter_cache`) are shared by every env of the
process that uses the same model objects, and keyed by those objects' ``id()``. A key must
go when an object it names goes, or a new object that reuses the id would find another
model's verdicts. :class:`LifetimeRegistry` does that once for both.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, Literal, TypeVar

from searchgym.error import ConfigError

V = TypeVar("V")

#: What a registry does with an owner that cannot be referenced weakly (so its death cannot
#: be seen): ``"private"`` makes the value for the caller alone and keeps nothing;
#: ``"keep"`` keeps the value and the owner with it, so the owner's id stays its own.
UNBOUND_POLICIES = ("private", "keep")


class LifetimeRegistry(Generic[V]):
    """Values made once per key and dropped when any of their owners is garbage collected.

    ``get(key, make, owners)`` returns the value kept under ``key`` or makes it with
    ``make()``; each owner then drops it from the registry when it goes. Thread-safe; a
    drop may run inside a garbage collection on the thread that holds the lock, so the lock
    is reentrant.
    """

    def __init__(self) -> None:
        self._values: dict[Hashable, tuple[V, tuple[object, ...]]] = {}
        self._lock = threading.RLock()

    def get(
        self, key: Hashable, make: Callable[[], V], owners: Iterable[object] = (), *,
        unbound: Literal["private", "keep"] = "private",
    ) -> V:
        """The value under ``key``, made by ``make()`` the first time (see :data:`UNBOUND_POLICIES`
        for an owner that cannot be referenced weakly)."""
        if unbound not in UNBOUND_POLICIES:
            raise ConfigError(f"LifetimeRegistry.get expects unbound to be one of {UNBOUND_POLICIES}, got {unbound!r}.")
        with self._lock:
            if key in self._values:
                return self._values[key][0]
            finalizers: list[weakref.finalize] = []
            kept: list[object] = []
            for owner in owners:
                try:
                    finalizers.append(weakref.finalize(owner, self._drop, key))
                except TypeError:
                    if unbound == "private":
                        for finalizer in finalizers:
                            finalizer.detach()
                        return make()
                    kept.append(owner)
            value = make()
            self._values[key] = (value, tuple(kept))
            return value

    def _drop(self, key: Hashable) -> None:
        with self._lock:
            self._values.pop(key, None)

    def clear(self) -> None:
        """Forget every value (owners that are still alive may make theirs again)."""
        with self._lock:
            self._values.clear()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._values

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
