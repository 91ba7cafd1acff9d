"""`dse serve`: the report over HTTP on 127.0.0.1, started and stopped within the test."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dse.errors import DseError
from dse.report import serve
from dse.report.serve import open_report_server, serve_report


def test_open_report_server_serves_the_report(small_run: Path) -> None:
    server, url = open_report_server(small_run, port=0)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/report.html")
    assert server.server_address[0] == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200
            assert b"Plotly.newPlot" in resp.read()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert (small_run / "report.html").is_file()  # written on demand


def test_serve_report_prints_url_without_a_display(small_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(serve.sys, "platform", "linux")
    opened: list[str] = []
    monkeypatch.setattr(serve.webbrowser, "open", opened.append)
    urls: list[str] = []
    ready, stop = threading.Event(), threading.Event()

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    thread = threading.Thread(
        target=serve_report,
        args=(small_run, 0, True),
        kwargs={"on_ready": on_ready, "stop": stop},
        daemon=True,
    )
    thread.start()
    try:
        assert ready.wait(20)
        with urllib.request.urlopen(urls[0], timeout=10) as resp:
            assert resp.status == 200
            assert resp.read().startswith(b"<!DOCTYPE html>")
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()
    assert opened == []  # no display: the URL is only announced


@pytest.mark.parametrize("port", [-1, 65536, 70000])
def test_a_port_off_the_tcp_range_is_a_readable_error(small_run: Path, port: int) -> None:
    with pytest.raises(DseError, match=f"--port {port}: a TCP port is 0-65535"):  # was an OverflowError
        open_report_server(small_run, port=port)


def test_busy_port_is_a_readable_error(small_run: Path) -> None:
    server, _ = open_report_server(small_run, port=0)
    try:
        with pytest.raises(DseError, match="--port 0"):
            open_report_server(small_run, port=server.server_address[1])
    finally:
        server.server_close()


def _get(url: str, host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def test_only_regular_files_of_the_run_and_only_for_loopback_hosts(small_run: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the browser")
    (small_run / "escape.txt").symlink_to(secret)
    (small_run / "inside.txt").symlink_to(small_run / "summary.json")
    server, url = open_report_server(small_run, port=0)
    base = url.rsplit("/", 1)[0]
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        assert _get(f"{base}/summary.json")[0] == 200
        assert _get(f"{base}/inside.txt")[0] == 200  # a link that stays inside the run
        assert _get(f"{base}/escape.txt")[0] == 404  # a link out of the run directory
        assert _get(f"{base}/../secret.txt")[0] == 404
        assert _get(f"{base}/%2e%2e/secret.txt")[0] == 404
        status, body = _get(f"{base}/")
        assert status == 200 and body.startswith(b"<!DOCTYPE html>")  # `/` is the report, not a listing
        assert _get(f"{base}/summary.json", host=f"localhost:{port}")[0] == 200
        assert _get(f"{base}/summary.json", host="evil.example:80")[0] == 403  # DNS rebinding
        assert _get(f"{base}/summary.json", host=f"127.0.0.1.evil.example:{port}")[0] == 403
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
