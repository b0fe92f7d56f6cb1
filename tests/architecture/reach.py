"""What a caller's room can reach from an object, walking the way Python code could.

The walk follows attributes (``__dict__``, ``__slots__``, Struct fields) of
aiden-defined objects, the items of builtin containers and the closure cells of
functions and bound methods. It does not open third-party objects (an anyio send
stream is a leaf): what they hold is theirs, and what matters is which objects
of aiden's rooms a ``Memory`` holds a reference to.
"""

from __future__ import annotations

import types
from collections.abc import Iterator

_CONTAINERS = (list, tuple, set, frozenset)


def _slots(obj: object) -> Iterator[object]:
    for klass in type(obj).__mro__:
        names = getattr(klass, "__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name != "__weakref__" and hasattr(obj, name):
                yield getattr(obj, name)


def _children(obj: object) -> Iterator[object]:
    if isinstance(obj, _CONTAINERS):
        yield from obj
    elif isinstance(obj, dict):
        yield from obj.keys()
        yield from obj.values()
    elif isinstance(obj, types.FunctionType):
        yield from (cell.cell_contents for cell in obj.__closure__ or ())
    elif isinstance(obj, types.MethodType):
        yield obj.__self__
        yield obj.__func__
    elif (type(obj).__module__ or "").split(".")[0] == "aiden":
        yield from vars(obj).values() if hasattr(obj, "__dict__") else ()
        yield from _slots(obj)


def reachable_types(root: object) -> dict[type, list[str]]:
    """Every type reachable from ``root`` -> one attribute path that reaches it."""
    seen: set[int] = set()
    found: dict[type, list[str]] = {}
    stack: list[tuple[object, list[str]]] = [(root, [type(root).__name__])]
    while stack:
        obj, path = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        found.setdefault(type(obj), path)
        for child in _children(obj):
            stack.append((child, [*path, type(child).__name__]))
    return found
