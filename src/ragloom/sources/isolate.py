"""Plug-in sources run apart from ragloom's own event loop and under a time limit.

A source from another package (an entry point of the group ``ragloom.sources``) may block in
its ``async def retrieve`` (``requests.get``, ``time.sleep``: the classic mistake). On the
event loop every source shares, that stalled the whole query: the per-source and total
timeouts could not fire, the delay was blamed on the code source, and a server answered 504
instead of the code hits at the per-source deadline. A sync that hung held the index's source
write lock for ever.

:class:`IsolatedSource` wraps such a source:

- its coroutines (``retrieve``, ``health_check``, ``dispose``) run on an event loop of its
  own, in a daemon thread of its own, started at its first call. The caller awaits the result
  and its timeouts hold whatever the source does. One loop for the source's life keeps what
  it binds to a loop (an HTTP client's connection pool) valid from one call to the next;
- its ``sync`` runs in a daemon thread and is given :data:`PLUGIN_SYNC_TIMEOUT_S`; past that it
  is reported as a failed sync (``SourceSyncError``) and left to finish in the background;
- everything else (``name``, ``enabled``, ``freshness``, ``indexed``, ...) is the source's own.

The built-in sources are not wrapped: they already run their blocking work in threads
(``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from ragloom.errors import DbError, RagError, SourceSyncError
from ragloom.sources.base import (
    RetrieveOptions,
    Source,
    SourceHit,
    SourceQuery,
    SourceSettings,
    SyncReport,
)

__all__ = [
    "PLUGIN_DISPOSE_WAIT_S",
    "PLUGIN_FRESHNESS_TIMEOUT_S",
    "PLUGIN_SYNC_TIMEOUT_S",
    "IsolatedSource",
]

log = logging.getLogger("ragloom")

T = TypeVar("T")

PLUGIN_SYNC_TIMEOUT_S: Final = 1800.0
"""How long a plug-in source's ``sync`` may run before it is reported as failed (30 minutes:
a first sync of a large tracker is minutes; a hang is for ever)."""
PLUGIN_FRESHNESS_TIMEOUT_S: Final = 2.0
"""How long ``status`` waits for a plug-in source's ``freshness`` (it is then reported as an
error of that source)."""
PLUGIN_DISPOSE_WAIT_S: Final = 2.0
"""How long closing waits for a plug-in's ``dispose`` when the source is idle (a source still
busy with a call is closed in the background: its loop is blocked)."""


_RUNNING: dict[tuple[str, str], threading.Event] = {}
"""(call, source key) -> set when the plug-in's last such call ended (:meth:`_in_thread`)."""
_RUNNING_LOCK = threading.Lock()


class IsolatedSource:
    """A plug-in :class:`~ragloom.sources.base.Source` on its own event loop and thread."""

    def __init__(
        self, inner: Source, *, key: str = "", sync_timeout_s: float = PLUGIN_SYNC_TIMEOUT_S
    ) -> None:
        """``key`` names the source across instances (its name and index folder): a
        ``sync`` or ``freshness`` still running from an earlier instance is not started
        again."""
        self.inner = inner
        self.name = inner.name
        self.key = key or inner.name
        self.sync_timeout_s = sync_timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy = 0
        """Calls running on the source's loop (started there and not finished)."""
        self._lock = threading.Lock()

    def __getattr__(self, attr: str) -> Any:
        # only reached for what this class does not define: the source's own attributes
        return getattr(self.inner, attr)

    @property
    def enabled(self) -> bool:
        return self.inner.enabled

    def initialize(self, settings: SourceSettings) -> None:
        self.inner.initialize(settings)

    # -- the source's own loop ------------------------------------------------------------
    def _own_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()

                def run() -> None:
                    try:
                        loop.run_forever()
                    finally:
                        loop.close()

                threading.Thread(
                    target=run, name=f"ragloom-source-{self.name}", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    async def _on_own_loop(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``make()`` run on the source's loop, awaited from the caller's; cancelling the
        caller (a timeout) cancels it there, at its next ``await``. A call whose caller gave
        up before the loop reached it (the loop was blocked by an earlier call) is not made:
        abandoned calls queued behind a blocked one ran one after another, each blocking the
        source again (a trial: four timed-out questions kept it blocked for 40 s)."""
        loop = self._own_loop()
        handed: list[concurrent.futures.Future[T]] = []

        async def tracked() -> T:
            if handed and handed[0].cancelled():
                raise asyncio.CancelledError
            with self._lock:
                self._busy += 1
            try:
                return await make()
            finally:  # on the source's loop: a call blocked there is still busy
                with self._lock:
                    self._busy -= 1

        future = asyncio.run_coroutine_threadsafe(tracked(), loop)
        handed.append(future)
        return await asyncio.wrap_future(future)

    async def retrieve(self, query: SourceQuery, options: RetrieveOptions) -> list[SourceHit]:
        return await self._on_own_loop(lambda: self.inner.retrieve(query, options))

    async def health_check(self) -> bool:
        return await self._on_own_loop(self.inner.health_check)

    async def dispose(self) -> None:
        """The source's ``dispose`` on its loop, then the loop stopped. An idle source is
        waited for (up to :data:`PLUGIN_DISPOSE_WAIT_S`); a busy one (a call still running,
        its loop blocked) is closed in the background, so a hung plug-in never holds the
        answer back."""
        future, busy = self._dispose_on_own_loop()
        if busy:
            return
        try:
            await asyncio.wait_for(asyncio.wrap_future(future), PLUGIN_DISPOSE_WAIT_S)
        except TimeoutError:
            log.warning("source %s did not dispose in %.0f s", self.name, PLUGIN_DISPOSE_WAIT_S)

    def dispose_later(self) -> None:
        """The source's ``dispose`` started on its loop, not waited for (a server closing the
        sources of one answer: a slow ``dispose`` added its time to every answer)."""
        self._dispose_on_own_loop()

    def _dispose_on_own_loop(self) -> tuple[concurrent.futures.Future[None], bool]:
        loop = self._own_loop()  # a source never asked has one now: its dispose is bounded
        with self._lock:
            self._loop = None
            busy = self._busy > 0
        future = asyncio.run_coroutine_threadsafe(self.inner.dispose(), loop)
        # stopped once the result is handed over (stopping from inside the coroutine ended
        # the loop before it passed the result on)
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(loop.stop))
        return future, busy

    # -- indexing ------------------------------------------------------------------------
    def sync(self) -> SyncReport:
        """The source's ``sync`` in a daemon thread, given :attr:`sync_timeout_s`."""
        return self._in_thread("sync", self.inner.sync, self.sync_timeout_s, SourceSyncError)

    def _in_thread(
        self, what: str, call: Callable[[], T], timeout_s: float, error: type[RagError]
    ) -> T:
        """``call()`` in a daemon thread; ``error`` when it gives no answer in ``timeout_s``
        (it is left running). What it raises is raised here, as it is."""
        outcome: list[T | BaseException] = []
        with _RUNNING_LOCK:
            last = _RUNNING.get((what, self.key))
            if last is not None and not last.is_set():
                # a server's `status` asked every few seconds: a thread each time, for ever
                raise error(
                    f"{self.name}: its last {what} has given no answer yet (a plug-in source)"
                )
            done = _RUNNING[(what, self.key)] = threading.Event()

        def run() -> None:
            try:
                outcome.append(call())
            except BaseException as exc:  # handed to the caller's thread as it is
                outcome.append(exc)
            finally:
                done.set()

        threading.Thread(target=run, name=f"ragloom-{what}-{self.name}", daemon=True).start()
        if not done.wait(timeout_s):
            raise error(
                f"{self.name}: the {what} gave no answer in {timeout_s:g} s "
                "(a plug-in source; it was left running and what it holds is kept)"
            )
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def freshness(self) -> dict[str, object]:
        """The source's ``freshness`` in a daemon thread, given
        :data:`PLUGIN_FRESHNESS_TIMEOUT_S` (``status`` of a server called every synced
        source's: one that never returned hung the route, and the server's stop)."""
        return self._in_thread(
            "freshness", self.inner.freshness, PLUGIN_FRESHNESS_TIMEOUT_S, DbError
        )
