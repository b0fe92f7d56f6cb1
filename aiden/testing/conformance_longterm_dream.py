"""The long-term conformance checks of session summaries and Dream (listed in :mod:`~aiden.testing.conformance_longterm`).

Summaries are extracted by the embedded extractive summarizer (the kits'
default), so every expected item below is exact. No pytest here.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path

import anyio

from aiden.config import Config
from aiden.errors import VersionNotFoundError
from aiden.longterm.backend import LongTermBackend
from aiden.longterm.dream import DreamOutcome
from aiden.longterm.project import render_project_memory
from aiden.longterm.writer import CapResult
from aiden.policy.tokens import estimate_tokens
from aiden.testing.ltkit import NOW, LongTermKit, raises, said

__all__ = [
    "check_cap_keeps_the_newest_summaries_and_digests_the_rest",
    "check_the_block_merges_the_digest_and_every_kept_summary",
    "check_summaries_order_by_write_and_the_cap_merges_every_one",
    "check_dream_records_versions_and_restores_them",
    "check_dream_runs_once_across_workers",
    "check_running_summary_merges_are_idempotent_and_shared",
    "check_session_summary_is_one_per_session_and_feeds_the_layer",
]

TABS = "I prefer tabs over spaces."
REDIS = "I prefer Redis over memcached for this project."
PORT = "Note that the staging database port is 5433."


async def check_running_summary_merges_are_idempotent_and_shared(kit: LongTermKit) -> None:
    """A merge is read-merge-write: a retried region changes nothing, another worker's merge adds to it."""
    backend = kit.fresh()
    running = await backend.summaries.merge_running_summary([said(1, TABS)], now=NOW)
    assert (running.kind, running.user_preferences, running.through_seq) == ("running", (TABS,), 1)
    assert backend.has_running_summary()
    assert await backend.summaries.merge_running_summary([said(1, TABS)], now=NOW + 1) == running
    other = kit.twin(backend)
    merged = await other.summaries.merge_running_summary([said(2, REDIS)], now=NOW + 2)
    assert sorted(merged.user_preferences) == sorted([TABS, REDIS])
    assert (merged.session_id, merged.created_at, merged.through_seq) == (running.session_id, int(NOW), 2)
    assert other.has_running_summary()


async def check_session_summary_is_one_per_session_and_feeds_the_layer(kit: LongTermKit) -> None:
    """A checkpoint and the session end write one summary per session; from the next session on, every
    worker's layer shows it (the session's own layer leaves it out: its prompt holds that session)."""
    backend = kit.fresh()
    checkpoint = await backend.summaries.checkpoint([said(1, TABS)], now=NOW)
    assert checkpoint.path is not None and checkpoint.reason == "checkpoint"
    assert (checkpoint.summary.kind, checkpoint.summary.created_at) == ("session", int(NOW))
    assert checkpoint.summary.user_preferences == (TABS,)
    end = await backend.summaries.write_session_summary([said(1, TABS), said(2, PORT)], now=NOW + 60)
    assert (end.path, end.reason, end.degraded, end.cap) == (
        checkpoint.path,
        "completion",
        False,
        CapResult(),
    )
    assert (end.summary.user_preferences, end.summary.facts) == ((TABS,), (PORT,))
    config = Config()
    want = render_project_memory(
        [end.summary], None, budget_tokens=config.project_memory_budget(), estimate=estimate_tokens
    )
    assert want.startswith("PROJECT MEMORY") and TABS in want and PORT in want
    assert (backend.load_layer(config), kit.twin(backend).load_layer(config)) == ("", "")
    kit.new_session(backend)
    assert backend.load_layer(config) == want
    assert kit.twin(backend).load_layer(config) == want
    nothing = await kit.fresh().summaries.write_session_summary([said(1, "Hi there!")], now=NOW)
    assert nothing.path is None


async def check_cap_keeps_the_newest_summaries_and_digests_the_rest(kit: LongTermKit) -> None:
    """Past ``session_summaries_keep`` the oldest summaries go into the digest, which the layer still shows."""
    backend = kit.fresh(Config(session_summaries_keep=2))
    writes = []
    for i, text in enumerate((TABS, REDIS, PORT)):
        writes.append(await backend.summaries.write_session_summary([said(1, text)], now=NOW + 3600 * i))
        kit.new_session(backend)
    assert [w.cap for w in writes[:2]] == [CapResult(), CapResult()]
    oldest = Path(str(writes[0].path)).stem
    assert writes[2].cap == CapResult(merged=(oldest,), deleted=(oldest,), digest_written=True)
    layer = backend.load_layer(Config())
    assert all(text in layer for text in (TABS, REDIS, PORT)), layer
    final = await backend.summaries.write_session_summary([said(1, TABS)], now=NOW + 4 * 3600)
    second = Path(str(writes[1].path)).stem
    assert final.cap == CapResult(merged=(second,), deleted=(second,), digest_written=True)


def _port(i: int) -> str:
    return f"The staging port is {8000 + i}."


def _ports(layer: str) -> list[str]:
    return re.findall(r"The staging port is (\d+)\.", layer)


async def check_summaries_order_by_write_and_the_cap_merges_every_one(kit: LongTermKit) -> None:
    """Summaries are ordered as they were written, also within one second and from a worker whose clock
    is behind: the newest wins in the block, and the cap merges each into the digest before deleting it."""
    config = Config(session_summaries_keep=2)
    backend = kit.fresh(config)
    stems = []
    for i in range(1, 5):  # four sessions ending within one second
        write = await backend.summaries.write_session_summary([said(1, _port(i))], now=NOW)
        stems.append(Path(str(write.path)).stem)
        kit.new_session(backend)
    assert stems == sorted(set(stems)), stems
    assert _ports(backend.load_layer(config)) == ["8004"]
    late = await backend.summaries.write_session_summary([said(1, _port(5)), said(2, REDIS)], now=NOW - 3600)
    assert Path(str(late.path)).stem > stems[-1]  # the newest, whatever the writer's clock says
    kit.new_session(backend)
    for text in (TABS, PORT):  # two more sessions: the cap merges the late one into the digest
        await backend.summaries.write_session_summary([said(1, text)], now=NOW + 1)
        kit.new_session(backend)
    layer = backend.load_layer(config)
    assert _ports(layer) == ["8005"], layer
    assert all(f"- {text}" in layer for text in (REDIS, TABS, PORT)), layer


async def check_the_block_merges_the_digest_and_every_kept_summary(kit: LongTermKit) -> None:
    """Every kept summary is in the block with the digest, newest wins: an earlier session's knowledge
    stays while the budget holds it, and a value a later session superseded never comes back."""
    config = Config()  # ten summaries kept, then the digest
    backend = kit.fresh(config)
    for i in range(1, 13):
        text = _port(i) if i in (1, 5) else f"Service {i} listens on port {5000 + i}."
        await backend.summaries.write_session_summary([said(1, text)], now=NOW + 3600 * i)
        kit.new_session(backend)
        layer = backend.load_layer(config)
        assert _ports(layer) == (["8001"] if i < 5 else ["8005"]), (i, layer)
        missing = [k for k in range(2, i + 1) if k != 5 and f"- Service {k} listens on port {5000 + k}." not in layer]
        assert missing == [], (i, layer)


async def _seed(backend: LongTermBackend, *contents: str) -> None:
    for text in contents:
        await anyio.to_thread.run_sync(partial(backend.history.append, text, session_key="w", now=NOW))


async def check_dream_records_versions_and_restores_them(kit: LongTermKit) -> None:
    """A run folds new history into a version and moves the cursor; the log and restore work on versions."""
    backend = kit.fresh()
    dream = backend.dream()
    await _seed(backend, "Constraints:\n- Always use yarn, never npm.")
    first = await dream.run(now=NOW + 10)
    assert (first.ran, first.records, first.cursor) == (True, 1, 1)
    assert first.commit_id is not None and first.edits and first.message.startswith("dream: history 1: ")
    assert backend.history.dream_cursor() == 1
    assert await dream.run(now=NOW + 11) == DreamOutcome(ran=False, cursor=1)
    await _seed(backend, "Facts:\n- The staging database port is 5433.")
    second = await dream.run(now=NOW + 20)
    assert (second.records, second.cursor) == (1, 2) and second.commit_id is not None
    log = await dream.dream_log()
    assert [(v.commit_id, v.timestamp, v.message) for v in log] == [
        (second.commit_id, int(NOW + 20), second.message),
        (first.commit_id, int(NOW + 10), first.message),
    ]
    restored = await dream.restore(1, now=NOW + 30)
    assert (restored.timestamp, restored.message) == (
        int(NOW + 30),
        f"restore: {first.commit_id[:12]} ({log[1].title})",
    )
    after = await dream.dream_log()
    assert [v.commit_id for v in after] == [restored.commit_id, second.commit_id, first.commit_id]
    # The restored state is the first version's: restoring it again records nothing.
    same = await dream.restore(first.commit_id[:8], now=NOW + 40)
    assert same.commit_id == first.commit_id
    assert await dream.dream_log() == after
    assert await dream.dream_log(limit=1) == after[:1]
    assert await kit.twin(backend).dream().dream_log() == after
    missing = await raises(VersionNotFoundError, lambda: dream.restore(3, now=NOW))
    assert str(missing) == "there are only 3 versions"
    await raises(VersionNotFoundError, lambda: dream.restore("not-hex", now=NOW))
    await raises(VersionNotFoundError, lambda: dream.restore("0" * 40, now=NOW))
    assert await dream.dream_log() == after


async def check_dream_runs_once_across_workers(kit: LongTermKit) -> None:
    """Two workers dreaming at once fold the new records once: one version, the cursor at the end."""
    first = kit.fresh()
    second = kit.twin(first)
    await _seed(first, *(f"Facts:\n- Service {i} listens on port {8000 + i}." for i in range(3)))
    outcomes: list[DreamOutcome] = []

    async def run(backend: LongTermBackend) -> None:
        outcomes.append(await backend.dream().run(now=NOW + 10))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, first)
        tg.start_soon(run, second)
    assert sorted((o.ran, o.records) for o in outcomes) == [(False, 0), (True, 3)]
    assert first.history.dream_cursor() == second.history.dream_cursor() == 3
    assert len(await second.dream().dream_log()) == 1
