"""The ``cognis-memory`` command line.

Configuration comes from flags, then ``COGNIS_*`` environment variables, then defaults
(see :class:`cognis_memory.config.Settings`). Every command works on the configured store;
by default the embedded SQLite store under ``./.cognis``. Exit status: 0 done, 1 failed,
2 refused input (the message names the flag or field), 141 (128 + SIGPIPE, as for any Unix tool)
when the reader of the output went away, as in ``cognis-memory export --user u | head``.
"""

from __future__ import annotations

import json
import os
import signal
import sys

from ..errors import CognisError, InvalidInputError
from .commands import _settings
from .parser import build_parser
from .store_location import check_store

__all__ = ["build_parser", "main"]

#: The exit status after the output's reader closed it: what a shell reports for a process ended by SIGPIPE.
OUTPUT_CLOSED = 128 + signal.SIGPIPE


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        access = getattr(args, "store_access", None)
        if access is not None:
            check_store(args, _settings(args), access)
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is noticed below
        return status
    except BrokenPipeError:
        return _output_closed()
    except (InvalidInputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (CognisError, FileNotFoundError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _output_closed() -> int:
    """Stop without a word: the reader has what it wanted. stdout is pointed at /dev/null first, so
    the interpreter's flush at exit cannot fail on the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return OUTPUT_CLOSED
