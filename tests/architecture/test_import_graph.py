"""The ``aiden`` package has no import cycles, ``TYPE_CHECKING`` imports included: each room depends on the
rooms below it only."""

from __future__ import annotations

from pathlib import Path

from tests.architecture.graph import cycles, import_graph, module_files


def test_the_graph_sees_absolute_relative_and_submodule_imports() -> None:
    graph = import_graph()
    assert "aiden.ports" in graph["aiden.memory_core"]
    assert "aiden.errors" in graph["aiden.ports"]
    # `from aiden.storage import session`-style imports reach the submodule, not the package.
    assert all(not target.endswith("__init__") for targets in graph.values() for target in targets)


def test_there_are_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def _package(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    root = tmp_path / "aiden"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return module_files(root)


def test_a_function_local_import_closes_a_cycle(tmp_path: Path) -> None:
    modules = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from aiden.b import x\n",
            "b.py": "def x():\n    from . import a\n    return a\n",
            "c.py": "import aiden.a\n",
        },
    )
    assert cycles(import_graph(modules)) == [["aiden.a", "aiden.b"]]


def test_a_type_checking_import_closes_one_too(tmp_path: Path) -> None:
    modules = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from aiden.b import x\n",
            "b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from aiden.a import y\nelse:\n    import json\n"
                "x = 1\n"
            ),
        },
    )
    assert import_graph(modules) == {"aiden": set(), "aiden.a": {"aiden.b"}, "aiden.b": {"aiden.a"}}
    assert cycles(import_graph(modules)) == [["aiden.a", "aiden.b"]]


def test_relative_imports_resolve_from_packages_and_modules(tmp_path: Path) -> None:
    modules = _package(
        tmp_path,
        {
            "__init__.py": "",
            "p/__init__.py": "from .q import z\n",
            "p/q.py": "from ..r import w\nz = 1\n",
            "r.py": "from aiden.p import q\nw = 2\n",
        },
    )
    assert import_graph(modules) == {
        "aiden": set(),
        "aiden.p": {"aiden.p.q"},
        "aiden.p.q": {"aiden.r"},
        "aiden.r": {"aiden.p.q"},
    }
    assert cycles(import_graph(modules)) == [["aiden.p.q", "aiden.r"]]
