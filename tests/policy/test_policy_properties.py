"""Property tests of plan_compaction and the scrubber over random event streams."""

from __future__ import annotations

import base64
import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiden.config import Config
from aiden.events import SessionEvent
from aiden.policy.cutpoints import CompactionPlan, SkipCompaction, classify, plan_compaction
from aiden.policy.scrub import strip_screenshot_data
from aiden.policy.tokens import event_tokens
from tests.policy.policy_helpers import event_streams, opens_legally, partner_calls, parts

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

configs = st.builds(
    Config,
    keep_recent_tokens=st.integers(1, 400),
    hot_window_events=st.integers(1, 25),
    max_pinned_events=st.integers(0, 4),
)
targets = st.one_of(st.none(), st.integers(1, 600))


def _plan(
    events: list[SessionEvent], config: Config, target: int | None
) -> CompactionPlan | SkipCompaction:
    return plan_compaction(events, config, target_tokens=target)


@SETTINGS
@given(events=event_streams(), config=configs, target=targets)
def test_plan_invariants(events: list[SessionEvent], config: Config, target: int | None) -> None:
    out = _plan(events, config, target)
    # Deterministic, and precomputed counts give the same answer.
    assert _plan(events, config, target) == out
    assert (
        plan_compaction(events, config, target_tokens=target, token_counts=event_tokens(events))
        == out
    )
    if isinstance(out, SkipCompaction):
        assert out.reason in {"no_events", "fits", "no_legal_cut", "nothing_compactable"}
        return
    where = parts(events, out)  # also asserts: no event twice, nothing missing

    # kept + compacted + retained partition the input in order: the retained
    # suffix, and before it kept and compacted interleaved in input order.
    cut = len(events) - len(out.retained)
    assert list(out.retained) == events[cut:]
    assert all(w != "retained" for w in where[:cut])
    before = [e for e, w in zip(events[:cut], where[:cut], strict=True) if w == "kept"]
    assert list(out.kept) == before
    compacted = [e for e, w in zip(events[:cut], where[:cut], strict=True) if w == "compacted"]
    assert list(out.compacted) == compacted
    assert list(out.history) + list(out.turn_prefix) == compacted

    # Never an empty compacted range; the hot window never opens on a
    # tool_result, and on context only when it was pulled in ahead of a cut.
    assert out.compacted
    assert opens_legally(out)
    assert (out.kept + out.retained)[0].type != "tool_result"

    # The root user input is never compacted.
    root = next((i for i, e in enumerate(events) if classify(e) == "boundary"), None)
    if root is not None:
        assert where[root] in ("kept", "retained")

    # Every tool_result stays in the same part as the tool_call it answers.
    pairs = partner_calls(events)
    for r, q in pairs.items():
        assert where[r] == where[q], (q, r)

    # Kept events are the root, pinned events, or tool partners of pinned ones.
    for i, w in enumerate(where):
        if w == "kept":
            group = {i, pairs.get(i, i)} | {r for r, q in pairs.items() if q == i}
            group |= {r for r, q in pairs.items() if q in group}
            assert i == root or any(events[j].pinned for j in group)
    if sum(e.pinned is not None for e in events) <= config.max_pinned_events:
        assert all(e.pinned is None for e in out.compacted)

    # Token bookkeeping and the progress report.
    tokens = event_tokens(events)
    assert out.tokens_before == sum(tokens)
    assert out.kept_tokens == sum(t for t, w in zip(tokens, where, strict=True) if w != "compacted")
    if target is not None and out.reaches_target:
        assert out.kept_tokens < target
    assert out.reaches_target == (out.note == "")
    if not out.reaches_target:
        assert target is not None and out.kept_tokens >= target

    # cut_meta and the split-turn ranges.
    meta = out.cut_meta
    assert meta.first_kept_event_id == out.retained[0].id
    assert meta.tokens_before == out.tokens_before
    assert meta.kept_tokens_estimate == out.kept_tokens
    assert meta.is_split_turn == bool(out.turn_prefix)
    if meta.is_split_turn:
        index = {id(e): i for i, e in enumerate(events)}
        start = next(i for i, e in enumerate(events) if e.id == meta.turn_start_event_id)
        assert classify(events[start]) == "boundary"
        assert all(index[id(e)] < start for e in out.history)
        assert all(start <= index[id(e)] < cut for e in out.turn_prefix)
    else:
        assert meta.turn_start_event_id is None and out.turn_prefix == ()
    assert out.first_seq == out.compacted[0].seq and out.last_seq == out.compacted[-1].seq
    assert set(out.kept_seqs) <= {e.seq for e in out.kept}


@settings(SETTINGS, max_examples=100)
@given(events=event_streams(max_turns=4))
def test_skip_only_when_no_cut_can_help(events: list[SessionEvent]) -> None:
    # With a tiny budget every useful legal cut qualifies; a skip then means
    # there is none (or nothing at all to plan).
    out = plan_compaction(events, Config(keep_recent_tokens=1, hot_window_events=1))
    if isinstance(out, SkipCompaction):
        assert out.reason in {"no_events", "no_legal_cut", "nothing_compactable"}


# --- scrubber ----------------------------------------------------------------------

_PAYLOAD = st.binary(min_size=80, max_size=200).map(lambda b: base64.b64encode(b).decode())
_URI = _PAYLOAD.map(lambda p: f"data:image/png;base64,{p}")
_LEAF = st.one_of(
    st.text(max_size=40),
    _PAYLOAD,
    _URI,
    st.integers(),
    st.booleans(),
    st.none(),
    st.tuples(st.text(max_size=20), _URI, st.text(max_size=20)).map("".join),
)
_JSON = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(["data", "image", "Base64", "width", "height", "url", "x"]),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=8,
)


_LONG_URI = re.compile(r"data:image/[a-z0-9.+-]+;base64,[A-Za-z0-9+/]{128,}", re.IGNORECASE)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=st.one_of(_JSON.map(json.dumps), _LEAF.map(str)),
    meta=st.dictionaries(st.sampled_from(["data", "screenshot", "note", "k"]), _JSON, max_size=3),
)
def test_scrubber_is_idempotent(content: str, meta: dict[str, object]) -> None:
    event = SessionEvent(type="tool_result", content=content, meta=meta)
    once = strip_screenshot_data(event)
    twice = strip_screenshot_data(once)
    assert twice is once
    # No long inline image payload survives anywhere.
    for text in [once.content, *_strings(once.meta)]:
        assert _LONG_URI.search(text) is None
