"""The ``cognis-memory`` command line.

Configuration comes from flags, then ``COGNIS_*`` environment variables, then defaults
(see :class:`cognis_memory.config.Settings`). Every command works on the configured store;
by default the embedded SQLite store under ``./.cognis``.
"""

from __future__ import annotations

import json
import sys

from ..errors import CognisError, InvalidInputError
from .parser import build_parser

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (InvalidInputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (CognisError, FileNotFoundError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
