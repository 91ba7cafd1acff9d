"""The `dse` console script (and `python -m dse`): the CLI, with a Ctrl-C during start-up (importing the
CLI's libraries takes a second or two) answered like one during a command, not with a traceback, and a
command line the parser refuses (`--tp 2.5`, an unknown option) answered in one `error:` line, as every
other bad input is (README, "Errors and exit codes")."""

from __future__ import annotations

import sys

USAGE_EXIT_CODE = 2


def usage_error_line(exc: BaseException) -> str | None:
    """The one-line message of a command-line usage error, or None for anything else.

    Typer's parser raises usage errors (a bad option value, an unknown option, a missing argument) as its
    vendored click's `UsageError`, which carries the command's context; recognized by that shape rather than
    by a private import. `NoArgsIsHelpError` (a bare `dse gpu`) is not an error to shorten: it shows help."""
    if type(exc).__name__ == "NoArgsIsHelpError" or not hasattr(exc, "ctx"):
        return None
    format_message = getattr(exc, "format_message", None)
    if not callable(format_message):
        return None
    _drop_hidden_suggestions(exc)
    command = getattr(exc.ctx, "command_path", None) or _innermost_command_path(exc) or "dse"
    return f"{' '.join(str(format_message()).split())} (see `{command} --help`)"


def _drop_hidden_suggestions(exc: BaseException) -> None:
    """An unknown option's "Possible options" without the command's hidden ones (a removed flag kept only
    to say so, `--host-gap-us`, was suggested for `--host`)."""
    possible = getattr(exc, "possibilities", None)
    params = getattr(getattr(exc.ctx, "command", None), "params", None) or []  # type: ignore[attr-defined]
    hidden = {opt for p in params if getattr(p, "hidden", False) for opt in getattr(p, "opts", ())}
    if possible and hidden:
        exc.possibilities = [o for o in possible if o not in hidden]  # type: ignore[attr-defined]


def _innermost_command_path(exc: BaseException) -> str | None:
    """The path of the command whose parsing raised `exc` (`dse predict`), read from the `ctx` of the
    innermost frame that has one: the parser raises an option missing its value without a context, and
    the hint then named `dse --help` for `dse predict --tp`."""
    path = None
    tb = exc.__traceback__
    while tb is not None:
        path = getattr(tb.tb_frame.f_locals.get("ctx"), "command_path", None) or path
        tb = tb.tb_next
    return path if isinstance(path, str) else None


def _show_help(exc: BaseException) -> None:
    """Help for a bare `dse` or group on stdout, as `--help` prints it. Rich help prints itself while the
    message is built and leaves it empty: the parser's `show()` then wrote a stray blank line on stderr."""
    format_message = getattr(exc, "format_message", None)
    text = str(format_message()) if callable(format_message) else ""
    if text.strip():
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _printable_streams() -> None:
    """A terminal whose encoding cannot show a character of the output (PYTHONIOENCODING=ascii: the `·`
    and `²` of the tables) gets `?` for it, not a UnicodeEncodeError traceback after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if callable(reconfigure):
            reconfigure(errors="replace")


def main() -> None:
    _printable_streams()
    try:
        from dse.cli import app

        rc = app(standalone_mode=False)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (Ctrl-C)\n")
        sys.exit(130)
    except BrokenPipeError:  # a write the CLI's own handlers did not meet (they call closed_pipe too)
        from dse.cli.common import closed_pipe

        closed_pipe()
    except Exception as exc:
        if type(exc).__name__ == "Abort":  # the parser's end of input (EOF at a prompt)
            sys.stderr.write("aborted\n")
            sys.exit(1)
        line = usage_error_line(exc)
        if line is None:
            show = getattr(exc, "show", None)
            if not callable(show) or not hasattr(exc, "exit_code"):  # not the parser's: a real error
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":
                _show_help(exc)
            else:
                show()  # the parser's other messages
            sys.exit(int(exc.exit_code))  # a bare group keeps the parser's 2: no command ran
        sys.stderr.write(f"error: {line}\n")
        sys.exit(USAGE_EXIT_CODE)
    sys.exit(rc if isinstance(rc, int) else 0)


__all__ = ["main", "usage_error_line"]
