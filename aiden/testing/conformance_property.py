"""The conformance suite's hypothesis property: random appends and commits lose and repeat nothing.

Random batches (events with and without repeating ``event_id`` values) and
compaction passes (a prefix of the hot window, maybe keeping one event hot,
maybe with a batch appended between snapshot and commit) run against a
fresh store and a model of what it must hold. After every step the hot
window matches the model; at the end every seq ``1..last`` is readable with
its exact content and lives in exactly one place (hot window or one chunk).
Chunks never re-compact a kept event here (that case has its own check).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiden.events import SessionEvent
from aiden.storage.protocol import SessionStore
from aiden.testing.storekit import StoreFactory, commit_plan, plan, prepared, stored

__all__ = ["check_random_appends_and_commits"]

Batch = list[list[tuple[str | None, str]]]
"""Requests of ``(event_id, content)`` pairs."""

_item = st.tuples(st.sampled_from([None, None, "a", "b", "c", "d"]), st.text(alphabet="xyz\u00e9", max_size=3))
_batch: st.SearchStrategy[Batch] = st.lists(st.lists(_item, max_size=3), max_size=3)
# (kind, events to compact, keep the middle one hot, batch appended: the batch itself, or during the pass)
_op = st.tuples(st.sampled_from(["append", "commit"]), st.integers(1, 6), st.booleans(), _batch)


class _Model:
    """What the store must hold: every stored event by seq, the hot seqs, the known ids."""

    def __init__(self) -> None:
        self.events: dict[int, SessionEvent] = {}
        self.hot: list[int] = []
        self.ids: dict[str, int] = {}
        self.last_seq = 0

    def append(self, store: SessionStore, batch: Batch) -> None:
        expected: list[list[int]] = []
        for request in batch:
            seqs: list[int] = []
            for eid, content in request:
                known = self.ids.get(eid) if eid is not None else None
                if known is not None:
                    seqs.append(-known)  # a dedupe hit
                    continue
                self.last_seq += 1
                self.events[self.last_seq] = stored(content, self.last_seq, event_id=eid)
                self.hot.append(self.last_seq)
                if eid is not None:
                    self.ids[eid] = self.last_seq
                seqs.append(self.last_seq)
            expected.append(seqs)
        got = store.append([[prepared(content, event_id=eid) for eid, content in r] for r in batch])
        assert got == expected, f"append returned {got}, expected {expected}"
        hits = sorted({-q for r in got for q in r if q < 0})
        assert store.read_events(hits) == [self.events[q] for q in hits]  # what a retry returns

    def hot_events(self) -> list[SessionEvent]:
        return [self.events[q] for q in self.hot]


def _commit(store: SessionStore, model: _Model, count: int, keep_middle: bool, during: Batch) -> None:
    store.lock_compaction()
    try:
        snap = store.snapshot()
        assert snap.events == model.hot_events()
        older = {e.seq for e in snap.events if e.seq <= snap.index.last_seq}  # kept by earlier chunks
        chosen = [e for e in snap.events if e.seq not in older][:count]
        model.append(store, during)
        if not chosen:
            return
        kept = set(older)
        if keep_middle and len(chosen) >= 3:
            kept.add(chosen[len(chosen) // 2].seq)
        full, left = commit_plan(store, plan(snap, chosen[-1].seq, kept=kept))
    finally:
        store.unlock_compaction()
    model.hot = [q for q in model.hot if not full.covers(q)]
    assert left == len(model.hot)


def _check_everything(store: SessionStore, model: _Model) -> None:
    seqs = range(1, model.last_seq + 1)
    want = [model.events[q] for q in seqs]
    assert [store.read_event(q) for q in seqs] == want
    assert store.read_events(seqs) == want
    places: Counter[int] = Counter(e.seq for e in store.read_hot_window())
    index = store.load_index()
    assert not index.segments, "too few chunks here to seal any"
    for entry in index.chunks:
        chunk = store.read_chunk(entry.chunk_id)
        assert chunk.entry == entry
        for e in chunk.events:
            assert e == model.events[e.seq]
            places[e.seq] += 1
    assert sorted(places.elements()) == list(seqs), f"seqs not stored exactly once: {places}"


def check_random_appends_and_commits(make_store: StoreFactory, *, max_examples: int = 30) -> None:
    """Random appends and commits keep seqs gap-free and every event stored exactly once, unchanged."""

    @settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,  # the same examples on every run: a shipped suite must not flake
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(ops=st.lists(_op, max_size=12))
    def run(ops: Sequence[tuple[str, int, bool, Batch]]) -> None:
        store = make_store()
        try:
            model = _Model()
            for kind, count, keep_middle, batch in ops:
                if kind == "append":
                    model.append(store, batch)
                else:
                    _commit(store, model, count, keep_middle, batch)
                assert store.read_hot_window() == model.hot_events()
            _check_everything(store, model)
        finally:
            store.close()

    run()
