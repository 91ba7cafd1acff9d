"""`dse serve RUN_DIR`: serve the run's report on 127.0.0.1 and open a browser when there is one.

Only the loopback interface is bound: the report is for the person at this machine (use an SSH tunnel,
`ssh -L 8000:127.0.0.1:8000 host`, to look from elsewhere). The server serves the regular files of the run
directory read-only, so the page's own links to `pareto.csv` or `trials.parquet` work too; anything else
is 404 (directories are not listed, and a symlink or `..` that leads out of the run directory is refused),
and a request whose Host header is not this loopback address is 403 (no DNS-rebinding page can read it).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import webbrowser
from collections.abc import Callable
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from dse.errors import DseError
from dse.report.frames import REPORT_FILE

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_PORT = 8000


class _QuietHandler(SimpleHTTPRequestHandler):
    """The run directory's regular files (module docstring), logged through `logging` instead of stderr."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
        logger.debug("%s " + format, self.address_string(), *args)

    def _host_ok(self) -> bool:
        port = self.server.server_address[1]  # type: ignore[index]  # an (address, port) pair for TCP
        host = (self.headers.get("Host") or "").strip().lower()
        return host in {f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")} | {
            "127.0.0.1",
            "localhost",
        }

    def send_head(self):  # http.server's untyped hook, returning a file object or None
        if not self._host_ok():
            self.send_error(403, "this server answers only requests to its loopback address")
            return None
        if self.path.split("?", 1)[0] in ("", "/"):
            self.send_response(302)
            self.send_header("Location", f"/{REPORT_FILE}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        root = os.path.realpath(self.directory)
        real = os.path.realpath(self.translate_path(self.path))
        if os.path.commonpath([real, root]) != root or not os.path.isfile(real):
            self.send_error(404, "not a file of this run")
            return None
        return super().send_head()


class _ReportServer(ThreadingHTTPServer):
    """A threading server whose dropped connections (a browser cancelling a load) are not tracebacks."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            logger.debug("client %s went away: %s", client_address, exc)
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


def has_display() -> bool:
    """True when a browser window can open here (a desktop session, macOS or Windows)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def open_report_server(run_dir: str | Path, port: int = DEFAULT_PORT) -> tuple[ThreadingHTTPServer, str]:
    """Bind a server for the run directory on 127.0.0.1 (writing report.html first if it is missing).

    Returns the server (not yet serving: call `serve_forever`) and the report's URL. Port 0 picks a free
    port.
    """
    if not 0 <= port <= 65535:
        raise DseError(f"--port {port}: a TCP port is 0-65535 (0: any free port)")
    run_dir = Path(run_dir).resolve()
    if not run_dir.is_dir():
        raise DseError(f"{run_dir}: not a run directory")
    if not (run_dir / REPORT_FILE).is_file():
        from dse.report.html import write_html_report

        write_html_report(run_dir)
    handler = functools.partial(_QuietHandler, directory=str(run_dir))
    try:
        server = _ReportServer((HOST, port), handler)
    except OSError as exc:
        raise DseError(
            f"cannot listen on {HOST}:{port} ({exc.strerror}); try --port 0 for any free port"
        ) from exc
    url = f"http://{HOST}:{server.server_address[1]}/{REPORT_FILE}"
    return server, url


def serve_report(
    run_dir: str | Path,
    port: int = DEFAULT_PORT,
    open_browser: bool = True,
    *,
    on_ready: Callable[[str], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve the report until Ctrl-C (or until `stop` is set).

    Args:
        run_dir: the run directory.
        port: TCP port on 127.0.0.1; 0 picks a free one.
        open_browser: open the URL in a browser when this machine has a display.
        on_ready: called with the URL once the server listens (the CLI prints it).
        stop: an event that shuts the server down when set (tests, embedding).
    """
    server, url = open_report_server(run_dir, port)
    if on_ready is not None:
        on_ready(url)
    logger.info("serving %s", url)
    if open_browser and has_display():
        try:
            webbrowser.open(url)
        except webbrowser.Error as exc:
            logger.info("no browser opened: %s", exc)
    if stop is not None:

        def _stop_when_set() -> None:
            stop.wait()
            server.shutdown()

        threading.Thread(target=_stop_when_set, daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
