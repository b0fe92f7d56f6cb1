"""Corrupt long-term files: every file under ``long_term/`` (``.git`` included) and the running summary.

A base root holds three saved memories, history records, session summaries, Dream's files and
git history. Each case damages one file one way (delete, empty, truncate, bit flips, garbage,
zeros, invalid UTF-8, a directory in its place), then opens the memory twice and uses it: appends,
a save, a compaction (a history record), a checkpoint, Dream and its log, a prompt.

Invariants: every open succeeds and nothing outside aiden's error tree is raised; an aiden error
comes only from Dream or its log, and only over a damaged ``.git`` (a CorruptionError); a save
after the damage succeeds and is shown; every memory saved before stays shown unless its own file
was the one damaged; each compaction after the damage records its history entry. The CI run damages each file one way (rotating through the kinds), the full run
(``AIDEN_RELIABILITY_FULL=1``) every way.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.storage.chunks import load_index
from aiden.storage.layout import Layout
from tests.reliability.corruption import mutate_file
from tests.reliability.harness import report

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

CONFIG = Config(
    durability="none",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summarizer_timeout_s=5,
)
KINDS = ["delete", "bitflip", "truncate", "garbage", "directory", "zeros", "invalid-utf8", "empty"]
PRIOR = [f"pref{r}" for r in range(3)]
# Dream and its log read long_term/.git: a damaged repository is their (reported) failure.
MAY_FAIL = {"dream", "dream_log"}


async def _build(root: Path) -> None:
    async with aiden.open_memory(root, config=CONFIG) as memory:
        for r, title in enumerate(PRIOR):
            for i in range(12):
                text = f"round {r} note {i}: the staging database port is {5400 + i}; we decided to use yarn"
                await memory.append(SessionEvent(type="user_input", role="user", content=text))
            await memory.maintain(manual=True)
            call = {"type": "preference", "title": title, "content": f"likes tabs {r}"}
            assert "saved" in json.loads(await memory.handle_tool_call("save_memory", call))
            await memory.checkpoint()
            await memory.dream()
    async with aiden.open_memory(root, config=CONFIG):
        pass  # profile.md is written at open


def _targets(root: Path) -> list[str]:
    """Every long-term file of the base root (git: refs, HEAD, config, packs), relative to memory/."""
    memory = root / "memory"
    found = []
    for path in sorted((memory / "long_term").rglob("*")):
        rel = path.relative_to(memory).as_posix()
        if not path.is_file() or any(part in rel for part in ("/hooks/", "/info/", "/description")):
            continue
        found.append(rel)
    return [*found, "session/running_summary.md"]


def _recorded_chunks(root: Path) -> list[str]:
    """The chunk ids of the readable history records, in file order."""
    path = root / "memory" / "long_term" / "history.jsonl"
    if not path.is_file():
        return []
    found = []
    for line in path.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("chunk_id"):
            found.append(record["chunk_id"])
    return found


def _chunks(root: Path) -> set[str]:
    index = load_index(Layout(root))
    assert index is not None
    return {c.chunk_id for c in index.chunks}


def _damage(path: Path, kind: str, rng: random.Random) -> None:
    if kind == "directory":
        path.unlink()
        path.mkdir()
        (path / "stray").write_text("not ours")
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        mutate_file(path, rng, kind)


@dataclass
class Case:
    target: str
    kind: str
    foreign: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    saved_after: bool = False
    prior_shown: int = 0
    compactions_recorded: int = 0
    recorded_twice: list[str] = field(default_factory=list)
    reported: list[str] = field(default_factory=list)


async def _use(root: Path, case: Case, tag: str) -> str:
    """One open with long-term work; returns the prompt's long-term layer."""

    async def step(name: str, call: object) -> object:
        try:
            return await call  # type: ignore[misc]
        except aiden.AidenError as exc:
            case.refused.append(f"{name}: {type(exc).__name__}")
        except Exception as exc:  # the finding: anything outside the tree
            case.foreign.append(f"{name}: {type(exc).__name__}: {exc}")
        return None

    try:
        async with aiden.open_memory(root, config=CONFIG) as memory:
            case.reported.extend(memory.recovery.unrecoverable)
            first = SessionEvent(type="user_input", content=f"{tag} after damage")
            await step("append", memory.append(first))
            call = {"type": "preference", "title": f"after-{tag}", "content": "likes spaces"}
            answer = await step("save", memory.handle_tool_call("save_memory", call))
            if isinstance(answer, str) and "saved" not in json.loads(answer):
                case.refused.append(f"save: {answer}")
            for i in range(12):
                more = SessionEvent(
                    type="user_input", role="user", content=f"{tag} more {i}: port {6000 + i}"
                )
                await step("append", memory.append(more))
            await step("maintain", memory.maintain(manual=True))
            await step("checkpoint", memory.checkpoint())
            await step("dream", memory.dream())
            await step("dream_log", memory.dream_log())
            await step("build_messages", memory.build_messages())
            return memory.long_term_layer
    except Exception as exc:
        case.foreign.append(f"open/close: {type(exc).__name__}: {exc}")
        return ""


async def test_every_long_term_file_damaged_every_way(tmp_path: Path, full_run: bool) -> None:
    base = tmp_path / "base"
    base.mkdir()
    await _build(base)
    rng = random.Random(18)
    base_chunks = _chunks(base)
    cases: list[Case] = []
    for i, target in enumerate(_targets(base)):
        for kind in KINDS if full_run else [KINDS[i % len(KINDS)]]:
            root = tmp_path / f"case{len(cases)}"
            shutil.copytree(base, root, symlinks=True)
            _damage(root / "memory" / target, kind, rng)
            case = Case(target, kind)
            await _use(root, case, "a")
            await _use(root, case, "b")
            async with aiden.open_memory(root, config=CONFIG) as memory:
                layer = memory.long_term_layer  # the profile is rebuilt at open
            case.saved_after = "**after-a**" in layer and "**after-b**" in layer
            case.prior_shown = sum(f"**{title}**" in layer for title in PRIOR)
            recorded = _recorded_chunks(root)
            case.compactions_recorded = len((_chunks(root) - base_chunks) & set(recorded))
            case.recorded_twice = sorted({c for c in recorded if recorded.count(c) > 1})
            cases.append(case)
    own_file_damaged = [c for c in cases if c.target.startswith("long_term/memories/")]
    report(
        "corrupt long-term files" + (" (full)" if full_run else ""),
        cases=len(cases),
        files=len({c.target for c in cases}),
        foreign_errors=sum(bool(c.foreign) for c in cases),
        refused_outside_dream=sum(any(r.split(":")[0] not in MAY_FAIL for r in c.refused) for c in cases),
        dream_refused=sum(any(r.split(":")[0] in MAY_FAIL for r in c.refused) for c in cases),
        saves_after_damage_lost=sum(not c.saved_after for c in cases),
        memories_lost_beyond_the_damaged_one=sum(
            c.prior_shown < len(PRIOR) - (c in own_file_damaged) for c in cases
        ),
        compactions_not_recorded=sum(2 - c.compactions_recorded for c in cases),
        chunks_recorded_twice=sum(len(c.recorded_twice) for c in cases),
        reported_at_open=sum(bool(c.reported) for c in cases),
    )
    for c in cases:
        where = f"{c.target} {c.kind}"
        assert c.foreign == [], where
        assert [r for r in c.refused if r.split(":")[0] not in MAY_FAIL] == [], (where, c.refused)
        if "/.git/" not in c.target:
            assert c.refused == [], (where, c.refused)  # Dream works over any other damage
        # Each open compacted once: both chunks are in the history, whatever was damaged; a chunk
        # whose record the damage took is recorded again at open, never twice.
        assert c.compactions_recorded == 2, (where, c.compactions_recorded)
        assert c.recorded_twice == [], (where, c.recorded_twice)
        assert c.saved_after, where
        assert c.prior_shown >= len(PRIOR) - (c in own_file_damaged), (where, c.prior_shown)
    assert {c.target.split("/")[1] for c in cases} >= {".git", "index.yaml", "history.jsonl", "memories"}
