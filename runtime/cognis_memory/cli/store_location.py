"""Which embedded store a command opens, checked before it opens it.

Opening the embedded store creates its directory and SQLite file when they are missing, so a
misspelt ``--data-dir`` would silently give a new, empty store. Commands that only read (or delete
what is there) therefore refuse a store that does not exist, naming the option that chose it and the
path; commands that write may create one, and say so on stderr. Each subcommand declares which it is
(``store_access`` in the parser); the other stores (``dual``) are not checked.
"""

from __future__ import annotations

import argparse
import sys
from enum import Enum
from pathlib import Path

from ..config import Settings
from ..errors import InvalidInputError


class StoreAccess(Enum):
    READ = "read"  # refuse a missing store: there is nothing to read
    WRITE = "write"  # create a missing store, saying so


def store_location(args: argparse.Namespace, settings: Settings) -> tuple[str, Path, Path] | None:
    """The option that chose the embedded store, the path it gave and the SQLite file; None when the
    configured store is not the embedded one or lives in memory."""
    if settings.store != "embedded":
        return None
    embedded = settings.embedded
    if embedded.sqlite_path is not None:
        option, given = "COGNIS_SQLITE_PATH", embedded.sqlite_path
    elif getattr(args, "data_dir", None) is not None:
        option, given = "--data-dir", embedded.data_dir
    elif "data_dir" in embedded.model_fields_set:
        option, given = "COGNIS_DATA_DIR", embedded.data_dir
    else:
        option, given = "--data-dir", embedded.data_dir  # the default, .cognis
    db = embedded.resolved_sqlite_path
    if str(db) == ":memory:":
        return None
    return option, given, db


def check_store(args: argparse.Namespace, settings: Settings, access: StoreAccess) -> None:
    """Refuse (READ) or announce (WRITE) an embedded store that does not exist yet.
    Raises :class:`InvalidInputError` naming the option (the CLI's exit status 2)."""
    where = store_location(args, settings)
    if where is None or where[2].exists():
        return
    option, given, db = where
    if access is StoreAccess.READ:
        shown = str(given) if given.is_absolute() else f"{given} ({given.resolve()})"
        why = f"{shown} does not exist" if not given.exists() else f"{shown} holds no store (no {db.name})"
        raise InvalidInputError(
            option, f"{why}; this command only reads, so check the path (import or add creates a store)"
        )
    print(f"cognis-memory: creating a new store at {db} ({option})", file=sys.stderr, flush=True)
