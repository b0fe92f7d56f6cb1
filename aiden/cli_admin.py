"""``aiden compact`` (writes) and ``aiden config check`` (read-only).

``compact`` opens the memory as an agent does and runs maintenance passes
until the hot window is under the trigger: more than
``count_compress_after_events`` events, or an estimated size at or above the
token threshold of the window (:func:`~aiden.policy.triggers.trigger_threshold_tokens`).
A command has no provider usage to report, so it decides on aiden's own
estimate of the hot window and asks each pass as a manual one.

Opening a root with a backlog starts a maintenance pass by itself (the open's
backlog pass): ``compact`` waits for it first and reports what it compacted
(``at_open``) apart from its own (manual) passes.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import msgspec

__all__ = ["add_admin_commands", "compact_root", "config_check"]

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
    from aiden.cli_open import writable_memory
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
    from aiden.errors import CorruptionError
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


def config_check(path: str) -> dict[str, Any]:
    """Validate ``path`` with :func:`aiden.config.load_config`: validity, the error, the settings that differ from the defaults ("changed")."""
    from aiden.config import Config, load_config
    from aiden.errors import ConfigError

    try:
        config = load_config(path)
    except ConfigError as exc:
        return {"file": path, "valid": False, "error": str(exc), "changed": {}}
    defaults = msgspec.structs.asdict(Config())
    changed = {k: v for k, v in msgspec.structs.asdict(config).items() if v != defaults[k]}
    return {"file": path, "valid": True, "error": None, "changed": msgspec.to_builtins(changed)}


def _config_check(args: argparse.Namespace) -> int:
    result = config_check(args.file)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    elif result["valid"]:
        print(f"{result['file']}: valid")
        for key, value in result["changed"].items():
            print(f"  {key}: {json.dumps(value, ensure_ascii=False)}")
    else:
        print(f"aiden config check: {result['error']}", file=sys.stderr)
    return 0 if result["valid"] else 1


def add_admin_commands(sub: Any) -> None:
    """Add ``compact`` and ``config check`` to the ``aiden`` subparsers ``sub``."""
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

    config = sub.add_parser("config", help="configuration files")
    csub = config.add_subparsers(dest="config_command", required=True)
    check = csub.add_parser("check", help="validate a config YAML; exit 1 with the error on a bad file")
    check.add_argument("file")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(func=_config_check, command="config check")
