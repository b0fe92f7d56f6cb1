"""The asyncio event loop every litellm call of aiden's runs on.

litellm is asyncio-only, while aiden runs on any anyio backend (trio
included). On asyncio, litellm runs on the caller's own loop: litellm keeps
per-loop state for the whole process (its logging worker's queue and task,
HTTP client pools), and the application's own litellm calls run on that loop
too. A second loop would make the two take turns rebinding that state: each
switch orphans the other loop's logging-worker task ("Task was destroyed but
it is pending!") or carries its queued callbacks across ("LoggingWorker:
event loop changed"). On any other backend (trio), where no asyncio loop
runs, every litellm call runs on one long-lived asyncio loop in a daemon
thread. Either way cancelling the caller cancels the litellm call.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import importlib
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import anyio

from aiden.errors import SummarizerError
from aiden.summarizers.llm.handle import imported_litellm

T = TypeVar("T")


class _LoopThread:
    """One asyncio event loop in a daemon thread, shared by the litellm calls made off asyncio (trio)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def get_loop(self) -> asyncio.AbstractEventLoop:
        """The loop, started on first use (and again in a forked child)."""
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive()
            if self._loop is None or not alive or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                loop.set_task_factory(_kept_tasks())
                ready = threading.Event()
                thread = threading.Thread(
                    target=self._run, args=(loop, ready), name="aiden-litellm-loop", daemon=True
                )
                thread.start()
                ready.wait()
                if self._loop is None:
                    atexit.register(self._shutdown)
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def _shutdown(self) -> None:
        # At interpreter exit: close litellm's pooled clients on the loop they
        # belong to, then stop and close the loop, so nothing warns about
        # unclosed sockets or loops.
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        handle = imported_litellm()
        if handle is not None:
            closer = getattr(handle.module, "close_litellm_async_clients", None)
            if closer is None:
                try:
                    cleanup = importlib.import_module("litellm.llms.custom_httpx.async_client_cleanup")
                    closer = getattr(cleanup, "close_litellm_async_clients", None)
                except ImportError:
                    closer = None
            if callable(closer):
                try:
                    asyncio.run_coroutine_threadsafe(closer(), loop).result(timeout=2.0)
                except Exception:  # best effort at exit; nothing to report to
                    pass
        # Then cancel what still runs there, as asyncio.run does before it closes its loop:
        # litellm's logging-worker task (one per time the worker came back to this loop) is
        # never done, and a pending task of a closed loop is reported at exit ("Task was
        # destroyed but it is pending!").
        try:
            asyncio.run_coroutine_threadsafe(_cancel_all_tasks(), loop).result(timeout=2.0)
        except Exception:  # best effort at exit; nothing to report to
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=2.0)
        if not thread.is_alive():
            loop.close()

    async def run(self, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``factory()`` on the caller's asyncio loop, or else on the loop thread, and await it.

        Cancelling the caller cancels the asyncio task (its HTTP request is
        aborted); the cancellation is then re-raised unchanged.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on asyncio (trio): litellm needs a loop of its own
            pass
        else:
            return await _run_on(loop, factory)
        future = _submit(factory, self.get_loop())
        try:
            # Waiting in a worker thread keeps this backend-neutral (trio too).
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            future.cancel()
            raise
        except concurrent.futures.CancelledError as exc:
            # The task was cancelled from inside litellm, not by our caller.
            raise SummarizerError("summarizer call was cancelled by the provider client") from exc


def _kept_tasks() -> Callable[..., asyncio.Task[Any]]:
    """A task factory that keeps every task of the loop referenced until it is done.

    litellm's logging worker drops its task when a call comes from another loop
    (the application's own asyncio loop after a call from trio): the task, still
    waiting on this loop, would be garbage collected while pending ("Task was
    destroyed but it is pending!"). Kept, it is cancelled at exit like the rest.
    """
    alive: set[asyncio.Task[Any]] = set()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
        alive.add(task)
        task.add_done_callback(alive.discard)
        return task

    return factory


async def _cancel_all_tasks() -> None:
    """Cancel every other task of the running loop and wait until each has finished."""
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


_loop_thread = _LoopThread()

# Tasks abandoned by a cancelled caller, kept referenced until they finish
# cancelling (the event loop holds its tasks only weakly).
_abandoned: set[asyncio.Task[Any]] = set()


def _retrieve(task: asyncio.Task[Any]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: an error after the caller left is not reported as "never retrieved"


async def _run_on(loop: asyncio.AbstractEventLoop, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Await ``factory()`` as its own task on ``loop``, the caller's (the same contract as the loop thread).

    A task of its own, rather than a plain ``await``, tells the two
    cancellations apart as the loop thread does: the caller's (deadline,
    cancel scope) cancels the litellm task and is re-raised unchanged; a
    cancellation from inside litellm is a :class:`SummarizerError`, not a
    cancellation of the caller's scope.
    """
    task = loop.create_task(factory())
    try:
        await asyncio.wait((task,))
    except BaseException:
        if not task.done():
            _abandoned.add(task)
            task.add_done_callback(_retrieve)
            task.cancel()
        raise
    if task.cancelled():
        raise SummarizerError("summarizer call was cancelled by the provider client")
    return task.result()


def _submit(
    factory: Callable[[], Coroutine[Any, Any, T]], loop: asyncio.AbstractEventLoop
) -> concurrent.futures.Future[T]:
    """Schedule ``factory()`` on ``loop`` (another thread's) from an empty context.

    The task would otherwise inherit the caller's context variables, among
    them sniffio's "trio" marker, and anyio inside litellm's HTTP client would
    then take the asyncio loop for a trio one.
    """
    coro = factory()
    try:
        return contextvars.Context().run(asyncio.run_coroutine_threadsafe, coro, loop)
    except Exception:
        coro.close()  # never scheduled: close it so it does not warn "never awaited"
        raise
