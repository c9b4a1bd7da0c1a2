"""Several worker processes on one listening socket (``ragloom serve http --workers N``,
docs/serving.md "Workers").

The per-question Python work holds the GIL, so one process answers at most as fast as one core
computes; N processes answer on N cores. :func:`run_workers` is the supervisor: the caller has
bound the socket (:func:`~ragloom.server.http.run.bind_socket`, before anything is loaded);
N worker processes are started with the ``spawn`` start method (never ``fork``: the parent
may hold threads and database connections), each given the socket (multiprocessing passes it
to the child as a duplicated descriptor, as ``uvicorn.supervisors.Multiprocess`` does) and
picklable arguments from which it builds its own engine and app. The kernel spreads new
connections over the processes accepting on the socket.

The supervisor

- waits until every worker reports it is ready, then calls ``announce`` once (the URL line);
- forwards SIGINT and SIGTERM to the workers (as SIGTERM: each stops gracefully, closing its
  engine, so query logs are flushed) and waits for them; a second signal is forwarded again
  (uvicorn then stops without waiting for open connections);
- restarts a worker that exits unexpectedly after start-up, with a backoff (0.5 s doubling up
  to 30 s; reset once a worker ran a minute), and says so on stderr;
- stops everything and raises the worker's error when a worker fails while starting (a bad
  index, a wrong model): the error travels back through the worker's pipe, so the command
  exits with the same ``error:`` line and exit code as one process would.

Workers put themselves in a process group of their own, so a Ctrl-C in a terminal reaches the
supervisor alone (which stops the workers once, gracefully); a worker whose supervisor
disappeared (its pipe closes) stops itself.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragloom.errors import RagError

__all__ = ["WorkerContext", "WorkerTarget", "run_workers"]

log = logging.getLogger("ragloom")

STOP_TIMEOUT_S = 30.0
"""How long the supervisor waits for the workers to stop before killing them."""
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
BACKOFF_RESET_S = 60.0
"""A worker that ran this long before dying is restarted after :data:`BACKOFF_FIRST_S` again."""


class WorkerContext:
    """What a worker process is told: its number, the worker count, the socket; and how it
    reports that it is ready (:meth:`ready`)."""

    def __init__(
        self,
        index: int,
        count: int,
        sock: socket.socket,
        conn: multiprocessing.connection.Connection,
    ) -> None:
        self.index = index
        self.count = count
        self.sock = sock
        self._conn = conn
        self.is_ready = False

    @property
    def primary(self) -> bool:
        """Worker 0: the one that follows the work tree."""
        return self.index == 0

    def ready(self, info: dict[str, Any] | None = None) -> None:
        """Tell the supervisor this worker is about to serve (its engine is open)."""
        self.is_ready = True
        self._conn.send(("ready", self.index, os.getpid(), dict(info or {})))


class WorkerTarget(Protocol):
    """A module-level function (spawn pickles it by name) that builds an engine and serves it
    on ``ctx.sock`` until SIGTERM, calling ``ctx.ready()`` once the engine is open."""

    def __call__(self, ctx: WorkerContext, *args: Any) -> None: ...


def _follow_parent(conn: multiprocessing.connection.Connection) -> None:
    """Stop this worker (SIGTERM to itself) when the supervisor's end of the pipe closes."""
    try:
        while True:
            conn.recv()
    except (EOFError, OSError):
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def _picklable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RagError(f"{type(exc).__name__}: {exc}")
    return exc


def _worker_main(
    target: WorkerTarget,
    index: int,
    count: int,
    sock: socket.socket,
    conn: multiprocessing.connection.Connection,
    args: tuple[Any, ...],
) -> None:
    """The worker process's entry point (runs in the spawned child)."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # a terminal's Ctrl-C goes to the supervisor alone
    threading.Thread(
        target=_follow_parent, args=(conn,), name="ragloom-parent", daemon=True
    ).start()
    ctx = WorkerContext(index, count, sock, conn)
    try:
        target(ctx, *args)
    except BaseException as exc:
        if ctx.is_ready:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            log.error("worker %d failed: %s", index, exc, exc_info=True)
            sys.exit(1)
        with contextlib.suppress(OSError, ValueError):
            conn.send(("failed", index, os.getpid(), _picklable(exc)))
        code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
        sys.exit(code or 1)


@dataclass
class _Worker:
    index: int
    process: Any = None
    conn: multiprocessing.connection.Connection | None = None
    started: float = 0.0
    ready: bool = False
    failures: int = 0
    restart_at: float | None = None
    info: dict[str, Any] = field(default_factory=dict)


class _Supervisor:
    def __init__(
        self,
        target: WorkerTarget,
        args: tuple[Any, ...],
        count: int,
        sock: socket.socket,
        echo: Callable[[str], None],
    ) -> None:
        self.ctx = multiprocessing.get_context("spawn")
        self.target, self.args, self.count, self.sock = target, args, count, sock
        self.echo = echo
        self.workers = [_Worker(i) for i in range(count)]
        self.signals: list[int] = []
        self.forwarded = 0

    def start(self, w: _Worker) -> None:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(
            target=_worker_main,
            args=(self.target, w.index, self.count, self.sock, child, self.args),
            name=f"ragloom-worker-{w.index}",
        )
        proc.start()
        child.close()
        w.process, w.conn, w.started, w.ready, w.restart_at = (
            proc,
            parent,
            time.monotonic(),
            False,
            None,
        )

    def alive(self) -> list[_Worker]:
        return [w for w in self.workers if w.process is not None and w.process.exitcode is None]

    def forward(self) -> None:
        """SIGTERM to every live worker."""
        self.forwarded = len(self.signals)
        for w in self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(w.process.pid, signal.SIGTERM)

    def stop(self) -> None:
        """Stop every worker gracefully; kill those still running after STOP_TIMEOUT_S."""
        self.forward()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.alive() and time.monotonic() < deadline:
            if len(self.signals) > self.forwarded:
                self.forward()
            multiprocessing.connection.wait([w.process.sentinel for w in self.alive()], timeout=0.2)
        for w in self.alive():
            log.warning(
                "worker %d (pid %d) did not stop in time; killing it", w.index, w.process.pid
            )
            w.process.kill()
        for w in self.workers:
            if w.process is not None:
                w.process.join(5)
            if w.conn is not None:
                w.conn.close()

    def loop(self, announce: Callable[[list[dict[str, Any]]], None], stagger: bool) -> None:
        """Run until a signal (return) or a start-up failure (raise it)."""
        first = self.workers[:1] if stagger else self.workers
        for w in first:
            self.start(w)
        announced = False
        while not self.signals:
            waitables: list[Any] = [w.process.sentinel for w in self.alive()]
            waitables += [w.conn for w in self.alive() if w.conn is not None and not w.ready]
            multiprocessing.connection.wait(waitables, timeout=0.2)
            now = time.monotonic()
            for w in self.workers:
                if w.process is None:
                    continue
                if not w.ready and w.conn is not None and w.conn.poll():
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg is not None and msg[0] == "ready":
                        w.ready, w.info = True, {"index": w.index, "pid": msg[2], **msg[3]}
                    elif msg is not None and msg[0] == "failed":
                        w.process.join(10)
                        raise msg[3]
                if w.process.exitcode is not None and w.restart_at is None:
                    code = w.process.exitcode
                    if not w.ready:
                        raise RagError(
                            f"worker {w.index} exited with code {code} while starting "
                            "(see the messages above)"
                        )
                    if now - w.started >= BACKOFF_RESET_S:
                        w.failures = 0
                    delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2**w.failures)
                    w.failures += 1
                    self.echo(
                        f"ragloom: worker {w.index} (pid {w.process.pid}) exited unexpectedly "
                        f"(exit code {code}); restarting it in {delay:g} s"
                    )
                    if w.conn is not None:
                        w.conn.close()
                        w.conn = None
                    w.restart_at = now + delay
                if w.restart_at is not None and now >= w.restart_at:
                    self.start(w)
            if stagger and self.workers[0].ready:
                for w in self.workers[1:]:
                    if w.process is None:
                        self.start(w)
            if not announced and all(w.ready for w in self.workers):
                announced = True
                announce([w.info for w in self.workers])


def run_workers(
    target: WorkerTarget,
    args: tuple[Any, ...],
    count: int,
    sock: socket.socket,
    *,
    announce: Callable[[list[dict[str, Any]]], None],
    echo: Callable[[str], None],
    stagger: bool = False,
) -> None:
    """Serve with ``count`` worker processes running ``target(ctx, *args)`` on ``sock`` until
    SIGINT or SIGTERM (then return once every worker stopped). ``announce`` is called once,
    when every worker is ready, with each worker's ``{index, pid, ...}`` (what it passed to
    ``ctx.ready``); ``echo`` prints a supervisor's notice (a restart). ``stagger``: start
    worker 0 alone and the others once it is ready (a PostgreSQL-backed server: the first
    builds this node's BM25 cache, the others then find it built). A worker failing while
    starting stops the others and its error is raised here."""
    sup = _Supervisor(target, args, count, sock, echo)

    def on_signal(signum: int, frame: object) -> None:
        sup.signals.append(signum)

    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, on_signal) for sig in handled}
    try:
        sup.loop(announce, stagger)
    finally:
        sup.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
