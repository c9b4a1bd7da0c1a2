"""Running the app under uvicorn: :func:`bind_socket` and :func:`serve` (``ragloom serve
http`` and the tests use both, so what is tested is what runs)."""

import socket

from fastapi import FastAPI

from ragloom.errors import InputError


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready socket bound to ``host:port`` (port 0: a free one, read it back with
    ``getsockname()``). Binding before uvicorn starts lets the caller print the real URL."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise InputError(f"cannot resolve host {host!r}: {exc.strerror}") from exc
    family, socktype, proto, _, addr = infos[0]
    sock = socket.socket(family, socktype, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(2048)  # connections queue from now on, even before uvicorn's loop runs
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (IPv6 hosts in brackets)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


class _Stopped(Exception):
    """Raised by our SIGINT/SIGTERM handler once uvicorn has shut down gracefully."""


def serve(app: FastAPI, sock: socket.socket, *, log_level: str = "warning") -> None:
    """Run ``app`` under uvicorn on ``sock`` until SIGINT or SIGTERM; blocks, then returns.

    uvicorn shuts down gracefully on those signals and then re-raises the signal under the
    handler that was in place before it started; by default SIGTERM would end the process
    right there, skipping the caller's clean-up (the engine's query log is flushed on close).
    A handler of ours is in place instead, so this function simply returns.
    """
    import signal
    import threading

    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if threading.current_thread() is not threading.main_thread():
        server.run(sockets=[sock])
        return

    def stopped(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.signal(sig, stopped) for sig in signals}
    try:
        server.run(sockets=[sock])
    except _Stopped:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
