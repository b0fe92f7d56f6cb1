"""Power-loss replay: rebuild what a disk could hold after power fails at op ``p`` of a recorded run.

The model (per the storage contract aiden is written against):

* **File data** written but not yet covered by an ``fsync`` of that file may be
  lost: the pending writes/truncates of each file survive as a prefix, and the
  first one that does not survive whole may be *torn* (a prefix of its bytes
  reached the disk) or *zero-filled* (the size grew but the data did not).
* **Directory entries** created, renamed, replaced or removed but not yet
  covered by an ``fsync`` of the directory holding them may be undone. Each
  directory keeps a prefix of its pending operations (its own order is kept;
  directories are independent). A rename between two directories is one
  atomic operation, kept when it is synced via either directory or kept by both.
* ``fsync`` of a file does not make its directory entry durable, ``fsync`` of a
  directory does not make its own entry in its parent durable.
* The state before recording started is durable (the *baseline*).

Ops come from :attr:`aiden.testing.RecordingStorage.ops`.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio

import aiden
from aiden import Config
from aiden.storage.layout import Layout
from aiden.testing import RecordingStorage, ScriptedSummarizer, SlowSummarizer, StorageOp
from tests.reliability.harness import Verdict, check_views, read_root, tagged_event

DIR = None  # baseline marker for a directory


def capture_baseline(root: Path) -> dict[str, bytes | None]:
    """Every directory (value None) and file (its bytes) under ``root``, by relative path."""
    out: dict[str, bytes | None] = {}
    base = Path(os.path.realpath(root))
    for dirpath, dirnames, filenames in os.walk(base):
        rel = os.path.relpath(dirpath, base)
        if rel != ".":
            out[rel] = DIR
        for name in filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                continue
            out[os.path.relpath(p, base)] = p.read_bytes()
        dirnames.sort()
    return out


@dataclass
class _Node:
    id: int
    is_dir: bool
    base: bytes = b""
    entries: dict[str, int] = field(default_factory=dict)  # current (dirs)
    data_ops: list[tuple[str, int, bytes]] = field(default_factory=list)  # ("w", off, data) | ("t", size, b"")
    synced: int = 0  # data_ops[:synced] are durable


@dataclass
class _Meta:
    idx: int
    kind: str  # set | move | del
    dirs: tuple[int, ...]
    args: tuple[object, ...]


@dataclass
class Timeline:
    """The simulated run up to a prefix: nodes, metadata ops, directory-sync points."""

    nodes: dict[int, _Node]
    meta: list[_Meta]
    dir_synced_at: dict[int, int]  # dir id -> index of its last fsync_dir in the prefix
    baseline_entries: dict[int, dict[str, int]]
    unknown_paths: int = 0


class Replayer:
    """Replays a recorded op log over a baseline and materializes power-loss states."""

    def __init__(self, root: Path, baseline: dict[str, bytes | None], ops: Sequence[StorageOp]) -> None:
        self.root = Path(os.path.realpath(root))
        self.baseline = baseline
        self.ops = list(ops)

    # --- simulation -------------------------------------------------------------------

    def timeline(self, p: int) -> Timeline:
        nodes: dict[int, _Node] = {}

        def new(is_dir: bool, base: bytes = b"") -> _Node:
            n = _Node(len(nodes), is_dir, base)
            nodes[n.id] = n
            return n

        root = new(True)
        for rel in sorted(self.baseline, key=lambda r: r.count(os.sep)):
            parts = rel.split(os.sep)
            parent = root
            for part in parts[:-1]:
                parent = nodes[parent.entries[part]]
            value = self.baseline[rel]
            node = new(value is DIR, b"" if value is None else value)
            parent.entries[parts[-1]] = node.id
        baseline_entries = {n.id: dict(n.entries) for n in nodes.values() if n.is_dir}

        tl = Timeline(nodes, [], {}, baseline_entries)

        def split(path: str) -> tuple[_Node, str] | None:
            try:
                rel = Path(path).relative_to(self.root)
            except ValueError:
                return None
            parts = rel.parts
            if not parts:
                return None
            cur = root
            for part in parts[:-1]:
                nid = cur.entries.get(part)
                if nid is None or not nodes[nid].is_dir:
                    return None
                cur = nodes[nid]
            return cur, parts[-1]

        def resolve(path: str) -> _Node | None:
            if Path(path) == self.root:
                return root
            sp = split(path)
            if sp is None:
                return None
            nid = sp[0].entries.get(sp[1])
            return nodes[nid] if nid is not None else None

        for i, op in enumerate(self.ops[:p]):
            kind = op.kind
            if kind in ("mkdir", "create"):
                sp = split(op.path)
                if sp is None:
                    tl.unknown_paths += 1
                    continue
                parent, name = sp
                if name in parent.entries:
                    continue  # O_CREAT on an existing file creates nothing
                child = new(kind == "mkdir")
                parent.entries[name] = child.id
                tl.meta.append(_Meta(i, "set", (parent.id,), (parent.id, name, child.id)))
            elif kind in ("write", "truncate"):
                node = resolve(op.path)
                if node is None or node.is_dir:
                    tl.unknown_paths += 1
                    continue
                if kind == "write":
                    node.data_ops.append(("w", op.offset, op.data))
                else:
                    node.data_ops.append(("t", op.offset, b""))
            elif kind == "fsync":
                node = resolve(op.path)
                if node is None:
                    tl.unknown_paths += 1
                    continue
                node.synced = len(node.data_ops)
            elif kind == "fsync_dir":
                node = resolve(op.path)
                if node is None or not node.is_dir:
                    tl.unknown_paths += 1
                    continue
                tl.dir_synced_at[node.id] = i
            elif kind in ("replace", "rename"):
                src, dst = split(op.path), split(op.target)
                if src is None or dst is None or src[1] not in src[0].entries:
                    tl.unknown_paths += 1
                    continue
                (sp_, sn), (dp, dn) = src, dst
                nid = sp_.entries.pop(sn)
                dp.entries[dn] = nid
                dirs = (sp_.id,) if sp_.id == dp.id else (sp_.id, dp.id)
                tl.meta.append(_Meta(i, "move", dirs, (sp_.id, sn, dp.id, dn, nid)))
            elif kind == "unlink":
                sp = split(op.path)
                if sp is None or sp[1] not in sp[0].entries:
                    tl.unknown_paths += 1
                    continue
                parent, name = sp
                nid = parent.entries.pop(name)
                tl.meta.append(_Meta(i, "del", (parent.id,), (parent.id, name, nid)))
            else:
                tl.unknown_paths += 1
        return tl

    # --- one power-loss state --------------------------------------------------------

    def materialize(self, p: int, dest: Path, mode: str, rng: random.Random) -> dict[str, int]:
        """Write the state after power loss at ``p`` into ``dest``; ``mode``: keep | drop | torn | random.

        ``keep`` keeps every pending operation (the same as a process crash at ``p``),
        ``drop`` keeps only what was synced, ``torn`` keeps the directory operations and tears the
        first pending write of every file (a prefix of its bytes, or zeros), ``random`` draws per
        directory/file.
        Returns counts of what was undone.
        """
        tl = self.timeline(p)
        stats = {"meta_pending": 0, "meta_undone": 0, "data_pending": 0, "data_undone": 0, "torn": 0}

        def synced(m: _Meta) -> bool:
            return any(tl.dir_synced_at.get(d, -1) > m.idx for d in m.dirs)

        pending: dict[int, list[int]] = {}
        for k, m in enumerate(tl.meta):
            if not synced(m):
                for d in m.dirs:
                    pending.setdefault(d, []).append(k)
        cut: dict[int, int] = {}
        for d, ks in pending.items():
            if mode in ("keep", "torn"):
                cut[d] = len(ks)
            elif mode == "drop":
                cut[d] = 0
            else:
                cut[d] = rng.choice([0, len(ks), rng.randint(0, len(ks))])
        position = {d: {k: j for j, k in enumerate(ks)} for d, ks in pending.items()}

        entries: dict[int, dict[str, int]] = {nid: dict(e) for nid, e in tl.baseline_entries.items()}
        for k, m in enumerate(tl.meta):
            keep = synced(m) or all(position[d][k] < cut[d] for d in m.dirs)
            if not synced(m):
                stats["meta_pending"] += 1
                if not keep:
                    stats["meta_undone"] += 1
            if not keep:
                continue
            if m.kind == "set":
                pd, name, child = m.args
                entries.setdefault(pd, {})[name] = child  # type: ignore[index]
            elif m.kind == "move":
                sp_, sn, dp, dn, nid = m.args
                if entries.setdefault(sp_, {}).get(sn) == nid:  # type: ignore[arg-type]
                    del entries[sp_][sn]  # type: ignore[index]
                entries.setdefault(dp, {})[dn] = nid  # type: ignore[index]
            else:
                pd, name, nid = m.args
                if entries.setdefault(pd, {}).get(name) == nid:  # type: ignore[arg-type]
                    del entries[pd][name]  # type: ignore[index]

        def content(node: _Node) -> bytes:
            buf = bytearray(node.base)
            extra = len(node.data_ops) - node.synced
            if extra:
                stats["data_pending"] += extra
            if mode == "keep":
                applied, tear = len(node.data_ops), None
            elif mode == "drop":
                applied, tear = node.synced, None
            elif mode == "torn":
                applied = node.synced
                tear = rng.choice(["partial", "zeros"]) if extra else None
            else:
                applied = node.synced + (rng.randint(0, extra) if extra else 0)
                tear = rng.choice([None, "partial", "zeros"]) if applied < len(node.data_ops) else None
            stats["data_undone"] += len(node.data_ops) - applied
            for kind, arg, data in node.data_ops[:applied]:
                _apply(buf, kind, arg, data)
            if tear is not None:
                kind, arg, data = node.data_ops[applied]
                if kind == "w" and data:
                    stats["torn"] += 1
                    piece = data[: rng.randint(0, len(data) - 1)] if tear == "partial" else b"\0" * len(data)
                    _apply(buf, "w", arg, piece)
            return bytes(buf)

        dest.mkdir(parents=True, exist_ok=True)
        seen: set[int] = set()

        def build(dir_id: int, path: Path) -> None:
            for name, nid in sorted(entries.get(dir_id, {}).items()):
                if nid in seen and tl.nodes[nid].is_dir:
                    continue
                seen.add(nid)
                node = tl.nodes[nid]
                target = path / name
                if node.is_dir:
                    target.mkdir(exist_ok=True)
                    build(nid, target)
                else:
                    target.write_bytes(content(node))

        build(0, dest)
        return stats


def _apply(buf: bytearray, kind: str, arg: int, data: bytes) -> None:
    if kind == "w":
        if arg > len(buf):
            buf.extend(b"\0" * (arg - len(buf)))
        buf[arg : arg + len(data)] = data
    else:
        if arg < len(buf):
            del buf[arg:]
        else:
            buf.extend(b"\0" * (arg - len(buf)))


def interesting_prefixes(ops: Sequence[StorageOp]) -> list[int]:
    """Prefix lengths right after a mutation whose durability is still pending (the dangerous moments)."""
    out = []
    for i, op in enumerate(ops):
        if op.kind in ("write", "truncate", "create", "mkdir", "replace", "rename", "unlink"):
            out.append(i + 1)
    return out


# --------------------------------------------------------------------------
# a recorded workload and the check of one power-loss state
# --------------------------------------------------------------------------


PL_CONFIG = Config(
    durability="fsync",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summary_max_chunks=3,
    summarizer_timeout_s=30,
)


@dataclass
class Recording:
    """A recorded run: baseline, op log, and when each acknowledgement / commit happened (op count)."""

    root: Path
    baseline: dict[str, bytes | None]
    ops: list[StorageOp]
    acks: dict[str, tuple[int, int]] = field(default_factory=dict)  # tag -> (seq, ops recorded at ack)
    attempted: set[str] = field(default_factory=set)
    commits: list[tuple[str, int]] = field(default_factory=list)  # chunk id -> ops recorded at return
    rotations: list[tuple[str, int]] = field(default_factory=list)


async def make_baseline(root: Path, rng: random.Random, rec: Recording) -> None:
    """A session that existed (and was flushed to disk) before recording: events, a chunk, one rotation."""
    async with aiden.open_memory(root, config=PL_CONFIG, summarizer=ScriptedSummarizer()) as m:
        for i in range(12):
            ev = await m.append(tagged_event(f"b:{i}", i, rng))
            rec.acks[f"b:{i}"] = (ev.seq, 0)
        await m.maintain(manual=True)
        await m.rotate("pl-0")
        for i in range(12, 16):
            ev = await m.append(tagged_event(f"b:{i}", i, rng))
            rec.acks[f"b:{i}"] = (ev.seq, 0)
    rec.attempted |= set(rec.acks)


async def record_workload(
    root: Path,
    storage: RecordingStorage,
    *,
    seed: int,
    baseline: bool = True,
    appends: int = 90,
    compactions: int = 4,
    rotate: bool = True,
) -> Recording:
    """Appends (one task) concurrent with manual compactions, then a rotation; every op recorded."""
    rng = random.Random(f"powerloss/{seed}")
    rec = Recording(root, {}, [])
    if baseline:
        await make_baseline(root, rng, rec)
    rec.baseline = capture_baseline(root)
    async with aiden.open_memory(
        root, config=PL_CONFIG, storage=storage, summarizer=SlowSummarizer(0.004)
    ) as m:
        done = anyio.Event()
        # Compaction k starts once (k + 1) / (compactions + 1) of the appends were acknowledged.
        reached = {(k + 1) * appends // (compactions + 1): anyio.Event() for k in range(compactions)}

        async def appender() -> None:
            for i in range(appends):
                tag = f"w:{i}"
                rec.attempted.add(tag)
                ev = await m.append(tagged_event(tag, i, rng))
                rec.acks[tag] = (ev.seq, len(storage.ops))
                if i + 1 in reached:
                    reached[i + 1].set()
                if rng.random() < 0.3:
                    await anyio.sleep(rng.random() * 0.003)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(appender)
            for threshold in sorted(reached):
                await reached[threshold].wait()
                outcome = await m.maintain(manual=True)
                if outcome.compacted and outcome.chunk_id:
                    rec.commits.append((outcome.chunk_id, len(storage.ops)))
            await done.wait()
        if rotate:
            await m.rotate("pl-1")
            rec.rotations.append(("pl-1", len(storage.ops)))
            for i in range(4):
                tag = f"r:{i}"
                rec.attempted.add(tag)
                ev = await m.append(tagged_event(tag, i, rng))
                rec.acks[tag] = (ev.seq, len(storage.ops))
    rec.ops = storage.ops
    return rec


async def check_state(state: Path, rec: Recording, p: int, *, second_open: bool) -> tuple[Verdict, list[str]]:
    """Open (recover) a power-loss state and check it; returns the verdict and the recovery's unrecoverable list."""
    verdict = Verdict()
    unrecoverable: list[str] = []
    try:
        async with aiden.open_memory(state, config=PL_CONFIG, summarizer=ScriptedSummarizer()) as m:
            unrecoverable = list(m.recovery.unrecoverable)
    except Exception as exc:  # the state must open, whatever it holds
        verdict.bad_states.append(f"open failed at p={p}: {type(exc).__name__}: {exc}")
        return verdict, unrecoverable
    acked = {t: seq for t, (seq, idx) in rec.acks.items() if idx <= p}
    views = read_root(state)
    verdict = check_views(views, acked, rec.attempted)
    ids = set().union(*(v.chunk_ids for v in views))
    for chunk_id, idx in rec.commits:
        if idx <= p and chunk_id not in ids:
            verdict.lost.append(f"committed chunk {chunk_id} (p={p})")
    for name, idx in rec.rotations:
        if idx <= p and not (Layout(state).archive / name).is_dir():
            verdict.lost.append(f"rotation {name} (p={p})")
    for problem in unrecoverable:
        verdict.bad_states.append(f"unrecoverable at p={p}: {problem}")
    if second_open:
        async with aiden.open_memory(state, config=PL_CONFIG, summarizer=ScriptedSummarizer()) as m:
            if m.recovery.changed:
                verdict.bad_states.append(f"second recovery changed something at p={p}: {m.recovery}")
    return verdict, unrecoverable


@dataclass
class ReplayResult:
    verdict: Verdict
    states: int = 0
    prefixes: int = 0
    ops: int = 0
    meta_undone: int = 0
    data_undone: int = 0
    torn: int = 0
    failing: list[str] = field(default_factory=list)


async def replay(
    rec: Recording,
    workdir: Path,
    prefixes: Sequence[int],
    modes: Sequence[str],
    *,
    seed: int,
    second_open_every: int = 3,
    stop_at_first_failure: bool = False,
) -> ReplayResult:
    """Materialize and check a power-loss state for every (prefix, mode)."""
    rng = random.Random(f"replay/{seed}")
    replayer = Replayer(rec.root, rec.baseline, rec.ops)
    result = ReplayResult(Verdict(), ops=len(rec.ops))
    result.prefixes = len(prefixes)
    n = 0
    for p in prefixes:
        for mode in modes:
            state = workdir / f"state{n}"
            stats = replayer.materialize(p, state, mode, rng)
            result.meta_undone += stats["meta_undone"]
            result.data_undone += stats["data_undone"]
            result.torn += stats["torn"]
            verdict, _ = await check_state(state, rec, p, second_open=(n % second_open_every == 0))
            result.states += 1
            result.verdict.merge(verdict, f"p={p}/{mode}")
            if not verdict.ok:
                result.failing.append(f"p={p} ({rec.ops[p - 1].kind} {rec.ops[p - 1].path}) mode={mode}: "
                                      f"{verdict.explain(3)}")
            shutil.rmtree(state, ignore_errors=True)
            n += 1
            if stop_at_first_failure and result.failing:
                return result
    return result
