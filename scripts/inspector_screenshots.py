"""Screenshots of the memory inspector for the README, taken the way the browser tests drive it:
a real ``cognis-memory serve`` with the demo conversation, Debian's headless chromium.

    .venv/bin/python -m scripts.inspector_screenshots            # writes docs/img/inspector-*.png
    .venv/bin/python -m scripts.inspector_screenshots --out /tmp

(from the repository root: it drives the inspector with the browser tests' harness, ``tests.ui.harness``).

Needs ``bash scripts/setup.sh --servers`` (chromium and chromium-driver).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from cognis_dev.processes import REPO as ROOT

from tests.ui.harness import (
    DEMO_USER,
    READ_KEY,
    WRITE_KEY,
    Inspector,
    browser_missing,
    chromium,
    seed,
    serve,
    wait_for_dead_jobs,
)

SEARCH = "Where does Maya live now?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="directory of the PNG files")
    args = parser.parse_args(argv)
    if why := browser_missing():
        print(f"error: {why}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cognis-shots-") as tmp, serve(Path(tmp)) as server:
        seeded = seed(server)
        wait_for_dead_jobs(server, len(seeded["jobs"]))
        with chromium(Path(tmp) / "profile", width=1440, height=1000) as driver:
            ui = Inspector(driver, server.base).open().connect(WRITE_KEY).pick_user(DEMO_USER)
            ui.open_chain(seeded["chain_head"]["id"])
            driver.execute_script("window.scrollTo(0, 0)")
            shot(driver, args.out / "inspector-memories.png")
            ui.search(SEARCH)
            shot(driver, args.out / "inspector-search.png")
            ui.tab("jobs")
            ui.until(lambda: ui.find_all("#jobs-table tbody tr[data-job]"), "no jobs listed")
            shot(driver, args.out / "inspector-jobs.png")
        with chromium(Path(tmp) / "profile-ro", width=1440, height=760) as driver:
            Inspector(driver, server.base).open().connect(READ_KEY).pick_user("rui")
            shot(driver, args.out / "inspector-read-only.png")
    return 0


def shot(driver, path: Path) -> None:
    driver.save_screenshot(str(path))
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")


if __name__ == "__main__":
    raise SystemExit(main())
