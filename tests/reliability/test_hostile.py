"""Hostile ids and paths in recall (lookup_chunk, rehydrate, recall_session_chunks, the recall tool
handler) and rotation: ``../x``, absolute paths, NUL, over-long names, symlinks leading out of the
root. Every one is rejected (InvalidIdError / a StorageError / an ``{"error": ...}`` tool result),
and an audit hook verifies that nothing outside the root (Python installation, /proc and /dev
aside) is opened, listed, renamed or removed during those calls.
"""

from __future__ import annotations

import json
import os
import site
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiden
from aiden import Config
from aiden.storage import chunks as cs
from aiden.storage.layout import Layout
from aiden.testing import ScriptedSummarizer
from tests.reliability.harness import report, tagged_event

pytestmark = pytest.mark.anyio

# --------------------------------------------------------------------------
# the audit hook: installed once (hooks cannot be removed), records only while armed
# --------------------------------------------------------------------------

_ARMED: dict[str, Any] = {"on": False, "allowed": (), "hits": None, "seen": 0}
_PATH_EVENTS = {
    "open": (0,),
    "os.listdir": (0,),
    "os.scandir": (0,),
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": (0, 1),
    "os.truncate": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.utime": (0,),
    "shutil.rmtree": (0,),
    "shutil.move": (0, 1),
    "shutil.copyfile": (0, 1),
    "sqlite3.connect": (0,),
}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _ARMED["on"]:
        return
    positions = _PATH_EVENTS.get(event)
    if positions is None:
        return
    for i in positions:
        if i >= len(args):
            continue
        value = args[i]
        if isinstance(value, int) or value is None:
            continue
        try:
            raw = os.fsdecode(value)
        except (TypeError, ValueError):
            continue
        if raw in (":memory:", ""):
            continue
        _ARMED["seen"] += 1
        try:
            real = os.path.realpath(raw)
        except (OSError, ValueError):
            real = raw
        if not any(real == a or real.startswith(a.rstrip(os.sep) + os.sep) for a in _ARMED["allowed"]):
            _ARMED["hits"].append(f"{event} {raw} -> {real}")


sys.addaudithook(_audit)


def _python_roots() -> tuple[str, ...]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, "/proc", "/dev"}
    roots |= set(site.getsitepackages()) | {site.getusersitepackages()}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        roots.add(sysconfig.get_paths()[key])
    roots.add(str(Path(aiden.__file__).resolve().parent))  # lazy imports of aiden's own modules
    return tuple(os.path.realpath(r) for r in roots if r)


@contextmanager
def audited(root: Path) -> Iterator[list[str]]:
    hits: list[str] = []
    _ARMED.update(on=True, allowed=(os.path.realpath(root), *_python_roots()), hits=hits, seen=0)
    try:
        yield hits
    finally:
        _ARMED.update(on=False, allowed=(), hits=None)


# --------------------------------------------------------------------------
# the hostile inputs
# --------------------------------------------------------------------------

CONFIG = Config(
    durability="none",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summary_max_chunks=3,
)


def hostile_ids(outside: Path) -> list[str]:
    return [
        "../x",
        "../../../../../../etc/passwd",
        "..",
        ".",
        "",
        " ",
        "/etc/passwd",
        str(outside / "evil"),
        "chunk/../../../x",
        "..\\..\\x",
        "C:\\Windows\\x",
        "a\x00b",
        "chunk_0000000001\x00.jsonl",
        "x" * 65,
        "x" * 5000,
        "chunk_0000000002_0000000010.jsonl",
        "chunk\n",
        "\uff43\uff48\uff55\uff4e\uff4b",  # fullwidth "chunk"
        "chunk%2F..%2Fx",
        "~root",
        "$HOME",
    ]


async def _session_with_chunks(root: Path, outside: Path) -> list[str]:
    """A session with two chunks, and (outside the root) a well-formed chunk file named "evil"."""
    import random

    rng = random.Random(5)
    ids = []
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        for k in range(2):
            for i in range(14):
                await memory.append(tagged_event(f"h{k}:{i}", i, rng))
            outcome = await memory.maintain(manual=True)
            assert outcome.compacted and outcome.chunk_id
            ids.append(outcome.chunk_id)
    layout = Layout(root)
    # A well-formed chunk file outside the root, named "evil", reachable through a symlink.
    chunk = cs.read_chunk(layout, ids[0])
    entry = cs.ChunkEntry(
        chunk_id="evil", first_seq=900, last_seq=901, count=0, sha256="", summary="secret outside the root"
    )
    data, _ = cs.encode_chunk(entry, chunk.events[:2])
    await anyio.Path(outside).mkdir(exist_ok=True)
    await anyio.Path(outside / "evil.jsonl").write_bytes(data)
    await anyio.Path(outside / "secret.txt").write_text("secret")
    return ids


def plant_symlinks(root: Path, outside: Path) -> None:
    """Symlinks in chunks/ with valid chunk-id names, leading out of the root."""
    layout = Layout(root)
    os.symlink(outside / "evil.jsonl", layout.chunks / "evil.jsonl")
    os.symlink(outside / "secret.txt", layout.chunks / "passwd.jsonl")


async def test_hostile_ids_in_recall_are_rejected_and_nothing_outside_is_opened(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    ids = await _session_with_chunks(root, outside)
    inputs = 0
    rejected = 0
    wrong: list[str] = []
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        # Warm the recall index once, outside the audited window (it opens its database).
        await memory.recall_session_chunks("module")
        # Planted while open: what the recall index meets (recovery meets them in the test below).
        plant_symlinks(root, outside)
        with audited(root) as hits:
            for bad in [*hostile_ids(outside), "evil", "passwd"]:
                for call in ("lookup", "rehydrate", "rehydrate-seqs", "tool-lookup", "tool-rehydrate"):
                    inputs += 1
                    try:
                        if call == "lookup":
                            result: Any = await memory.lookup_chunk(bad)
                        elif call == "rehydrate":
                            result = await memory.rehydrate(bad)
                        elif call == "rehydrate-seqs":
                            result = await memory.rehydrate(bad, [1, 2, 3])
                        else:
                            args: dict[str, Any] = {"query": "", "chunk_id": bad}
                            if call == "tool-rehydrate":
                                args["seqs"] = [1]
                            result = json.loads(await memory.handle_recall_tool(json.dumps(args)))
                            if "error" in result:
                                rejected += 1
                                continue
                    except aiden.InvalidIdError:
                        rejected += 1
                        continue
                    except aiden.AidenError as exc:
                        wrong.append(f"{call}({bad!r}) raised {type(exc).__name__}: {exc}")
                        continue
                    wrong.append(f"{call}({bad!r}) returned {str(result)[:120]}")
            # Legit ids still work (the hook saw their reads, all inside the root).
            assert (await memory.lookup_chunk(ids[0])) is not None
            assert len(await memory.rehydrate(ids[1])) > 0
            # The symlinked chunk is never served by a search either.
            hits_evil = await memory.recall_session_chunks("secret outside")
        outside_opens = list(hits)
        audited_paths = _ARMED["seen"]
    report(
        "hostile ids in recall",
        inputs_tried=inputs,
        rejected=rejected,
        accepted_or_wrong_error=len(wrong),
        audited_path_events=audited_paths,
        opens_outside_root=len(outside_opens),
    )
    assert audited_paths > 0, "the audit hook saw nothing: it is not armed"
    assert not wrong, wrong[:10]
    assert rejected == inputs
    assert all(h.chunk_id != "evil" for h in hits_evil)
    assert not outside_opens, outside_opens[:10]


async def test_hostile_recall_queries_never_crash(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    await _session_with_chunks(root, outside)
    queries = [
        '"', '""', "NEAR(a b", "a* OR", "-x", "chunk_id:evil", "a AND", "(((", ")))", "^", "*", "\x00",
        "'; DROP TABLE chunks; --", "x" * 100_000, "../../etc/passwd", "module" * 2000, "\u202e\u0000\uffff",
        "MATCH", "a:b:c", "{col1 col2}: x",
    ]
    outcomes = {"results": 0, "errors": 0}
    wrong: list[str] = []
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await memory.recall_session_chunks("module")
        plant_symlinks(root, outside)
        with audited(root) as hits:
            for q in queries:
                try:
                    await memory.recall_session_chunks(q)
                    outcomes["results"] += 1
                except aiden.RecallError:
                    outcomes["errors"] += 1
                except aiden.AidenError as exc:
                    wrong.append(f"{q[:30]!r}: {type(exc).__name__}: {exc}")
                doc = json.loads(await memory.handle_recall_tool({"query": q}))
                if "error" not in doc and "results" not in doc:
                    wrong.append(f"tool {q[:30]!r}: {str(doc)[:100]}")
            outside_opens = list(hits)
    report("hostile recall queries", inputs_tried=len(queries) * 2, **outcomes, wrong=len(wrong),
           opens_outside_root=len(outside_opens))
    assert not wrong, wrong
    assert not outside_opens, outside_opens[:10]


async def test_hostile_rotation_ids_are_rejected(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    await _session_with_chunks(root, outside)
    layout = Layout(root)
    layout.archive.mkdir(exist_ok=True)
    # An archive entry that is a symlink out of the root: its name must be refused, not followed.
    os.symlink(outside, layout.archive / "taken-by-symlink")
    inputs = rejected = 0
    wrong: list[str] = []
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        with audited(root) as hits:
            for bad in [*hostile_ids(outside), "taken-by-symlink"]:
                inputs += 1
                try:
                    await memory.rotate(bad)
                except (aiden.InvalidIdError, aiden.StorageError):
                    rejected += 1
                except Exception as exc:
                    wrong.append(f"rotate({bad!r}) raised {type(exc).__name__}: {exc}")
                else:
                    wrong.append(f"rotate({bad!r}) was accepted")
            outside_opens = list(hits)
        hot = await memory.hot_window()
    report("hostile rotation ids", inputs_tried=inputs, rejected=rejected, wrong=len(wrong),
           opens_outside_root=len(outside_opens))
    assert not wrong, wrong
    assert rejected == inputs
    assert not outside_opens, outside_opens[:10]
    assert sorted(os.listdir(outside)) == ["evil.jsonl", "secret.txt"]
    assert len(hot) > 0  # the active session was not rotated away


async def test_symlink_out_of_root_in_chunks_does_not_break_open(tmp_path: Path) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): a symlink in chunks/ with a valid
    chunk-id name leading out of the root makes recovery on open raise InvalidIdError
    (SessionStore._recover step 3 calls read_chunk on orphan chunk files and only catches
    CorruptionError): anyone able to plant a symlink makes the memory impossible to open
    """
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    await _session_with_chunks(root, outside)
    plant_symlinks(root, outside)
    with audited(root) as hits:
        async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
            report_ = memory.recovery
        outside_opens = list(hits)
    report("symlinks out of the root at open", unrecoverable=len(report_.unrecoverable),
           opens_outside_root=len(outside_opens))
    assert not outside_opens
    assert any("evil" in p for p in report_.unrecoverable)


async def test_rotation_through_a_symlinked_archive_dir_stays_inside_the_root(tmp_path: Path) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): SessionStore.rotate follows a
    memory/session_archive symlink: the session directory is renamed to a path outside the memory root
    (the target is only checked with lexists, never with Layout.contains)
    """
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    await _session_with_chunks(root, outside)
    layout = Layout(root)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, layout.archive)
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        with audited(root) as hits:
            try:
                await memory.rotate("legit-id")
            except (aiden.InvalidIdError, aiden.StorageError):
                pass
            outside_touched = list(hits)
    report("rotation through a symlinked session_archive", outside_touched=len(outside_touched),
           moved_outside=sorted(os.listdir(elsewhere)))
    assert os.listdir(elsewhere) == [], "the session was moved out of the memory root"
    assert not outside_touched, outside_touched[:5]


@pytest.mark.parametrize("call", ["lookup-int", "lookup-none", "rehydrate-str-seqs", "search-int", "search-surrogate"])
async def test_wrong_typed_recall_arguments_are_rejected(tmp_path: Path, call: str) -> None:
    """Regression test (bug found by this suite, fixed in 1179c60): arguments of Memory.lookup_chunk /
    rehydrate / recall_session_chunks are sent to the recall actor unchecked: a wrong type (int/None
    chunk id, str seqs, int query) makes the actor's inbox decode raise msgspec.ValidationError, the
    actor dies and the whole open_memory block fails; a query with a lone surrogate raises a raw
    UnicodeEncodeError from the mailbox encoder (instead of RecallError)
    """
    root = tmp_path / "root"
    root.mkdir()
    outcome = "accepted"
    try:
        async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
            try:
                if call == "lookup-int":
                    await memory.lookup_chunk(123)  # type: ignore[arg-type]
                elif call == "lookup-none":
                    await memory.lookup_chunk(None)  # type: ignore[arg-type]
                elif call == "rehydrate-str-seqs":
                    await memory.rehydrate("chunk_x", ["1"])  # type: ignore[list-item]
                elif call == "search-int":
                    await memory.recall_session_chunks(5)  # type: ignore[arg-type]
                else:
                    await memory.recall_session_chunks("lone \ud800 surrogate")
            except (aiden.InvalidIdError, aiden.RecallError):
                outcome = "rejected"
            except Exception as exc:
                outcome = f"raised {type(exc).__name__}"
            # The memory must still work afterwards.
            await memory.append(tagged_event("alive:0", 0, __import__("random").Random(0)))
    except Exception as exc:
        outcome = f"runtime died: {type(exc).__name__}"
    report(f"wrong-typed recall argument ({call})", outcome=outcome)
    assert outcome == "rejected"


# --------------------------------------------------------------------------
# hostile events: at / over the size limit, text that cannot be stored
# --------------------------------------------------------------------------


async def test_hostile_events_round_trip_or_are_rejected_before_any_byte(tmp_path: Path) -> None:
    from aiden import SessionEvent
    from aiden.events import encode_event
    from aiden.storage.jsonl import read_bytes

    limit = 4096
    config = Config(durability="fsync", max_event_bytes=limit, count_compress_after_events=10**6)
    base = SessionEvent(type="tool_result", content="x", timestamp=1.0)
    overhead = len(encode_event(base)) - 1  # bytes of the line besides the content
    # Memory keeps 32 bytes of room for the seq the writer adds.
    at_limit = SessionEvent(type="tool_result", content="x" * (limit - 32 - overhead), timestamp=1.0)
    cases: dict[str, SessionEvent] = {
        "at-limit": at_limit,
        "one-over": SessionEvent(type="tool_result", content="x" * (limit - 32 - overhead + 1), timestamp=1.0),
        "far-over": SessionEvent(type="tool_result", content="y" * (50 * limit), timestamp=1.0),
        "surrogate-content": SessionEvent(type="user_input", content="a \udc80 b", timestamp=1.0),
        "surrogate-role": SessionEvent(type="user_input", role="\ud800", content="x", timestamp=1.0),
        "surrogate-tool-args": SessionEvent(type="tool_call", tool_args='{"a": "\udfff"}', timestamp=1.0),
        "surrogate-meta-key": SessionEvent(type="user_input", meta={"\ud800": 1}, timestamp=1.0),
        "surrogate-meta-value": SessionEvent(type="user_input", meta={"k": ["\udbff"]}, timestamp=1.0),
        "nul-and-controls": SessionEvent(type="user_input", content="a\x00b\x1b[31m\r\n\u2028c", timestamp=1.0),
        "unicode-max": SessionEvent(type="user_input", content="\U0010ffff\ufeff\u202e", timestamp=1.0),
        "object-meta": SessionEvent(type="user_input", meta={"k": object()}, timestamp=1.0),
    }
    stored_ok: list[str] = []
    rejected: list[str] = []
    wrong: list[str] = []
    layout = Layout(tmp_path)
    async with aiden.open_memory(tmp_path, config=config, summarizer=ScriptedSummarizer()) as memory:
        await memory.append(SessionEvent(type="user_input", content="first"))
        for name, event in cases.items():
            before = read_bytes(layout.events)
            try:
                stored = await memory.append(event)
            except aiden.InvalidEventError:
                rejected.append(name)
                if read_bytes(layout.events) != before:
                    wrong.append(f"{name}: bytes written before the rejection")
                continue
            except Exception as exc:
                wrong.append(f"{name}: {type(exc).__name__}: {exc}"[:200])
                continue
            back = await memory.read_event(stored.seq)
            if back != stored:
                wrong.append(f"{name}: stored {stored!r:.80} read back {back!r:.80}")
            stored_ok.append(name)
    async with aiden.open_memory(tmp_path, config=config, summarizer=ScriptedSummarizer()) as memory:
        recovery = memory.recovery
    report("hostile events", inputs_tried=len(cases), stored=len(stored_ok), rejected=len(rejected),
           wrong=len(wrong), recovery_changed=recovery.changed)
    assert not wrong, wrong
    assert "at-limit" in stored_ok and "unicode-max" in stored_ok and "nul-and-controls" in stored_ok
    assert {"one-over", "far-over", "surrogate-content", "surrogate-role", "surrogate-tool-args"} <= set(rejected)
    assert recovery.changed is False and not recovery.unrecoverable


@pytest.mark.parametrize(
    "meta", [{"k": float("nan")}, {"k": float("inf")}, {"k": {1, 2}}, {"k": b"\xff"}], ids=["nan", "inf", "set", "bytes"]
)
async def test_meta_that_json_cannot_carry_is_rejected(tmp_path: Path, meta: dict[str, Any]) -> None:
    from aiden import SessionEvent

    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        try:
            stored = await memory.append(SessionEvent(type="user_input", content="m", meta=meta, timestamp=1.0))
        except aiden.InvalidEventError:
            return
        back = await memory.read_event(stored.seq)
    report("meta JSON cannot carry", sent=repr(meta), stored=repr(back.meta if back else None))
    assert back == stored, f"acknowledged {stored.meta!r}, stored {back.meta if back else None!r}"
