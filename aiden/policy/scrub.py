"""What aiden keeps or shows without its payload: screenshot data, credentials in lessons, DSN passwords.

* :func:`strip_screenshot_data` drops base64 image payloads (at least 128 characters, under an image
  key of JSON, as a ``data:image`` URI or as a whole raw image) before persistence and keeps their
  metadata; it is idempotent and returns the same event when nothing changed, so every persistence
  boundary can call it unconditionally.
* :func:`redact_secrets` blanks well-known credential shapes in lessons, which are copied into later
  runs' context, and leaves the rest of the text readable. The session log stays verbatim.
* :func:`mask` hides DSN passwords; it lives here so code that runs without psycopg masks the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgspec

from aiden.events import SessionEvent

__all__ = ["IMAGE_KEYS", "REDACTED", "mask", "redact_secrets", "scrub_text", "strip_screenshot_data"]

_MIN_PAYLOAD: Final = 128
"""Shortest base64 payload treated as image data (a 1x1 PNG is ~90 characters)."""

IMAGE_KEYS: Final = frozenset(
    {"data", "image", "base64", "b64_json", "image_data", "image_base64", "screenshot"}
)
"""JSON keys (case-insensitive) whose long base64 values are image payloads."""

_DATA_URI: Final = re.compile(
    rf"data:image/[a-z0-9.+-]{{1,32}};base64,[A-Za-z0-9+/_-]{{{_MIN_PAYLOAD},}}={{0,2}}",
    re.IGNORECASE,
)
# MIME-style base64 may be wrapped in lines; spaces never occur in it, which
# is what keeps ordinary prose (letters and spaces only) out.
_BASE64: Final = re.compile(r"(?:[A-Za-z0-9+/_-]|\r?\n)+={0,2}\s*")
_HEX: Final = re.compile(r"[0-9A-Fa-f\s]+")
# Base64 of the PNG, JPEG, GIF and WebP signatures.
_IMAGE_MAGIC: Final = ("iVBORw0KGgo", "/9j/", "R0lGOD", "UklGR")
_KEY_HINT: Final = re.compile('"(?:' + "|".join(sorted(IMAGE_KEYS)) + r')"\s*:', re.IGNORECASE)


def _may_contain_uri(text: str) -> bool:
    return "ase64," in text or "ASE64," in text


def _omitted(length: int) -> str:
    return f"[image data omitted: {length} bytes]"


def scrub_text(text: str) -> str:
    """``text`` with inline ``data:image/...;base64,...`` URIs replaced by a size marker (else ``text`` itself)."""
    if not _may_contain_uri(text):
        return text
    scrubbed, count = _DATA_URI.subn(lambda m: _omitted(len(m.group(0))), text)
    return scrubbed if count else text


def _is_base64_payload(value: str) -> bool:
    # Hex digests (sha512 is 128 characters) are base64-alphabet too: not images.
    return (
        len(value) >= _MIN_PAYLOAD
        and _BASE64.fullmatch(value) is not None
        and _HEX.fullmatch(value) is None
    )


def _is_image_payload(value: str) -> bool:
    return _is_base64_payload(value) or _DATA_URI.fullmatch(value.strip()) is not None


def _scrub_value(value: Any) -> Any:
    """``value`` scrubbed; the very same object when nothing changed."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return _scrub_dict(value)
    if isinstance(value, list):
        items = [_scrub_value(item) for item in value]
        return items if any(new is not old for new, old in zip(items, value, strict=True)) else value
    return value


def _scrub_dict(mapping: dict[Any, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in mapping.items():
        if isinstance(key, str) and isinstance(value, str) and key.lower() in IMAGE_KEYS and _is_image_payload(value):
            out[f"{key}_omitted_bytes"] = len(value)
        else:
            out[key] = _scrub_value(value)
    unchanged = out.keys() == mapping.keys() and all(out[key] is value for key, value in mapping.items())
    return mapping if unchanged else out


def _scrub_content(content: str) -> str:
    stripped = content.strip()
    if stripped[:1] in ("{", "[") and (_KEY_HINT.search(content) or _may_contain_uri(content)):
        try:
            parsed = json.loads(content)
        except ValueError:
            pass  # not JSON after all: scrub it as text
        else:
            scrubbed = _scrub_value(parsed)
            if scrubbed is parsed:
                return content
            return json.dumps(scrubbed, ensure_ascii=False, separators=(",", ":"))
    if stripped.startswith(_IMAGE_MAGIC) and _is_base64_payload(stripped):
        return _omitted(len(stripped))
    return scrub_text(content)


def strip_screenshot_data(event: SessionEvent) -> SessionEvent:
    """``event`` without base64 image payloads in its content and meta; ``event`` itself when nothing changed.

    A JSON value under an image key becomes ``<key>_omitted_bytes`` (its length); in text, a payload
    becomes ``[image data omitted: N bytes]``.
    """
    content = _scrub_content(event.content) if event.content else event.content
    meta = _scrub_dict(event.meta) if event.meta else event.meta
    if content is event.content and meta is event.meta:
        return event
    return msgspec.structs.replace(event, content=content, meta=meta)


# --- credentials in lessons ---------------------------------------------------------

REDACTED: Final = "[redacted]"

# Each pattern's group "secret" is what gets replaced; the rest stays for the reader.
_PATTERNS: Final = tuple(
    re.compile(p)
    for p in (
        # Provider keys with a recognizable prefix (OpenAI, Anthropic, GitHub, Slack, AWS, Google).
        r"(?P<secret>\b(?:sk|rk|pk)-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,})",
        r"(?P<secret>\bgh[pousr]_[A-Za-z0-9]{20,})",
        r"(?P<secret>\bgithub_pat_[A-Za-z0-9_]{20,})",
        r"(?P<secret>\bxox[abprs]-[A-Za-z0-9-]{10,})",
        r"(?P<secret>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b)",
        r"(?P<secret>\bAIza[0-9A-Za-z_-]{30,})",
        # Authorization headers.
        r"(?i:\b(?:bearer|basic|token)\s+)(?P<secret>[A-Za-z0-9._~+/=-]{12,})",
        # key=value / key: value for names that say they hold a secret.
        r"(?i:\b(?P<name>[\w.-]*(?:password|passwd|secret|api[_-]?key|access[_-]?key|auth[_-]?token|token)[\w.-]*)"
        r"\s*[=:]\s*)[\"']?(?P<secret>[^\s\"',;]{4,})",
        # Credentials inside URLs: scheme://user:password@host.
        r"(?i:\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)(?P<secret>[^\s@/]{3,})(?=@)",
    )
)
_PRIVATE_KEY: Final = re.compile(
    r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----.*?(?:-----END (?:[A-Z]+ )?PRIVATE KEY-----|\Z)", re.DOTALL
)


_NAMES_A_LOCATION: Final = re.compile(r"(?i)(?:file|path|dir)(?:[_.-]|$)")


def redact_secrets(text: str) -> str:
    """``text`` with the secret part of every credential shape replaced by ``[redacted]``.

    Idempotent; ``text`` itself when nothing matched.
    """
    out = _PRIVATE_KEY.sub(f"-----{REDACTED} PRIVATE KEY-----", text)
    for pattern in _PATTERNS:
        out = pattern.sub(_keep_all_but_secret, out)
    return out if out != text else text


def _keep_all_but_secret(match: re.Match[str]) -> str:
    whole, start, end = match.group(0), match.start("secret"), match.end("secret")
    if match.group("secret") == REDACTED:
        return whole
    if "name" in match.re.groupindex and _NAMES_A_LOCATION.search(match.group("name")):
        # TOKEN_FILE=/etc/x/token names where a secret is, not the secret: a lesson needs it verbatim.
        return whole
    base = match.start(0)
    return whole[: start - base] + REDACTED + whole[end - base :]


# --- passwords in connection strings -----------------------------------------------

# ``password=...`` in libpq's keyword form or a URI query, and ``user:password@`` in a URI.
_SECRET = re.compile(r"(password\s*=\s*)('[^']*'|\S+)|(://[^:/@\s]*:)[^@\s]*@", re.IGNORECASE)


def mask(text: str) -> str:
    """``text`` with every password of a DSN in it replaced by ``***``."""
    return _SECRET.sub(lambda m: f"{m.group(1)}***" if m.group(1) else f"{m.group(3)}***@", text)
