"""The summarizer deadline policy: the configured deadline, scaled by the observed call times (#19)."""

from __future__ import annotations

from aiden.policy.summarizer_deadline import CallTimes, after_success, after_timeout, deadline_s


def test_the_deadline_starts_at_the_configured_one() -> None:
    assert deadline_s(CallTimes(), 120.0) == 120.0
    # Calls well inside it change nothing.
    assert deadline_s(after_success(CallTimes(), 30.0), 120.0) == 120.0


def test_the_deadline_follows_the_slowest_recent_call() -> None:
    times = CallTimes()
    for seconds in (20.0, 70.0, 25.0):
        times = after_success(times, seconds)
    assert deadline_s(times, 120.0) == 210.0  # 3 x 70
    # Only the last 8 calls count: the 70 s call is forgotten after 8 faster ones.
    for _ in range(8):
        times = after_success(times, 10.0)
    assert times.recent == (10.0,) * 8
    assert deadline_s(times, 120.0) == 120.0


def test_a_cut_call_doubles_the_next_deadline_up_to_four_times_the_configured_one() -> None:
    times = after_timeout(CallTimes())
    assert deadline_s(times, 120.0) == 240.0
    times = after_timeout(times)
    assert deadline_s(times, 120.0) == 480.0
    assert deadline_s(after_timeout(times), 120.0) == 480.0  # a provider that hangs is still cut off
    assert after_success(times, 200.0) == CallTimes(recent=(200.0,), timeouts=0)
    assert deadline_s(after_success(times, 200.0), 120.0) == 480.0  # 3 x 200 = 600, capped
