"""The summarizer actor: runs the configured :class:`~aiden.summarizers.protocol.Summarizer`.

It owns the deadline of every call (``anyio.fail_after`` around the call it
makes: ``summarizer_timeout_s``, scaled by the call times it observed, see
:mod:`aiden.policy.summarizer_deadline`) and turns every failure into a
:class:`~aiden.messages.Failed` reply: a hung or crashing provider can
never take the actor — or the session's events — down with it.

Two tasks, both started by the runtime: :meth:`run_inbox` reads requests and
:meth:`run_worker` summarizes one at a time. The split lets a
:class:`~aiden.messages.CancelSummarize` (sent when a caller gives up, e.g. a
pass cancelled by rotation) cancel the call in flight instead of queueing
behind it.
"""

from __future__ import annotations

import logging
from typing import assert_never

import anyio
import msgspec
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import Client
from aiden.config import Config
from aiden.errors import AidenError, InvalidSummaryError, SummarizerError, SummarizerTimeout
from aiden.messages import (
    CancelSummarize,
    Codec,
    Failed,
    Summarize,
    Summarized,
    SummarizerInbox,
    SummarizerOutbox,
    codec,
    error_info,
)
from aiden.policy.summarizer_deadline import CallTimes, after_success, after_timeout, deadline_s
from aiden.summarizers.protocol import Preparable, Summarizer, SummaryRequest, SummaryResult

__all__ = ["SummarizerActor", "SummarizerProxy"]

log = logging.getLogger("aiden.summarizer")

_probe = msgspec.msgpack.Encoder()


class SummarizerActor:
    """Serves summarization requests one at a time; a request can be cancelled while it runs."""

    def __init__(
        self,
        summarizer: Summarizer,
        config: Config,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
    ) -> None:
        self._summarizer = summarizer
        self._config = config
        self._inbox = inbox
        self._outbox = outbox
        self._in: Codec[SummarizerInbox] = codec(SummarizerInbox)
        self._out: Codec[SummarizerOutbox] = codec(SummarizerOutbox)
        self._work_send, self._work_recv = anyio.create_memory_object_stream[Summarize](16)
        self._current: tuple[int, anyio.CancelScope] | None = None
        self._cancelled: set[int] = set()
        self.calls = 0
        self.failures = 0
        self._times = CallTimes()

    @property
    def deadline_s(self) -> float:
        """The deadline of the next call: the configured one, scaled by the observed call times."""
        return deadline_s(self._times, self._config.summarizer_timeout_s)

    def close_streams(self) -> None:
        """Close the internal work stream (after the tasks ended)."""
        self._work_send.close()
        self._work_recv.close()

    async def run_inbox(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Route requests to the worker and cancellations to the call in flight, until the inbox closes."""
        task_status.started()
        async with self._inbox, self._work_send:
            async for raw in self._inbox:
                msg = self._in.decode(raw)
                match msg:
                    case Summarize():
                        await self._work_send.send(msg)
                    case CancelSummarize(request_id=rid):
                        if self._current is not None and self._current[0] == rid:
                            self._current[1].cancel()
                        else:
                            self._cancelled.add(rid)
                    case _:
                        assert_never(msg)

    async def run_worker(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Summarize queued requests one at a time, until the work stream closes.

        A :class:`~aiden.summarizers.protocol.Preparable` summarizer is prepared
        first, so the memory's open waits for it rather than the first compaction.
        """
        if isinstance(self._summarizer, Preparable):
            try:
                await self._summarizer.prepare()
            except AidenError as exc:  # the first call reports a broken setup as a failure, with its cause
                log.warning("summarizer setup failed (the first call will retry it): %s", exc)
        task_status.started()
        async with self._work_recv, self._outbox:
            async for msg in self._work_recv:
                if msg.request_id in self._cancelled:
                    self._cancelled.discard(msg.request_id)
                    continue  # its caller is gone: do not spend a provider call on it
                reply = await self._summarize(msg)
                await self._outbox.send(self._out.encode(reply))

    async def _summarize(self, msg: Summarize) -> Summarized | Failed:
        self.calls += 1
        deadline = self.deadline_s
        try:
            with anyio.CancelScope() as scope:
                self._current = (msg.request_id, scope)
                started = anyio.current_time()
                with anyio.fail_after(deadline):
                    result = await self._summarizer.summarize(msg.request)
                self._times = after_success(self._times, anyio.current_time() - started)
                _validate(result, self._config)
                return Summarized(msg.request_id, result)
            # Only a CancelSummarize gets here: the caller gave up.
            self.failures += 1
            return Failed(msg.request_id, error_info(SummarizerError("cancelled by the caller")))
        except TimeoutError:
            self.failures += 1
            self._times = after_timeout(self._times)
            exc: AidenError = SummarizerTimeout(
                f"summarizer exceeded its deadline of {deadline:g}s (the next call gets {self.deadline_s:g}s)"
            )
            log.warning("%s", exc)
            return Failed(msg.request_id, error_info(exc))
        except AidenError as exc:
            self.failures += 1
            log.warning("summarizer failed: %s", exc)
            return Failed(msg.request_id, error_info(exc))
        except Exception as exc:  # a user-supplied summarizer may raise anything
            self.failures += 1
            log.warning("summarizer raised %s: %s", type(exc).__name__, exc)
            return Failed(msg.request_id, error_info(SummarizerError(f"{type(exc).__name__}: {exc}")))
        finally:
            self._current = None


def _validate(result: SummaryResult, config: Config) -> None:
    # Checked here too so a third-party summarizer cannot put empty, unbounded
    # or unstorable text into summary.md.
    if not isinstance(result, SummaryResult):
        raise InvalidSummaryError(f"summarizer returned {type(result).__name__}, not SummaryResult")
    if not result.text.strip():
        raise InvalidSummaryError("summarizer returned an empty summary")
    if len(result.text) > config.summary_max_chars:
        raise InvalidSummaryError(
            f"summary of {len(result.text)} chars exceeds summary_max_chars={config.summary_max_chars}"
        )
    try:
        _probe.encode(result)
    except (UnicodeEncodeError, TypeError, ValueError) as exc:
        # e.g. a lone surrogate from a JSON "\ud83d" escape: it could never be stored.
        raise InvalidSummaryError(f"summary cannot be stored: {exc}") from exc


class SummarizerProxy:
    """A :class:`Summarizer` that forwards to the summarizer actor (its deadline and error handling apply)."""

    def __init__(self, client: Client[SummarizerInbox, SummarizerOutbox]) -> None:
        self._client = client

    def owns_deadline(self) -> bool:
        """True: the actor bounds every call (a :class:`~aiden.summarizers.protocol.DeadlineOwner`)."""
        return True

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize through the actor; failures arrive as :class:`SummarizerError`."""
        reply = await self._client.call(lambda rid: Summarize(rid, request))
        match reply:
            case Summarized(result=result):
                return result
            case Failed(error=err):
                raise SummarizerError(f"{err.kind}: {err.message}")
            case _:
                assert_never(reply)
