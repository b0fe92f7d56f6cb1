"""One owner per piece of state: a module touches only the ``_``-prefixed members it defines itself.

An attribute ``x._name`` read or written through anything but ``self`` or ``cls`` is another
object's private member, unless the module defines a member of that name (a class's own copies
and classmethods reach their instances so). The runtime asks the memory it made through what it
handed it (the calibration it publishes, whether it is closed), never through ``memory._runs``.

The walk goes by names, not types: a module that defines a ``_name`` of its own and reaches
another class's ``_name`` is not seen, nor a ``getattr`` with a string.
"""

from __future__ import annotations

import ast

from tests.architecture.graph import module_files

# namedtuple's public API, underscored so as not to clash with field names (langgraph's ops).
_NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make"})


def _own(value: ast.expr) -> bool:
    return isinstance(value, ast.Name) and value.id in ("self", "cls")


def _defined(tree: ast.AST) -> set[str]:
    """The names ``tree`` defines: its functions and classes, assigned names, ``self.``/``cls.`` members."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _own(node.value):
            names.add(node.attr)
    return names


def foreign_private_uses(source: str) -> list[str]:
    """Each ``x._name`` in ``source`` through another object than ``self``/``cls`` of a name it does not define."""
    tree = ast.parse(source)
    defined = _defined(tree) | _NAMEDTUPLE_API
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.endswith("__")
        and not _own(node.value)
        and node.attr not in defined
    ]


def test_no_module_touches_another_objects_private_members() -> None:
    found = {
        module: uses
        for module, path in module_files().items()
        if (uses := foreign_private_uses(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_walk_tells_a_foreign_private_member_from_an_own_one() -> None:
    source = (
        "class Box:\n"
        "    def __init__(self) -> None:\n"
        "        self._runs = []\n"
        "    def copy(self, other: Box) -> None:\n"
        "        other._runs = list(self._runs)\n"
        "def close(memory: object, op: object) -> None:\n"
        "    memory._closed = True\n"
        "    print(memory.config._window, op._replace(), memory.__dict__)\n"
    )
    assert foreign_private_uses(source) == ["line 7: memory._closed", "line 8: memory.config._window"]
