"""The ``aiden`` write subcommands and their read-only partners, on a root produced by the demo.

compact, memory list|save|forget, history, restore, config check; reads on a
read-only copy, writes refused there with a message and exit 1.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiden
from aiden.cli import main
from aiden.config import Config
from aiden.demo import run_demo
from aiden.longterm.gitstore import Version
from aiden.policy.tokens import event_tokens
from aiden.policy.triggers import trigger_threshold_tokens
from aiden.readonly import iter_events, open_layout
from aiden.storage import chunks as cs
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from tests.cli.conftest import DemoRoot
from tests.cli.guard import read_only_root, tree


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _hot(root: Path) -> list[aiden.SessionEvent]:
    layout = Layout(root)
    index = cs.load_index(layout) or cs.ChunkIndex()
    entries = cs.load_all_entries(layout, index)
    return [
        e
        for e in scan(read_bytes(layout.events)).events
        if e.seq > index.last_seq or not cs.covered(entries, e.seq)
    ]


# --- compact ----------------------------------------------------------------------------------


def test_compact_under_the_trigger_does_nothing(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hot = _hot(root)
    events_before = list(iter_events(open_layout(root)))
    threshold = trigger_threshold_tokens(Config().context_window, Config())
    code, out, err = _run(capsys, "compact", str(root))
    assert (code, err) == (0, "")
    assert out == (
        "nothing to compact\n"
        f"hot window: {len(hot)} events, ~{sum(event_tokens(hot))} tokens "
        f"(trigger: more than {Config().count_limit()} events or ~{threshold} tokens)\n"
    )
    assert list(iter_events(open_layout(root))) == events_before


def test_compact_json_runs_passes_until_under_the_trigger(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = Layout(root)
    index_before = cs.load_index(layout)
    assert index_before is not None
    hot_before = _hot(root)
    stored = list(iter_events(open_layout(root)))
    threshold = trigger_threshold_tokens(1500, Config().with_window(1500))
    assert sum(event_tokens(hot_before)) >= threshold  # the demo's hot window is over a 1500-token trigger
    code, out, err = _run(capsys, "compact", str(root), "--context-window", "1500", "--json")
    assert (code, err) == (0, "")
    result = json.loads(out)
    index = cs.load_index(layout)
    assert index is not None
    new = [e for e in cs.load_all_entries(layout, index) if e.first_seq > index_before.last_seq]
    hot = _hot(root)
    assert len(new) >= 1
    # The open at 2,000 tokens may compact first (its own trigger, on aiden's estimate); compact's
    # manual passes then take what is left. Together they made exactly the new chunks.
    own = new[len(new) - len(result["passes"]) :]
    by_open = new[: len(new) - len(result["passes"])]
    assert result == {
        "at_open": {"compactions": len(by_open), "events_compacted": sum(e.count for e in by_open)},
        "passes": [
            {
                "compacted": True,
                "reason": "manual",
                "chunk_id": entry.chunk_id,
                "events_compacted": entry.count,
                "tokens_before": p["tokens_before"],
                "tokens_after": p["tokens_after"],
                "degraded": False,
                "note": p["note"],
            }
            for entry, p in zip(own, result["passes"], strict=True)
        ],
        "hot_window": {"events": len(hot), "estimated_tokens": sum(event_tokens(hot))},
        "trigger": {"events_over": Config().count_limit(), "tokens_at": threshold},
        "under_trigger": True,
    }
    assert sum(event_tokens(hot)) < threshold
    assert sum(e.count for e in new) == len(hot_before) - len(hot)
    assert list(iter_events(open_layout(root))) == stored  # compaction moved events, lost none


def test_compact_force_text(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The demo closes without waiting for its last background pass (about 1 run in 8 it is still in
    # flight and cancelled): a forced pass then compacts what that one would have. Once the hot
    # window fits keep_recent at the default window, the forced pass says why it kept it (each
    # forced pass compacts at least one event, and cut points may keep it a little over at first).
    for _ in range(10):
        code, out, err = _run(capsys, "compact", str(root), "--force")
        lines = out.splitlines()
        assert (code, err, len(lines)) == (0, "", 2)
        if not lines[0].startswith("pass 1: compacted "):
            break
    assert lines[0].startswith("pass 1: nothing compacted (fits: ")


# --- memory list | save | forget ----------------------------------------------------------------


def test_memory_save_list_forget(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "memory", "list", str(root)) == (0, "no long-term memories\n", "")
    code, out, err = _run(
        capsys, "memory", "save", str(root), "--type", "rule", "--title", "Run tests",
        "--content", "Always run pytest after a change", "--expires-at", "2099-01-01",
    )  # fmt: skip
    assert (code, err) == (0, "")
    saved = json.loads(out)["saved"]
    mid = saved["id"]
    assert saved == {"id": mid, "type": "rule", "title": "Run tests", "expires_at": "2099-01-01T00:00:00Z"}
    assert (root / f"memory/long_term/memories/{mid}.md").is_file()
    assert _run(capsys, "memory", "list", str(root)) == (
        0,
        f"{mid}  rule        Run tests  (expires 2099-01-01T00:00:00Z)\n",
        "",
    )
    assert _run(capsys, "memory", "forget", str(root), mid) == (0, json.dumps({"forgotten": mid}) + "\n", "")
    assert not (root / f"memory/long_term/memories/{mid}.md").exists()
    assert _run(capsys, "memory", "list", str(root)) == (0, "no long-term memories\n", "")


def test_a_saved_memory_reaches_the_next_prompt(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, _err = _run(
        capsys,
        "memory",
        "save",
        str(root),
        "--type",
        "preference",
        "--title",
        "Use yarn",
        "--content",
        "never npm",
    )
    assert code == 0

    async def layer() -> str:
        async with aiden.open_memory(root) as memory:
            return memory.long_term_layer

    assert "Use yarn" in anyio.run(layer)


def test_memory_list_json_on_a_read_only_copy(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = []
    for title, content in [("Port", "staging listens on 8234"), ("Flag", "gateway_async_v2")]:
        code, out, _ = _run(
            capsys, "memory", "save", str(root), "--type", "fact", "--title", title, "--content", content
        )
        assert code == 0
        saved.append((json.loads(out)["saved"]["id"], title, content))
    with read_only_root(root, monkeypatch):
        code, out, err = _run(capsys, "memory", "list", str(root), "--json")
    assert (code, err) == (0, "")
    # The id is mem-<int(now)>-<hex> with created_at = now: its second is the id's number.
    expected = [
        {"id": mid, "type": "fact", "title": title, "content": content,
         "created_at": _iso(int(mid.split("-")[1])), "expires_at": None}
        for mid, title, content in saved
    ]  # fmt: skip
    # Oldest first: the second save is the newer one even when both fall in the same second.
    assert json.loads(out) == expected


def test_memory_forget_an_unknown_id_exits_1(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "memory", "forget", str(root), "nope") == (
        1,
        "",
        "aiden memory forget: forget_memory: no memory with id 'nope'\n",
    )


def test_memory_save_with_a_bad_expiry_writes_nothing(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys,
        "memory",
        "save",
        str(root),
        "--type",
        "fact",
        "--title",
        "t",
        "--content",
        "c",
        "--expires-at",
        "soon",
    )
    assert (code, out) == (1, "")
    assert err.startswith("aiden memory save: save_memory: ")
    assert not any((root / "memory/long_term/memories").glob("*.md"))


# --- history | restore --------------------------------------------------------------------------


def _version_json(v: Version) -> dict[str, Any]:
    return {"commit_id": v.commit_id, "time": _iso(v.timestamp), "title": v.title, "message": v.message}


def test_history_json_on_a_read_only_copy(
    demo: DemoRoot, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with read_only_root(root, monkeypatch):
        code, out, err = _run(capsys, "history", str(root), "--json")
        text = _run(capsys, "history", str(root))
    assert (code, err) == (0, "")
    assert json.loads(out) == [_version_json(v) for v in demo.versions]
    (v,) = demo.versions
    assert text == (0, f"{v.commit_id[:12]}  {_iso(v.timestamp)}  {v.title}\n", "")
    assert v.title.startswith("dream: history 1-")


def test_history_of_a_root_that_never_dreamed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "fresh"
    anyio.run(lambda: run_demo(root, turns=4, echo=lambda _line: None))
    assert _run(capsys, "history", str(root)) == (0, "no Dream versions yet\n", "")
    assert _run(capsys, "history", str(root), "--json") == (0, "[]\n", "")


def test_restore_brings_back_a_version_after_a_hand_edit(
    demo: DemoRoot, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory_md = root / "memory/long_term/MEMORY.md"
    memory_md.write_bytes(b"# MEMORY\n\nedited by hand\n")
    (dreamed,) = demo.versions
    code, out, err = _run(capsys, "restore", str(root), dreamed.commit_id[:8], "--json")
    assert (code, err) == (0, "")
    assert memory_md.read_bytes() == demo.memory_md
    _, history, _ = _run(capsys, "history", str(root), "--json")
    versions = json.loads(history)
    title = f"restore: {dreamed.commit_id[:12]} ({dreamed.title})"
    assert [v["title"] for v in versions] == [title, "snapshot: manual edits", dreamed.title]
    assert json.loads(out) == versions[0]
    # Steps back: 1 is the version before the newest (the hand edit, kept by the snapshot).
    assert _run(capsys, "restore", str(root), "1")[0] == 0
    assert memory_md.read_bytes() == b"# MEMORY\n\nedited by hand\n"


def test_restore_an_unknown_version_exits_1(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (root / "memory/long_term/MEMORY.md").read_bytes()
    assert _run(capsys, "restore", str(root), "deadbeef") == (1, "", "aiden restore: no version 'deadbeef'\n")
    assert (root / "memory/long_term/MEMORY.md").read_bytes() == before


# --- write commands on a read-only root, and on a missing one -------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["compact", "{root}", "--force"],
        ["memory", "save", "{root}", "--type", "fact", "--title", "t", "--content", "c"],
        ["memory", "forget", "{root}", "mem-1"],
        ["restore", "{root}", "1"],
    ],
    ids=["compact", "memory save", "memory forget", "restore"],
)
def test_a_write_command_on_a_read_only_root_fails_with_a_message(
    root: Path, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("{root}", str(root)) for a in argv]
    command = " ".join(a for a in argv[:2] if a != str(root))
    with read_only_root(root, monkeypatch):  # and nothing under it changed (checked on exit)
        code, out, err = _run(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.startswith(f"aiden {command}: memory root {str(root)!r} is not writable: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["compact"],
        ["memory", "list"],
        ["memory", "save", "--type", "fact", "--title", "t", "--content", "c"],
        ["memory", "forget", "--", "mem-1"],
        ["history"],
        ["restore", "--", "1"],
    ],
)
def test_a_missing_root_exits_2_and_is_not_created(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    n = 2 if argv[0] == "memory" else 1
    rest = [a for a in argv[n:] if a != "--"]
    code, out, err = _run(capsys, *argv[:n], str(missing), *rest)
    assert (code, out) == (2, "")
    assert (
        err
        == f"aiden {' '.join(argv[:n])}: memory root {str(missing)!r} does not exist or is not a directory\n"
    )
    assert not missing.exists()


# --- config check -----------------------------------------------------------------------------


def test_config_check_a_valid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "extraction.yaml"
    path.write_text("context_window: 64000\ncompress_at_percent: 70.5\n")
    assert _run(capsys, "config", "check", str(path)) == (
        0,
        f"{path}: valid\n  context_window: 64000\n  compress_at_percent: 70.5\n",
        "",
    )
    code, out, err = _run(capsys, "config", "check", str(path), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "file": str(path),
        "valid": True,
        "error": None,
        "changed": {"context_window": 64000, "compress_at_percent": 70.5},
    }


def test_config_check_an_empty_file_is_the_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert _run(capsys, "config", "check", str(path)) == (0, f"{path}: valid\n", "")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("context_window: 32000\nbogus: 1\n", "{path}: unknown key 'bogus'"),
        ("context_window: [1\n", "{path}: invalid YAML: "),
        ("context_window: -5\n", "{path}: key 'context_window': "),
    ],
    ids=["unknown key", "bad yaml", "bad value"],
)
def test_config_check_a_bad_file_exits_1_with_the_error(
    tmp_path: Path, text: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "extraction.yaml"
    path.write_text(text)
    expected = error.format(path=path)
    code, out, err = _run(capsys, "config", "check", str(path))
    assert (code, out) == (1, "")
    assert err.startswith(f"aiden config check: {expected}") and err.endswith("\n")
    code, out, err = _run(capsys, "config", "check", str(path), "--json")
    result = json.loads(out)
    assert (code, err) == (1, "")
    assert result == {"file": str(path), "valid": False, "error": result["error"], "changed": {}}
    assert result["error"].startswith(expected)


def test_config_check_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "none.yaml"
    assert _run(capsys, "config", "check", str(path)) == (
        1,
        "",
        f"aiden config check: {path}: cannot read config: No such file or directory\n",
    )


def test_the_read_commands_leave_a_demo_root_unchanged(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree(root)
    for argv in (["memory", "list", str(root), "--json"], ["history", str(root), "--json"]):
        assert main(argv) == 0
    capsys.readouterr()
    assert tree(root) == before


# --- a real read-only mount (root with mount namespaces only) ------------------------------------

_READS = [
    ["inspect", "{root}", "--json"],
    ["doctor", "{root}", "--json"],
    ["export", "{root}"],
    ["recall", "{root}", "staging port", "--json"],
    ["memory", "list", "{root}", "--json"],
    ["history", "{root}", "--json"],
]
_WRITES = [
    ["compact", "{root}", "--force"],
    ["memory", "save", "{root}", "--type", "fact", "--title", "t", "--content", "c"],
    ["memory", "forget", "{root}", "mem-1"],
    ["restore", "{root}", "1"],
]


def _can_mount_read_only(tmp: Path) -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = tmp / "probe"
    probe.mkdir()
    script = (
        f"mount --bind {probe} {probe} && mount -o remount,ro,bind {probe} && ! touch {probe}/x 2>/dev/null"
    )
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, timeout=60)
    return done.returncode == 0


def test_every_command_on_a_read_only_bind_mount(root: Path, tmp_path: Path) -> None:
    if not _can_mount_read_only(tmp_path):
        pytest.skip("needs root and unshare -m to bind-mount the root read-only")
    argvs = [[a.replace("{root}", str(root)) for a in argv] for argv in _READS + _WRITES]
    cmd = [
        sys.executable,
        "-c",
        "import json, sys; from tests.cli.test_cli_commands import run_each; run_each(sys.argv[1:])",
    ]
    # One child per mount: every command runs in it on the mounted root, and prints (code, out, err) as JSON.
    script = f'mount --bind {root} {root} && mount -o remount,ro,bind {root} && exec "$@"'
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", *cmd, json.dumps(argvs)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.splitlines()[-1])
    before = tree(root)
    expected = [list(run_each_one(argv)) for argv in argvs[: len(_READS)]]  # the same reads, mount gone
    assert results[: len(_READS)] == expected
    assert all(code == 0 for code, _out, _err in expected)
    for argv, (code, out, err) in zip(argvs[len(_READS) :], results[len(_READS) :], strict=True):
        command = " ".join(a for a in argv[:2] if a != str(root))
        assert (code, out) == (1, ""), argv
        assert err.startswith(f"aiden {command}: memory root {str(root)!r} is not writable: "), err
        assert err.endswith(": Read-only file system\n"), err
    assert tree(root) == before


def run_each_one(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` with stdout and stderr captured: (exit code, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def run_each(args: list[str]) -> None:
    """The child of the bind-mount test: run each argv of the JSON list and print the results as JSON."""
    print(json.dumps([run_each_one(argv) for argv in json.loads(args[0])]))


def test_text_output_shows_stored_control_characters_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A tool's coloured output, or a title with an escape sequence, must not drive the operator's terminal.
    root = tmp_path / "agent"

    async def fill() -> None:
        config = Config(durability="none", count_compress_after_events=10**6, hot_window_events=2)
        async with aiden.open_memory(root, config=config) as memory:
            await memory.append(aiden.SessionEvent(type="user_input", role="user", content="run the tests"))
            await memory.append(
                aiden.SessionEvent(type="tool_result", content="\x1b[31mFAILED\x1b[0m division by zero\x9b2J")
            )
            for n in range(4):
                await memory.append(aiden.SessionEvent(type="assistant_output", role="assistant", content=f"step {n}"))
            assert (await memory.maintain(manual=True)).compacted
            saved = await memory.handle_tool_call(
                "save_memory", {"type": "rule", "title": "red \x1b[31mtitle", "content": "x", "id": "r1"}
            )
            assert "saved" in json.loads(saved)

    anyio.run(fill)
    code, out, _err = _run(capsys, "recall", str(root), "division")
    assert code == 0
    assert "\\x1b[31mFAILED\\x1b[0m division by zero\\x9b2J" in out
    code, out, _err = _run(capsys, "memory", "list", str(root))
    assert (code, out) == (0, "r1  rule        red \\x1b[31mtitle\n")
    # JSON output escapes them too (JSON escapes C0 itself; DEL and C1 such as U+009B it leaves raw),
    # and reads back as the same text.
    code, out, _err = _run(capsys, "recall", str(root), "division", "--json")
    assert code == 0 and not any("\x7f" <= c <= "\x9f" or c == "\x1b" for c in out)
    assert json.loads(out)["results"][0]["text"] == "\x1b[31mFAILED\x1b[0m division by zero\x9b2J"
    code, out, _err = _run(capsys, "export", str(root))
    assert code == 0 and not any("\x7f" <= c <= "\x9f" or c == "\x1b" for c in out)
    assert "\x1b[31mFAILED\x1b[0m division by zero\x9b2J" in [json.loads(line)["content"] for line in out.splitlines()]
