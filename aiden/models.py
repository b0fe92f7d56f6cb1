"""Model context windows from litellm's bundled model map, read without importing litellm.

The runtime asks for the window on every open, so this module must stay cheap
and offline: it locates the installed litellm package with ``find_spec`` and
reads its JSON, and never runs litellm's code.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import msgspec

__all__ = ["ModelResolver"]

_BACKUP_MAP: Final = "model_prices_and_context_window_backup.json"

_map_lock = threading.Lock()
_default_map: dict[str, int] | None = None


def _litellm_map_path() -> Path | None:
    # find_spec locates the package without importing (and so without running) it.
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / _BACKUP_MAP


def _load_windows(path: Path | None) -> dict[str, int]:
    """``{model: context window}`` from a litellm-format model map; ``{}`` if unreadable."""
    if path is None:
        return {}
    try:
        raw = path.read_bytes()
        data = msgspec.json.decode(raw)
    except (OSError, msgspec.DecodeError):
        return {}
    if not isinstance(data, dict):
        return {}
    windows: dict[str, int] = {}
    for name, spec in data.items():
        if not isinstance(spec, dict):
            continue
        for key in ("max_input_tokens", "max_tokens"):
            value = spec.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                windows[str(name)] = value
                break
    return windows


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class ModelResolver:
    """Context windows of models, from litellm's bundled model map, without importing litellm.

    ``path`` points at a map in litellm's format (default: the
    ``model_prices_and_context_window_backup.json`` shipped inside the
    installed litellm package, read lazily once per process). ``overrides``
    wins over the map. Nothing is printed and nothing raises: an unknown model
    or a missing map gives the caller's fallback.
    """

    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, int] | None = None,
    ) -> None:
        self._path = Path(path) if path is not None else None
        self._overrides = dict(overrides or {})
        self._windows: dict[str, int] | None = None

    def _table(self) -> dict[str, int]:
        global _default_map
        if self._windows is not None:
            return self._windows
        if self._path is not None:
            self._windows = _load_windows(self._path)
            return self._windows
        with _map_lock:
            if _default_map is None:
                _default_map = _load_windows(_litellm_map_path())
            self._windows = _default_map
        return self._windows

    def lookup(self, model: str | None) -> int | None:
        """The known context window of ``model`` (tokens), or ``None``.

        Tries the name as given, then without provider prefixes
        (``openai/gpt-4o`` -> ``gpt-4o``; ``azure/eu/gpt-4o`` -> ``eu/gpt-4o`` -> ``gpt-4o``).
        """
        if not model:
            return None
        parts = model.strip().split("/")
        candidates = ["/".join(parts[i:]) for i in range(len(parts))]
        for name in candidates:
            if name in self._overrides and _positive_int(self._overrides[name]):
                return self._overrides[name]
        table = self._table()
        for name in candidates:
            window = table.get(name)
            if window is not None:
                return window
        return None

    def context_window(self, model: str | None, fallback: int) -> int:
        """The context window of ``model``, or ``fallback`` if unknown."""
        window = self.lookup(model)
        return window if window is not None else fallback
