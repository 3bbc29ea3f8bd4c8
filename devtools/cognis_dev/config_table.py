"""The README's configuration table, made from the Settings model (so it stays true).

``scripts/config_table.py`` prints it or rewrites it inside README.md; ``tests/test_docs.py``
checks the README against :func:`rows`.
"""

from __future__ import annotations

from pathlib import Path

from cognis_memory.config import Settings

HEADER = "| environment variable | default | meaning |"


def rows() -> list[tuple[str, str, str]]:
    """``(environment variable, default, meaning)`` of every setting, in the model's order, as shown."""
    out = []
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if hasattr(default, "get_secret_value"):
            default = "(secret)"
        shown = "" if default is None or default == "" else f"`{default}`"
        out.append((f"`COGNIS_{name.upper()}`", shown, field.description or ""))
    return out


def table() -> str:
    """The Markdown table of :func:`rows`, header included, ending with a newline."""
    lines = [HEADER, "|---|---|---|"]
    lines += [f"| {env} | {default} | {desc} |" for env, default, desc in rows()]
    return "\n".join(lines) + "\n"


def update_readme(readme: Path) -> None:
    """Replace the table in ``readme`` (the run of ``|`` lines from its header on) with :func:`table`."""
    lines = readme.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("| environment variable |"))
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    readme.write_text("".join(lines[:start]) + table() + "".join(lines[end:]))
