"""The must-keep step of a chunk summary as a job of the helper process (:mod:`aiden.offload`).

``bytes -> bytes``: an encoded :class:`MustKeepJob` in, the encoded summary
with its must-keep section out. :func:`apply_job` is the same step in this
process, for small chunks and when the helper cannot run it.
"""

from __future__ import annotations

import msgspec

from aiden.events import SessionEvent
from aiden.summarizers.mustkeep import apply_must_keep, extract_must_keep

__all__ = ["MustKeepJob", "apply_job", "run_job"]


class MustKeepJob(msgspec.Struct, frozen=True):
    """``apply_must_keep(summary, extract_must_keep(events))`` with the configured item limit."""

    summary: str
    events: tuple[SessionEvent, ...]
    max_items: int


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(MustKeepJob)


def apply_job(job: MustKeepJob) -> str:
    """The summary with the items of ``job.events`` it lacks appended (see :func:`apply_must_keep`)."""
    items = extract_must_keep(job.events, max_items=job.max_items)
    return apply_must_keep(job.summary, items, max_items=job.max_items)


def run_job(payload: bytes) -> bytes:
    """The helper process's entry: :func:`apply_job` on encoded arguments."""
    return _encoder.encode(apply_job(_decoder.decode(payload)))
