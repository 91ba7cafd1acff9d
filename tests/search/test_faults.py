"""Disk faults during a run: one clear error, nothing logged is lost, and `--resume` continues exactly."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from dse.errors import ConfigError, RunFailed, SearchError
from dse.search import rundir
from dse.search.runner import run_study

from .test_runner import comparable, read_log, zdt_study
from .toy import zdt1


def test_a_full_disk_mid_run_keeps_the_log_and_resume_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    study = zdt_study(tmp_path, 160)
    original = rundir.PointLog.append
    calls = {"n": 0}

    def append_until_full(self: rundir.PointLog, records) -> None:  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        original(self, records)

    monkeypatch.setattr(rundir.PointLog, "append", append_until_full)
    with pytest.raises(RunFailed, match="No space left on device.*every point its log holds.*--resume"):
        run_study(study, out=tmp_path / "out", evaluator=zdt1, executor="serial")
    run_dir = next((tmp_path / "out").glob("zdt/*"))
    kept = read_log(run_dir)
    assert 0 < len(kept) < 160 and not (run_dir / "summary.json").exists()

    monkeypatch.setattr(rundir.PointLog, "append", original)
    resumed = run_study(resume=run_dir, evaluator=zdt1)
    after = read_log(run_dir)
    assert after[: len(kept)] == kept and len(after) == 160 and resumed.n_cached == len(kept)
    straight = run_study(zdt_study(tmp_path, 160, "same.yaml"), out=tmp_path / "straight", evaluator=zdt1)
    assert comparable(after) == comparable(read_log(straight.run_dir))


def test_an_unwritable_results_directory_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the results directory should go")
    with pytest.raises(ConfigError, match="cannot write the run directory"):
        run_study(zdt_study(tmp_path, 8), out=blocker, evaluator=zdt1, executor="serial")


def test_failing_to_write_the_tables_is_a_run_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dse.search import runner

    def full(*args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(runner, "write_tables", full)
    with pytest.raises(RunFailed, match="Read-only file system.*--resume"):
        run_study(zdt_study(tmp_path, 8), out=tmp_path, evaluator=zdt1, executor="serial")
    log = next(tmp_path.glob("zdt/*/points.jsonl"))
    assert len([json.loads(x) for x in log.read_text().splitlines()]) == 8


def test_an_unreachable_ray_address_fails_at_once() -> None:
    """ray.init retries an address nobody listens on for minutes; dse checks the TCP port first."""
    import socket
    import time

    from dse.search.executors import _check_reachable

    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(SearchError, match=f"could not reach the Ray cluster at 127.0.0.1:{port}"):
        _check_reachable(f"127.0.0.1:{port}")
    assert time.monotonic() - start < 10
    with socket.socket() as server:  # a listening port passes; forms Ray resolves itself are left to it
        server.bind(("127.0.0.1", 0))
        server.listen()
        _check_reachable(f"ray://127.0.0.1:{server.getsockname()[1]}")
    _check_reachable("auto")


def test_a_run_refused_before_any_point_leaves_no_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unreachable Ray cluster (here: an executor that cannot start) fails the run before any point: the
    run directory it had just made (study, env, an empty log) is removed, not left as an empty run that
    `dse run` would later continue (a fuzzer's finding). A resumed run's directory is kept."""
    from dse.search import executors

    def unreachable(*args: object, **kwargs: object) -> None:
        raise SearchError("could not reach the Ray cluster at 1.2.3.4:1")

    first = run_study(zdt_study(tmp_path, 16), out=tmp_path / "kept", evaluator=zdt1)
    monkeypatch.setattr(executors, "make_executor", unreachable)
    with pytest.raises(SearchError, match="could not reach"):
        run_study(zdt_study(tmp_path, 16), out=tmp_path / "res", evaluator=zdt1)
    assert not (tmp_path / "res" / "zdt").exists()  # nor the study's folder it held alone
    with pytest.raises(SearchError, match="could not reach"):  # a later refusal keeps the earlier run
        run_study(zdt_study(tmp_path, 16), out=tmp_path / "kept", evaluator=zdt1, fresh=True)
    assert [p.name for p in (tmp_path / "kept" / "zdt").iterdir()] == [first.run_dir.name]


_ORPHAN_PARENT = """
import os, time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from dse.search.executors import _worker_init

def pid_after(delay_s):
    time.sleep(delay_s)  # long enough that both workers take a task
    return os.getpid()

if __name__ == "__main__":
    pool = ProcessPoolExecutor(2, mp_context=get_context("spawn"), initializer=_worker_init)
    print(" ".join(map(str, sorted(set(pool.map(pid_after, [0.5] * 4))))), flush=True)
    time.sleep(600)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see the workers")
def test_process_workers_leave_when_their_parent_is_killed(tmp_path: Path) -> None:
    """`dse run --executor process` killed with SIGKILL left its spawn workers idle under init (a
    newcomer found them 35 s later); each now exits within a poll once it is reparented."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(_ORPHAN_PARENT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = parent.stdout.readline() if parent.stdout else ""
        workers = [int(p) for p in line.split()]
        assert workers, "the pool's workers did not start"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 20.0
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in workers):
        time.sleep(0.2)
    alive = [pid for pid in workers if Path(f"/proc/{pid}").exists()]
    for pid in alive:  # leave nothing behind whatever the outcome
        os.kill(pid, signal.SIGKILL)
    assert not alive
