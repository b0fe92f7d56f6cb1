"""The ``aiden`` command.

``aiden demo`` runs the main job on the embedded default; ``inspect``,
``export``, ``recall`` (:mod:`aiden.readonly`), ``doctor`` (:mod:`aiden.doctor`), ``memory list``,
``history`` and ``config check`` are read-only (they never open the memory,
take a lock or write under it); ``compact``, ``memory save|forget``, ``restore``
and ``doctor --repair`` write, opening the memory as an agent does
(:mod:`aiden.cli_memory`). ``aiden mcp`` serves memories to MCP clients (:mod:`aiden.mcp`).

A command that met a problem says it on stderr and exits non-zero, even when it
did its job: a read that skipped something (a damaged line), a write whose open
repaired the root, any warning aiden logged meanwhile.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

if TYPE_CHECKING:
    from aiden.readonly import ProgressFactory

__all__ = ["config_check", "main"]

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
        """Print the warnings (but one the error repeats); how many were printed."""
        from aiden.readonly import report_problems

        said = [m for m in self.messages if error is None or not m.endswith(str(error))]
        report_problems(command, said)
        return len(said)


def _demo(args: argparse.Namespace) -> int:
    from aiden.demo import run_demo
    from aiden.readonly import has_memory
    from aiden.summarizers.protocol import Summarizer

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
        from aiden.summarizers.llm import LiteLLMSummarizer

        summarizer = LiteLLMSummarizer(model)
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


def _window(args: argparse.Namespace) -> int | None:
    if args.context_window is not None and args.context_window <= 0:
        raise ValueError(f"--context-window must be a positive number of tokens, not {args.context_window}")
    window: int | None = args.context_window
    return window


def _inspect(args: argparse.Namespace) -> int:
    from aiden.readonly import inspect_root, report_problems

    info = inspect_root(args.root, context_window=_window(args), model=args.model)
    if args.json:
        print(json.dumps(info, indent=2, ensure_ascii=False))
        return report_problems("inspect", info["problems"])
    hot, chunks, layer, stats = info["hot_window"], info["chunks"], info["summary_layer"], info["stats"]
    print(f"root: {info['root']}")
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
        print(f"  {size:>10}  {name}")
    return report_problems("inspect", info["problems"])


def _recovery_text(last: dict[str, Any] | None) -> str:
    if last is None:
        return "no open has found anything to repair"
    from datetime import UTC, datetime

    at = datetime.fromtimestamp(float(last["at"]), UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    found = ", ".join(f"{k}={v}" for k, v in last["report"].items() if v)
    return f"{at}: {found}"


def _export(args: argparse.Namespace) -> int:
    from aiden.readonly import export_lines, report_problems

    # Streamed: a damaged chunk stops the export with exit 1 after the lines before it; a
    # damaged hot-window line is skipped, said on stderr, and the exit is 1.
    write = sys.stdout.write
    skipped: list[str] = []
    progress = _progress(args, "export", "chunk files")
    for line in export_lines(args.root, args.format, progress=progress, problems=skipped):
        write(line + "\n")
    return report_problems("export", skipped)


def _progress(args: argparse.Namespace, label: str, what: str) -> ProgressFactory | None:
    from aiden.readonly import Progress, progress_enabled

    if not progress_enabled(args.progress):
        return None
    return lambda total: Progress(label, what, total)


def _recall(args: argparse.Namespace) -> int:
    from aiden.readonly import recall
    from aiden.recall.tool import encode_hits

    hits = recall(args.root, args.query, k=args.k)
    if args.json:
        print(encode_hits(hits))
        return 0
    if not hits:
        print("no results")
    for hit in hits:
        where = (
            f"seq {hit.first_seq}" if hit.kind == "event" else f"summary seq {hit.first_seq}..{hit.last_seq}"
        )
        text = " ".join(hit.text.split())
        print(f"[{hit.score:.3f}] {hit.chunk_id} {where}: {text[:300]}{'…' if len(text) > 300 else ''}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from aiden.config import load_config
    from aiden.doctor import doctor

    config = load_config(args.config) if args.config else None
    repaired: list[str] = []
    if args.repair:
        from aiden.doctor import repair_root

        repaired = anyio.run(lambda: repair_root(args.root, config_path=args.config))
    result = doctor(args.root, config=config, progress=_progress(args, "doctor", "checks"))
    if args.repair:
        result = {"repaired": repaired, **result}
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0 if result["ok"] else 1
    for line in repaired:
        print(f"repaired: {line}")
    for problem in result["problems"]:
        print(problem)
    for note in result["notes"]:
        print(f"note: {note}")
    if not result["ok"]:
        return 1
    print("ok")
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


def _version() -> str:
    from aiden import __version__

    return f"aiden {__version__}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aiden", description="Session memory compaction for LLM agents.")
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="replay a generated coding-agent session through aiden")
    demo.add_argument("--root", help="memory root, new or empty (default: a new temp dir)")
    demo.add_argument("--turns", type=int, default=40)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--model", help="litellm model name for LLM summaries (default: embedded summarizer)")
    demo.set_defaults(func=_demo)

    inspect = sub.add_parser("inspect", help="what a memory root holds (read-only)")
    inspect.add_argument("root")
    inspect.add_argument(
        "--context-window", type=int, help="the agent's window in tokens, for the summary layer's share"
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

    from aiden.cli_memory import add_compact_command, add_memory_commands
    from aiden.mcp import add_mcp_command

    # `aiden --help` lists the subcommands in the order they are added: compact, config, memory...
    add_compact_command(sub)
    config = sub.add_parser("config", help="configuration files")
    csub = config.add_subparsers(dest="config_command", required=True)
    check = csub.add_parser("check", help="validate a config YAML; exit 1 with the error on a bad file")
    check.add_argument("file")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(func=_config_check, command="config check")
    add_memory_commands(sub)
    add_mcp_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aiden`` command and ``python -m aiden``."""
    from aiden.errors import AidenError
    from aiden.readonly import RootError

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
    except RootError as exc:
        warnings.say(args.command, exc)
        print(f"aiden {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (AidenError, OSError, ValueError) as exc:
        warnings.say(args.command, exc)
        print(f"aiden {args.command}: {exc}", file=sys.stderr)
        return 1
    finally:
        logger.removeHandler(warnings)


if __name__ == "__main__":
    sys.exit(main())
