"""The read subcommands (inspect, export, recall, doctor) on a root produced by the demo, made read-only.

Every ``--json`` answer is compared whole; the guard refuses any write under
the root and asserts on leaving that nothing under it changed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import aiden
from aiden.cli import main
from aiden.config import Config
from aiden.context.prompt import events_to_messages
from aiden.events import SessionEvent, decode_event, encode_event
from aiden.policy.tokens import estimate_tokens, event_tokens
from aiden.recall.tool import encode_hits
from aiden.storage import chunks as cs
from aiden.storage.fs import TEMP_MARKER
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from aiden.storage.protocol import RecoveryReport
from tests.cli.conftest import DemoRoot
from tests.cli.guard import read_only_root

TORN = b'{"type":"user_in'
CLEAN_DRY_RUN = {k: v for k, v in msgspec.to_builtins(RecoveryReport()).items() if k != "checked"}


@pytest.fixture
def read_only(root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The private demo copy made read-only for the test (and checked unchanged after it)."""
    with read_only_root(root, monkeypatch):
        yield root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _stored(root: Path) -> tuple[list[cs.ChunkEntry], list[SessionEvent], list[SessionEvent]]:
    """(chunk entries, compacted events, hot-window events), read straight from the files."""
    layout = Layout(root)
    index = cs.load_index(layout)
    assert index is not None
    entries = cs.load_all_entries(layout, index)
    chunked = [e for entry in entries for e in cs.read_chunk(layout, entry.chunk_id).events]
    seqs = {e.seq for e in chunked}
    hot = [e for e in scan(read_bytes(layout.events)).events if e.seq not in seqs]
    return entries, chunked, hot


def _files(root: Path) -> dict[str, int]:
    memory = root / "memory"
    return {str(p.relative_to(memory)): p.stat().st_size for p in sorted(memory.rglob("*")) if p.is_file()}


# --- inspect ----------------------------------------------------------------------------------


def test_inspect_json_on_a_read_only_demo_root(
    demo: DemoRoot, read_only: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries, chunked, hot = _stored(read_only)
    summary = (read_only / "memory/session/summary.md").read_text()
    layer = estimate_tokens(summary.strip())
    code, out, err = _run(capsys, "inspect", str(read_only), "--json", "--context-window", "8000")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "root": str(read_only),
        "hot_window": {"events": len(hot), "first_seq": hot[0].seq, "last_seq": hot[-1].seq},
        "chunks": {
            "count": len(entries),
            "live": len(entries),
            "segments": 0,
            "first_seq": entries[0].first_seq,
            "last_seq": entries[-1].last_seq,
            "events": len(chunked),
        },
        "summary_md_bytes": len(summary.encode()),
        "summary_layer": {
            "tokens": layer,
            "context_window": 8000,
            "share_percent": round(100 * layer / 8000, 1),
            "cap_percent": 15.0,
            "cap_tokens": 1200,
            "cut_in_prompt": layer > 1200,
            "window_from": "--context-window",
        },
        "stats": {
            "events": demo.appends,
            "compactions": len(entries),
            "degraded_chunks": 0,
            "hot_window_tokens": sum(event_tokens(hot)),
            "archived_sessions": 0,
        },
        "last_recovery": None,
        "long_term_entries": 0,
        "files": _files(read_only),
        "problems": [],
    }
    assert len(chunked) + len(hot) == demo.appends
    assert len(entries) >= 3  # the demo compacted several times


def test_inspect_text_names_the_summary_layer_share(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    info = json.loads(_run(capsys, "inspect", str(root), "--json", "--model", "gpt-4o")[1])
    layer = info["summary_layer"]
    assert layer["context_window"] == 128000  # gpt-4o's window, from litellm's model map
    code, out, _err = _run(capsys, "inspect", str(root), "--model", "gpt-4o")
    assert code == 0
    assert (
        f"summary layer: ~{layer['tokens']} tokens = {layer['share_percent']}% of a 128000-token window "
        f"(from --model; cap 15.0%: ~19200 tokens); summary.md {info['summary_md_bytes']} bytes\n"
    ) in out
    assert "last recovery: no open has found anything to repair\n" in out


def test_inspect_shows_the_last_recovery_that_found_something(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Layout(root).events.open("ab") as f:
        f.write(TORN)

    async def reopen() -> RecoveryReport:
        async with aiden.open_memory(
            root, config=Config(durability="none", session_summary_on_close=False)
        ) as m:
            return m.recovery

    report = anyio.run(reopen)
    assert report.torn_tail_bytes == len(TORN)
    kept = json.loads((root / "memory/last_recovery.json").read_bytes())
    assert kept == {
        "at": kept["at"],
        "report": {**CLEAN_DRY_RUN, "torn_tail_bytes": len(TORN), "checked": []},
    }
    info = json.loads(_run(capsys, "inspect", str(root), "--json")[1])
    assert info["last_recovery"] == kept
    anyio.run(reopen)  # a clean open keeps the last finding
    assert json.loads((root / "memory/last_recovery.json").read_bytes()) == kept


@pytest.mark.parametrize(
    "kept",
    [
        b'{"report": {"torn_tail_bytes": 16}}',
        b'{"at": 1e300, "report": {"torn_tail_bytes": 16}}',
        b'{"at": [1], "report": {"torn_tail_bytes": 16}}',
        b'{"at": true, "report": {"torn_tail_bytes": 16}}',
        b'{"at": NaN, "report": {"torn_tail_bytes": 16}}',
        b'{"at": 1, "report": {"torn_tail_bytes": Infinity}}',
    ],
)
def test_inspect_reads_a_damaged_last_recovery_as_none(
    root: Path, kept: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    (root / "memory/last_recovery.json").write_bytes(kept)
    code, out, err = _run(capsys, "inspect", str(root), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out, parse_constant=pytest.fail)["last_recovery"] is None
    code, out, err = _run(capsys, "inspect", str(root))
    assert (code, err) == (0, "")
    assert "last recovery: no open has found anything to repair\n" in out


# --- export -----------------------------------------------------------------------------------


def test_export_jsonl_on_a_read_only_demo_root_is_every_event_in_seq_order(
    demo: DemoRoot, read_only: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _entries, chunked, hot = _stored(read_only)
    code, out, err = _run(capsys, "export", str(read_only))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert [decode_event(line).seq for line in lines] == list(range(1, demo.appends + 1))
    stored = sorted(chunked + hot, key=lambda e: e.seq)
    assert [line.encode() + b"\n" for line in lines] == [encode_event(e) for e in stored]


def test_export_openai_on_a_read_only_demo_root(read_only: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _entries, chunked, hot = _stored(read_only)
    code, out, err = _run(capsys, "export", str(read_only), "--format", "openai")
    assert (code, err) == (0, "")
    expected, _repairs = events_to_messages(sorted(chunked + hot, key=lambda e: e.seq))
    assert [json.loads(line) for line in out.splitlines()] == expected
    assert expected[0]["role"] == "user"


def test_export_progress_goes_to_stderr(read_only: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entries, _chunked, _hot = _stored(read_only)
    n = len(entries)
    code, out, err = _run(capsys, "export", str(read_only), "--progress")
    assert code == 0
    assert out == _run(capsys, "export", str(read_only))[1]  # progress never mixes into the export
    shown = sorted({d * 10 // n: d for d in range(n, 0, -1)}.values())  # the first count of each tenth
    assert err == "".join(f"export: {d}/{n} chunk files\n" for d in shown)


def test_export_stops_at_a_damaged_chunk_with_exit_1(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entries, chunked, hot = _stored(root)
    path = Layout(root).chunk_file(entries[1].chunk_id)
    data = bytearray(path.read_bytes())
    pos = data.index(b'"content":"', len(data) // 2) + len(b'"content":"')
    while not chr(data[pos]).isalnum():
        pos += 1
    data[pos] ^= 0x20 if chr(data[pos]).isalpha() else 0x01  # still valid JSON, another text
    path.write_bytes(bytes(data))
    code, out, err = _run(capsys, "export", str(root))
    assert code == 1
    assert err == f"aiden export: chunk file {path.name}: checksum mismatch\n"
    # Streamed: every event before the damaged chunk was written (the pinned root input of the hot
    # window among them), nothing from it on.
    before = sorted(e.seq for e in chunked + hot if e.seq < entries[1].first_seq)
    assert [decode_event(line).seq for line in out.splitlines()] == before
    assert before[0] == 1 and len(before) > 1


# --- recall -----------------------------------------------------------------------------------


def test_recall_json_on_a_read_only_demo_root_answers_as_the_agents_tool(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    query = "how was the AsyncPool ImportError resolved"
    agent = tmp_path / "agent-copy"
    shutil.copytree(root, agent, symlinks=True)

    async def from_the_agent() -> str:
        async with aiden.open_memory(agent, config=Config(session_summary_on_close=False)) as memory:
            return encode_hits(await memory.recall_session_chunks(query, 3))

    expected = anyio.run(from_the_agent)
    with read_only_root(root, monkeypatch):
        code, out, err = _run(capsys, "recall", str(root), query, "-k", "3", "--json")
    assert (code, err) == (0, "")
    assert out == expected + "\n"
    results = json.loads(out)["results"]
    assert len(results) == 3
    assert "AsyncPool" in results[0]["text"]


# --- doctor -----------------------------------------------------------------------------------


def test_doctor_json_on_a_read_only_demo_root(read_only: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "doctor", str(read_only), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "ok": True,
        "problems": [],
        "notes": [],
        "locks": {"session.lock": [], "compaction.lock": []},
        "recovery_dry_run": CLEAN_DRY_RUN,
    }


def test_doctor_text_and_progress(read_only: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entries, _chunked, _hot = _stored(read_only)
    n = len(entries) + 1  # every chunk file, then the recovery dry run
    code, out, err = _run(capsys, "doctor", str(read_only), "--progress")
    assert (code, out) == (0, "ok\n")
    shown = sorted({d * 10 // n: d for d in range(n, 0, -1)}.values())
    assert err == "".join(f"doctor: {d}/{n} checks\n" for d in shown)


def test_doctor_dry_run_finds_an_interrupted_trim_and_a_temp_file(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(root)
    entries, chunked, hot = _stored(root)
    last = [e for e in chunked if entries[-1].first_seq <= e.seq <= entries[-1].last_seq]
    # A crash after the commit point, before the trim: the hot window still holds the chunk's events.
    layout.events.write_bytes(b"".join(encode_event(e) for e in sorted(last + hot, key=lambda e: e.seq)))
    (layout.session / f"{TEMP_MARKER}summary.md.4242.0123456789ab").write_bytes(b"partial")
    before = read_bytes(layout.events)
    code, out, _err = _run(capsys, "doctor", str(root), "--json")
    assert code == 1
    result = json.loads(out)
    assert result["recovery_dry_run"] == {
        **CLEAN_DRY_RUN,
        "hot_events_dropped": len(last),
        "temp_files_removed": 1,
    }
    assert result["problems"] == [
        f"recovery dry run: the next open would remove 1 temp files of interrupted writes; drop {len(last)} "
        "hot-window events a committed chunk already holds (an interrupted trim)"
    ]
    assert read_bytes(layout.events) == before  # a dry run: the root is untouched


def test_doctor_names_who_holds_a_lock_and_skips_the_dry_run(
    read_only: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not Path("/proc/locks").exists():
        pytest.skip("lock holders are read from /proc/locks (Linux)")
    fd = os.open(read_only / "memory/compaction.lock", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, out, _err = _run(capsys, "doctor", str(read_only), "--json")
    finally:
        os.close(fd)
    assert code == 0
    result: dict[str, Any] = json.loads(out)
    assert result == {
        "ok": True,
        "problems": [],
        "notes": [
            f"recovery dry run skipped: compaction.lock held by pid {os.getpid()} "
            "(a write in flight would look like damage)"
        ],
        "locks": {"session.lock": [], "compaction.lock": [os.getpid()]},
        "recovery_dry_run": None,
    }


def test_export_into_a_closed_pipe_stops_quietly(root: Path) -> None:
    # `aiden export ROOT | head -1`: the reader leaves after one line, the export finds the pipe closed.
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    child = subprocess.Popen(
        [sys.executable, "-m", "aiden", "export", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.readline()
    child.stdout.close()
    with child.stderr:
        err = child.stderr.read()
    assert child.wait(timeout=60) == 1
    assert err == b""
    assert decode_event(first).seq == 1
    assert len(b"".join(encode_event(e) for e in _stored(root)[1])) > 1 << 16  # more than a pipe buffer
