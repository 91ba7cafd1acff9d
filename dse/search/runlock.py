"""One dse run at a time per run directory: an exclusive flock on its lock file (`rundir.LOCK_FILE`).

    lock = lock_run_dir(run_dir / LOCK_FILE)   # ConfigError naming the holder's pid when another run has it
    with lock:
        ...                                    # write the run's files; released on any exit

Two runs of one study at once (`make run` in two terminals) both continued its newest run directory: each
evaluated and logged every point, and both rewrote its tables. The OS drops an flock when its file is
closed, also when the process is killed (SIGKILL, a crash), so a lock never outlives its run and there is
no stale lock to clear. Readers (`dse report`) take no lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import IO

from dse.errors import ConfigError

logger = logging.getLogger(__name__)


class RunLock:
    """A held lock on a run directory (`lock_run_dir`); `release` (or leaving a `with`) drops it."""

    def __init__(self, fh: IO[str], created: bool) -> None:
        self._fh = fh
        self.created = created  # the run made the directory: a run refused before any point removes it

    def release(self) -> None:
        # The file stays: unlinking it would let a third run lock a new file while a second holds the old.
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_run_dir(path: Path, created: bool = False) -> RunLock:
    """Hold an exclusive flock on `path`, the lock file of a run directory, and write this pid into it;
    ConfigError when another process holds it (the message names its pid and the ways on)."""
    import fcntl  # POSIX: only a run takes the lock, so reading a run directory needs no fcntl

    run_dir = path.parent
    try:
        fh = path.open("a+", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write the run directory {run_dir}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.readline(32).strip()
        fh.close()
        pid = f" (pid {holder})" if holder.isdigit() else ""
        raise ConfigError(
            f"run directory {run_dir} is in use by another dse run{pid}; wait for it, or start a new run "
            "with --fresh"
        ) from None
    except OSError as exc:  # a file system without locks (some network mounts): the run goes on unguarded
        logger.warning("%s: not locked (%s); run one dse run at a time here", run_dir, exc.strerror or exc)
    with contextlib.suppress(OSError):  # the pid only names the holder in a refusal (a full disk: none)
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
    return RunLock(fh, created)
