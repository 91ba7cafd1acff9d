"""Output files users name (`--html`, `--out`, `-o`): checked before the work that fills them runs.

problem = output_file_problem(path, "report.html")   # None, or why `path` cannot take the output
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["output_file_problem"]


def output_file_problem(path: Path, suggested_name: str) -> str | None:
    """Why `path` cannot be written as a new or replaced regular file, or None: a directory (suggesting
    `suggested_name` in it), something else that is not a regular file (a named pipe without a reader
    blocked the write for ever; a device node was replaced by the file where it is written beside and
    renamed), a parent that is a file, or no permission to write."""
    if path.is_dir():
        return f"is a directory; give a file name such as {path / suggested_name}"
    if path.exists() and not path.is_file():
        return "not a regular file (a device, a pipe or a socket); name a file"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, not a directory"
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return "cannot write there (permission denied)"
    return None
