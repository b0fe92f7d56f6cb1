"""Versioned ``index.yaml`` files: safe parsing into a msgspec Struct, and rendering (pure).

The experience stores keep their commit point in a small YAML index (readable
by a person, diffable). Parsing is the same for every one of them: bounded
size, PyYAML's safe loader (no tags, nothing executed), a version check, the
Struct conversion, unique and path-safe ids; any failure is a
:class:`~aiden.errors.CorruptionError` naming the file, which the store
answers by rebuilding the index from its files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

import msgspec
import yaml

from aiden.errors import CorruptionError, InvalidIdError
from aiden.events import validate_id

__all__ = ["parse_yaml_index", "render_yaml_index"]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_BYTES: Final = 16 * 1024 * 1024

T = TypeVar("T")


def parse_yaml_index(
    data: bytes, kind: type[T], *, name: str, version: int, ids: Callable[[T], Iterable[str]], what: str
) -> T:
    """``data`` as a ``kind`` (empty: ``kind()``); :class:`CorruptionError` for anything else.

    ``ids(index)`` lists the index's ids, each checked with
    :func:`~aiden.events.validate_id` (as ``what``) and for duplicates.
    """
    if len(data) > _MAX_BYTES:
        raise CorruptionError(f"{name} larger than {_MAX_BYTES} bytes")
    try:
        raw = yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise CorruptionError(f"{name} is not valid safe YAML: {exc}") from exc
    if raw is None:
        return kind()
    if not isinstance(raw, dict) or raw.get("version") != version:
        raise CorruptionError(f"{name} is not a version {version} mapping")
    try:
        index = msgspec.convert(raw, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise CorruptionError(f"{name} invalid: {exc}") from exc
    seen: set[str] = set()
    for item in ids(index):
        try:
            validate_id(item, what=what)
        except InvalidIdError as exc:
            raise CorruptionError(f"{name}: {exc}") from exc
        if item in seen:
            raise CorruptionError(f"{name}: duplicate {what} {item!r}")
        seen.add(item)
    return index


def render_yaml_index(index: object) -> bytes:
    """The YAML text of ``index`` (``yaml.safe_dump``: plain data, no tags, field order kept)."""
    text = yaml.safe_dump(msgspec.to_builtins(index), sort_keys=False, allow_unicode=True, width=4096)
    return text.encode("utf-8")
