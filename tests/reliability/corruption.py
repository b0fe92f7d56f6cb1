"""Seeded mutations of a session's files and the judgement of what recovery made of them."""

from __future__ import annotations

import random
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

import aiden
from aiden import Config, SessionEvent
from aiden.storage.layout import Layout
from aiden.testing import ScriptedSummarizer
from tests.reliability.harness import read_root, tag_of, tagged_event

# summary_max_chunks=1 keeps 2 live entries: the 35th chunk seals a segment of 32.
CORRUPT_CONFIG = Config(
    durability="none",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summary_max_chunks=1,
)


async def build_base(root: Path, *, compactions: int = 37, seed: int = 0) -> dict[int, str]:
    """A session with a sealed segment, live chunks and a hot window; returns seq -> tag of every event."""
    rng = random.Random(f"corrupt-base/{seed}")
    n = 0
    async with aiden.open_memory(root, config=CORRUPT_CONFIG, summarizer=ScriptedSummarizer()) as memory:
        for _ in range(compactions):
            await memory.append_many([tagged_event(f"e:{n + i}", n + i, rng) for i in range(4)])
            n += 4
            await memory.maintain(manual=True)
        await memory.append_many([tagged_event(f"e:{n + i}", n + i, rng) for i in range(7)])
    view = read_root(root)[-1]
    assert not view.problems
    return {e.seq: tag_of(e) for e in view.events}


# --------------------------------------------------------------------------
# mutations: each returns a description and the seqs it may legitimately cost
# --------------------------------------------------------------------------

Mutation = Callable[[Path, random.Random, Path], tuple[str, set[int] | None]]
"""(session root, rng, marker path) -> (description, seqs whose loss is acceptable; None = any)."""


def _flip_bits(data: bytes, rng: random.Random, k: int, allowed: Callable[[int], bool] | None = None) -> bytes:
    buf = bytearray(data)
    positions = [i for i in range(len(buf)) if allowed is None or allowed(i)]
    for pos in rng.sample(positions, min(k, len(positions))):
        buf[pos] ^= 1 << rng.randrange(8)
    return bytes(buf)


def _garbage(rng: random.Random, n: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(n))


INVALID_UTF8 = (b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x28\x8c\x28", b"\x80")


def yaml_payloads(marker: Path) -> dict[str, bytes]:
    cmd = f"touch {marker}"
    laughs = ["a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]"]
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        laughs.append(f"{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]")
    return {
        "python-object-apply": f'!!python/object/apply:os.system ["{cmd}"]\n'.encode(),
        "python-object-new": f'chunks: !!python/object/new:os.system ["{cmd}"]\n'.encode(),
        "python-name": b"chunks: !!python/name:os.system\n",
        "python-module": b"x: !!python/module:os\n",
        "billion-laughs": ("\n".join(laughs) + "\nchunks: *i\n").encode(),
        "deep-nesting": b"chunks: " + b"[" * 20000 + b"]" * 20000 + b"\n",
        "wrong-types": b"version: 1\nchunks: 'not a list'\nsegments: 7\n",
        "huge-int": b"version: 1\nrolled_count: 99999999999999999999999999999999999\nchunks: []\n",
        "empty": b"",
        "nul-bytes": b"version: 1\x00\x00\nchunks: []\n",
    }


def _seq_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte spans of ``"seq":<digits>`` (key and value)."""
    return [m.span(0) for m in re.finditer(rb'"seq":\d+', data)]


def mutate_events_line(session: Path, rng: random.Random, marker: Path, kind: str) -> tuple[str, set[int] | None]:
    """Damage one middle line of events.jsonl.

    Bit flips and inserted bytes never touch the ``"seq":N`` field: damaged seqs have their own
    targeted tests in test_corrupt_files.py.
    """
    path = session / "events.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    i = rng.randrange(1, len(lines) - 1)
    line = lines[i]
    seq = int(re.search(rb'"seq":(\d+)', line).group(1))  # type: ignore[union-attr]
    spans = _seq_spans(line)

    def outside(p: int) -> bool:
        return not any(a <= p < b for a, b in spans)

    if kind == "bitflip":
        new = _flip_bits(line[:-1], rng, rng.randint(1, 3), outside) + b"\n"
    elif kind == "invalid-utf8":
        cut = rng.choice([p for p in range(1, len(line) - 1) if outside(p) and outside(p - 1)])
        new = line[:cut] + rng.choice(INVALID_UTF8) + line[cut:]
    elif kind == "garbage":
        new = _garbage(rng, rng.randint(1, 80)).replace(b"\n", b" ") + b"\n"
    elif kind == "nul":
        new = b"\x00" * len(line[:-1]) + b"\n"
    elif kind == "merged":  # a lost newline glues two lines
        new = line[:-1]
    else:
        raise ValueError(kind)
    lines[i] = new
    path.write_bytes(b"".join(lines))
    affected = {seq}
    if kind == "merged":
        nxt = re.search(rb'"seq":(\d+)', lines[i + 1])
        if nxt:
            affected.add(int(nxt.group(1)))
    return f"events.jsonl line {i} {kind}", affected


def mutate_file(path: Path, rng: random.Random, kind: str) -> str:
    data = path.read_bytes()
    if kind == "bitflip":
        path.write_bytes(_flip_bits(data, rng, rng.randint(1, 4)))
    elif kind == "truncate":
        path.write_bytes(data[: rng.randrange(0, max(1, len(data)))])
    elif kind == "garbage":
        path.write_bytes(_garbage(rng, rng.randint(1, 400)))
    elif kind == "invalid-utf8":
        cut = rng.randrange(0, max(1, len(data)))
        path.write_bytes(data[:cut] + rng.choice(INVALID_UTF8) + data[cut:])
    elif kind == "delete":
        path.unlink()
    elif kind == "zeros":
        start = rng.randrange(0, max(1, len(data)))
        n = rng.randint(1, 64)
        path.write_bytes(data[:start] + b"\x00" * n + data[start + n :])
    else:
        raise ValueError(kind)
    return f"{path.name} {kind}"


# --------------------------------------------------------------------------
# judging one mutated copy
# --------------------------------------------------------------------------


@dataclass
class Outcome:
    description: str
    crashed: str = ""
    code_executed: bool = False
    lost: set[int] = field(default_factory=set)
    unexpected_loss: set[int] = field(default_factory=set)
    duplicated: int = 0
    reported: list[str] = field(default_factory=list)
    second_changed: bool = False
    append_ok: bool = True
    seconds: float = 0.0

    @property
    def silent(self) -> bool:
        return bool(self.lost) and not self.reported


async def judge(root: Path, base: dict[int, str], marker: Path, description: str, acceptable: set[int] | None) -> Outcome:
    out = Outcome(description)
    t0 = anyio.current_time()
    try:
        with anyio.fail_after(60):
            async with aiden.open_memory(root, config=CORRUPT_CONFIG, summarizer=ScriptedSummarizer()) as memory:
                out.reported = list(memory.recovery.unrecoverable)
                try:
                    await memory.append(SessionEvent(type="user_input", content="z:0 after corruption"))
                except aiden.AidenError:
                    out.append_ok = False
    except Exception as exc:  # opening must never crash
        out.crashed = f"{type(exc).__name__}: {exc}"[:300]
        return out
    finally:
        out.seconds = anyio.current_time() - t0
    out.code_executed = await anyio.Path(marker).exists()
    view = read_root(root)[-1]
    stored: dict[int, str] = {}
    seqs = []
    for e in view.events:
        seqs.append(e.seq)
        stored.setdefault(e.seq, tag_of(e))
    out.duplicated = len(seqs) - len(set(seqs))
    out.lost = {s for s in base if s not in stored}
    out.unexpected_loss = set() if acceptable is None else out.lost - acceptable
    try:
        async with aiden.open_memory(root, config=CORRUPT_CONFIG, summarizer=ScriptedSummarizer()) as memory:
            out.second_changed = memory.recovery.changed
    except Exception as exc:
        out.crashed = f"second open: {type(exc).__name__}: {exc}"[:300]
    return out


def fresh_copy(base_root: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(base_root, dest, symlinks=True)
    # Locks and the derived recall index are not part of what is being corrupted.
    for name in ("recall.sqlite3", "recall.sqlite3-wal", "recall.sqlite3-shm"):
        p = Layout(dest).session / name
        if p.exists():
            p.unlink()
    return dest


def chunk_files(root: Path) -> list[Path]:
    return sorted(p for p in Layout(root).chunks.glob("chunk_*.jsonl"))


def segment_files(root: Path) -> list[Path]:
    return sorted(Layout(root).chunks.glob("segment-*.jsonl"))


def chunk_seqs(path: Path) -> set[int]:
    return {int(m.group(1)) for m in re.finditer(rb'"seq":(\d+)', path.read_bytes())}


__all__ = [
    "CORRUPT_CONFIG",
    "Outcome",
    "build_base",
    "chunk_files",
    "chunk_seqs",
    "fresh_copy",
    "judge",
    "mutate_events_line",
    "mutate_file",
    "segment_files",
    "yaml_payloads",
]
