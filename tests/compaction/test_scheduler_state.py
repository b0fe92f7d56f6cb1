"""The scheduler actor's seams to its pure trigger state and to the chunk summaries."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec

from aiden.messages import RecordUsage
from aiden.policy.triggers import UsageReported

ACTORS = Path(__file__).resolve().parents[2] / "aiden" / "actors"


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (function-local and TYPE_CHECKING imports too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_summaries_do_not_import_the_scheduler() -> None:
    assert "aiden.actors.summarizer" in imported_modules(ACTORS / "scheduler.py")
    assert "aiden.actors.scheduler" not in imported_modules(ACTORS / "summarizer.py")


def test_the_usage_event_takes_the_message_fields_by_name() -> None:
    assert set(UsageReported.__struct_fields__) - set(RecordUsage.__struct_fields__) == set()
    msg = RecordUsage(
        prompt_tokens=10,
        estimated_prompt_tokens=8,
        completion_tokens=3,
        cached_tokens=4,
        cost_usd=0.5,
        tool_output_tokens=7,
        run_ended=True,
        model="m",
    )
    assert msgspec.convert(msg, UsageReported, from_attributes=True) == UsageReported(
        prompt_tokens=10,
        estimated_prompt_tokens=8,
        cached_tokens=4,
        cost_usd=0.5,
        tool_output_tokens=7,
        run_ended=True,
        model="m",
    )
