"""Adapters that plug aiden into agent frameworks (each imports its framework lazily)."""

from __future__ import annotations

__all__: list[str] = []
