"""A minimal Chrome DevTools Protocol client over `--remote-debugging-pipe`, for the report's browser test.

It drives Debian's `chromium` in headless mode with no Python dependency beyond the standard library (no
Selenium, no chromedriver, no Playwright browser download): Chromium reads JSON commands from fd 3 and writes
replies and events to fd 4, each message ending in a NUL byte. It records console errors, uncaught
exceptions and every network request of the page, evaluates JavaScript, moves the mouse and takes
screenshots.

Run by hand: `python tests/report/browser.py results/<study>/<run>/report.html shot.png`.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    # Headless Chromium 144+ no longer falls back to SwiftShader for WebGL on its own (scattergl, parcoords).
    "--enable-unsafe-swiftshader",
    # Nothing may leave the machine: any host name fails to resolve (requests are still recorded).
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class CdpError(RuntimeError):
    """A CDP command failed or timed out."""


def _high_fd(fd: int) -> int:
    """Duplicate `fd` to a number >= 10 (close-on-exec) so that moving it onto 3 or 4 cannot clobber it."""
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class Browser:
    """One headless Chromium with one page, controlled over the DevTools pipe. Use as a context manager."""

    def __init__(self, binary: str, *, width: int = 1280, height: int = 900, timeout_s: float = 60.0) -> None:
        # a ceiling, not a timing check: a 2,000-point report loaded in over 20 s on a loaded 2-core machine
        self.timeout_s = timeout_s
        self.console_errors: list[str] = []
        self.console_messages: list[str] = []
        self.requests: list[str] = []
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._replies: dict[int, dict[str, Any]] = {}
        self._cond = threading.Condition()
        self._next_id = 0
        self._profile = tempfile.mkdtemp(prefix="dse-chromium-")
        cmd_r, cmd_w = os.pipe()
        out_r, out_w = os.pipe()
        cmd_r, out_w = _high_fd(cmd_r), _high_fd(out_w)

        def child_fds() -> None:  # runs in the child between fork and exec
            os.dup2(cmd_r, 3)
            os.dup2(out_w, 4)

        args = [
            binary,
            *HEADLESS_FLAGS,
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        self._proc = subprocess.Popen(  # noqa: S603 (fixed argv, no shell)
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=child_fds,  # noqa: PLW1509 (needed to place the pipe on fds 3 and 4)
        )
        os.close(cmd_r)
        os.close(out_w)
        self._w = os.fdopen(cmd_w, "wb", buffering=0)
        self._r = os.fdopen(out_r, "rb", buffering=0)
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    # --- transport ----------------------------------------------------------------------------------

    def _read_loop(self) -> None:
        buf = b""
        while True:
            try:
                chunk = self._r.read(65536)
            except (OSError, ValueError):
                chunk = b""
            if not chunk:
                with self._cond:
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._replies[msg["id"]] = msg
                        self._cond.notify_all()
                else:
                    self._on_event(msg)

    def _on_event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method", ""), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console_messages.append(f"{params.get('type')}: {text}")
            if params.get("type") in ("error", "assert"):
                self.console_errors.append(text)
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            exc = details.get("exception", {}).get("description") or details.get("text", "")
            self.console_errors.append(f"uncaught: {exc}")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.console_messages.append(f"log {entry.get('level')}: {entry.get('text')}")
            if entry.get("level") == "error":
                self.console_errors.append(
                    f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}"
                )
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        self._events.put(msg)

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        """Send one command and wait for its reply's `result`."""
        self._next_id += 1
        mid = self._next_id
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self._w.write(json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout_s
        with self._cond:
            while mid not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self._proc.poll() is not None:
                    raise CdpError(f"{method}: no reply (browser exited: {self._proc.poll() is not None})")
                self._cond.wait(min(left, 0.5))
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise CdpError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a command to the page."""
        return self.send(method, params, self.session)

    def wait_event(self, method: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Block until the page emits `method` (earlier events are dropped)."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError(f"timed out waiting for {method}")
            try:
                msg = self._events.get(timeout=left)
            except queue.Empty:
                continue
            if msg.get("method") == method:
                return msg.get("params", {})

    # --- page helpers -------------------------------------------------------------------------------

    def goto(self, url: str) -> None:
        """Navigate and wait for the load event."""
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page (promises are awaited) and return its JSON value."""
        res = self.call(
            "Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}
        )
        if "exceptionDetails" in res:
            details = res["exceptionDetails"]
            raise CdpError(details.get("exception", {}).get("description") or details.get("text"))
        return res.get("result", {}).get("value")

    def mouse_move(self, x: float, y: float) -> None:
        """Move the mouse to viewport coordinates (fires real mousemove events)."""
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def click(self, x: float, y: float) -> None:
        """A left click at viewport coordinates (move, press, release: what plotly's buttons listen to)."""
        self.mouse_move(x, y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}
            )

    def screenshot(self, path: str | Path, *, full_page: bool = False, selector: str | None = None) -> Path:
        """Save a PNG of the viewport, of the whole page, or of the element `selector` matches."""
        params: dict[str, Any] = {"format": "png"}
        if selector is not None:
            box = self.evaluate(
                f"(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                " return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width,"
                " height: r.height}; })()"
            )
            params |= {"captureBeyondViewport": True, "clip": box | {"scale": 1}}
        elif full_page:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params |= {
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
            }
        data = self.call("Page.captureScreenshot", params)["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        """Stop the browser and remove its profile."""
        with contextlib.suppress(CdpError, OSError, ValueError):
            self.send("Browser.close")
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=5)
        for f in (self._w, self._r):
            with contextlib.suppress(OSError):
                f.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str]) -> int:
    """Open a report, print console errors and requests, save a screenshot."""
    if len(argv) != 3:
        print(__doc__)
        return 2
    binary = find_chromium()
    if binary is None:
        print("no chromium on PATH (apt-get install chromium)")
        return 2
    with Browser(binary) as b:
        b.goto(Path(argv[1]).resolve().as_uri())
        b.evaluate("new Promise((r) => setTimeout(r, 1500))")
        b.screenshot(argv[2], full_page=True)
        print("errors:", b.console_errors)
        print("requests:", b.requests)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
