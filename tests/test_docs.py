"""The README's configuration table and commands stay true to the code."""

from pathlib import Path

from cognis_dev.config_table import rows

from cognis_memory.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_readme_lists_every_setting_with_its_default() -> None:
    readme = (ROOT / "README.md").read_text()
    for env, setting, default, _ in rows():
        line = next((row for row in readme.splitlines() if row.startswith(f"| {env} |")), None)
        assert line is not None, f"{env} is missing from the README configuration table"
        assert f"| {setting} | {default} |" in line, f"{env}: README setting or default differs from the code"
    assert len(rows()) == len(list(Settings.flat_fields())) == len({env for env, *_ in rows()})


def test_readme_commands_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        assert f"bash {script}" in readme and (ROOT / script).is_file()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci
