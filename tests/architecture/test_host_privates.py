"""One owner per piece of state: no module but ``aiden/host.py`` reads a Host's private members.

The runtime asks its host through the Host's methods (a key and the rings, its shared actors, the
start and the detach of a memory); the Host's ``_``-prefixed attributes are its own. A Host object
here is a name that a module annotates with ``Host`` (a parameter or an annotated assignment): in
aiden a host always reaches a module so, as ``run_memory``'s and ``open_memory``'s ``host``.
"""

from __future__ import annotations

import ast
import re

from tests.architecture.graph import module_files

_HOST = re.compile(r"\bHost\b")  # not HostActor, HostLink


def _host_names(tree: ast.AST) -> set[str]:
    """The names annotated with ``Host`` (``Host | None`` and ``aiden.Host`` included) in ``tree``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            annotation, name = node.annotation, node.arg
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation, name = node.annotation, node.target.id
        else:
            continue
        if _HOST.search(ast.unparse(annotation)):
            names.add(name)
    return names


def _private_reads(tree: ast.AST, hosts: set[str]) -> list[str]:
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in hosts
        and node.attr.startswith("_")
        and not node.attr.endswith("__")
    ]


def test_no_module_but_the_host_reads_a_host_private_attribute() -> None:
    reads: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    for module, path in module_files().items():
        if module == "aiden.host":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        hosts = _host_names(tree)
        seen |= {(module, name) for name in hosts}
        if found := _private_reads(tree, hosts):
            reads[module] = found
    assert reads == {}
    # The walk sees the hosts that modules are given.
    assert {("aiden.runtime", "host"), ("aiden.memory", "host")} <= seen
