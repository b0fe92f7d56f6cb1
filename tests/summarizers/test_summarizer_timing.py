"""A slow summarizer is not an outage (#19): the deadline and the breaker's open time follow what was observed.

The summarizer actor runs on trio's MockClock (no threads), so the virtual
clock moves exactly to each deadline and sleep.
"""

from __future__ import annotations

import anyio
import msgspec
import pytest

from aiden.actors.summarizer import SummarizerActor, SummarizerProxy, SummarizerSession
from aiden.config import Config
from aiden.errors import SummarizerUnavailable
from aiden.events import SessionEvent
from aiden.longterm.writer import extract_summary
from aiden.messages import Codec, Failed, Summarize, Summarized, SummarizerInbox
from aiden.summarizers.llm.client import Breaker
from aiden.summarizers.protocol import DeadlineOwner, Summarizer, SummaryRequest, SummaryResult
from aiden.testing import ScriptedSummarizer, SlowSummarizer

pytestmark = pytest.mark.timeout(30)

REQUEST = SummaryRequest(
    purpose="history",
    events=(SessionEvent(type="user_input", seq=1, content="Ship the CSV export by Friday."),),
)


# --- the summarizer actor --------------------------------------------------------------------------


async def ask(summarizer: Summarizer, timeout_s: float, n: int) -> tuple[list[Summarized | Failed], float]:
    """Send ``n`` requests of one session through a running actor; the replies in order, and the
    deadline of that session's next call."""
    actor = SummarizerActor()
    replies_send, replies_recv = anyio.create_memory_object_stream[Summarized | Failed](8)
    actor.attach(1, SummarizerSession(summarizer, Config(summarizer_timeout_s=timeout_s), replies_send.send_nowait))
    into: Codec[SummarizerInbox] = Codec(SummarizerInbox)
    replies: list[Summarized | Failed] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(actor.run)
        with actor.sender() as send, replies_send, replies_recv:
            for rid in range(1, n + 1):
                await send.send(into.encode(Summarize(1, rid, REQUEST)))
                replies.append(await replies_recv.receive())
        deadline = actor.deadline_s(1)
        tg.cancel_scope.cancel()  # the host stops
    return replies, deadline


@pytest.mark.anyio
async def test_the_actor_gives_a_slow_summarizer_a_longer_deadline_after_a_timeout() -> None:
    slow = SlowSummarizer(15.0)
    (first, second), deadline = await ask(slow, 10.0, 2)
    assert isinstance(first, Failed)
    assert first.error.message == "summarizer exceeded its deadline of 10s (the next call gets 20s)"
    assert isinstance(second, Summarized)  # the same 15 s call fits the doubled deadline
    assert (slow.calls_started, slow.calls_finished) == (2, 1)
    # 3 x 15 s observed = 45 s, capped at 4 x the configured 10 s.
    assert deadline == 40.0


@pytest.mark.anyio
async def test_a_fast_summarizer_keeps_the_configured_deadline() -> None:
    replies, deadline = await ask(SlowSummarizer(1.0), 10.0, 3)
    assert [type(r) for r in replies] == [Summarized] * 3
    assert deadline == 10.0


# --- the session-summary extraction leaves the deadline to the actor ------------------------------


class SelfTimed(SlowSummarizer):
    """A slow summarizer that says it bounds its own calls (as the actor's proxy does)."""

    def owns_deadline(self) -> bool:
        return True


@pytest.mark.anyio
async def test_extraction_does_not_cut_a_summarizer_that_owns_its_deadline() -> None:
    config = Config(summarizer_timeout_s=10.0)
    events = REQUEST.events
    assert isinstance(SelfTimed(0.0), DeadlineOwner)
    assert not isinstance(SlowSummarizer(0.0), DeadlineOwner)
    _summary, degraded = await extract_summary(SelfTimed(25.0), config, events)
    assert degraded is False
    # A summarizer without a deadline of its own still gets the configured one (then the fallback).
    _summary, degraded = await extract_summary(SlowSummarizer(25.0), config, events)
    assert degraded is True


def test_the_actors_proxy_owns_its_deadline() -> None:
    send, recv = anyio.create_memory_object_stream[bytes](1)
    send.close()
    recv.close()
    from aiden.actors.mailbox import Client

    proxy = SummarizerProxy(Client("summarizer", send, Codec(SummarizerInbox)), 1)
    assert isinstance(proxy, DeadlineOwner) and proxy.owns_deadline() is True


# --- the breaker ------------------------------------------------------------------------------------


def test_an_outage_opens_for_reset_s_and_doubles_per_failed_trial() -> None:
    breaker = Breaker(threshold=2, reset_s=60.0)
    breaker.failed(0.0)
    assert breaker.state(0.0) == "closed"
    breaker.failed(1.0)
    assert (breaker.state(60.9), breaker.state(61.0)) == ("open", "half_open")
    breaker.admit(61.0)  # the trial
    breaker.failed(62.0)
    assert (breaker.state(181.9), breaker.state(182.0)) == ("open", "half_open")  # 2 x 60
    for at in (182.0, 422.0, 902.0):
        breaker.admit(at)
        breaker.failed(at)
    # 4 x, 8 x, then never past 8 x reset_s.
    assert (breaker.open_for, breaker.state(902.0 + 479.9)) == (480.0, "open")
    breaker.succeeded()
    assert (breaker.state(0.0), breaker.open_for, breaker.failed_trials) == ("closed", 60.0, 0)


def test_a_slow_provider_cut_by_the_deadline_opens_for_two_call_lengths() -> None:
    breaker = Breaker(threshold=1, reset_s=300.0)
    breaker.failed(100.0, slow_s=40.0)
    assert (breaker.state(179.9), breaker.state(180.0)) == ("open", "half_open")
    with pytest.raises(SummarizerUnavailable, match=r"next trial in 80\.0s"):
        breaker.admit(100.0)
    # Slower than half the reset time: reset_s is the most it waits.
    slow = Breaker(threshold=1, reset_s=300.0)
    slow.failed(0.0, slow_s=500.0)
    assert slow.open_for == 300.0


# --- validation ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_empty_answer_is_refused_by_the_actor() -> None:
    (reply,), _deadline = await ask(ScriptedSummarizer([SummaryResult(text="  ")]), 10.0, 1)
    assert isinstance(reply, Failed)
    assert reply.error.message == "summarizer returned an empty summary"


@pytest.mark.anyio
async def test_an_undecodable_request_is_refused_and_the_actor_serves_on() -> None:
    # The host's summarizer serves every memory of the host: a request with a value of the wrong
    # type (encoding checks none) is answered with Failed, and the next request is served.
    actor = SummarizerActor()
    replies_send, replies_recv = anyio.create_memory_object_stream[Summarized | Failed](8)
    actor.attach(1, SummarizerSession(ScriptedSummarizer(), Config(), replies_send.send_nowait))
    into: Codec[SummarizerInbox] = Codec(SummarizerInbox)
    bad = into.encode(Summarize(1, 1, msgspec.structs.replace(REQUEST, purpose="no such purpose")))  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        tg.start_soon(actor.run)
        with actor.sender() as send, replies_send, replies_recv:
            await send.send(bad)
            refused = await replies_recv.receive()
            await send.send(into.encode(Summarize(1, 2, REQUEST)))
            served = await replies_recv.receive()
        tg.cancel_scope.cancel()
    assert isinstance(refused, Failed) and refused.request_id == 1 and refused.session == 1
    assert refused.error.message.startswith("invalid request to the summarizer: Invalid enum value 'no such purpose'")
    assert isinstance(served, Summarized) and served.request_id == 2
