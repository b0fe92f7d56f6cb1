"""A LangGraph ``BaseStore`` over aiden's long-term memory: :class:`AidenStore`.

Needs the ``langgraph`` extra. An item ``(namespace, key)`` is the long-term entry
``lg-<hash of namespace and key>`` (namespace, key, JSON value and times in its content;
``ttl`` in minutes is its expiry). The agent's own entries appear in the namespace
``("memories",)`` with their id as key and ``{"type", "title", "content"}`` as value (a put
there saves one; ``type`` defaults to ``fact``). A key there that is another namespace's item's id
names nothing: a put raises ``MemoryEntryError`` and a delete does nothing. ``search`` ranks by
aiden's long-term search and leaves out items matching no word; ``filter`` compares as
LangGraph's InMemoryStore does. Scores are None: no embeddings.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import operator
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import msgspec
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from aiden.errors import InvalidIdError, LongTermError, MemoryEntryError
from aiden.longterm.entries import MEMORY_TYPES, MemoryEntry, make_entry, rank_entries

if TYPE_CHECKING:
    from aiden.longterm.backend import EntryStore

__all__ = ["NATIVE_NAMESPACE", "AidenStore"]

NATIVE_NAMESPACE: Final = ("memories",)
"""Where the agent's own long-term entries appear (key = entry id)."""

_MARK: Final = "aiden.langgraph/1"
_MAX_TITLE: Final = 200
_LAST_SECOND: Final = 253402300800  # 10000-01-01T00:00:00Z: the first timestamp a datetime cannot hold
_ItemT = TypeVar("_ItemT", bound=Item)


def _labels(namespace: object, *, wildcard: bool = False) -> tuple[str, ...]:
    """``namespace`` as a tuple, after refusing it as BaseStore's methods do (ops given to batch() skip them)."""
    if not isinstance(namespace, tuple | list):
        raise InvalidNamespaceError(f"a namespace must be a tuple of str, got {type(namespace).__name__}")
    for label in namespace:
        if wildcard and label == "*":
            continue
        if not isinstance(label, str) or not label or "." in label or "\x00" in label:
            raise InvalidNamespaceError(f"invalid namespace label {label!r} in {namespace!r}")
    return tuple(namespace)


def _count(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise LongTermError(f"{name} must be a non-negative int, got {value!r}")


def _check_filter(wanted: object) -> None:
    """Refuse a filter ``_compare`` cannot apply, whether or not any item reaches it."""
    if isinstance(wanted, list | tuple):
        for part in wanted:
            _check_filter(part)
    if not isinstance(wanted, dict):
        return
    if not all(isinstance(k, str) for k in wanted):
        raise LongTermError(f"filter keys must be str, got {list(wanted)!r}")
    if not any(k.startswith("$") for k in wanted):
        for part in wanted.values():
            _check_filter(part)
        return
    for op, operand in wanted.items():
        if op in _ORDER:
            if _number(operand) is None:
                raise LongTermError(f"filter operator {op!r} needs a number, got {operand!r}")
        elif op not in ("$eq", "$ne"):
            raise LongTermError(f"unsupported filter operator {op!r}")


def _number(value: Any) -> float | None:
    """``float(value)`` as LangGraph's InMemoryStore compares; None for what has no number."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _checked(op: object) -> Op:
    """``op`` with its namespace as a tuple, or an error naming what is wrong: nothing runs before it."""
    if isinstance(op, GetOp | PutOp):
        if not isinstance(op.key, str):
            raise LongTermError(f"key must be str, got {type(op.key).__name__}")
        return op._replace(namespace=_labels(op.namespace))
    if isinstance(op, SearchOp):
        if op.query is not None and not isinstance(op.query, str):
            raise LongTermError(f"query must be str or None, got {type(op.query).__name__}")
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise LongTermError(f"filter must be a dict or None, got {type(op.filter).__name__}")
        wanted = None if op.filter is None else dict(op.filter)
        _check_filter(wanted)
        _count("limit", op.limit)
        _count("offset", op.offset)
        return op._replace(namespace_prefix=_labels(op.namespace_prefix), filter=wanted)
    if isinstance(op, ListNamespacesOp):
        conditions = op.match_conditions or ()
        if not isinstance(conditions, tuple | list) or not all(
            isinstance(c, MatchCondition) and c.match_type in ("prefix", "suffix") for c in conditions
        ):
            raise LongTermError("match_conditions must be a tuple of MatchCondition (prefix or suffix)")
        for condition in conditions:
            _labels(condition.path, wildcard=True)
        if op.max_depth is not None:
            _count("max_depth", op.max_depth)
        _count("limit", op.limit)
        _count("offset", op.offset)
        return op
    raise LongTermError(f"unknown operation {type(op).__name__}")


def _entry_id(namespace: tuple[str, ...], key: str) -> str:
    digest = hashlib.sha256(json.dumps([list(namespace), key]).encode()).hexdigest()
    return f"lg-{digest[:40]}"


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


_ORDER: Final = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op in ("$eq", "$ne"):
        return bool(value == operand) == (op == "$eq")
    number = _number(value)  # a stored value without a number matches no order (as None does not)
    return number is not None and bool(_ORDER[op](number, float(operand)))


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    # A prefix compares from the start, a suffix from the end; "*" matches any label.
    tail = (
        namespace[: len(path)]
        if condition.match_type == "prefix"
        else namespace[len(namespace) - len(path) :]
    )
    return all(p == "*" or n == p for n, p in zip(tail, path, strict=True))


class _Stored:
    """One entry read as an item: the entry, its namespace, key, value, times and ttl."""

    def __init__(self, entry: MemoryEntry) -> None:
        self.entry = entry
        self.ttl: float | None = None
        envelope = _envelope(entry)
        if envelope is None:
            self.namespace: tuple[str, ...] = NATIVE_NAMESPACE
            self.key = entry.id
            self.value: dict[str, Any] = {"type": entry.type, "title": entry.title, "content": entry.content}
            self.created_at = entry.created_at
        else:
            self.namespace = tuple(envelope["namespace"])
            self.key = envelope["key"]
            self.value = envelope["value"]
            self.created_at = envelope["created_at"]
            self.ttl = envelope.get("ttl")

    def ranked(self) -> MemoryEntry:
        """The entry as search ranks it: an item's body is its value, not the envelope's own words."""
        if self.namespace == NATIVE_NAMESPACE:
            return self.entry
        return msgspec.structs.replace(self.entry, content=json.dumps(self.value, ensure_ascii=False))

    def item(self, kind: type[_ItemT]) -> _ItemT:
        return kind(
            namespace=self.namespace,
            key=self.key,
            value=self.value,
            created_at=datetime.fromtimestamp(self.created_at, UTC),
            updated_at=datetime.fromtimestamp(self.entry.created_at, UTC),
        )


def _envelope(entry: MemoryEntry) -> dict[str, Any] | None:
    """The item envelope ``entry`` holds; None for a native entry.

    Only an envelope this store wrote counts: its entry id is the hash of its namespace and key and
    its fields have their types. Content that merely looks like one (an agent may save any text)
    stays a native entry.
    """
    if not entry.id.startswith("lg-") or not entry.content.startswith("{"):
        return None
    try:
        data = json.loads(entry.content)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("format") != _MARK:
        return None
    namespace, key, created_at, ttl = (data.get(k) for k in ("namespace", "key", "created_at", "ttl"))
    if not (
        isinstance(namespace, list)
        and all(isinstance(label, str) for label in namespace)
        and isinstance(key, str)
        and entry.id == _entry_id(tuple(namespace), key)
        and isinstance(data.get("value"), dict)
        and _within(created_at, 0, _LAST_SECOND)
        and (ttl is None or _within(ttl, 0, math.inf))
    ):
        return None
    return data


def _within(value: object, low: float, high: float) -> bool:
    """Whether ``value`` is a number in ``[low, high)`` (a timestamp must make a datetime)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value < high


class AidenStore(BaseStore):
    """A LangGraph store whose items are aiden long-term memory entries (:meth:`for_root` opens a file root's).

    Writes take the entry store's own lock, so a running agent on the same root may write
    too; its prompt shows the new entries after its next profile rebuild.
    """

    supports_ttl = True

    def __init__(self, entries: EntryStore, *, memory_type: str = "fact") -> None:
        if memory_type not in MEMORY_TYPES:
            raise ValueError(f"memory_type must be one of {list(MEMORY_TYPES)}, got {memory_type!r}")
        self._entries = entries
        self._type = memory_type

    @classmethod
    def for_root(cls, root: str, *, memory_type: str = "fact") -> AidenStore:
        """The store over the long-term memory of the file root ``root`` (created on first write)."""
        from aiden.longterm.store import LongTermMemoryStore
        from aiden.storage.fs import Storage
        from aiden.storage.layout import Layout

        return cls(LongTermMemoryStore(Layout(root), Storage()), memory_type=memory_type)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (blocking; not from inside a running event loop: use :meth:`abatch`)."""
        return anyio.run(self.abatch, ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; each result is the item, the items, the namespaces or None."""
        if not isinstance(ops, Iterable):
            raise LongTermError(f"ops must be an iterable of operations, got {type(ops).__name__}")
        checked = [_checked(op) for op in ops]
        for op in checked:
            if isinstance(op, PutOp) and op.value is not None:
                self._check_entry(op)
        results: list[Result] = []
        for op in checked:
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            else:
                results.append(await self._namespaces(op))
        return results

    # --- operations ----------------------------------------------------------------------

    def _id(self, namespace: tuple[str, ...], key: str) -> str:
        return key if namespace == NATIVE_NAMESPACE else _entry_id(namespace, key)

    async def _read(self, namespace: tuple[str, ...], key: str) -> _Stored | None:
        """The entry the item's id names, whichever item it holds (None when there is none)."""
        try:
            entry = await self._entries.get(self._id(namespace, key), now=time.time())
        except InvalidIdError:  # a native key that is no entry id names nothing
            return None
        return None if entry is None else _Stored(entry)

    async def _stored(self, namespace: tuple[str, ...], key: str) -> _Stored | None:
        stored = await self._read(namespace, key)
        return stored if stored is not None and (stored.namespace, stored.key) == (namespace, key) else None

    async def _get(self, op: GetOp) -> Item | None:
        stored = await self._stored(op.namespace, op.key)
        if stored is None:
            return None
        if op.refresh_ttl:
            await self._refresh(stored)
        return stored.item(Item)

    async def _all(self) -> list[_Stored]:
        return [_Stored(e) for e in await self._entries.entries(now=time.time())]

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        found = [
            s
            for s in await self._all()
            if s.namespace[: len(prefix)] == prefix
            and all(_compare(s.value.get(k), v) for k, v in (op.filter or {}).items())
        ]
        if op.query:
            by_id = {s.entry.id: s for s in found}
            found = [by_id[e.id] for e in rank_entries([s.ranked() for s in found], op.query, k=len(found))]
        else:
            found.sort(key=lambda s: -s.entry.created_at)
        page = found[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            for s in page:
                await self._refresh(s)
        return [s.item(SearchItem) for s in page]

    async def _put(self, op: PutOp) -> None:
        found = await self._read(op.namespace, op.key)
        if op.namespace == NATIVE_NAMESPACE and found is not None and found.namespace != NATIVE_NAMESPACE:
            # A native key is an entry id, and another namespace's item is an entry whose id anyone
            # knowing its namespace and key can compute: a write here must not reach it (get doesn't).
            if op.value is None:
                return
            raise MemoryEntryError(f"{op.key!r} is an item of another namespace, not an entry of {NATIVE_NAMESPACE}")
        if op.value is None:
            with contextlib.suppress(InvalidIdError):  # nothing is stored under a key that is no entry id
                await self._entries.forget(self._id(op.namespace, op.key))
            return
        old = found if found is not None and (found.namespace, found.key) == (op.namespace, op.key) else None
        await self._save(op.namespace, op.key, dict(op.value), op.ttl, old.created_at if old else time.time())

    async def _refresh(self, stored: _Stored) -> None:
        """Restart an item's ttl (an item without one is left alone)."""
        if stored.ttl is not None:
            await self._save(stored.namespace, stored.key, stored.value, stored.ttl, stored.created_at)

    async def _save(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
        ttl: float | None,
        created_at: float,
    ) -> None:
        kind, title, content, memory_id = self._entry(namespace, key, value, ttl, created_at)
        now = time.time()
        await self._entries.save(
            type=kind,
            title=title,
            content=content,
            now=now,
            expires_at=now + ttl * 60 if ttl is not None else None,
            memory_id=memory_id,
        )

    def _check_entry(self, op: PutOp) -> None:
        """Refuse an item the long-term store would refuse, before any operation of the batch runs."""
        value, ttl = op.value, op.ttl
        if not isinstance(value, Mapping):
            raise MemoryEntryError(f"value must be a dict or None, got {type(value).__name__}")
        if ttl is not None and not (isinstance(ttl, int | float) and not isinstance(ttl, bool) and 0 < ttl < math.inf):
            raise MemoryEntryError(f"ttl must be a positive number of minutes or None, got {ttl!r}")
        if op.namespace == NATIVE_NAMESPACE:
            for field in ("type", "title", "content"):
                if not isinstance(value.get(field, ""), str):
                    raise MemoryEntryError(f"value[{field!r}] must be str, got {type(value[field]).__name__}")
        now = time.time()
        try:
            kind, title, content, memory_id = self._entry(op.namespace, op.key, dict(value), ttl, now)
            (title + content).encode("utf-8")
        except (TypeError, ValueError) as exc:  # not JSON, or a lone surrogate (UnicodeEncodeError)
            raise MemoryEntryError(f"namespace, key and value must be JSON text: {exc}") from None
        make_entry(memory_id=memory_id, type=kind, title=title, content=content, created_at=now)

    def _entry(
        self, namespace: tuple[str, ...], key: str, value: dict[str, Any], ttl: float | None, created_at: float
    ) -> tuple[str, str, str, str]:
        """The type, title, content and id of the entry an item is saved as."""
        if namespace == NATIVE_NAMESPACE:
            kind, title = str(value.get("type", "fact")), str(value.get("title", ""))
            content, memory_id = str(value.get("content", "")), key
        else:
            envelope = {
                "format": _MARK,
                "namespace": list(namespace),
                "key": key,
                "created_at": created_at,
                "ttl": ttl,
                "value": value,
            }
            # The title is for reading (the profile); the envelope holds the exact key.
            title = "".join(c if c.isprintable() else " " for c in "/".join((*namespace, key)))
            if len(title) > _MAX_TITLE:
                title = title[: _MAX_TITLE - 1] + "…"
            kind, content = self._type, json.dumps(envelope, ensure_ascii=False, sort_keys=True)
            memory_id = _entry_id(namespace, key)
        return kind, title, content, memory_id

    async def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        spaces = {s.namespace for s in await self._all() if all(_matches(c, s.namespace) for c in conditions)}
        if op.max_depth is not None:
            spaces = {ns[: op.max_depth] for ns in spaces}
        return sorted(spaces)[op.offset : op.offset + op.limit]
