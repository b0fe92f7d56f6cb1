"""Noise a person resuming does not need, dropped where the summary is written (#19).

One test per kind the demo and the real sessions showed: read-only calls
listed as Commands, the same command in every chunk, tool-result lines that
carry nothing, Errors that are no errors, and superseded step open threads.
Each asserts exactly what is kept and what is dropped.
"""

from __future__ import annotations

import json

import pytest

from aiden.events import SessionEvent
from aiden.storage.chunks import ChunkEntry, ChunkIndex, render_summary_md
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import ErrorResolution, SummaryRequest, SummaryResult

pytestmark = pytest.mark.timeout(30)

CODE = '"""gateway module."""\nimport logging\nfrom gateway.core import Base\n\ndef retry(value: int) -> int:\n    return value'
SEARCH = json.dumps([{"path": "src/gateway/trace.py", "line": 12, "text": "retry = queue(3)"}], indent=1)
LOG = "\n".join(
    f"2026-11-{day:02d} 12:05:28 {level} queue.metric processed {1869 + day} items in 405ms"
    for day, level in ((20, "INFO"), (21, "DEBUG"), (22, "WARNING"))
)


def history(*events: SessionEvent) -> SummaryResult:
    numbered = tuple(SessionEvent(**{**_fields(e), "seq": n + 1}) for n, e in enumerate(events))
    return ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=numbered))


def _fields(event: SessionEvent) -> dict[str, object]:
    return {
        f: getattr(event, f) for f in ("type", "content", "tool_name", "tool_call_id", "tool_args", "meta")
    }


def call(cid: str, name: str, **args: str) -> SessionEvent:
    return SessionEvent(type="tool_call", tool_name=name, tool_call_id=cid, tool_args=json.dumps(args))


def result(cid: str, content: str, name: str = "", **meta: object) -> SessionEvent:
    return SessionEvent(
        type="tool_result", tool_name=name or None, tool_call_id=cid, content=content, meta=meta
    )


def user(text: str) -> SessionEvent:
    return SessionEvent(type="user_input", content=text)


def assistant(text: str) -> SessionEvent:
    return SessionEvent(type="assistant_output", content=text)


GOAL = user("Please fix the retry handling of the gateway.")


# --- read-only calls -------------------------------------------------------------------


def test_read_only_calls_are_no_commands_their_files_are() -> None:
    summary = history(
        GOAL,
        call("a", "read_file", path="src/gateway/retry.py"),
        result("a", CODE, "read_file"),
        call("b", "search", pattern="retry"),
        result("b", SEARCH, "search"),
        call("c", "bash", command="cat src/gateway/queue.py | head -n 20"),
        result("c", CODE, "bash"),
        call("d", "bash", command="python fix_retry.py && pytest tests/gateway -q"),
        result("d", "all tests pass", "bash"),
    )
    assert summary.text == (
        "Goal: Please fix the retry handling of the gateway.\n"
        "Open thread:\n- User: Please fix the retry handling of the gateway.\n"
        "Files: src/gateway/retry.py, src/gateway/queue.py, fix_retry.py\n"
        "Commands:\n"
        "- $ python fix_retry.py && pytest tests/gateway -q"
    )


def test_the_rolling_fold_drops_read_only_commands_whose_files_are_listed() -> None:
    rolling = (
        "Files: src/a.py\nCommands:\n- read_file(path=src/a.py)\n- search(pattern=retry)\n"
        "- read_file(path=src/b.py)\n- $ cat src/a.py\n- $ make build"
    )
    folded = ExtractiveSummarizer().summarize_sync(
        SummaryRequest(
            purpose="rolling_fold",
            text="Decisions:\n- Use tenacity because it is tested.",
            previous_summary=rolling,
        )
    )
    # src/b.py is under no Files line: that read is the only record of it.
    assert folded.text == (
        "Decisions:\n- Use tenacity because it is tested.\n"
        "Files: src/a.py\nCommands:\n- read_file(path=src/b.py)\n- $ make build"
    )


# --- repeated commands -----------------------------------------------------------------


def test_the_rolling_summary_keeps_the_newest_few_distinct_commands() -> None:
    chunks = [f"Commands:\n- $ pytest tests/gateway -q\n- $ make step{n}" for n in range(8)]
    rolling = ""
    for chunk in chunks:
        rolling = (
            ExtractiveSummarizer()
            .summarize_sync(SummaryRequest(purpose="rolling_fold", text=chunk, previous_summary=rolling))
            .text
        )
    assert rolling == (
        "Commands:\n- $ make step4\n- $ make step5\n- $ make step6\n- $ pytest tests/gateway -q\n- $ make step7"
    )


def entry(first: int, summary: str) -> ChunkEntry:
    return ChunkEntry(
        chunk_id=f"chunk_{first:010d}_{first + 9:010d}",
        first_seq=first,
        last_seq=first + 9,
        count=10,
        sha256="0",
        summary=summary,
    )


def summary_md(rolling: str, *chunks: str) -> str:
    entries = [entry(10 * (n + 1), text) for n, text in enumerate(chunks)]
    return render_summary_md(ChunkIndex(rolling_summary=rolling, chunks=entries), entries)


def test_summary_md_shows_a_repeated_command_at_its_newest_place_only() -> None:
    text = summary_md(
        "Decisions:\n- Use tenacity because it is tested.\nCommands:\n- $ pytest tests/gateway -q\n- $ make db",
        "Files: src/a.py\nCommands:\n- $ pytest tests/gateway -q",
        "Commands:\n- $ pytest tests/gateway -q\n- $ make lint\n\n---\n\nTurn Context (split turn):\nFiles: src/b.py",
    )
    assert text == (
        "# Session History (compressed chunks)\n\n## Rolling Summary\n\n"
        "Decisions:\n- Use tenacity because it is tested.\nCommands:\n- $ make db\n\n"
        "## Recent Chunks\n\n"
        "- **chunk_0000000010_0000000019**\n  Files: src/a.py\n\n"
        "- **chunk_0000000020_0000000029**\n  Commands:\n  - $ pytest tests/gateway -q\n  - $ make lint\n\n"
        "  ---\n\n  Turn Context (split turn):\n  Files: src/b.py\n"
    )


# --- tool-result lines -----------------------------------------------------------------


def test_tool_result_lines_that_carry_nothing_are_dropped() -> None:
    summary = history(
        GOAL,
        call("a", "read_file", path="src/gateway/retry.py"),
        result("a", CODE, "read_file"),
        call("b", "search", pattern="retry"),
        result("b", SEARCH, "search"),
        call("c", "run", cmd="python -m gateway.bench"),
        result("c", LOG, "run"),
        call("d", "run", cmd="python -m gateway.replay"),
        result("d", "replayed 3 batches\nqueue drained\ncheckpoint written\nall consumers idle", "run"),
    )
    # A docstring, a search hit's path line, log records, an uncited line of a long output.
    assert "Tool results" not in summary.text
    assert summary.text == (
        "Goal: Please fix the retry handling of the gateway.\n"
        "Open thread:\n- User: Please fix the retry handling of the gateway.\nFiles: src/gateway/retry.py\n"
        "Commands:\n- $ python -m gateway.bench\n- $ python -m gateway.replay"
    )


def test_a_value_alone_or_one_a_decision_cites_is_kept() -> None:
    summary = history(
        GOAL,
        call("a", "bash", command="python count.py"),
        result("a", "344", "bash"),
        call("b", "bash", command="pip index versions tenacity"),
        result(
            "b",
            "tenacity (8.2.3)\nAvailable versions: 8.2.3, 8.2.2, 8.1.0\n  INSTALLED: 8.1.0\n  LATEST: 8.2.3",
            "bash",
        ),
        assistant("Decision: pin tenacity==8.2.3 because 8.1.0 retries forever."),
    )
    assert summary.structured.decisions[0].what == "Decision: pin tenacity==8.2.3"
    assert summary.text.endswith(
        "Tool results:\n- $ python count.py: 344\n- $ pip index versions tenacity: tenacity (8.2.3)"
    )


# --- errors by evidence ----------------------------------------------------------------

VIEW = (
    "[File: /repo/reproduce_bug.py (18 lines total)]\n"
    "17:result = np.array_equal(ds.pixel_array, pixel_array)\n"
    '18:print("Script completed successfully, no errors. Result:", result)\n'
    "261:    AttributeError\n"
    "316:        raise ValueError("
)
LINT = (
    "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry your edit command.\n\n"
    "ERRORS:\n- E999 SyntaxError: unmatched ']'\n\nThis is how your edit would have looked if applied\n"
    "DO NOT re-run the same failed edit command. Running it again will lead to the same error."
)
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/repo/pydicom/pixel_data_handlers/numpy_handler.py", line 293, in get_pixeldata\n'
    "    raise AttributeError(\n"
    "AttributeError: Unable to convert the pixel data: PixelRepresentation is missing"
)


def test_errors_are_filed_by_evidence_not_by_the_word() -> None:
    summary = history(
        GOAL,
        assistant("This script will attempt to access the `pixel_array` property to see if it fails."),
        call("a", "shell", cmd="open reproduce_bug.py"),
        result("a", VIEW, "shell"),
        call("b", "shell", cmd="pytest tests/test_errors.py -q"),
        result("b", "tests/test_errors.py::test_retry PASSED\n1 passed in 0.1s", "shell"),
        call("c", "shell", cmd="python reproduce_bug.py"),
        result("c", TRACE, "shell"),
        assistant("The script reproduced the bug: it raised an `AttributeError` for `PixelRepresentation`."),
        assistant("Let's open the file that raises the error, at line 293 according to the traceback."),
        call("d", "shell", cmd="edit 287:295"),
        result("d", LINT, "shell"),
        call("e", "shell", cmd="python reproduce_bug.py"),
        result("e", "Script completed successfully, no errors. Result: True", "shell"),
        call("f", "shell", cmd="python -m app"),
        result("f", "starting app", "shell", exit_code=3),
    )
    assert summary.structured.errors == (
        ErrorResolution(
            error="AttributeError: Unable to convert the pixel data: PixelRepresentation is missing "
            "(from $ python reproduce_bug.py)"
        ),
        ErrorResolution(error="E999 SyntaxError: unmatched ']' (from $ edit 287:295)"),
        ErrorResolution(error="starting app (from $ python -m app)"),
    )


def test_a_users_report_is_evidence_a_denial_or_a_condition_is_not() -> None:
    summary = history(
        GOAL,
        user("The dashboard shows an error banner after login."),
        user("If the script fails, print the traceback to reproduce.log."),
        user("The nightly job ran with no errors on build 4411."),
    )
    assert summary.structured.errors == (
        ErrorResolution(error="The dashboard shows an error banner after login."),
    )
    assert summary.structured.facts == (
        "If the script fails, print the traceback to reproduce.log.",
        "The nightly job ran with no errors on build 4411.",
    )


def test_a_fold_files_only_reported_errors_from_unlabelled_lines() -> None:
    text = (
        "Must keep:\n- Let's open the file that raises the error, at line 293 according to the traceback.\n"
        "- The deploy failed with ECONNREFUSED on port 5432."
    )
    folded = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="rolling_fold", text=text))
    assert folded.structured.errors == (
        ErrorResolution(error="The deploy failed with ECONNREFUSED on port 5432."),
    )
    assert folded.text.endswith(
        "Notes:\n- Let's open the file that raises the error, at line 293 according to the traceback."
    )


# --- superseded step open threads ------------------------------------------------------

STEP = "- User: Continue with the gateway migration (PROJ-1791), step {}: check the {} handling."


def test_an_older_step_of_the_same_request_is_superseded_in_summary_md() -> None:
    rolling = (
        "Decisions:\n- Use tenacity because it is tested.\nOpen thread:\n"
        "- User: Continue with the gateway migration (PROJ-1791), steps 1\u20134; now at step 4: check the queue handling.\n"
        "- Plan: benchmark the retry budget next."
    )
    older = f"Open thread:\n{STEP.format(5, 'cache')}\n- User: Also rename retry_v1 to retry_legacy.\nFiles: src/a.py"
    newest = (
        f"Open thread:\n{STEP.format(6, 'index')}\nFiles: src/b.py\n\n---\n\nTurn Context (split turn):\n"
        f"Open thread:\n{STEP.format(7, 'timeout')}"
    )
    text = summary_md(rolling, older, newest)
    assert text == (
        "# Session History (compressed chunks)\n\n## Rolling Summary\n\n"
        "Decisions:\n- Use tenacity because it is tested.\nOpen thread:\n- Plan: benchmark the retry budget next.\n\n"
        "## Recent Chunks\n\n"
        "- **chunk_0000000010_0000000019**\n"
        "  Open thread:\n  - User: Also rename retry_v1 to retry_legacy.\n  Files: src/a.py\n\n"
        "- **chunk_0000000020_0000000029**\n  Files: src/b.py\n\n  ---\n\n  Turn Context (split turn):\n"
        f"  Open thread:\n  {STEP.format(7, 'timeout')}\n"
    )


def test_a_routine_request_naming_a_number_is_no_fact() -> None:
    summary = history(GOAL, user("(continue) step 10"), user("Next step for PROJ-1791, turn 13: continue."))
    assert summary.structured.facts == ()
    # (the older routine request, counting in other words, is superseded by the newer one)
    assert summary.text == (
        "Goal: Please fix the retry handling of the gateway.\n"
        "Open thread:\n- User: Next step for PROJ-1791, turn 13: continue."
    )
