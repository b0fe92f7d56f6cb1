"""The must-keep step of a chunk summary, here or as a job of the helper process (:mod:`aiden.offload`).

:func:`with_must_keep` runs the step where it stalls nothing; :func:`run_job`
is the helper's entry (``bytes -> bytes``: an encoded :class:`MustKeepJob`
in, the encoded summary with its must-keep section out); :func:`apply_job`
is the step itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import msgspec

from aiden import offload
from aiden.events import SessionEvent
from aiden.summarizers.mustkeep import apply_must_keep, extract_must_keep

__all__ = ["MustKeepJob", "apply_job", "run_job", "with_must_keep"]

class MustKeepJob(msgspec.Struct, frozen=True):
    """``apply_must_keep(summary, extract_must_keep(events))`` with the configured item limit."""

    summary: str
    events: tuple[SessionEvent, ...]
    max_items: int


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(MustKeepJob)
_str_decoder = msgspec.msgpack.Decoder(str)


def apply_job(job: MustKeepJob) -> str:
    """The summary with the items of ``job.events`` it lacks appended (see :func:`apply_must_keep`)."""
    items = extract_must_keep(job.events, max_items=job.max_items)
    return apply_must_keep(job.summary, items, max_items=job.max_items)


def run_job(payload: bytes) -> bytes:
    """The helper process's entry: :func:`apply_job` on encoded arguments."""
    return _encoder.encode(apply_job(_decoder.decode(payload)))


async def with_must_keep(summary: str, events: Sequence[SessionEvent], max_items: int) -> str:
    """:func:`apply_job` without stalling the event loop or holding the GIL for long.

    Inline for an ordinary chunk (as planning is: a worker thread would cost
    appends more than the few ms it takes); a backlog slice's, or a chunk of
    long tool output, goes to the helper process: in a worker thread it would hold the GIL and slow every
    hand-off of the loop and the session writer's thread. Without the helper,
    a worker thread.
    """
    job = MustKeepJob(summary, tuple(events), max_items)
    if not offload.too_long_for_the_loop(job.events, len(job.summary)):
        return apply_job(job)
    try:
        return _str_decoder.decode(await offload.run_job("must_keep", _encoder.encode(job)))
    except offload.OffloadUnavailable:
        return await anyio.to_thread.run_sync(apply_job, job)
