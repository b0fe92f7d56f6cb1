"""The subcommands that work on a memory as an agent does: ``aiden compact``, ``aiden memory list|save|forget``, ``aiden history`` and ``aiden restore``.

The write subcommands (``compact``, ``memory save|forget``, ``restore``, and
``doctor --repair``) open an existing root with :func:`writable_memory`, through
:func:`aiden.open_memory` like an agent does (session lock, recovery, actors);
the read subcommands never do (see :mod:`aiden.readonly`).

``memory list`` and ``history`` are read-only: they read ``long_term/`` (the
entries, the Dream versions in ``long_term/.git``) without opening the memory,
so they work on a read-only root and beside a running agent. ``memory save``,
``memory forget`` and ``restore`` write: they open the memory as an agent does
and save/forget through the agent's own ``save_memory`` / ``forget_memory``
tools (:meth:`aiden.Memory.handle_tool_call`).

``compact`` runs maintenance passes until the hot window is under the trigger:
more than ``count_compress_after_events`` events, or an estimated size at or
above the token threshold of the window
(:func:`~aiden.policy.triggers.trigger_threshold_tokens`). A command has no
provider usage to report, so it decides on aiden's own estimate of the hot
window and asks each pass as a manual one. Opening a root with a backlog starts
a maintenance pass by itself (the open's backlog pass): ``compact`` waits for it
first and reports what it compacted (``at_open``) apart from its own (manual) passes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from aiden.errors import CorruptionError, StorageError

if TYPE_CHECKING:
    from aiden.config import Config
    from aiden.longterm.entries import MemoryEntry
    from aiden.longterm.gitstore import Version
    from aiden.memory import Memory

__all__ = [
    "NotWritableError",
    "add_compact_command",
    "add_memory_commands",
    "cli_config",
    "compact_root",
    "dream_versions",
    "list_memories",
    "parse_version",
    "writable_memory",
]


class NotWritableError(StorageError):
    """A write subcommand could not open its memory root for writing (read-only, permissions, a held lock)."""


def cli_config(path: str | None) -> Config:
    """The configuration a write subcommand opens with: ``path`` (``load_config``) or the defaults.

    A subcommand is not the end of the agent's session, so closing it writes no
    dated session summary (``session_summary_on_close`` off).
    """
    from aiden.config import Config, load_config

    config = load_config(path) if path else Config()
    return msgspec.structs.replace(config, session_summary_on_close=False)


@asynccontextmanager
async def writable_memory(
    root: str, *, config_path: str | None = None, context_window: int | None = None
) -> AsyncIterator[Memory]:
    """The open memory under an existing ``root``.

    A missing root or one without ``memory/`` is a :class:`~aiden.readonly.RootError`
    (a write subcommand never creates a memory); a root that cannot be written
    is a :class:`NotWritableError` naming the cause. Without ``context_window``
    the memory opens with the window and model the root was last opened with
    (``memory/window.json``), so a command works at the agent's window and
    leaves that record as the agent left it.
    """
    from aiden.memory import open_memory
    from aiden.readonly import open_layout
    from aiden.storage.advisory import read_window

    layout = open_layout(root)
    recorded = read_window(layout) if context_window is None else None
    model = recorded["model"] if recorded is not None else None
    if recorded is not None:
        context_window = recorded["context_window"]
    config = cli_config(config_path)
    async with AsyncExitStack() as stack:
        try:
            memory = await stack.enter_async_context(
                open_memory(root, config=config, model=model, context_window=context_window)
            )
        except (StorageError, OSError) as exc:
            # Opening writes (the lock file, recovery): on a read-only root that is where it fails.
            raise NotWritableError(f"memory root {os.fspath(root)!r} is not writable: {exc}") from exc
        yield memory


_FAILED = frozenset({"summarizer_failed", "running_summary_failed", "conflict"})
"""Outcomes that mean a pass was attempted and failed (not 'nothing left to compact')."""


def _outcome_json(outcome: Any) -> dict[str, Any]:
    keys = (
        "compacted",
        "reason",
        "chunk_id",
        "events_compacted",
        "tokens_before",
        "tokens_after",
        "degraded",
        "note",
    )
    data = msgspec.structs.asdict(outcome)
    return {k: data[k] for k in keys}


async def compact_root(
    root: str,
    *,
    config_path: str | None = None,
    context_window: int | None = None,
    force: bool = False,
    max_passes: int = 100,
) -> dict[str, Any]:
    """Compact ``root`` until its hot window is under the trigger; what each pass did, as JSON-able data.

    ``force`` runs one pass even when the hot window is already under the trigger.
    Stops early when a pass compacts nothing (its reason says why).
    """
    from aiden.policy.tokens import event_tokens
    from aiden.policy.triggers import trigger_threshold_tokens

    before = await anyio.to_thread.run_sync(_chunk_ids, root)
    async with writable_memory(root, config_path=config_path, context_window=context_window) as memory:
        # Waits behind the open's backlog pass, or is that pass (requests coalesce): a pass
        # that compacts only if the trigger fires, as the open's check does. Counted as the
        # open's, whichever of the two ran it.
        await memory.maintain()
        config = memory.config
        threshold = trigger_threshold_tokens(memory.context_window, config)
        limit = config.count_limit()

        async def hot_state() -> tuple[int, int]:
            hot = await memory.hot_window()
            return len(hot), sum(event_tokens(hot))

        passes: list[dict[str, Any]] = []
        events, tokens = await hot_state()
        while len(passes) < max_passes:
            over = events > limit or tokens >= threshold
            if not over and not (force and not passes):
                break
            outcome = await memory.maintain(manual=True)
            passes.append(_outcome_json(outcome))
            events, tokens = await hot_state()
            if not outcome.compacted:
                break
        own = sum(1 for p in passes if p["compacted"])
        by_open = memory.stats().compactions - own
    after = await anyio.to_thread.run_sync(_chunk_ids, root)
    mine = {p["chunk_id"] for p in passes}
    new = {cid: n for cid, n in after.items() if cid not in before and cid not in mine}
    return {
        "at_open": {"compactions": by_open, "events_compacted": sum(new.values())},
        "passes": passes,
        "hot_window": {"events": events, "estimated_tokens": tokens},
        "trigger": {"events_over": limit, "tokens_at": threshold},
        "under_trigger": events <= limit and tokens < threshold,
    }


def _chunk_ids(root: str) -> dict[str, int]:
    """Chunk id -> events it holds, read from the root's index (empty when it does not read)."""
    from aiden.readonly import load_entries, open_layout

    try:
        return {e.chunk_id: e.count for e in load_entries(open_layout(root))[1]}
    except CorruptionError:
        return {}  # the open's recovery rebuilds it, and says so


def _compact(args: argparse.Namespace) -> int:
    result = anyio.run(
        lambda: compact_root(
            args.root,
            config_path=args.config,
            context_window=args.context_window,
            force=args.force,
            max_passes=args.max_passes,
        )
    )
    failed = any(p["reason"] in _FAILED for p in result["passes"])
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        opened = result["at_open"]
        if opened["compactions"]:
            print(
                f"at open: the backlog pass compacted {opened['events_compacted']} events "
                f"in {opened['compactions']} compaction{'s' if opened['compactions'] != 1 else ''}"
            )
        for n, p in enumerate(result["passes"], 1):
            if p["compacted"]:
                degraded = ", degraded summary" if p["degraded"] else ""
                print(
                    f"pass {n}: compacted {p['events_compacted']} events into {p['chunk_id']} "
                    f"(~{p['tokens_before']} -> ~{p['tokens_after']} tokens{degraded})"
                )
            else:
                note = f": {p['note']}" if p["note"] else ""
                print(f"pass {n}: nothing compacted ({p['reason']}{note})")
        if not result["passes"]:
            print("nothing more to compact" if opened["compactions"] else "nothing to compact")
        hot, trig = result["hot_window"], result["trigger"]
        print(
            f"hot window: {hot['events']} events, ~{hot['estimated_tokens']} tokens "
            f"(trigger: more than {trig['events_over']} events or ~{trig['tokens_at']} tokens)"
        )
    if failed or not result["under_trigger"]:
        if not args.json:
            why = "a pass failed" if failed else "the hot window is still over the trigger"
            print(f"aiden compact: {why}", file=sys.stderr)
        return 1
    return 0


def add_compact_command(sub: Any) -> None:
    """Add ``compact`` to the ``aiden`` subparsers ``sub``."""
    compact = sub.add_parser(
        "compact", help="run maintenance until the hot window is under the trigger (writes)"
    )
    compact.add_argument("root")
    compact.add_argument("--config", help="extraction.yaml the agent uses (default: built-in defaults)")
    compact.add_argument("--context-window", type=int, help="the agent's context window in tokens")
    compact.add_argument("--force", action="store_true", help="compact once even when under the trigger")
    compact.add_argument("--max-passes", type=int, default=100)
    compact.add_argument("--json", action="store_true", help="machine-readable output")
    compact.set_defaults(func=_compact)


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
    from aiden.longterm.gitstore import GitStore, check_history
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
    from aiden.readonly import report_problems

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
    from aiden.readonly import report_problems

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
