"""The one owner of every cache keyed by what callers send (template text, requests).

A server or an engine plug-in may see a new template or new tools on any request, so
nothing kept per template or per request may grow without bound. Every such cache is a
``Store`` made by ``CACHES`` (the process' ``Caches``): bounded, least recently used
entry out first, thread-safe, its hits and misses counted (serve exports them as
metrics), its size configurable (``CACHES.configure(analysis=64)``). Compiled forms of
an object (a parser's one-shot form) live on that object instead, and leave with it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from autoparser.errors import AutoparserError

V = TypeVar("V")


@dataclasses.dataclass(frozen=True)
class CacheStats:
    """One store's counters: ``entries`` held of ``size`` at most, ``hits``, ``misses``."""

    name: str
    size: int
    entries: int
    hits: int
    misses: int


class Store(Generic[V]):
    """A bounded, thread-safe map from a key to a value built once, counting hits.

    A value may be stored with the object it was built from (``owner``, compared by
    identity): a key that outlives its owner (an ``id`` reused) is then never a false hit.
    A build that raises stores nothing.
    """

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self._size = max(size, 1)
        self._entries: OrderedDict[Hashable, tuple[object, V]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def get(self, key: Hashable, owner: object = None) -> V | None:
        """The value under ``key`` (built for ``owner``), or None; counts a hit or a miss."""
        with self._lock:
            found = self._entries.get(key)
            if found is not None and found[0] is owner:
                self._entries.move_to_end(key)
                self._hits += 1
                return found[1]
            self._misses += 1
            return None

    def put(self, key: Hashable, value: V, owner: object = None) -> V:
        """Store ``value`` under ``key``; the least recently used entries leave to fit."""
        with self._lock:
            self._entries[key] = (owner, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value

    def get_or_build(self, key: Hashable, build: Callable[[], V], owner: object = None) -> V:
        """The value under ``key``, built (outside the lock) and stored on a miss."""
        found = self.get(key, owner)
        if found is not None:
            return found
        return self.put(key, build(), owner)

    def resize(self, size: int) -> None:
        """Hold at most ``size`` entries from now on (at least one)."""
        with self._lock:
            self._size = max(size, 1)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        with self._lock:
            self._entries.clear()

    def stats(self) -> CacheStats:
        """The counters, read together."""
        with self._lock:
            return CacheStats(self.name, self._size, len(self._entries), self._hits, self._misses)


class Caches:
    """The stores of a process, by name: one place to size, read and clear them."""

    def __init__(self) -> None:
        self._stores: dict[str, Store[object]] = {}
        self._lock = threading.Lock()

    def store(self, name: str, size: int) -> Store[V]:
        """The store called ``name`` (made with ``size`` entries at most the first time)."""
        with self._lock:
            found = self._stores.get(name)
            if found is None:
                found = self._stores[name] = Store(name, size)
        return found  # type: ignore[return-value]

    def configure(self, **sizes: int) -> None:
        """Resize stores by name; an unknown name is an ``AutoparserError`` naming it."""
        for name, size in sizes.items():
            if name not in self._stores:
                known = ", ".join(sorted(self._stores))
                raise AutoparserError(f"no cache named {name!r} (known: {known})")
            self._stores[name].resize(size)

    def stats(self) -> dict[str, CacheStats]:
        """Every store's counters, by name."""
        return {name: store.stats() for name, store in sorted(self._stores.items())}

    def clear(self) -> None:
        """Empty every store (for tests and benchmarks that measure cold work)."""
        for store in self._stores.values():
            store.clear()

    def __repr__(self) -> str:
        return f"Caches({', '.join(sorted(self._stores))})"


CACHES = Caches()
