"""The `dse` console script (and `python -m dse`): the CLI, with a Ctrl-C during start-up (importing the
CLI's libraries takes a second or two) answered like one during a command, not with a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from dse.cli import app

        app()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (Ctrl-C)\n")
        sys.exit(130)


__all__ = ["main"]
