"""The ``aiden`` command: --version, the demo's guards, and the read-only inspect/export/recall/doctor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest

import aiden
from aiden.cli import main
from aiden.demo import run_demo
from aiden.errors import SummarizerError
from aiden.events import SessionEvent, decode_event
from aiden.longterm.history import HistoryStore
from aiden.storage import chunks as cs
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.protocol import RecoveryReport
from aiden.summarizers.protocol import SummaryRequest, SummaryResult
from tests.cli.guard import read_only_root, tree
from tests.helpers import SMALL_MANUAL, all_events

TORN = b'{"type":"user_in'
CLEAN_DOCTOR = {
    "ok": True,
    "problems": [],
    "notes": [],
    "locks": {"session.lock": [], "compaction.lock": []},
    "recovery_dry_run": {k: v for k, v in msgspec.to_builtins(RecoveryReport()).items() if k != "checked"},
}
"""``aiden doctor --json`` on a healthy root nobody holds a lock on."""
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _session() -> list[SessionEvent]:
    events = [SessionEvent(type="user_input", role="user", content="deploy the service to staging")]
    events.append(
        SessionEvent(
            type="tool_call",
            role="assistant",
            tool_name="shell",
            tool_call_id="call_1",
            tool_args='{"cmd": "kubectl version"}',
        )
    )
    events.append(
        SessionEvent(
            type="tool_result",
            role="tool",
            tool_call_id="call_1",
            content="the staging cluster runs kubernetes 1.29",
        )
    )
    for n in range(12):
        events.append(SessionEvent(type="assistant_output", role="assistant", content=f"step {n} done"))
    return events


async def _build(root: Path) -> list[SessionEvent]:
    stored: list[SessionEvent] = []
    async with aiden.open_memory(root, config=SMALL_MANUAL) as memory:
        for event in _session():
            stored.append(await memory.append(event))
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted
    return stored


@pytest.fixture
def memory_root(tmp_path: Path) -> tuple[Path, list[SessionEvent]]:
    root = tmp_path / "agent"
    stored = anyio.run(_build, root)
    return root, stored


_tree = tree


@pytest.fixture
def read_only(
    memory_root: tuple[Path, list[SessionEvent]], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """The memory root made read-only (chmod, and every write under it refused, since tests may run as root)."""
    with read_only_root(memory_root[0], monkeypatch) as root:
        yield root


def _hot_and_chunks(root: Path) -> tuple[list[SessionEvent], list[cs.ChunkEntry]]:
    layout = Layout(root)
    index = cs.load_index(layout)
    assert index is not None
    entries = cs.load_all_entries(layout, index)
    chunked, hot = all_events(root)
    covered = {e.seq for e in chunked}
    return [e for e in hot if e.seq not in covered], entries


# --- --version and the demo -----------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"aiden {aiden.__version__}\n"


def test_version_as_a_module() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "aiden", "--version"], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert proc.returncode == 0
    assert proc.stdout == f"aiden {aiden.__version__}\n"


def test_demo_refuses_a_root_that_holds_a_memory(
    memory_root: tuple[Path, list[SessionEvent]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = memory_root[0]
    before = _tree(root)
    assert main(["demo", "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "already holds a memory" in err
    assert _tree(root) == before


def test_demo_in_an_empty_root_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    (root / "memory").mkdir()  # an empty memory/ is not a memory
    assert main(["demo", "--root", str(root), "--turns", "24"]) == 0
    assert "compactions" in capsys.readouterr().out


def test_a_root_not_valid_utf8_records_its_compactions_in_long_term_history(tmp_path: Path) -> None:
    root = Path(os.fsdecode(os.fsencode(tmp_path / "root") + b"\xff"))
    anyio.run(lambda: run_demo(root, turns=24, echo=lambda _line: None))
    layout = Layout(root)
    index = cs.load_index(layout)
    assert index is not None
    chunk_ids = [e.chunk_id for e in cs.load_all_entries(layout, index)]
    assert len(chunk_ids) > 1
    history = HistoryStore(layout, Storage()).read_after(0)
    key = f"{tmp_path}/root\\xff"
    assert [(r.session_key, r.chunk_id) for r in history] == [(key[:128], c) for c in chunk_ids]


class _Failing:
    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        raise SummarizerError("model not found")


def test_demo_exits_nonzero_when_the_summarizer_never_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import aiden

    monkeypatch.setattr(aiden, "LiteLLMSummarizer", lambda model: _Failing())
    assert main(["demo", "--root", str(tmp_path / "d"), "--turns", "24", "--model", "no-such/model"]) == 1
    assert "the summarizer failed all" in capsys.readouterr().err


# --- inspect ----------------------------------------------------------------------------------


def test_inspect_json_on_a_read_only_root(
    memory_root: tuple[Path, list[SessionEvent]], read_only: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, stored = memory_root
    hot, entries = _hot_and_chunks(root)
    assert main(["inspect", str(root), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["hot_window"] == {"events": len(hot), "first_seq": hot[0].seq, "last_seq": hot[-1].seq}
    assert info["chunks"]["count"] == len(entries) == 1
    assert info["chunks"]["first_seq"] == entries[0].first_seq
    assert info["chunks"]["last_seq"] == entries[-1].last_seq
    assert info["chunks"]["events"] + len(hot) == len(stored)
    assert info["summary_md_bytes"] == (root / "memory/session/summary.md").stat().st_size > 0
    assert info["long_term_entries"] == 0
    assert info["files"]["session/events.jsonl"] == (root / "memory/session/events.jsonl").stat().st_size
    assert info["files"][f"session/chunks/{entries[0].chunk_id}.jsonl"] > 0
    assert info["problems"] == []


def test_inspect_text(
    memory_root: tuple[Path, list[SessionEvent]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = memory_root[0]
    hot, entries = _hot_and_chunks(root)
    assert main(["inspect", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"hot window: {len(hot)} events (seq {hot[0].seq}..{hot[-1].seq})" in out
    assert f"chunks: 1 ({entries[0].count} events, 0 segments)" in out


# --- export -----------------------------------------------------------------------------------


def test_export_jsonl_is_every_appended_event_in_seq_order(
    memory_root: tuple[Path, list[SessionEvent]], read_only: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, stored = memory_root
    assert main(["export", str(root)]) == 0
    exported = [decode_event(line) for line in capsys.readouterr().out.splitlines()]
    assert [e.seq for e in exported] == list(range(1, len(stored) + 1))
    assert [msgspec.to_builtins(e) for e in exported] == [msgspec.to_builtins(e) for e in stored]


def test_export_openai(
    memory_root: tuple[Path, list[SessionEvent]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = memory_root[0]
    assert main(["export", str(root), "--format", "openai"]) == 0
    messages = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert messages[0] == {"role": "user", "content": "deploy the service to staging"}
    assert messages[1]["role"] == "assistant"
    assert messages[1]["tool_calls"][0]["id"] == "call_1"
    assert messages[1]["tool_calls"][0]["function"] == {
        "name": "shell",
        "arguments": '{"cmd": "kubectl version"}',
    }
    assert messages[2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "the staging cluster runs kubernetes 1.29",
    }
    assert [m["content"] for m in messages[3:]] == [f"step {n} done" for n in range(12)]


# --- recall -----------------------------------------------------------------------------------


def test_recall_json_on_a_read_only_root(
    memory_root: tuple[Path, list[SessionEvent]], read_only: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = memory_root[0]
    _hot, entries = _hot_and_chunks(root)
    chunked = cs.read_chunk(Layout(root), entries[0].chunk_id).events
    target = next(e for e in chunked if e.type == "assistant_output")
    assert main(["recall", str(root), target.content, "--json", "-k", "1"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert len(results) == 1
    assert results[0]["seq"] == target.seq
    assert results[0]["text"] == target.content
    assert results[0]["chunk_id"] == entries[0].chunk_id
    # The read-only guard checks on leaving that the command changed nothing under the root.


def test_recall_text_and_no_results(
    memory_root: tuple[Path, list[SessionEvent]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = memory_root[0]
    assert main(["recall", str(root), "zyxwvut"]) == 0
    assert capsys.readouterr().out == "no results\n"


# --- doctor -----------------------------------------------------------------------------------


def test_doctor_clean_on_a_read_only_root(
    memory_root: tuple[Path, list[SessionEvent]], read_only: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", str(memory_root[0])]) == 0
    assert capsys.readouterr().out == "ok\n"


def test_doctor_json_clean_on_a_read_only_root_and_with_a_problem(
    memory_root: tuple[Path, list[SessionEvent]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = memory_root[0]
    with read_only_root(root, monkeypatch):
        assert main(["doctor", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == CLEAN_DOCTOR
    with Layout(root).events.open("ab") as f:
        f.write(TORN)
    size = Layout(root).events.stat().st_size
    assert main(["doctor", str(root), "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {
        **CLEAN_DOCTOR,
        "ok": False,
        "problems": [
            f"events.jsonl: torn tail of {len(TORN)} bytes at offset {size - len(TORN)}",
            f"recovery dry run: the next open would quarantine a torn tail of {len(TORN)} bytes",
        ],
        "recovery_dry_run": {**CLEAN_DOCTOR["recovery_dry_run"], "torn_tail_bytes": len(TORN)},
    }


def test_doctor_finds_a_flipped_byte_in_a_chunk_file(
    memory_root: tuple[Path, list[SessionEvent]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = memory_root[0]
    _hot, entries = _hot_and_chunks(root)
    path = Layout(root).chunk_file(entries[0].chunk_id)
    data = bytearray(path.read_bytes())
    pos = data.index(b"step 0 done")
    data[pos] ^= 0x01
    path.write_bytes(bytes(data))
    assert main(["doctor", str(root)]) == 1
    assert capsys.readouterr().out == (
        f"chunk file {path.name}: checksum mismatch\n"
        f"recovery dry run: chunk {entries[0].chunk_id} (seq {entries[0].first_seq}-{entries[0].last_seq}) "
        f"unreadable: chunk file {path.name}: checksum mismatch\n"
    )


def test_doctor_finds_a_torn_tail_and_a_corrupt_line(
    memory_root: tuple[Path, list[SessionEvent]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = memory_root[0]
    events = Layout(root).events
    size = events.stat().st_size
    with events.open("ab") as f:
        f.write(b"not json\n" + TORN)
    assert main(["doctor", str(root)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"events.jsonl: corrupt line at offset {size}: ")
    assert lines[1:] == [
        f"events.jsonl: torn tail of {len(TORN)} bytes at offset {size + 9}",
        f"recovery dry run: the next open would quarantine a torn tail of {len(TORN)} bytes; "
        "quarantine 1 corrupt lines",
        f"recovery dry run: events.jsonl: corrupt line at offset {size} quarantined",
    ]


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["inspect"], ["inspect", "--json"], ["export"], ["recall", "_", "query"], ["doctor"]]
)
def test_a_missing_root_exits_2_with_a_message(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    argv = [argv[0], str(missing), *[a for a in argv[1:] if a != "_"]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"aiden {argv[0]}: memory root {str(missing)!r} does not exist or is not a directory\n"


def test_a_directory_without_memory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", str(tmp_path)]) == 2
    assert "no memory under" in capsys.readouterr().err


def test_the_read_only_guard_refuses_a_writer(read_only: Path) -> None:
    async def open_it() -> None:
        async with aiden.open_memory(read_only, config=SMALL_MANUAL):
            pass

    with pytest.raises(Exception):  # noqa: B017 - whatever open_memory raises, it must not succeed
        anyio.run(open_it)


def test_doctor_finds_an_invalid_index_and_an_orphan_chunk(
    memory_root: tuple[Path, list[SessionEvent]], capsys: pytest.CaptureFixture[str]
) -> None:
    root = memory_root[0]
    layout = Layout(root)
    layout.index.write_bytes(b"chunks: [unclosed\n")
    assert main(["doctor", str(root)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("index.yaml invalid: ")
    assert lines[1].startswith("chunk file chunk_") and lines[1].endswith(
        ".jsonl is not in index.yaml (orphan)"
    )
    # The next open rebuilds the index from the chunk files: nothing is lost.
    assert lines[2:] == [
        "recovery dry run: the next open would rebuild index.yaml from the chunk files",
        f"recovery dry run: index.yaml was corrupt and was rebuilt from chunk files: {lines[0]}",
    ]


def test_doctor_finds_events_stored_nowhere(
    memory_root: tuple[Path, list[SessionEvent]], capsys: pytest.CaptureFixture[str]
) -> None:
    root, stored = memory_root
    events = Layout(root).events
    lines = events.read_bytes().splitlines(keepends=True)
    lost = decode_event(lines[-2]).seq
    events.write_bytes(b"".join(lines[:-2] + lines[-1:]))
    assert main(["doctor", str(root)]) == 1
    assert capsys.readouterr().out == (
        f"1 seqs stored nowhere (chunks or hot window): {lost}\n"
        f"recovery dry run: events.jsonl: 1 events lost (seqs {lost})\n"
    )
    assert lost == len(stored) - 1


def test_a_missing_root_gives_no_traceback_from_the_command(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "aiden", "inspect", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert "does not exist" in proc.stderr
