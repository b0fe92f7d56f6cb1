"""A LangGraph ``BaseStore`` over aiden's long-term memory: :class:`AidenStore`.

Needs the ``langgraph`` extra. An item ``(namespace, key)`` is the long-term entry
``lg-<hash of namespace and key>`` (namespace, key, JSON value and times in its content;
``ttl`` in minutes is its expiry). The agent's own entries appear in the namespace
``("memories",)`` with their id as key and ``{"type", "title", "content"}`` as value (a put
there saves one; ``type`` defaults to ``fact``). ``search`` ranks by aiden's long-term search
and leaves out items matching no word; ``filter`` compares as LangGraph's InMemoryStore does.
Scores are None: no embeddings.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import operator
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
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

from aiden.errors import InvalidIdError
from aiden.longterm.entries import MEMORY_TYPES, MemoryEntry, rank_entries

if TYPE_CHECKING:
    from aiden.longterm.backend import EntryStore

__all__ = ["NATIVE_NAMESPACE", "AidenStore"]

NATIVE_NAMESPACE: Final = ("memories",)
"""Where the agent's own long-term entries appear (key = entry id)."""

_MARK: Final = "aiden.langgraph/1"
_MAX_TITLE: Final = 200
_ItemT = TypeVar("_ItemT", bound=Item)


def _check_labels(op: Op) -> None:
    # As BaseStore's methods check them; ops given to batch() directly skip those methods.
    if isinstance(op, SearchOp):
        namespaces = [op.namespace_prefix]
    elif isinstance(op, ListNamespacesOp):
        namespaces = [tuple(p for p in c.path if p != "*") for c in op.match_conditions or ()]
    else:
        namespaces = [getattr(op, "namespace", ())]
    for namespace in namespaces:
        for label in namespace:
            if not isinstance(label, str) or not label or "." in label or "\x00" in label:
                raise InvalidNamespaceError(f"invalid namespace label {label!r} in {namespace!r}")


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
    if value is None:
        return False
    if op not in _ORDER:
        raise ValueError(f"unsupported filter operator {op!r}")
    return bool(_ORDER[op](float(value), float(operand)))


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
        envelope = _envelope(entry.content)
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

    def item(self, kind: type[_ItemT]) -> _ItemT:
        """The entry as an ``Item`` (or a ``SearchItem``)."""
        return kind(
            namespace=self.namespace,
            key=self.key,
            value=self.value,
            created_at=datetime.fromtimestamp(self.created_at, UTC),
            updated_at=datetime.fromtimestamp(self.entry.created_at, UTC),
        )


def _envelope(content: str) -> dict[str, Any] | None:
    if not content.startswith("{"):
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get("format") == _MARK else None


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
        results: list[Result] = []
        for op in ops:
            _check_labels(op)
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._namespaces(op))
            else:
                raise ValueError(f"unknown operation {type(op).__name__}")
        return results

    # --- operations ----------------------------------------------------------------------

    def _id(self, namespace: tuple[str, ...], key: str) -> str:
        return key if namespace == NATIVE_NAMESPACE else _entry_id(namespace, key)

    async def _stored(self, namespace: tuple[str, ...], key: str) -> _Stored | None:
        try:
            entry = await self._entries.get(self._id(namespace, key), now=time.time())
        except InvalidIdError:  # a native key that is no entry id names nothing
            return None
        if entry is None:
            return None
        stored = _Stored(entry)
        return stored if (stored.namespace, stored.key) == (namespace, key) else None

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
            found = [by_id[e.id] for e in rank_entries([s.entry for s in found], op.query, k=len(found))]
        else:
            found.sort(key=lambda s: -s.entry.created_at)
        page = found[op.offset : op.offset + op.limit]
        if op.refresh_ttl:
            for s in page:
                await self._refresh(s)
        return [s.item(SearchItem) for s in page]

    async def _put(self, op: PutOp) -> None:
        if op.value is None:
            with contextlib.suppress(InvalidIdError):  # nothing is stored under a key that is no entry id
                await self._entries.forget(self._id(op.namespace, op.key))
            return
        ttl = op.ttl if isinstance(op.ttl, int | float) else None
        old = await self._stored(op.namespace, op.key)
        await self._save(op.namespace, op.key, dict(op.value), ttl, old.created_at if old else time.time())

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
        now = time.time()
        await self._entries.save(
            type=kind,
            title=title,
            content=content,
            now=now,
            expires_at=now + ttl * 60 if ttl is not None else None,
            memory_id=memory_id,
        )

    async def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        spaces = {s.namespace for s in await self._all() if all(_matches(c, s.namespace) for c in conditions)}
        if op.max_depth is not None:
            spaces = {ns[: op.max_depth] for ns in spaces}
        return sorted(spaces)[op.offset : op.offset + op.limit]
