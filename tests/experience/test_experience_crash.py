"""Experience memory under SIGKILL (#21): no committed episode lost, no record duplicated, learning idempotent.

Children (:mod:`tests.experience.experience_child`) run episodes and learning
passes on one root and are killed at random instants. Afterwards every episode
a child reported committed is in the index, the index and the record files
hold no duplicate, and the records equal what learning the same committed
episodes from scratch, in a fresh root, gives: a pass repeated after a crash
changed nothing.

The children are forked by a fork server (``experience_child.py serve``, one per
module) that imported aiden once: each is a process of its own, running the same
code as one started with ``sys.executable`` (``AIDEN_RELIABILITY_NOFORK=1``: so
started), and SIGKILLed by its pid.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

import aiden
from aiden.config import Config
from aiden.experience.episodestore import EpisodeStore
from aiden.experience.recordstore import RecordStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from tests.recall.recall_helpers import NoSyncStorage
from tests.reliability.harness import Child, ForkServer, full_mode, report, serving, spawn_child

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

CHILD = Path(__file__).resolve().with_name("experience_child.py")
QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)


CRASH_POINTS = (
    "experience.commit.before_file",
    "experience.commit.after_file",
    "experience.commit.after_index",
    "experience.records.after_files",
    "experience.records.after_index",
)


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer | None]:
    """One ``experience_child.py serve`` process forking every child (``AIDEN_RELIABILITY_NOFORK=1``: none)."""
    with serving(CHILD) as fork_server:
        yield fork_server


def spawn(server: ForkServer | None, root: Path, seed: int, workdir: Path, point: str | None = None) -> Child:
    argv = [str(root), str(seed), "1000", *([point] if point else [])]
    return spawn_child(server, argv, workdir, f"c{seed}", script=CHILD)


def printed(child: Child) -> str:
    """What the child printed so far (a forked child creates its output file after the fork)."""
    try:
        return child.out.read_text()
    except FileNotFoundError:
        return ""


def reported(workdir: Path, what: str) -> list[str]:
    """The episode ids the children printed as ``what`` (``begun`` or ``committed``)."""
    ids: list[str] = []
    for path in sorted(workdir.glob("c*.out")):
        ids += [line.split()[1] for line in path.read_text().splitlines() if line.startswith(f"{what} ")]
    return ids


def record_state(root: Path) -> list[tuple[str, str, str, list[tuple[str, tuple[int, ...]]]]]:
    records = RecordStore(Layout(root), Storage()).records()
    return sorted((r.id, r.kind, r.status, [(e.episode_id, e.seqs) for e in r.evidence]) for r in records)


async def learn_all(root: Path, storage: Storage | None = None) -> None:
    async with aiden.open_memory(root, config=QUIET, storage=storage) as memory:
        while (await memory.learn_experience(limit=64)).pending:
            pass


async def test_kill_storm_loses_no_committed_episode_and_duplicates_no_record(
    tmp_path: Path, server: ForkServer | None
) -> None:
    rounds = 30 if full_mode() else 8
    root, work = tmp_path / "root", tmp_path / "work"
    work.mkdir()
    rng = random.Random(2112)
    kills = 0
    for seed in range(rounds):
        child = spawn(server, root, seed, work)
        # Killed once it runs (its first episode committed: 0.06-0.1 s after a fork, 0.5-1 s after an
        # interpreter start, more on a loaded machine), at a random instant of the next second: a
        # child commits some 40 episodes and learns every few of them a second, so kills land in
        # episodes and in learning passes.
        with anyio.fail_after(120):
            while "committed " not in printed(child) and child.returncode() is None:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        await anyio.sleep(rng.uniform(0.0, 1.0))
        kills += child.returncode() is None
        child.kill()
    await check_root(tmp_path, root, work, title="experience kill storm", rounds=rounds, kills=kills)


@pytest.mark.parametrize("point", CRASH_POINTS)
async def test_a_crash_at_each_commit_point_loses_nothing(
    tmp_path: Path, point: str, server: ForkServer | None
) -> None:
    root, work = tmp_path / "root", tmp_path / "work"
    work.mkdir()
    child = spawn(server, root, 7, work, point)
    assert child.wait(120) == 137, child.stderr()[-2000:]
    child = spawn(server, root, 8, work)  # a second run on the crashed root: recovery is the next commit or pass
    # Killed once it has committed episodes and finished a learning pass after them.
    with anyio.fail_after(120):
        while "learned " not in printed(child) and child.returncode() is None:  # noqa: ASYNC110
            await anyio.sleep(0.05)
    child.kill()
    await check_root(tmp_path, root, work, title=f"experience crash at {point}", rounds=2, kills=2)


async def check_root(tmp_path: Path, root: Path, work: Path, *, title: str, rounds: int, kills: int) -> None:
    acked = reported(work, "committed")
    await learn_all(root)
    episodes = EpisodeStore(Layout(root), Storage())
    rows = episodes.rows()
    stored = [r.id for r in rows]
    lost = sorted(set(acked) - set(stored))
    assert lost == [], f"{len(lost)} committed episodes lost"
    assert len(stored) == len(set(stored))
    # Beyond what the children reported committed, only an episode a child had begun (the one in
    # flight when it was killed): a recovery that committed an episode again under a new id fails this.
    unreported = set(stored) - set(acked)
    assert unreported <= set(reported(work, "begun")), f"stored, never begun: {sorted(unreported)}"
    assert episodes.pending() == [] and episodes.problems == []

    # Learning the very same committed episodes from scratch gives the very same records. The
    # fresh root is the reference, never crashed: its writes skip fsync (nothing durable to prove).
    fresh = tmp_path / "fresh"
    clean = EpisodeStore(Layout(fresh), NoSyncStorage())
    for row in rows:
        episode = episodes.load(row)
        assert episode is not None
        assert clean.commit(episode, now=row.committed_at)
    await learn_all(fresh, NoSyncStorage())
    state = record_state(root)
    assert state == record_state(fresh)
    ids = [r.id for r in RecordStore(Layout(root), Storage()).rows()]
    assert len(ids) == len(set(ids))
    files = sorted(p.stem for p in (Layout(root).memory / "experience").glob("*/*.md"))
    assert files == sorted(ids)
    report(
        title,
        rounds=rounds,
        kills=kills,
        acked=len(acked),
        stored=len(stored),
        lost=len(lost),
        unreported=len(unreported),
        records=len(state),
        statuses=sorted({s for _, _, s, _ in state}),
    )
    assert len(acked) >= rounds  # the children did commit episodes between kills
