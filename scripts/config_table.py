"""Print the configuration table of the README from the Settings model (keeps it true).

    .venv/bin/python scripts/config_table.py > /tmp/table.md
"""

from __future__ import annotations

from cognis_memory.config import Settings


def rows() -> list[tuple[str, str, str]]:
    out = []
    for name, field in Settings.model_fields.items():
        default = field.default
        if hasattr(default, "get_secret_value"):
            default = "(secret)"
        shown = "" if default is None else f"`{default}`"
        out.append((f"`COGNIS_{name.upper()}`", shown, field.description or ""))
    return out


def main() -> None:
    print("| environment variable | default | meaning |")
    print("|---|---|---|")
    for env, default, desc in rows():
        print(f"| {env} | {default} | {desc} |")


if __name__ == "__main__":
    main()
