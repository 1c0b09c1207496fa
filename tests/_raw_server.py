"""A tiny HTTP server on 127.0.0.1 whose answers a test writes byte by byte.

For misbehaviour the mock server does not script: answers that trickle, bodies larger than they
should be, status codes and bodies of the test's choosing. One thread per connection; each request
is read whole (``Content-Length`` bodies), then handed to the test's ``handler(request, conn)``,
which writes what it likes on the socket. The connection is closed after each answer.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RawRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


Handler = Callable[[RawRequest, socket.socket], None]


def http_bytes(status: int, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 response with a correct Content-Length."""
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {"Content-Type": "application/json"}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def json_answer(payload: Any, status: int = 200) -> Handler:
    """A handler that answers every request with ``payload`` as JSON."""
    data = json.dumps(payload).encode()

    def handle(request: RawRequest, conn: socket.socket) -> None:
        conn.sendall(http_bytes(status, data))

    return handle


def completion(message: Any, **fields: Any) -> dict[str, Any]:
    """A chat completion whose first choice holds ``message`` (any JSON value, well-formed or not)."""
    return {"id": "x", "object": "chat.completion", "model": "raw-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}], **fields}


def trickling(head: bytes, every_s: float, stop: threading.Event) -> Handler:
    """A handler that sends ``head`` one byte every ``every_s`` seconds, then keeps sending spaces."""

    def handle(request: RawRequest, conn: socket.socket) -> None:
        for index in range(len(head)):
            if stop.is_set():
                return
            conn.sendall(head[index:index + 1])
            time.sleep(every_s)
        while not stop.is_set():
            conn.sendall(b" ")
            time.sleep(every_s)

    return handle


@dataclass
class RawServer:
    handler: Handler
    requests: list[RawRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.stopped = threading.Event()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, body = data.split(b"\r\n\r\n", 1)
            first, *lines = head.decode("latin-1").split("\r\n")
            method, path, _ = first.split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines if ":" in line)}
            size = int(headers.get("content-length", "0"))
            while len(body) < size:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                body += chunk
            request = RawRequest(method, path, headers, body)
            with self._lock:
                self.requests.append(request)
            self.handler(request, conn)

    def close(self) -> None:
        self.stopped.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    conn.close()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
