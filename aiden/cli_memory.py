"""``aiden memory list|save|forget``, ``aiden history`` and ``aiden restore``: long-term memory from the shell.

``memory list`` and ``history`` are read-only: they read ``long_term/`` (the
entries, the Dream versions in ``long_term/.git``) without opening the memory,
so they work on a read-only root and beside a running agent. ``memory save``,
``memory forget`` and ``restore`` write: they open the memory as an agent does
and save/forget through the agent's own ``save_memory`` / ``forget_memory``
tools (:meth:`aiden.Memory.handle_tool_call`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from aiden.longterm.entries import MemoryEntry
    from aiden.longterm.gitstore import Version

__all__ = ["add_memory_commands", "dream_versions", "list_memories", "parse_version"]


def _iso(seconds: float | None) -> str | None:
    """ISO-8601 UTC; None for None and for a time no calendar date holds (a damaged index's ``1e300``)."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


def _bad_times(entry: MemoryEntry) -> list[str]:
    return [
        f"entry {entry.id}: {name} {value!r} is not a valid time (shown as null)"
        for name, value in (("created_at", entry.created_at), ("expires_at", entry.expires_at))
        if value is not None and _iso(value) is None
    ]


def list_memories(
    root: str, *, now: float | None = None, problems: list[str] | None = None
) -> list[MemoryEntry]:
    """The unexpired long-term entries under ``root``, oldest first. Read-only.

    ``problems`` receives each time no date can show (what the store could not
    read, a damaged index or entry file, it logs).
    """
    from aiden.longterm.store import LongTermMemoryStore
    from aiden.readonly import open_layout
    from aiden.storage.fs import Storage

    # The store writes only in save/forget/rebuild_profile; reading entries takes no lock.
    store = LongTermMemoryStore(open_layout(root), Storage())
    when = time.time() if now is None else now
    entries = anyio.run(lambda: store.entries(now=when))
    if problems is not None:  # what the store could not read, it logs (the command says it on stderr)
        problems.extend(bad for entry in entries for bad in _bad_times(entry))
    return entries


def dream_versions(root: str, *, limit: int = 20, problems: list[str] | None = None) -> list[Version]:
    """The newest ``limit`` versions of SOUL.md / USER.md / MEMORY.md, newest first. Read-only.

    ``problems`` receives what is wrong with ``long_term/.git`` (the versions listed
    may then be incomplete); ``aiden doctor --repair`` repairs it.
    """
    from aiden.longterm.dream_edits import LONG_TERM_FILES
    from aiden.longterm.gitcheck import check_history
    from aiden.longterm.gitstore import GitStore
    from aiden.readonly import open_layout
    from aiden.storage.fs import Storage

    layout = open_layout(root)
    if problems is not None:
        problems.extend(check_history(layout.long_term).problems)
    # log() opens the repository without create: a root that never dreamed has no .git and no versions.
    return GitStore(layout.long_term, LONG_TERM_FILES, Storage()).log(limit)


def parse_version(text: str) -> str | int:
    """A restore target: up to 3 digits are steps back from the newest version (1 = the one before), else a commit id."""
    stripped = text.strip()
    # A commit id prefix needs >= 4 hex digits (GitStore.resolve), so short numbers are unambiguous.
    return int(stripped) if stripped.isdigit() and len(stripped) < 4 else stripped


def _entry_json(entry: MemoryEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "type": entry.type,
        "title": entry.title,
        "content": entry.content,
        "created_at": _iso(entry.created_at),
        "expires_at": _iso(entry.expires_at),
    }


def _version_json(version: Version) -> dict[str, Any]:
    return {
        "commit_id": version.commit_id,
        "time": _iso(version.timestamp),
        "title": version.title,
        "message": version.message,
    }


def _list(args: argparse.Namespace) -> int:
    from aiden.cli_progress import report_problems

    problems: list[str] = []
    entries = list_memories(args.root, problems=problems)
    if args.json:
        print(json.dumps([_entry_json(e) for e in entries], indent=2, ensure_ascii=False))
        return report_problems("memory list", problems)
    if not entries:
        print("no long-term memories")
    for entry in entries:
        expires = f"  (expires {_iso(entry.expires_at)})" if entry.expires_at is not None else ""
        print(f"{entry.id}  {entry.type:<10}  {entry.title}{expires}")
    return report_problems("memory list", problems)


async def _tool(args: argparse.Namespace, name: str, arguments: dict[str, Any]) -> str:
    from aiden.cli_open import writable_memory

    async with writable_memory(args.root, config_path=args.config) as memory:
        return await memory.handle_tool_call(name, arguments)


def _answer(command: str, result: str) -> int:
    """Print the tool's JSON answer; exit 1 when it is an error."""
    answer = json.loads(result)
    if "error" in answer:
        print(f"aiden {command}: {answer['error']}", file=sys.stderr)
        return 1
    print(json.dumps(answer, ensure_ascii=False))
    return 0


def _save(args: argparse.Namespace) -> int:
    arguments: dict[str, Any] = {"type": args.type, "title": args.title, "content": args.content}
    if args.expires_at is not None:
        arguments["expires_at"] = args.expires_at
    if args.id is not None:
        arguments["id"] = args.id
    return _answer("memory save", anyio.run(_tool, args, "save_memory", arguments))


def _forget(args: argparse.Namespace) -> int:
    return _answer("memory forget", anyio.run(_tool, args, "forget_memory", {"id": args.id}))


def _history(args: argparse.Namespace) -> int:
    from aiden.cli_progress import report_problems

    problems: list[str] = []
    versions = dream_versions(args.root, limit=args.limit, problems=problems)
    if args.json:
        print(json.dumps([_version_json(v) for v in versions], indent=2, ensure_ascii=False))
        return report_problems("history", problems)
    if not versions and not problems:
        print("no Dream versions yet")
    for version in versions:
        print(f"{version.commit_id[:12]}  {_iso(version.timestamp)}  {version.title}")
    return report_problems("history", problems)


async def _restore_async(args: argparse.Namespace) -> Version:
    from aiden.cli_open import writable_memory

    async with writable_memory(args.root, config_path=args.config) as memory:
        return await memory.dream_restore(parse_version(args.version))


def _restore(args: argparse.Namespace) -> int:
    version = anyio.run(_restore_async, args)
    if args.json:
        print(json.dumps(_version_json(version), ensure_ascii=False))
    else:
        print(f"{version.commit_id[:12]}  {version.title}")
    return 0


def add_memory_commands(sub: Any) -> None:
    """Add ``memory``, ``history`` and ``restore`` to the ``aiden`` subparsers ``sub``."""
    from aiden.longterm.entries import MEMORY_TYPES

    memory = sub.add_parser("memory", help="long-term memory entries: list (read-only), save, forget")
    msub = memory.add_subparsers(dest="memory_command", required=True)
    lst = msub.add_parser("list", help="the unexpired entries, oldest first (read-only)")
    lst.add_argument("root")
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    lst.set_defaults(func=_list, command="memory list")

    save = msub.add_parser("save", help="save an entry with the agent's save_memory tool (writes)")
    save.add_argument("root")
    save.add_argument("--type", required=True, choices=MEMORY_TYPES)
    save.add_argument("--title", required=True)
    save.add_argument("--content", required=True)
    save.add_argument("--expires-at", help="ISO-8601 date or time (UTC if no zone)")
    save.add_argument("--id", help="replace the entry with this id")
    save.add_argument("--config", help="extraction.yaml the agent uses (default: built-in defaults)")
    save.set_defaults(func=_save, command="memory save")

    forget = msub.add_parser("forget", help="delete an entry with the agent's forget_memory tool (writes)")
    forget.add_argument("root")
    forget.add_argument("id")
    forget.add_argument("--config", help="extraction.yaml the agent uses (default: built-in defaults)")
    forget.set_defaults(func=_forget, command="memory forget")

    history = sub.add_parser("history", help="Dream versions of SOUL.md / USER.md / MEMORY.md (read-only)")
    history.add_argument("root")
    history.add_argument("--limit", type=int, default=20, help="at most this many, newest first")
    history.add_argument("--json", action="store_true", help="machine-readable output")
    history.set_defaults(func=_history)

    restore = sub.add_parser("restore", help="bring back a Dream version as a new version (writes)")
    restore.add_argument("root")
    restore.add_argument(
        "version", help="a commit id (>= 4 hex digits) or steps back: 1 = the previous version"
    )
    restore.add_argument("--json", action="store_true", help="the new version as JSON")
    restore.add_argument("--config", help="extraction.yaml the agent uses (default: built-in defaults)")
    restore.set_defaults(func=_restore)
