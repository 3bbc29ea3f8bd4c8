"""Print the configuration table of the README from the Settings model (keeps it true).

.venv/bin/python scripts/config_table.py             # print the table
.venv/bin/python scripts/config_table.py --update    # rewrite the table inside README.md

The table is made by :mod:`cognis_dev.config_table`.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cognis_dev.config_table import table, update_readme


def main() -> None:
    if "--update" not in sys.argv:
        print(table(), end="")
        return
    update_readme(Path(__file__).resolve().parents[1] / "README.md")


if __name__ == "__main__":
    main()
