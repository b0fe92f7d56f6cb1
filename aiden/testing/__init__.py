"""Typed fakes for testing code that uses aiden (and aiden itself).

Everything here is deterministic and offline:

* :class:`ScriptedSummarizer` returns scripted results in order and records requests.
* :class:`SlowSummarizer` sleeps (virtual time works: trio's ``MockClock``) then delegates.
* :class:`GatedSummarizer` holds every call until the test opens it, then delegates.
* :class:`FailingSummarizer` always raises.
* :class:`HangingSummarizer` never answers; counts calls and cancellations.
* :class:`FakeLLMServer` is a tiny OpenAI-compatible HTTP server on 127.0.0.1 so a
  real HTTP client (litellm, openai) can be exercised without a provider; it
  also answers ``/v1/embeddings`` with :func:`hashing_embedding` vectors.
* :class:`HashingEmbedder` is a deterministic recall embedder (hashed words and trigrams).
* :class:`RecordingStorage` records every filesystem mutation (:class:`StorageOp`) in
  order, for power-loss replay.
* :class:`MemorySessionStore` is an in-memory session store; the conformance
  suite every store backend must pass is :mod:`aiden.testing.conformance`
  (imported on its own: it needs hypothesis).

No pytest import here: the package ships with aiden and must be importable
by any test runner.
"""

from __future__ import annotations

from aiden.testing.embedding import HashingEmbedder, hashing_embedding
from aiden.testing.llm_server import FakeLLMServer, RecordedRequest, Responder
from aiden.testing.memstore import MemorySessionStore
from aiden.testing.recording import RecordingStorage, StorageOp
from aiden.testing.summarizers import (
    FailingSummarizer,
    GatedSummarizer,
    HangingSummarizer,
    ScriptedSummarizer,
    SlowSummarizer,
    default_summary_text,
)

__all__ = [
    "FailingSummarizer",
    "FakeLLMServer",
    "GatedSummarizer",
    "HangingSummarizer",
    "HashingEmbedder",
    "MemorySessionStore",
    "RecordedRequest",
    "RecordingStorage",
    "Responder",
    "ScriptedSummarizer",
    "SlowSummarizer",
    "StorageOp",
    "default_summary_text",
    "hashing_embedding",
]
