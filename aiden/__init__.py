"""aiden: session memory compaction for LLM agents.

Every event of an agent session is appended to a durable log; when the prompt
grows too large, older history is summarized into chunks while the recent hot
window stays verbatim; compacted detail can be recalled; and durable knowledge
carries over to the next session.

Quick start::

    import aiden

    async with aiden.open_memory("./agent") as memory:
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="hi"))

Importing aiden never imports litellm (that happens lazily, only when
:class:`LiteLLMSummarizer` is used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiden._lazy import lazy_exports
from aiden.config import Config, config_from_mapping, load_config
from aiden.errors import (
    AidenError,
    ClosedError,
    CommitConflict,
    ConfigError,
    CorruptionError,
    DreamError,
    DurabilityError,
    EventTooLargeError,
    GitCorruptionError,
    InvalidEventError,
    InvalidIdError,
    InvalidSummaryError,
    LockError,
    LongTermError,
    MemoryEntryError,
    RecallError,
    StorageError,
    SummarizerError,
    SummarizerTimeout,
    SummarizerUnavailable,
    VersionNotFoundError,
)
from aiden.events import EventType, SessionEvent

if TYPE_CHECKING:
    from aiden import sync
    from aiden.context.prompt import PromptBuild, PromptLayers
    from aiden.experience.episodes import Episode, EpisodeEvent
    from aiden.experience.messages import LearnerStats, LearnOutcome
    from aiden.experience.records import Evidence, ExperienceRecord, RecordRow
    from aiden.host import Host, open_host
    from aiden.lifecycle import Outcome, RunStart
    from aiden.longterm.dream import DreamOutcome
    from aiden.longterm.dream_edits import DreamEdit, Version
    from aiden.memory import Memory, open_memory
    from aiden.messages import CompactionOutcome
    from aiden.observe import MemoryStats
    from aiden.openai_format import events_from_message, events_from_response, usage_numbers
    from aiden.policy.triggers import BoundaryDecision
    from aiden.recall.embedding import Embedder, LocalMiniLMEmbedder
    from aiden.recall.tool import RecallContext, RecallHit, RecallStats
    from aiden.storage.chunks import ChunkEntry, ChunkFile, ChunkIndex, SegmentRef
    from aiden.storage.fs import StagedFile, Storage
    from aiden.storage.layout import Layout
    from aiden.storage.postgres import PostgresSessionStore, open_pool, postgres_store_factory
    from aiden.storage.protocol import (
        AppendGroup,
        ChangeFeed,
        ChangeToken,
        ChunkChanges,
        PendingChunks,
        PreparedEvent,
        RecoveryReport,
        SessionStore,
        Snapshot,
    )
    from aiden.storage.session import FileSessionStore
    from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
    from aiden.summarizers.llm.embedder import LiteLLMEmbedder
    from aiden.summarizers.llm.schema import StructuredOutput
    from aiden.summarizers.llm.summarizer import LiteLLMSummarizer, SummarizerStats
    from aiden.summarizers.protocol import (
        Decision,
        ErrorResolution,
        Preparable,
        StructuredSummary,
        Summarizer,
        SummaryRequest,
        SummaryResult,
    )
    from aiden.sync import SyncMemory

__version__ = "0.1.0"

__all__ = [
    "AidenError",
    "AppendGroup",
    "BoundaryDecision",
    "ChangeFeed",
    "ChangeToken",
    "ChunkChanges",
    "ChunkEntry",
    "ChunkFile",
    "ChunkIndex",
    "ClosedError",
    "CommitConflict",
    "CompactionOutcome",
    "Config",
    "ConfigError",
    "CorruptionError",
    "Decision",
    "DreamEdit",
    "DreamError",
    "DreamOutcome",
    "DurabilityError",
    "Embedder",
    "Episode",
    "EpisodeEvent",
    "ErrorResolution",
    "EventTooLargeError",
    "EventType",
    "Evidence",
    "ExperienceRecord",
    "ExtractiveSummarizer",
    "FileSessionStore",
    "GitCorruptionError",
    "Host",
    "InvalidEventError",
    "InvalidIdError",
    "InvalidSummaryError",
    "Layout",
    "LearnOutcome",
    "LearnerStats",
    "LiteLLMEmbedder",
    "LiteLLMSummarizer",
    "LocalMiniLMEmbedder",
    "LockError",
    "LongTermError",
    "Memory",
    "MemoryEntryError",
    "MemoryStats",
    "Outcome",
    "PendingChunks",
    "PostgresSessionStore",
    "Preparable",
    "PreparedEvent",
    "PromptBuild",
    "PromptLayers",
    "RecallContext",
    "RecallError",
    "RecallHit",
    "RecallStats",
    "RecordRow",
    "RecoveryReport",
    "RunStart",
    "SegmentRef",
    "SessionEvent",
    "SessionStore",
    "Snapshot",
    "StagedFile",
    "Storage",
    "StorageError",
    "StructuredOutput",
    "StructuredSummary",
    "Summarizer",
    "SummarizerError",
    "SummarizerStats",
    "SummarizerTimeout",
    "SummarizerUnavailable",
    "SummaryRequest",
    "SummaryResult",
    "SyncMemory",
    "Version",
    "VersionNotFoundError",
    "config_from_mapping",
    "events_from_message",
    "events_from_response",
    "load_config",
    "open_host",
    "open_memory",
    "open_pool",
    "postgres_store_factory",
    "sync",
    "usage_numbers",
]


# Everything but the errors, events and config loads on first use (litellm, the extractive rule
# tables, every actor): `import aiden` stays cheap, and the first call pays for what it uses.
__getattr__ = lazy_exports(
    __name__,
    {
        "AppendGroup": "aiden.storage.protocol",
        "BoundaryDecision": "aiden.policy.triggers",
        "ChangeFeed": "aiden.storage.protocol",
        "ChangeToken": "aiden.storage.protocol",
        "ChunkChanges": "aiden.storage.protocol",
        "ChunkEntry": "aiden.storage.chunks",
        "ChunkFile": "aiden.storage.chunks",
        "ChunkIndex": "aiden.storage.chunks",
        "CompactionOutcome": "aiden.messages",
        "Decision": "aiden.summarizers.protocol",
        "Embedder": "aiden.recall.embedding",
        "Episode": "aiden.experience.episodes",
        "EpisodeEvent": "aiden.experience.episodes",
        "ErrorResolution": "aiden.summarizers.protocol",
        "Evidence": "aiden.experience.records",
        "ExperienceRecord": "aiden.experience.records",
        "FileSessionStore": "aiden.storage.session",
        "Layout": "aiden.storage.layout",
        "LearnOutcome": "aiden.experience.messages",
        "LearnerStats": "aiden.experience.messages",
        "LiteLLMEmbedder": "aiden.summarizers.llm.embedder",
        "Memory": "aiden.memory",
        "MemoryStats": "aiden.observe",
        "Outcome": "aiden.lifecycle",
        "PendingChunks": "aiden.storage.protocol",
        "Preparable": "aiden.summarizers.protocol",
        "PreparedEvent": "aiden.storage.protocol",
        "PromptBuild": "aiden.context.prompt",
        "PromptLayers": "aiden.context.prompt",
        "RecallContext": "aiden.recall.tool",
        "RecallHit": "aiden.recall.tool",
        "RecallStats": "aiden.recall.tool",
        "RecordRow": "aiden.experience.records",
        "RecoveryReport": "aiden.storage.protocol",
        "RunStart": "aiden.lifecycle",
        "SegmentRef": "aiden.storage.chunks",
        "SessionStore": "aiden.storage.protocol",
        "Snapshot": "aiden.storage.protocol",
        "StagedFile": "aiden.storage.fs",
        "Storage": "aiden.storage.fs",
        "StructuredSummary": "aiden.summarizers.protocol",
        "Summarizer": "aiden.summarizers.protocol",
        "SummaryRequest": "aiden.summarizers.protocol",
        "SummaryResult": "aiden.summarizers.protocol",
        "events_from_message": "aiden.openai_format",
        "events_from_response": "aiden.openai_format",
        "open_memory": "aiden.memory",
        "open_host": "aiden.host",
        "Host": "aiden.host",
        "usage_numbers": "aiden.openai_format",
        "LiteLLMSummarizer": "aiden.summarizers.llm.summarizer",
        "ExtractiveSummarizer": "aiden.summarizers.extractive.summarizer",
        "LocalMiniLMEmbedder": "aiden.recall.embedding",
        # The long-term types live beside dulwich (git history): loaded on first use.
        "DreamEdit": "aiden.longterm.dream_edits",
        "DreamOutcome": "aiden.longterm.dream",
        "Version": "aiden.longterm.dream_edits",
        "SummarizerStats": "aiden.summarizers.llm.summarizer",
        "StructuredOutput": "aiden.summarizers.llm.schema",
        # The PostgreSQL store needs the `postgres` extra (psycopg): loaded on first use.
        "PostgresSessionStore": "aiden.storage.postgres",
        "open_pool": "aiden.storage.postgres",
        "postgres_store_factory": "aiden.storage.postgres",
        # The sync facade loads anyio's blocking portal: only for sync loops.
        "SyncMemory": "aiden.sync",
        "sync": "aiden.sync",
    },
)
