"""What a command meets that is wrong is said on stderr and makes the exit non-zero.

A damaged root (garbage in every file), a damaged hot-window line, a time no date
can show, a symlink that leads out of the root; and what the open itself did: the
window a root was used with, the backlog pass an open runs by itself.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path

import anyio
import pytest

import aiden
from aiden.cli import main
from aiden.config import Config
from aiden.policy.triggers import trigger_threshold_tokens
from aiden.storage.layout import Layout

pytestmark = pytest.mark.timeout(60)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# --- a garbage root ---------------------------------------------------------------------------


def _garbage(root: Path) -> None:
    """Every file under memory/ but the lock files replaced by 300 random bytes (the root holds
    chunks, a Dream history and a saved memory: every command has something to read)."""
    rng = random.Random(11)
    for path in sorted((root / "memory").rglob("*")):
        if path.is_file() and not path.name.endswith(".lock"):
            path.write_bytes(rng.randbytes(300))


@pytest.mark.parametrize(
    "argv",
    [
        ["inspect"],
        ["inspect", "--json"],
        ["export"],
        ["recall", "{root}", "pytest"],
        ["memory", "list"],
        ["memory", "list", "--json"],
        ["history"],
        ["compact"],
        ["memory", "save", "{root}", "--type", "rule", "--title", "t", "--content", "c"],
        ["doctor"],
    ],
)
def test_every_command_on_a_garbage_root_exits_non_zero_and_says_why(
    root: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert (
        _run(capsys, "memory", "save", str(root), "--type", "rule", "--title", "a", "--content", "b")[0] == 0
    )
    _garbage(root)
    args = [a.replace("{root}", str(root)) for a in argv]
    if str(root) not in args:
        args.insert(2 if args[0] == "memory" else 1, str(root))
    code, _out, err = _run(capsys, *args)
    assert code == 1
    if args[0] != "doctor":  # doctor lists its problems on stdout
        command = " ".join(args[:2]) if args[0] == "memory" else args[0]
        assert err.startswith(f"aiden {command}: ")


# --- skipped lines ----------------------------------------------------------------------------


def _damage_a_hot_line(root: Path) -> int:
    """Flip a letter inside the content of the last hot-window line (the JSON stays valid): its seq."""
    events = Layout(root).events
    lines = events.read_bytes().splitlines(keepends=True)
    last = lines[-1]
    at = last.index(b'"content":"') + len(b'"content":"')
    lines[-1] = last[:at] + bytes([last[at] ^ 0x01]) + last[at + 1 :]
    events.write_bytes(b"".join(lines))
    return int(json.loads(last)["seq"])


def test_export_and_inspect_say_they_skipped_a_checksum_damaged_line(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "export", str(root))
    assert (code, err) == (0, "")
    every = [json.loads(line)["seq"] for line in out.splitlines()]
    damaged = _damage_a_hot_line(root)
    code, out, err = _run(capsys, "export", str(root))
    assert code == 1
    assert [json.loads(line)["seq"] for line in out.splitlines()] == [s for s in every if s != damaged]
    assert re.fullmatch(
        r"aiden export: session/events\.jsonl: skipped a damaged line at byte \d+ \(\d+ bytes\): "
        r"checksum mismatch \(a damaged line\)\n",
        err,
    )
    code, out, err = _run(capsys, "inspect", str(root))
    assert code == 1
    assert err.startswith("aiden inspect: session/events.jsonl: skipped a damaged line at byte ")


def test_memory_list_json_shows_a_time_no_date_holds_as_null_and_says_so(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = _run(
        capsys, "memory", "save", str(root), "--type", "rule", "--title", "pnpm", "--content", "Use pnpm."
    )
    assert code == 0
    mid = json.loads(out)["saved"]["id"]
    lt = Layout(root).long_term
    for path in (lt / "index.yaml", lt / "memories" / f"{mid}.md"):
        text = path.read_text()
        path.write_text(re.sub(r"(created_at\"?: ?)[0-9.]+", r"\g<1>1.0e+300", text))
    code, out, err = _run(capsys, "memory", "list", str(root), "--json")
    assert code == 1
    assert [(e["id"], e["created_at"]) for e in json.loads(out)] == [(mid, None)]
    assert err == f"aiden memory list: entry {mid}: created_at 1e+300 is not a valid time (shown as null)\n"


# --- symlinks out of the root -----------------------------------------------------------------


def test_reads_refuse_an_events_file_that_leads_out_of_the_root(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = Layout(root).events
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(events.read_bytes())
    events.unlink()
    events.symlink_to(outside)
    for argv in (["export"], ["inspect"], ["recall", str(root), "pytest"]):
        args = [argv[0], str(root), *argv[2:]] if len(argv) > 1 else [argv[0], str(root)]
        code, out, err = _run(capsys, *args)
        assert (code, out) == (1, "")
        assert f"memory/session/events.jsonl -> {outside}" in err
    code, out, _err = _run(capsys, "doctor", str(root))
    assert code == 1
    assert f"symlink leads out of the root: memory/session/events.jsonl -> {outside}" in out
    code, _out, err = _run(capsys, "doctor", str(root), "--repair")
    assert code == 1
    assert "symlinks that lead out of it" in err


def test_memory_list_refuses_a_memories_directory_that_leads_out_of_the_root(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        _run(capsys, "memory", "save", str(root), "--type", "fact", "--title", "a", "--content", "b")[0] == 0
    )
    memories = Layout(root).memories
    outside = tmp_path / "elsewhere"
    memories.rename(outside)
    memories.symlink_to(outside)
    code, out, err = _run(capsys, "memory", "list", str(root), "--json")
    assert (code, out) == (1, "")
    assert f"memory/long_term/memories -> {outside}" in err


# --- what the open did ------------------------------------------------------------------------


async def _backlog(root: Path, events: int) -> None:
    """``events`` user inputs, appended with compaction off (as a crash loop or an import leaves them)."""
    quiet = Config(count_compress_after_events=100_000, durability="none", session_summary_on_close=False)
    async with aiden.open_memory(root, config=quiet, context_window=8000) as memory:
        for n in range(events):
            await memory.append(
                aiden.SessionEvent(type="user_input", content=f"step {n}: run the tests " + "and read the log " * 12)
            )


def test_inspect_uses_the_window_the_root_was_last_opened_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anyio.run(_backlog, tmp_path, 5)
    info = json.loads(_run(capsys, "inspect", str(tmp_path), "--json")[1])
    assert (info["summary_layer"]["context_window"], info["summary_layer"]["window_from"]) == (
        8000,
        "the last open",
    )
    info = json.loads(_run(capsys, "inspect", str(tmp_path), "--json", "--context-window", "4000")[1])
    assert (info["summary_layer"]["context_window"], info["summary_layer"]["window_from"]) == (
        4000,
        "--context-window",
    )


def test_compact_reports_what_the_opens_backlog_pass_compacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anyio.run(_backlog, tmp_path, 150)
    code, out, err = _run(capsys, "compact", str(tmp_path), "--json")
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert result["at_open"]["compactions"] >= 1
    assert result["at_open"]["events_compacted"] + result["hot_window"]["events"] == 150
    assert result["passes"] == []


def test_write_commands_work_at_the_recorded_window_and_keep_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anyio.run(_backlog, tmp_path, 5)
    recorded = (tmp_path / "memory" / "window.json").read_bytes()
    code, out, _err = _run(capsys, "compact", str(tmp_path), "--json")
    assert code == 0
    threshold = trigger_threshold_tokens(8000, Config().with_window(8000))
    assert json.loads(out)["trigger"]["tokens_at"] == threshold
    assert (
        _run(capsys, "memory", "save", str(tmp_path), "--type", "fact", "--title", "a", "--content", "b")[0]
        == 0
    )
    assert (tmp_path / "memory" / "window.json").read_bytes() == recorded


def test_an_incomplete_last_line_is_no_problem(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Never acknowledged, and beside a running agent perhaps a write in flight: left out quietly."""
    expected = _run(capsys, "export", str(root))[1]
    with Layout(root).events.open("ab") as f:
        f.write(b'{"type":"user_in')
    assert _run(capsys, "export", str(root)) == (0, expected, "")


def test_history_says_when_the_version_history_is_damaged(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lost branch ref reads as "no versions yet" to git; history says the history is damaged."""
    (Layout(root).long_term / ".git" / "refs" / "heads" / "main").unlink()
    code, out, err = _run(capsys, "history", str(root))
    assert (code, out) == (1, "")
    assert err.startswith("aiden history: ")


# --- chunk files the index does not list --------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["export"], ["inspect"], ["inspect", "--json"], ["recall", "AsyncPool"], ["recall", "AsyncPool", "--json"]]
)
def test_reads_name_the_chunk_files_a_missing_index_leaves_unread(
    root: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    layout = Layout(root)
    chunk_ids = sorted(p.stem for p in layout.chunks.glob("chunk_*.jsonl"))
    assert len(chunk_ids) > 1
    layout.index.unlink()
    code, _out, err = _run(capsys, argv[0], str(root), *argv[1:])
    assert code == 1
    assert err == (
        f"aiden {argv[0]}: {len(chunk_ids)} chunk files in session/chunks/ are not in index.yaml and were not read "
        f"(the next open of the memory adopts or removes them): {', '.join(chunk_ids)}\n"
    )


# --- one line per error -----------------------------------------------------------------------


def test_an_error_of_several_lines_is_said_on_one(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Layout(root).index.write_bytes(b'entries:\n  - "unterminated\n')
    assert _run(capsys, "export", str(root)) == (
        1,
        "",
        'aiden export: index.yaml invalid: while scanning a quoted scalar in "<byte string>", line 2, column 5 '
        'found unexpected end of stream in "<byte string>", line 3, column 1\n',
    )
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"a: [\n")
    assert _run(capsys, "config", "check", str(bad)) == (
        1,
        "",
        f"aiden config check: {bad}: invalid YAML: while parsing a flow node expected the node content, "
        "but found '<stream end>' in \"<byte string>\", line 2, column 1: ^\n",
    )


# --- doctor on a file where a folder goes, or the reverse ---------------------------------------


@pytest.mark.parametrize("name", ["session/summary.md", "session/chunks", "session/events.jsonl"])
def test_doctor_names_a_file_where_a_folder_goes_or_the_reverse(
    root: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = root / "memory" / name
    if path.is_dir():
        shutil.rmtree(path)
        path.write_bytes(b"x\n")
        what = "file"
    else:
        path.unlink()
        path.mkdir()
        what = "directory"
    code, out, err = _run(capsys, "doctor", str(root), "--json")
    assert (code, err) == (1, "")
    assert json.loads(out) == {
        "ok": False,
        "problems": [f"a {what} stands where {path} goes"],
        "notes": [
            "the other checks were skipped: the next open of the memory (or --repair) moves these aside, "
            "then run doctor again"
        ],
        "locks": {},
        "recovery_dry_run": None,
    }


def test_doctor_names_a_seq_the_hot_window_stores_twice(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A line written twice (a copy restored over a live log, a hand edit) is named with its seq."""
    events = Layout(root).events
    last = events.read_bytes().splitlines(keepends=True)[-1]
    seq = json.loads(last)["seq"]
    with events.open("ab") as f:
        f.write(last)
    code, out, _err = _run(capsys, "doctor", str(root))
    assert code == 1
    assert f"1 seqs stored more than once (chunks or hot window): {seq}" in out.splitlines()
