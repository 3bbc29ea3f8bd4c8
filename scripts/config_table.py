"""Print the configuration table of the README from the Settings model (keeps it true).

.venv/bin/python scripts/config_table.py             # print the table
.venv/bin/python scripts/config_table.py --update    # rewrite the table inside README.md
"""

from __future__ import annotations

from cognis_memory.config import Settings


def rows() -> list[tuple[str, str, str]]:
    out = []
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if hasattr(default, "get_secret_value"):
            default = "(secret)"
        shown = "" if default is None or default == "" else f"`{default}`"
        out.append((f"`COGNIS_{name.upper()}`", shown, field.description or ""))
    return out


def table() -> str:
    lines = ["| environment variable | default | meaning |", "|---|---|---|"]
    lines += [f"| {env} | {default} | {desc} |" for env, default, desc in rows()]
    return "\n".join(lines) + "\n"


def main() -> None:
    import sys
    from pathlib import Path

    if "--update" not in sys.argv:
        print(table(), end="")
        return
    readme = Path(__file__).resolve().parents[1] / "README.md"
    lines = readme.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("| environment variable |"))
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    readme.write_text("".join(lines[:start]) + table() + "".join(lines[end:]))


if __name__ == "__main__":
    main()
