"""Long-term (cross-session) memory: session summaries and the PROJECT MEMORY block, saved
memories and the profile, history, AutoCompact and Dream.

Names are imported on first use, so importing this package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiden._lazy import lazy_exports
from aiden.errors import DreamError, GitCorruptionError, LongTermError, MemoryEntryError, VersionNotFoundError

if TYPE_CHECKING:
    from aiden.longterm.autocompact import (
        AutoCompactor,
        IdleTarget,
        is_idle,
        run_autocompact,
        should_autocompact,
    )
    from aiden.longterm.dream import (
        Dream,
        DreamEditor,
        DreamOutcome,
        SummarizerDreamEditor,
        run_dream_schedule,
    )
    from aiden.longterm.dream_edits import LONG_TERM_FILES, DreamEdit, Version, apply_edits, plan_edits
    from aiden.longterm.entries import (
        INDEX_VERSION,
        MEMORY_TYPES,
        IndexEntry,
        LongTermIndex,
        MemoryEntry,
        MemoryType,
    )
    from aiden.longterm.files import digest_path, list_session_files, running_summary_path, sessions_dir
    from aiden.longterm.gitstore import GitStore
    from aiden.longterm.history import (
        HistoryRecord,
        HistoryStore,
    )
    from aiden.longterm.project import load_project_memory, render_project_memory
    from aiden.longterm.store import (
        LongTermMemoryStore,
        ParseCache,
        StoreStats,
        render_profile,
        run_profile_debouncer,
    )
    from aiden.longterm.summaries import (
        SECTIONS,
        SessionSummary,
        clean_item,
        conflict_key,
        is_excluded,
        merge_many,
        merge_summaries,
        parse_summary_md,
        render_summary_md,
        strip_thinking,
        summary_from_result,
    )
    from aiden.longterm.tools import (
        FORGET_MEMORY_TOOL,
        SAVE_MEMORY_TOOL,
    )
    from aiden.longterm.writer import (
        CapPlan,
        CapResult,
        SessionSummaryWriter,
        SummaryWrite,
        enforce_cap,
        plan_cap,
    )

__all__ = [
    "FORGET_MEMORY_TOOL",
    "INDEX_VERSION",
    "LONG_TERM_FILES",
    "MEMORY_TYPES",
    "SAVE_MEMORY_TOOL",
    "SECTIONS",
    "AutoCompactor",
    "CapPlan",
    "CapResult",
    "Dream",
    "DreamEdit",
    "DreamEditor",
    "DreamError",
    "DreamOutcome",
    "GitCorruptionError",
    "GitStore",
    "HistoryRecord",
    "HistoryStore",
    "IdleTarget",
    "IndexEntry",
    "LongTermError",
    "LongTermIndex",
    "LongTermMemoryStore",
    "MemoryEntry",
    "MemoryEntryError",
    "MemoryType",
    "ParseCache",
    "SessionSummary",
    "SessionSummaryWriter",
    "StoreStats",
    "SummarizerDreamEditor",
    "SummaryWrite",
    "Version",
    "VersionNotFoundError",
    "apply_edits",
    "clean_item",
    "conflict_key",
    "digest_path",
    "enforce_cap",
    "is_excluded",
    "is_idle",
    "list_session_files",
    "load_project_memory",
    "merge_many",
    "merge_summaries",
    "parse_summary_md",
    "plan_cap",
    "plan_edits",
    "render_profile",
    "render_project_memory",
    "render_summary_md",
    "run_autocompact",
    "run_dream_schedule",
    "run_profile_debouncer",
    "running_summary_path",
    "sessions_dir",
    "should_autocompact",
    "strip_thinking",
    "summary_from_result",
]

_LAZY: dict[str, str] = {
    name: module
    for module, names in {  # as imported above
        "aiden.longterm.autocompact": (
            "AutoCompactor", "IdleTarget", "is_idle", "run_autocompact", "should_autocompact",
        ),
        "aiden.longterm.dream": (
            "Dream", "DreamEditor", "DreamOutcome", "SummarizerDreamEditor", "run_dream_schedule",
        ),
        "aiden.longterm.dream_edits": (
            "DreamEdit", "LONG_TERM_FILES", "Version", "apply_edits", "plan_edits",
        ),
        "aiden.longterm.entries": (
            "INDEX_VERSION", "IndexEntry", "LongTermIndex", "MEMORY_TYPES", "MemoryEntry", "MemoryType",
        ),
        "aiden.longterm.files": ("digest_path", "list_session_files", "running_summary_path", "sessions_dir"),
        "aiden.longterm.gitstore": ("GitStore",),
        "aiden.longterm.history": (
            "HistoryRecord", "HistoryStore",
        ),
        "aiden.longterm.project": ("load_project_memory", "render_project_memory"),
        "aiden.longterm.store": (
            "LongTermMemoryStore", "ParseCache", "StoreStats", "render_profile",
            "run_profile_debouncer",
        ),
        "aiden.longterm.summaries": (
            "SECTIONS", "SessionSummary", "clean_item", "conflict_key", "is_excluded", "merge_many",
            "merge_summaries", "parse_summary_md", "render_summary_md", "strip_thinking",
            "summary_from_result",
        ),
        "aiden.longterm.tools": (
            "FORGET_MEMORY_TOOL", "SAVE_MEMORY_TOOL",
        ),
        "aiden.longterm.writer": (
            "CapPlan", "CapResult", "SessionSummaryWriter", "SummaryWrite", "enforce_cap", "plan_cap",
        ),
    }.items()
    for name in names
}


__getattr__ = lazy_exports(__name__, _LAZY)
