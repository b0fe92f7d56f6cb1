"""The public handle: :class:`Memory`, what :func:`open_memory` yields.

``Memory`` is the core (:class:`~aiden.memory_core.CoreMemory`) with the methods of the
long-term and experience extensions. The runtime never imports this module.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiden.config import Config
from aiden.experience.extension import ExperienceMethods
from aiden.extension import StoreFactory, StoreSpec
from aiden.host import Host, async_only
from aiden.longterm.extension import LongTermMethods
from aiden.recall.embedding import Embedder
from aiden.runtime import run_memory
from aiden.storage.fs import Storage
from aiden.storage.session import FileSessionStore
from aiden.summarizers.protocol import Summarizer

__all__ = ["Memory", "open_memory"]


class Memory(ExperienceMethods, LongTermMethods):
    """An open session memory. Obtain it from :func:`aiden.open_memory`."""


@async_only
@asynccontextmanager
async def open_memory(
    root: str | os.PathLike[str],
    *,
    config: Config | None = None,
    summarizer: Summarizer | None = None,
    model: str | None = None,
    context_window: int | None = None,
    storage: Storage | None = None,
    store_factory: StoreFactory = FileSessionStore,
    embedder: Embedder | None = None,
    store: StoreSpec | None = None,
    session_id: str | None = None,
    host: Host | None = None,
) -> AsyncIterator[Memory]:
    """Open (and recover) the memory under ``root`` and run its actors for the block's duration.

    ``summarizer`` defaults to the embedded :class:`ExtractiveSummarizer` (no
    network). ``model`` selects the context window from litellm's bundled model
    map (without importing litellm); ``context_window`` overrides it; unknown
    models fall back to ``config.context_window``. ``embedder`` (e.g.
    :class:`~aiden.summarizers.llm.embedder.LiteLLMEmbedder`) turns on hybrid recall:
    compacted events and experience records are embedded and both recalls
    fuse BM25 with vector similarity; off by default. ``store`` selects the
    session store (:func:`aiden.extension.select_store`): a ``"postgresql://..."``
    DSN (the PostgreSQL store of ``session_id``, default ``"default"``), a
    store object or a factory; by default the files under ``root``.
    ``storage`` and ``store_factory`` are seams for fault-injection tests.

    ``host`` (from :func:`open_host`) runs the memory's actors in that host's task group. Without
    it, the memories open in one asyncio event loop share a host started with the first and
    stopped with the last (other event loops: a host of the memory's own).

    Use it with ``async with``; a plain ``with`` raises a TypeError pointing to
    :func:`aiden.sync.open_memory`, the blocking facade for synchronous loops.
    """
    async with run_memory(
        Memory,
        root,
        config=config,
        summarizer=summarizer,
        model=model,
        context_window=context_window,
        storage=storage,
        store_factory=store_factory,
        embedder=embedder,
        store=store,
        session_id=session_id,
        host=host,
    ) as memory:
        yield memory
