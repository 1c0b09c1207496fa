"""Headless Chromium driven over the DevTools protocol on a pipe: no driver, no websocket, no extra package.

Chromium started with ``--remote-debugging-pipe`` reads protocol messages (JSON, each ended by a NUL
byte) on file descriptor 3 and writes its own on descriptor 4. :class:`Browser` starts it in its own
process group, asks the kernel to kill it if this process dies (``PR_SET_PDEATHSIG``), and
:meth:`Browser.close` ends the whole group, so no browser outlives the test that started it.

Used by the viewer's tests, by ``benchmarks/viewer.py`` and by ``scripts/viewer_screenshots.py``.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = (
    "no Chromium found (looked for {names} on PATH and $CHROMIUM): install it, e.g. `apt-get install -y chromium` "
    "on Debian (.ci/run does this when it runs as root), or point $CHROMIUM at a Chromium binary"
)
PR_SET_PDEATHSIG = 1


# What Chromium answers an evaluation whose page went away under it.
NAVIGATED = "Inspected target navigated or closed"


class BrowserError(RuntimeError):
    """The browser could not be started, or a protocol command failed."""


def find_chromium() -> str | None:
    """The Chromium binary: $CHROMIUM, else the first of :data:`CANDIDATES` on PATH."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else shutil.which(explicit)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def install_hint() -> str:
    return INSTALL_HINT.format(names=", ".join(CANDIDATES))


def die_with_parent() -> None:
    """In a child before exec (``preexec_fn``): the kernel kills it when this process dies (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _child_setup(read_end: int, write_end: int) -> None:
    """In the child before exec: the protocol pipe on fds 3 and 4, and death with the parent."""
    high_read = fcntl.fcntl(read_end, fcntl.F_DUPFD, 10)
    high_write = fcntl.fcntl(write_end, fcntl.F_DUPFD, 10)
    os.dup2(high_read, 3)
    os.dup2(high_write, 4)
    die_with_parent()


class Browser:
    """One headless Chromium with one page (tab), driven by protocol commands."""

    def __init__(self, width: int = 1280, height: int = 860, binary: str | None = None) -> None:
        self.binary = binary or find_chromium()
        if self.binary is None:
            raise BrowserError(install_hint())
        self.width, self.height = width, height
        self._profile = tempfile.mkdtemp(prefix="commitbench-chromium-")
        self._proc: subprocess.Popen[bytes] | None = None
        self._next_id = 0
        self._lock = threading.Lock()
        self._replies: dict[int, dict[str, Any]] = {}
        self._arrived = threading.Condition(self._lock)
        self.events: list[dict[str, Any]] = []
        self.session = ""
        self._reader: threading.Thread | None = None
        self._closed = False

    # ------------------------------------------------------------------------ process
    def start(self) -> Browser:
        to_chrome_read, to_chrome_write = os.pipe()
        from_chrome_read, from_chrome_write = os.pipe()
        command = [
            self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
            f"--user-data-dir={self._profile}", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage", "--mute-audio", "--hide-scrollbars",
            "--force-color-profile=srgb", "--force-device-scale-factor=1",
            f"--window-size={self.width},{self.height}", "about:blank",
        ]
        try:
            self._proc = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                close_fds=False, start_new_session=True,
                preexec_fn=lambda: _child_setup(to_chrome_read, from_chrome_write),
            )
        finally:
            os.close(to_chrome_read)
            os.close(from_chrome_write)
        self._out = os.fdopen(to_chrome_write, "wb", buffering=0)
        self._in = os.fdopen(from_chrome_read, "rb", buffering=0)
        self._reader = threading.Thread(target=self._read_loop, name="chromium-pipe", daemon=True)
        self._reader.start()
        try:
            version = self.command("Browser.getVersion", timeout=30)
            self.version = str(version.get("product", ""))
            target = self.command("Target.createTarget", {"url": "about:blank"})
            attached = self.command("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
            self.session = attached["sessionId"]
            for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
                self.command(domain)
            self.command("Emulation.setDeviceMetricsOverride",
                         {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """End the browser and every process it started; idempotent."""
        if self._closed:
            return
        self._closed = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        if proc is not None:  # children that outlived the main process share its group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    os.killpg(proc.pid, 0)
                except (ProcessLookupError, PermissionError):
                    break
                time.sleep(0.05)
        for handle in (getattr(self, "_out", None), getattr(self, "_in", None)):
            if handle is not None:
                with contextlib.suppress(OSError):
                    handle.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # ------------------------------------------------------------------------ protocol
    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = self._in.read(65536)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                with self._lock:
                    self._replies[-1] = {"error": {"message": "the browser closed its pipe"}}
                    self._arrived.notify_all()
                return
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                message = json.loads(raw)
                with self._lock:
                    if "id" in message:
                        self._replies[message["id"]] = message
                    else:
                        self.events.append(message)
                    self._arrived.notify_all()

    def command(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60.0,
                browser_level: bool = False) -> dict[str, Any]:
        """Send one command (to the page's session unless ``browser_level``) and wait for its reply."""
        with self._lock:
            self._next_id += 1
            ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if self.session and not browser_level and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        self._out.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._lock:
            while ident not in self._replies and -1 not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"{method}: no reply within {timeout:.0f} s")
                self._arrived.wait(left)
            reply = self._replies.pop(ident, None) or self._replies[-1]
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error'].get('message')}")
        return dict(reply.get("result", {}))

    # ------------------------------------------------------------------------ pages
    def evaluate(self, expression: str, timeout: float = 60.0) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.command("Runtime.evaluate", {
            "expression": expression, "awaitPromise": True, "returnByValue": True, "userGesture": True,
        }, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"script failed: {text}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60.0, interval: float = 0.05) -> Any:
        """Poll until ``expression`` is truthy in the page; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except BrowserError as exc:
                # The page navigated while the expression ran (a redirect, a link followed): poll the new one.
                if NAVIGATED not in str(exc):
                    raise
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out after {timeout:.0f} s waiting for: {expression}")
            time.sleep(interval)

    def goto(self, url: str, ready: str | None = None, timeout: float = 60.0) -> None:
        """Load ``url`` (a new document) and wait until ``ready`` (a JS expression) holds, if given."""
        with self._lock:
            mark = len(self.events)
        reply = self.command("Page.navigate", {"url": url}, timeout=timeout)
        if reply.get("errorText"):
            raise BrowserError(f"cannot load {url}: {reply['errorText']}")
        if reply.get("loaderId"):  # a new document (a change of the fragment alone has no loader)
            self._wait_event("Page.loadEventFired", mark, timeout)
        if ready:
            self.wait_for(ready, timeout)

    def _wait_event(self, method: str, since: int, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for event in self.events[since:]:
                    if event.get("method") == method:
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BrowserError(f"no {method} within {timeout:.0f} s")
                self._arrived.wait(left)

    def screenshot(self, path: Path | str, full_page: bool = False, max_height: float = 12000.0) -> Path:
        """A PNG of the viewport, or of the page from its top down to ``max_height`` pixels, at ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = self.command("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params.update(captureBeyondViewport=True, clip={
                "x": 0, "y": 0, "width": self.width, "height": min(float(size["height"]), max_height), "scale": 1,
            })
        data = self.command("Page.captureScreenshot", params)["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads the page reported so far."""
        found = []
        with self._lock:
            events = list(self.events)
        for event in events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                described = details.get("exception", {}).get("description") or details.get("text")
                found.append(f"exception: {described}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console." + params["type"] + ": " + " ".join(
                    str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                found.append(f"log ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".strip())
        return found


@contextlib.contextmanager
def browser(width: int = 1280, height: int = 860) -> Iterator[Browser]:
    with Browser(width, height) as b:
        yield b


def browser_session() -> Iterator[Browser]:
    """A started Chromium for a test module's fixture: fails the test (never skips) when Chromium is missing
    or does not start, and checks on the way out that the browser and everything it started are gone."""
    import pytest

    if find_chromium() is None:
        pytest.fail(install_hint(), pytrace=False)
    try:
        instance = Browser(width=1280, height=900).start()
    except BrowserError as exc:
        pytest.fail(f"Chromium did not start: {exc}", pytrace=False)
    try:
        yield instance
    finally:
        pid = instance.pid
        instance.close()
        if pid is not None:
            with pytest.raises(ProcessLookupError):
                os.killpg(pid, 0)
