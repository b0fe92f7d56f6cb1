"""The summarizer actor: runs the configured :class:`~aiden.summarizers.protocol.Summarizer`.

It owns the deadline of every call (``anyio.fail_after(summarizer_timeout_s)``
around the call it makes) and turns every failure into a
:class:`~aiden.messages.SummarizeFailed` reply: a hung or crashing provider can
never take the actor — or the session's events — down with it.
"""

from __future__ import annotations

import logging
from typing import assert_never

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.writer import error_info
from aiden.config import Config
from aiden.errors import AidenError, InvalidSummaryError, SummarizerError, SummarizerTimeout
from aiden.actors.mailbox import Client
from aiden.messages import Codec, Summarize, Summarized, SummarizeFailed, SummarizerInbox, SummarizerOutbox
from aiden.summarizers.protocol import Summarizer, SummaryRequest, SummaryResult

__all__ = ["SummarizerActor", "SummarizerProxy"]

log = logging.getLogger("aiden.summarizer")


class SummarizerActor:
    """Serves summarization requests one at a time."""

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
        self._in: Codec[SummarizerInbox] = Codec(SummarizerInbox)
        self._out: Codec[SummarizerOutbox] = Codec(SummarizerOutbox)
        self.calls = 0
        self.failures = 0

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until the inbox closes."""
        task_status.started()
        async with self._inbox, self._outbox:
            async for raw in self._inbox:
                msg = self._in.decode(raw)
                match msg:
                    case Summarize():
                        reply = await self._summarize(msg)
                    case _:
                        assert_never(msg)
                await self._outbox.send(self._out.encode(reply))

    async def _summarize(self, msg: Summarize) -> Summarized | SummarizeFailed:
        self.calls += 1
        try:
            with anyio.fail_after(self._config.summarizer_timeout_s):
                result = await self._summarizer.summarize(msg.request)
            _validate(result, self._config)
        except TimeoutError:
            self.failures += 1
            exc: AidenError = SummarizerTimeout(
                f"summarizer exceeded its deadline of {self._config.summarizer_timeout_s}s"
            )
            log.warning("%s", exc)
            return SummarizeFailed(msg.request_id, error_info(exc))
        except AidenError as exc:
            self.failures += 1
            log.warning("summarizer failed: %s", exc)
            return SummarizeFailed(msg.request_id, error_info(exc))
        except Exception as exc:  # a user-supplied summarizer may raise anything
            self.failures += 1
            log.warning("summarizer raised %s: %s", type(exc).__name__, exc)
            return SummarizeFailed(
                msg.request_id, error_info(SummarizerError(f"{type(exc).__name__}: {exc}"))
            )
        return Summarized(msg.request_id, result)


def _validate(result: SummaryResult, config: Config) -> None:
    # Checked here too so a third-party summarizer cannot put empty or
    # unbounded text into summary.md.
    if not isinstance(result, SummaryResult):
        raise InvalidSummaryError(f"summarizer returned {type(result).__name__}, not SummaryResult")
    if not result.text.strip():
        raise InvalidSummaryError("summarizer returned an empty summary")
    if len(result.text) > config.summary_max_chars:
        raise InvalidSummaryError(
            f"summary of {len(result.text)} chars exceeds summary_max_chars={config.summary_max_chars}"
        )


class SummarizerProxy:
    """A :class:`Summarizer` that forwards to the summarizer actor (its deadline and error handling apply)."""

    def __init__(self, client: Client[SummarizerInbox, SummarizerOutbox]) -> None:
        self._client = client

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize through the actor; failures arrive as :class:`SummarizerError`."""
        reply = await self._client.call(lambda rid: Summarize(rid, request))
        match reply:
            case Summarized(result=result):
                return result
            case SummarizeFailed(error=err):
                raise SummarizerError(f"{err.kind}: {err.message}")
            case _:
                assert_never(reply)
