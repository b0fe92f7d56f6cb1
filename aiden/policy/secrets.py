"""Credential redaction for what aiden distills and keeps for long (experience episodes and records).

The session log keeps what the agent saw, verbatim (the user's data, the
user's disk). A lesson is different: it is copied into later runs' context
by ``recall_experience``, possibly months later, so a token that appeared in a
command line or a tool output must not travel with it. :func:`redact_secrets`
replaces the secret part of well-known credential shapes with
``[redacted]`` and leaves the rest of the text (the command, the flag, the
variable name) as it was, so the lesson still reads.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["REDACTED", "redact_secrets"]

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

    Idempotent; returns ``text`` itself when nothing matched.
    """
    if not text:
        return text
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
