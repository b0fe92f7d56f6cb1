"""Model context windows from litellm's bundled model map — without importing litellm.

litellm ships ``model_prices_and_context_window_backup.json`` inside its
package; reading it directly costs a few milliseconds instead of litellm's
~3 s import and never touches the network or prints a banner. Unknown models
fall back to the configured window.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from typing import Any

__all__ = ["ModelResolver"]

_MAP_FILE = "model_prices_and_context_window_backup.json"


class ModelResolver:
    """Resolves a model name to its input context window (tokens)."""

    _cache: dict[str, Any] | None = None
    _lock = threading.Lock()

    def __init__(self, model_map: dict[str, Any] | None = None) -> None:
        self._map = model_map

    @classmethod
    def _load(cls) -> dict[str, Any]:
        with cls._lock:
            if cls._cache is None:
                data: dict[str, Any] = {}
                try:
                    spec = importlib.util.find_spec("litellm")
                    if spec is not None and spec.origin:
                        path = os.path.join(os.path.dirname(spec.origin), _MAP_FILE)
                        with open(path, encoding="utf-8") as f:
                            loaded = json.load(f)
                        if isinstance(loaded, dict):
                            data = loaded
                except (OSError, ValueError, ImportError):
                    data = {}
                cls._cache = data
            return cls._cache

    def context_window(self, model: str | None, fallback: int) -> int:
        """The model's ``max_input_tokens`` (else ``max_tokens``); ``fallback`` when unknown."""
        if not model:
            return fallback
        table = self._map if self._map is not None else self._load()
        candidates = [model]
        if "/" in model:
            candidates.append(model.split("/", 1)[1])
        for name in candidates:
            info = table.get(name)
            if isinstance(info, dict):
                for key in ("max_input_tokens", "max_tokens"):
                    value = info.get(key)
                    if isinstance(value, int) and value > 0:
                        return value
        return fallback
