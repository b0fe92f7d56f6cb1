"""The ``aiden`` command.

Read-only subcommands (``inspect``, ``export``, ``recall``, ``doctor``, ``memory list``,
``history``, ``config check``) never open the memory, take a lock or write under it, so they
work on a read-only root and beside a running agent. Writing ones (``compact``, ``memory
save|forget``, ``restore``, ``doctor --repair``) open an existing root as an agent does
(:func:`writable_memory`); save and forget go through the agent's own tools.

A command that met a problem says it on stderr and exits non-zero, even when it did its
job (a skipped damaged line, a write whose open repaired the root, any logged warning).
``compact`` has no provider usage, so it decides on aiden's own estimate of the hot window.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from aiden.config import Config, load_config
from aiden.doctor import doctor, recovery_actions
from aiden.errors import AidenError, ConfigError, CorruptionError, DreamError, StorageError
from aiden.readonly import (
    Progress,
    ProgressFactory,
    RootError,
    export_lines,
    has_memory,
    inspect_root,
    load_entries,
    open_layout,
    progress_enabled,
    recall,
    report_problems,
)
from aiden.recall.tool import encode_hits
from aiden.storage.advisory import read_window, record_window
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock

if TYPE_CHECKING:
    from aiden.longterm.entries import MemoryEntry
    from aiden.longterm.gitstore import Version
    from aiden.memory import Memory
    from aiden.summarizers.protocol import Summarizer

__all__ = [
    "NotWritableError",
    "compact_root",
    "config_check",
    "dream_versions",
    "list_memories",
    "main",
    "repair_root",
    "writable_memory",
]

EXIT_USAGE = 2
"""Exit code for a bad argument: a missing root, a root the demo must not touch."""

_PROGRESS_HELP = "progress on stderr (default: when stderr is a terminal)"

_OWN_LOGGING = frozenset({"demo", "doctor", "mcp"})
"""Commands whose warnings are not counted as problems: the demo, doctor (it judges the root
itself; --repair's recovery warns about what it repairs) and the MCP server (it runs until
stopped and logs to stderr as it goes)."""


class _Warnings(logging.Handler):
    """Keeps aiden's warnings while a command runs, for :func:`main` to say on stderr."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def say(self, command: str, error: BaseException | None = None) -> int:
        """Print the warnings once each (but one the error repeats); how many were printed."""
        # One problem met at each read (a damaged long-term index.yaml, at open and at the save) is one problem.
        said = [m for m in dict.fromkeys(self.messages) if error is None or not m.endswith(str(error))]
        report_problems(command, said)
        return len(said)


def _demo(args: argparse.Namespace) -> int:
    from aiden.demo import run_demo

    if args.root and has_memory(args.root):
        print(
            f"aiden demo: {args.root!r} already holds a memory (non-empty memory/); the demo would append "
            "its fictional session to it. Pass a new or empty directory, or omit --root.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    summarizer: Summarizer | None = None
    model = args.model or os.environ.get("AIDEN_MODEL")
    if model:
        import aiden  # the public name: tests replace it there

        summarizer = aiden.LiteLLMSummarizer(model)
        print(f"summarizer: LiteLLMSummarizer({model!r})")
    else:
        print("summarizer: ExtractiveSummarizer (embedded default, no network)")
    root = args.root or tempfile.mkdtemp(prefix="aiden-demo-")
    print(f"memory root: {root}\n")
    result = anyio.run(lambda: run_demo(root, turns=args.turns, seed=args.seed, summarizer=summarizer))
    stats = result.stats
    print(f"\nreplayed {result.turns} turns; {stats.compactions} compactions; files under {root}/memory")
    if stats.summarizer_calls and stats.summarizer_failures >= stats.summarizer_calls:
        print(
            f"aiden demo: the summarizer failed all {stats.summarizer_calls} calls (check the model name and its API key)",
            file=sys.stderr,
        )
        return 1
    if stats.compactions == 0:
        print("aiden demo: no compaction happened (try more --turns)", file=sys.stderr)
        return 1
    return 0


def _inspect(args: argparse.Namespace) -> int:
    info = inspect_root(args.root, context_window=args.context_window, model=args.model)
    if args.json:
        print(_json(info, indent=2))
        return report_problems("inspect", info["problems"])
    hot, chunks, layer, stats = info["hot_window"], info["chunks"], info["summary_layer"], info["stats"]
    print(f"root: {_shown(info['root'])}")
    span = f" (seq {hot['first_seq']}..{hot['last_seq']})" if hot["events"] else ""
    print(f"hot window: {hot['events']} events{span}, ~{stats['hot_window_tokens']} tokens")
    cspan = f" (seq {chunks['first_seq']}..{chunks['last_seq']})" if chunks["count"] else ""
    print(f"chunks: {chunks['count']} ({chunks['events']} events, {chunks['segments']} segments){cspan}")
    cut = ", cut to the cap in each prompt" if layer["cut_in_prompt"] else ""
    print(
        f"summary layer: ~{layer['tokens']} tokens = {layer['share_percent']}% of a {layer['context_window']}-token "
        f"window (from {layer['window_from']}; cap {layer['cap_percent']}%: ~{layer['cap_tokens']} tokens{cut}); summary.md {info['summary_md_bytes']} bytes"
    )
    print(
        f"stats: {stats['events']} events stored, {stats['compactions']} compactions, "
        f"{stats['degraded_chunks']} degraded chunks, {stats['archived_sessions']} archived sessions"
    )
    print(f"long-term entries: {info['long_term_entries']}")
    print(f"last recovery: {_recovery_text(info['last_recovery'])}")
    print("files:")
    for name, size in info["files"].items():
        print(f"  {size:>10}  {_shown(name)}")
    return report_problems("inspect", info["problems"])


def _recovery_text(last: dict[str, Any] | None) -> str:
    if last is None:
        return "no open has found anything to repair"
    at = datetime.fromtimestamp(float(last["at"]), UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    found = ", ".join(f"{k}={v}" for k, v in last["report"].items() if v)
    return f"{at}: {found}"


def _export(args: argparse.Namespace) -> int:
    # Streamed: a damaged chunk stops the export with exit 1 after the lines before it; a
    # damaged hot-window line is skipped, said on stderr, and the exit is 1.
    write = sys.stdout.write
    skipped: list[str] = []
    progress = _progress(args, "export", "chunk files")
    for line in export_lines(args.root, args.format, progress=progress, problems=skipped):
        write(_json_safe(line) + "\n")
    return report_problems("export", skipped)


def _progress(args: argparse.Namespace, label: str, what: str) -> ProgressFactory | None:
    if not progress_enabled(args.progress):
        return None
    return lambda total: Progress(label, what, total)


def _recall(args: argparse.Namespace) -> int:
    problems: list[str] = []
    hits = recall(args.root, args.query, k=args.k, problems=problems)
    lines = []
    for hit in hits:
        where = (
            f"seq {hit.first_seq}" if hit.kind == "event" else f"summary seq {hit.first_seq}..{hit.last_seq}"
        )
        text = _shown(" ".join(hit.text.split()))
        more = "…" if len(text) > 300 else ""
        lines.append(f"[{hit.score:.3f}] {hit.chunk_id} {where}: {text[:300]}{more}")
    return _listed(args, _json_safe(encode_hits(hits)), lines or ["no results"], problems)


def _listed(args: argparse.Namespace, json_text: str, lines: list[str], problems: list[str]) -> int:
    for line in [json_text] if args.json else lines:
        print(line)
    return report_problems(args.command, problems)


# A path's bytes that are not UTF-8 come as lone surrogates (U+DC80..U+DCFF): printed, they would be those raw bytes.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\udc80-\udcff]")
_JSON_UNESCAPED = re.compile(r"[\x7f-\x9f\ud800-\udfff]")  # JSON escapes C0 controls itself, not DEL, C1, surrogates


def _json_safe(text: str) -> str:
    """JSON ``text`` with DEL, C1 controls (U+009B starts an escape sequence) and lone surrogates escaped: the same data."""
    return _JSON_UNESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON for the terminal: non-ASCII text as is, control characters escaped."""
    return _json_safe(json.dumps(value, indent=indent, ensure_ascii=False))


def _shown(text: str) -> str:
    """Stored ``text`` for a terminal: control characters (a tool output's colour codes) and a path's
    undecodable bytes as ``\\xNN``, never run."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()) & 0xFF:02x}", text)


def _doctor(args: argparse.Namespace) -> int:
    config = load_config(args.config) if args.config else None
    repaired = anyio.run(lambda: repair_root(args.root, config_path=args.config)) if args.repair else []
    result = doctor(args.root, config=config, progress=_progress(args, "doctor", "checks"))
    if args.repair:
        result = {"repaired": repaired, **result}
    if args.json:
        print(_json(result, indent=2))
    else:
        for line in repaired:
            print(f"repaired: {line}")
        for problem in result["problems"]:
            print(_shown(problem))
        for note in result["notes"]:
            print(f"note: {_shown(note)}")
        if result["ok"]:
            print("ok")
    return 0 if result["ok"] else 1


def config_check(path: str) -> dict[str, Any]:
    """Validate ``path`` with :func:`aiden.config.load_config`: validity, the error, the settings that differ from the defaults ("changed")."""
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
        print(_json(result, indent=2))
    elif result["valid"]:
        print(f"{result['file']}: valid")
        for key, value in result["changed"].items():
            print(f"  {key}: {_json(value)}")
    else:
        report_problems("config check", [result["error"]])
    return 0 if result["valid"] else 1


def _positive(text: str) -> int:
    """A count argument (``--limit``, ``--max-passes``, ``--turns``, ``--context-window``): 0 or less is a usage error."""
    if not (text.isdecimal() and int(text) > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    from aiden import __version__

    parser = argparse.ArgumentParser(prog="aiden", description="Session memory compaction for LLM agents.")
    parser.add_argument("--version", action="version", version=f"aiden {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="replay a generated coding-agent session through aiden")
    demo.add_argument("--root", help="memory root, new or empty (default: a new temp dir)")
    demo.add_argument("--turns", type=_positive, default=40)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--model", help="litellm model name for LLM summaries (default: embedded summarizer)")
    demo.set_defaults(func=_demo)

    inspect = sub.add_parser("inspect", help="what a memory root holds (read-only)")
    inspect.add_argument("root")
    inspect.add_argument(
        "--context-window", type=_positive, help="the agent's window in tokens, for the summary layer's share"
    )
    inspect.add_argument(
        "--model", help="the agent's model: its window (litellm's model map) and token estimator"
    )
    inspect.add_argument("--json", action="store_true", help="machine-readable output")
    inspect.set_defaults(func=_inspect)

    export = sub.add_parser("export", help="every stored event in seq order on stdout (read-only)")
    export.add_argument("root")
    export.add_argument("--format", choices=("jsonl", "openai"), default="jsonl")
    export.add_argument("--progress", action=argparse.BooleanOptionalAction, help=_PROGRESS_HELP)
    export.set_defaults(func=_export)

    rec = sub.add_parser("recall", help="search the compacted history (read-only)")
    rec.add_argument("root")
    rec.add_argument("query")
    rec.add_argument("-k", type=int, default=None, help="at most this many results")
    rec.add_argument("--json", action="store_true", help="the recall tool's JSON answer")
    rec.set_defaults(func=_recall)

    doc = sub.add_parser(
        "doctor",
        help="verify checksums, files, locks and the Dream version history, and dry-run recovery; exit 1 on any problem (read-only; --repair writes)",
    )
    doc.add_argument("root")
    doc.add_argument(
        "--config", help="extraction.yaml the agent uses (the summary.md shape recovery re-derives)"
    )
    doc.add_argument("--progress", action=argparse.BooleanOptionalAction, help=_PROGRESS_HELP)
    doc.add_argument(
        "--repair",
        action="store_true",
        help="open the memory (recovery repairs the session files), repair the Dream version history, then check (writes)",
    )
    doc.add_argument("--json", action="store_true", help="machine-readable output")
    doc.set_defaults(func=_doctor)

    from aiden.longterm.entries import MEMORY_TYPES
    from aiden.mcp import add_mcp_command

    # `aiden --help` lists the subcommands in the order they are added: compact, config, memory...
    compact = sub.add_parser(
        "compact", help="run maintenance until the hot window is under the trigger (writes)"
    )
    compact.add_argument("root")
    compact.add_argument("--config", help="extraction.yaml the agent uses (default: built-in defaults)")
    compact.add_argument("--context-window", type=_positive, help="the agent's context window in tokens")
    compact.add_argument("--force", action="store_true", help="compact once even when under the trigger")
    compact.add_argument("--max-passes", type=_positive, default=100)
    compact.add_argument("--json", action="store_true", help="machine-readable output")
    compact.set_defaults(func=_compact)

    config = sub.add_parser("config", help="configuration files")
    csub = config.add_subparsers(dest="config_command", required=True)
    check = csub.add_parser("check", help="validate a config YAML; exit 1 with the error on a bad file")
    check.add_argument("file")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(func=_config_check, command="config check")

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
    history.add_argument("--limit", type=_positive, default=20, help="at most this many, newest first")
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

    add_mcp_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aiden`` command and ``python -m aiden``."""
    args = _parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    warnings = _Warnings()
    logger = logging.getLogger("aiden")
    if args.command not in _OWN_LOGGING:
        logger.addHandler(warnings)
    try:
        code = func(args)
        said = warnings.say(args.command)
        if code == 0 and said:
            print(f"aiden {args.command}: {said} problem(s) said above", file=sys.stderr)
            return 1
        return code
    except BrokenPipeError:
        # The reader went away (`aiden export ROOT | head`): stop quietly, and point stdout at
        # /dev/null so the interpreter's final flush does not report the pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (RootError, AidenError, OSError, ValueError) as exc:
        warnings.say(args.command, exc)
        report_problems(args.command, [str(exc)])  # one line: a YAML error's text spans several
        return EXIT_USAGE if isinstance(exc, RootError) else 1
    finally:
        logger.removeHandler(warnings)


class NotWritableError(StorageError):
    """A write subcommand could not open its memory root for writing (read-only, permissions, a held lock)."""


@asynccontextmanager
async def writable_memory(
    root: str, *, config_path: str | None = None, context_window: int | None = None
) -> AsyncIterator[Memory]:
    """The open memory under an existing ``root``.

    A missing root or one without ``memory/`` is a :class:`~aiden.readonly.RootError` (a
    write subcommand never creates a memory); an unwritable root a :class:`NotWritableError`.
    Without ``context_window`` the memory opens with the window and model the root was last
    opened with, so a command works at the agent's window; with it, at that window for this
    command only: either way the record is left as the agent left it.
    """
    from aiden.memory import open_memory

    layout = open_layout(root)
    recorded = read_window(layout)
    model = None
    if context_window is None and recorded is not None:
        context_window, model = recorded["context_window"], recorded["model"]
    # A subcommand is not the end of the agent's session: closing it writes no dated session summary.
    config = msgspec.structs.replace(
        load_config(config_path) if config_path else Config(), session_summary_on_close=False
    )
    async with AsyncExitStack() as stack:
        if recorded is not None and (context_window, model) != (recorded["context_window"], recorded["model"]):
            # The open records this command's window, dropping what the agent's closes learned at its
            # own: the agent's record is put back after the close (a no-op when nothing changed it).
            at = recorded["context_window"], recorded["model"], recorded["calibration"]
            stack.push_async_callback(anyio.to_thread.run_sync, lambda: record_window(Storage(), layout, *at))
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


_OUTCOME_KEYS = (
    "compacted", "reason", "chunk_id", "events_compacted", "tokens_before", "tokens_after", "degraded", "note"
)
"""What ``compact`` reports of each pass's outcome."""


async def compact_root(
    root: str,
    *,
    config_path: str | None = None,
    context_window: int | None = None,
    force: bool = False,
    max_passes: int = 100,
) -> dict[str, Any]:
    """Compact ``root`` until its hot window is under the trigger; what each pass did, as JSON-able data.

    ``force`` runs one pass even when already under the trigger. Stops early when a pass
    compacts nothing. What the open's own backlog pass compacted is reported as ``at_open``.
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
            passes.append({k: getattr(outcome, k) for k in _OUTCOME_KEYS})
            events, tokens = await hot_state()
            if not outcome.compacted:
                break
        by_open = memory.stats().compactions - sum(1 for p in passes if p["compacted"])
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
        print(_json(result, indent=2))
        return 1 if failed or not result["under_trigger"] else 0
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
        why = "a pass failed" if failed else "the hot window is still over the trigger"
        print(f"aiden compact: {why}", file=sys.stderr)
        return 1
    return 0


def _iso(seconds: float | None) -> str | None:
    """ISO-8601 UTC; None for None and for a time no calendar date holds (a damaged index's ``1e300``)."""
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return None


def list_memories(root: str, *, problems: list[str] | None = None) -> list[MemoryEntry]:
    """The unexpired long-term entries under ``root``, oldest first. Read-only; ``problems`` receives what could not be read."""
    from aiden.longterm.store import LongTermMemoryStore

    # The store writes only in save/forget/rebuild_profile; reading entries takes no lock.
    store = LongTermMemoryStore(open_layout(root), Storage())
    entries = anyio.run(lambda: store.entries(now=time.time()))
    if problems is not None:
        problems.extend(
            f"entry {e.id}: {name} {value!r} is not a valid time (shown as null)"
            for e in entries
            for name, value in (("created_at", e.created_at), ("expires_at", e.expires_at))
            if value is not None and _iso(value) is None
        )
    return entries


def dream_versions(root: str, *, limit: int = 20, problems: list[str] | None = None) -> list[Version]:
    """The newest ``limit`` versions of SOUL.md / USER.md / MEMORY.md, newest first. Read-only.

    ``problems`` receives what is wrong with ``long_term/.git`` (the list may then be incomplete).
    """
    from aiden.longterm.gitstore import GitStore, check_history

    layout = open_layout(root)
    if problems is not None:
        problems.extend(check_history(layout.long_term).problems)
    # log() opens the repository without create: a root that never dreamed has no .git and no versions.
    return GitStore(layout.long_term, Storage()).log(limit)


def _entry_json(entry: MemoryEntry) -> dict[str, Any]:
    fields = {k: getattr(entry, k) for k in ("id", "type", "title", "content")}
    return {**fields, "created_at": _iso(entry.created_at), "expires_at": _iso(entry.expires_at)}


def _version_json(version: Version) -> dict[str, Any]:
    return {
        "commit_id": version.commit_id,
        "time": _iso(version.timestamp),
        "title": version.title,
        "message": version.message,
    }


def _list(args: argparse.Namespace) -> int:
    problems: list[str] = []
    entries = list_memories(args.root, problems=problems)
    lines = [
        f"{e.id}  {e.type:<10}  {_shown(e.title)}"
        + (f"  (expires {_iso(e.expires_at)})" if e.expires_at is not None else "")
        for e in entries
    ]
    data = _json([_entry_json(e) for e in entries], indent=2)
    return _listed(args, data, lines or ["no long-term memories"], problems)


def _history(args: argparse.Namespace) -> int:
    problems: list[str] = []
    versions = dream_versions(args.root, limit=args.limit, problems=problems)
    lines = [f"{v.commit_id[:12]}  {_iso(v.timestamp)}  {_shown(v.title)}" for v in versions]
    if not versions and not problems:
        lines = ["no Dream versions yet"]
    return _listed(args, _json([_version_json(v) for v in versions], indent=2), lines, problems)


async def _tool(args: argparse.Namespace, name: str, arguments: dict[str, Any]) -> int:
    async with writable_memory(args.root, config_path=args.config) as memory:
        result = await memory.handle_tool_call(name, arguments)
    answer = json.loads(result)
    if "error" in answer:
        print(f"aiden {args.command}: {answer['error']}", file=sys.stderr)
        return 1
    print(_json(answer))
    return 0


def _save(args: argparse.Namespace) -> int:
    fields = ("type", "title", "content", "expires_at", "id")
    arguments = {k: getattr(args, k) for k in fields if getattr(args, k) is not None}
    return anyio.run(_tool, args, "save_memory", arguments)


def _forget(args: argparse.Namespace) -> int:
    return anyio.run(_tool, args, "forget_memory", {"id": args.id})


async def _restore_async(args: argparse.Namespace) -> Version:
    # Up to 3 digits are steps back from the newest version (1 = the one before), else a commit id:
    # a commit id prefix needs >= 4 hex digits (GitStore.resolve), so short numbers are unambiguous.
    text = args.version.strip()
    target = int(text) if text.isdigit() and len(text) < 4 else text
    async with writable_memory(args.root, config_path=args.config) as memory:
        return await memory.dream_restore(target)


def _restore(args: argparse.Namespace) -> int:
    version = anyio.run(_restore_async, args)
    if args.json:
        print(_json(_version_json(version)))
    else:
        print(f"{version.commit_id[:12]}  {_shown(version.title)}")
    return 0


async def repair_root(root: str, *, config_path: str | None = None) -> list[str]:
    """Repair ``root``; one line per repair made, in order ([] when nothing needed one)."""
    from aiden.longterm.dream import DREAM_LOCK_NAME
    from aiden.longterm.gitstore import repair_history

    async with writable_memory(root, config_path=config_path) as memory:
        report = memory.recovery
        lines = [
            " ".join(f"recovery at open: {what}".split())
            for what in (*recovery_actions(report), *report.unrecoverable)
        ]
        layout, storage = Layout(memory.root), Storage()
        if not (layout.long_term / ".git").exists() and not (layout.long_term / ".git").is_symlink():
            return lines  # never dreamed: no history to repair
        flock = SessionLock(storage, layout.dream_lock)
        if not await anyio.to_thread.run_sync(flock.try_acquire):
            raise DreamError(f"another process is running Dream ({DREAM_LOCK_NAME} is held): repair refused")
        try:
            repaired = await anyio.to_thread.run_sync(
                lambda: repair_history(layout.long_term, storage, now=time.time())
            )
        finally:
            await anyio.to_thread.run_sync(flock.release)
        return [*lines, *repaired]


if __name__ == "__main__":
    sys.exit(main())
