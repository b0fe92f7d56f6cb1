"""The ``aiden`` command: ``aiden demo`` runs the main job on the embedded default."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence

import anyio

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from aiden.demo import run_demo
    from aiden.summarizers.protocol import Summarizer

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
    print(f"\nreplayed {result.turns} turns; {result.stats.compactions} compactions; files under {root}/memory")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``aiden`` command and ``python -m aiden``."""
    parser = argparse.ArgumentParser(prog="aiden", description="Session memory compaction for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="replay a generated coding-agent session through aiden")
    demo.add_argument("--root", help="memory root (default: a new temp dir)")
    demo.add_argument("--turns", type=int, default=40)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--model", help="litellm model name for LLM summaries (default: embedded summarizer)")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
