"""The bounded parse cache of the long-term store: an LRU with a fixed admission rule.

Entries are keyed by memory id and validated by the file's (mtime_ns, size,
inode) stamp, so an entry changed on disk is re-read. Admission is fixed: a
full scan (search, profile) only fills free slots and never evicts, so scans
cannot grow memory beyond ``capacity`` nor flush the working set; a point read
evicts the least recently used entry.
"""

from __future__ import annotations

from collections import OrderedDict

from aiden.longterm.entries import MemoryEntry

__all__ = ["ParseCache", "Stamp"]

Stamp = tuple[int, int, int]
"""(mtime_ns, size, inode) of an entry file."""


class ParseCache:
    """LRU of parsed entries keyed by id and validated by the file's (mtime, size, inode) stamp."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._items: OrderedDict[str, tuple[Stamp, MemoryEntry]] = OrderedDict()
        self.hits = self.misses = self.admitted = self.rejected = self.evicted = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str, stamp: Stamp) -> MemoryEntry | None:
        """The cached entry if its stamp still matches (and mark it recently used)."""
        item = self._items.get(key)
        if item is None or item[0] != stamp:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return item[1]

    def put(self, key: str, stamp: Stamp, entry: MemoryEntry, *, scan: bool) -> None:
        """Admit ``entry``: refresh if present; fill a free slot; evict the LRU only if not ``scan``."""
        if key in self._items:
            self._items[key] = (stamp, entry)
            self._items.move_to_end(key)
            return
        if len(self._items) >= self.capacity:
            if scan:
                self.rejected += 1
                return
            self._items.popitem(last=False)
            self.evicted += 1
        self._items[key] = (stamp, entry)
        self.admitted += 1

    def discard(self, key: str) -> None:
        """Forget ``key``."""
        self._items.pop(key, None)
