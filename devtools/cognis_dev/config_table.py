"""The README's configuration table, made from the settings classes (so it stays true).

One row per setting of :class:`cognis_memory.config.Settings`, components expanded in their order
(:meth:`Settings.flat_fields`): its environment variable, where code reads it
(``settings.<component>.<field>``), its default and its description. ``scripts/config_table.py``
prints it or rewrites it inside README.md; ``tests/test_docs.py`` checks the README against :func:`rows`.
"""

from __future__ import annotations

from pathlib import Path

from cognis_memory.config import Settings

HEADER = "| environment variable | setting | default | meaning |"


def rows() -> list[tuple[str, str, str, str]]:
    """``(environment variable, setting, default, meaning)`` of every setting, in the settings' order, as shown."""
    out = []
    for field in Settings.flat_fields():
        default = field.info.get_default(call_default_factory=True)
        if hasattr(default, "get_secret_value"):
            default = "(secret)"
        shown = "" if default is None or default == "" else f"`{default}`"
        out.append((f"`{field.env}`", f"`{field.path}`", shown, field.info.description or ""))
    return out


def table() -> str:
    """The Markdown table of :func:`rows`, header included, ending with a newline."""
    lines = [HEADER, "|---|---|---|---|"]
    lines += [f"| {env} | {path} | {default} | {desc} |" for env, path, default, desc in rows()]
    return "\n".join(lines) + "\n"


def update_readme(readme: Path) -> None:
    """Replace the table in ``readme`` (the run of ``|`` lines from its header on) with :func:`table`."""
    lines = readme.read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("| environment variable |"))
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    readme.write_text("".join(lines[:start]) + table() + "".join(lines[end:]))
