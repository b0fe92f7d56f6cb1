"""Masking credentials in connection strings before they reach an error message or a log.

Kept out of :mod:`aiden.storage.postgres` so that code which runs without
psycopg installed (store selection, its error messages) masks the same way.
"""

from __future__ import annotations

import re

__all__ = ["mask"]

# ``password=...`` in libpq's keyword form or a URI query, and ``user:password@`` in a URI.
_SECRET = re.compile(r"(password\s*=\s*)('[^']*'|\S+)|(://[^:/@\s]*:)[^@\s]*@", re.IGNORECASE)


def mask(text: str) -> str:
    """``text`` with every password of a DSN in it replaced by ``***``."""
    return _SECRET.sub(lambda m: f"{m.group(1)}***" if m.group(1) else f"{m.group(3)}***@", text)
