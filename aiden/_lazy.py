"""Lazy package exports: names whose modules load on first attribute access.

Used by packages whose members are costly to import (sqlite3, dulwich, large
rule tables, litellm's wrapper), so ``import aiden`` stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, table: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` resolving ``name`` from the module ``table[name]``.

    A name that is the submodule itself (``table["sync"] == f"{package}.sync"``) resolves to that module.
    """

    def __getattr__(name: str) -> object:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        loaded = importlib.import_module(module)
        return loaded if module == f"{package}.{name}" else getattr(loaded, name)

    return __getattr__
