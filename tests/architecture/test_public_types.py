"""Every aiden type a user meets in a public signature is exported from ``aiden``.

Starting from ``aiden.__all__``, the walk reads the type hints of each exported
function, of each exported class's constructor, public methods, properties and
Struct fields, and of the types those mention in turn: a type defined in aiden
that turns up there and is not importable from ``aiden`` is a hole in the API.
"""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Iterator

import aiden

# Built by aiden, never by users (open_memory wires its ports): the constructor is not public API.
CONSTRUCTED_BY_AIDEN: frozenset[type] = frozenset({aiden.Memory})


def _types_in(hint: object) -> Iterator[type]:
    if isinstance(hint, type):
        yield hint
    for arg in typing.get_args(hint):
        if isinstance(arg, list):  # Callable[[A, B], R]
            for item in arg:
                yield from _types_in(item)
        else:
            yield from _types_in(arg)


@functools.cache
def _every_aiden_class() -> dict[str, type]:
    """Class name -> class over aiden's modules (the adapters import their frameworks: not walked)."""
    classes: dict[str, type] = {}
    for info in pkgutil.walk_packages(aiden.__path__, "aiden."):
        if not info.name.startswith("aiden.adapters") and not info.name.endswith("__main__"):
            module = importlib.import_module(info.name)
            classes.update((n, v) for n, v in vars(module).items() if isinstance(v, type))
    return classes


def _hints(obj: Callable[..., object]) -> dict[str, object]:
    # Hints may name TYPE_CHECKING-only imports: resolve them against every aiden class.
    module = inspect.getmodule(obj)
    namespace = {**_every_aiden_class(), **(vars(module) if module else {})}
    return typing.get_type_hints(obj, namespace)


def _signature_types(obj: object) -> Iterator[type]:
    if inspect.isfunction(obj):
        for hint in _hints(obj).values():
            yield from _types_in(hint)
        return
    if not isinstance(obj, type) or issubclass(obj, BaseException | enum.Enum):
        return
    if hasattr(obj, "__struct_fields__"):
        yield from (t for hint in _hints(obj).values() for t in _types_in(hint))
    elif obj not in CONSTRUCTED_BY_AIDEN:
        yield from _signature_types(obj.__init__)
    for name, member in inspect.getmembers(obj):
        if name.startswith("_"):
            continue
        if isinstance(member, property) and member.fget is not None:
            yield from _signature_types(member.fget)
        elif inspect.isfunction(member):
            yield from _signature_types(member)


def _defined_in_aiden(klass: type) -> bool:
    return klass.__module__.split(".")[0] == "aiden" and not klass.__name__.startswith("_")


def missing_exports() -> dict[str, str]:
    """Aiden types met in public signatures but not exported -> where they were met."""
    exported = {id(getattr(aiden, name)) for name in aiden.__all__}
    missing: dict[str, str] = {}
    queue = [(name, getattr(aiden, name)) for name in aiden.__all__]
    seen: set[int] = set()
    while queue:
        where, obj = queue.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        for klass in _signature_types(obj):
            if not _defined_in_aiden(klass):
                continue
            if id(klass) not in exported:
                missing.setdefault(f"{klass.__module__}.{klass.__qualname__}", where)
            queue.append((klass.__name__, klass))
    return missing


def test_every_type_in_a_public_signature_is_exported() -> None:
    assert missing_exports() == {}


def test_the_walk_reaches_method_property_and_field_types() -> None:
    met = {klass.__name__ for klass in _signature_types(aiden.Memory)}
    assert {"SessionEvent", "CompactionOutcome", "MemoryStats", "PromptBuild", "RecallHit"} <= met
    assert "ChunkEntry" in {klass.__name__ for klass in _signature_types(aiden.ChunkIndex)}
