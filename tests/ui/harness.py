"""A real inspector session: ``cognis-memory serve`` on a free port with demo data, and Debian's
chromium driven through its chromedriver by Selenium. Used by the browser tests and by
``scripts/inspector_screenshots.py`` (the README's pictures).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).with_name("cognis-memory")
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
#: Flags that run Debian's chromium headless in a container, offline, without first-run work.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
TENANT = "acme"
WRITE_KEY, READ_KEY = "ui-write-key", "ui-read-key"
DEMO_USER = "demo-user"
MARKUP = '<img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>'


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (None when they can)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing: bash scripts/setup.sh --servers installs chromium and chromium-driver"
    return None


@dataclass
class Server:
    base: str
    proc: subprocess.Popen
    log: Path

    def client(self, key: str = WRITE_KEY) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {key}"}, timeout=60)


@contextlib.contextmanager
def serve(tmp: Path) -> Iterator[Server]:
    """The real server on 127.0.0.1 (embedded store in ``tmp``), stopped on exit.

    Its extraction LLM is an OpenAI-compatible URL where nothing listens, with one attempt per
    job and no waiting for the LLM: messages posted in ``async`` mode are stored and searchable at
    once, and their extraction jobs end up dead with the connection error, as after an outage
    longer than ``COGNIS_JOB_MAX_WAIT_S``.
    """
    from cognis_dev.processes import free_port, stop, wait_for_http

    port, llm_port = free_port(), free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "COGNIS_DATA_DIR": str(tmp / "data"),
        "COGNIS_API_KEYS": f"{WRITE_KEY}={TENANT},{READ_KEY}={TENANT}:read",
        "COGNIS_TELEMETRY": "json",
        "COGNIS_LLM": "openai",
        "COGNIS_OPENAI_BASE_URL": f"http://127.0.0.1:{llm_port}/v1",
        "COGNIS_LLM_TIMEOUT_S": "2",
        "COGNIS_JOB_MAX_ATTEMPTS": "1",
        "COGNIS_JOB_MAX_WAIT_S": "0",
    }
    log = tmp / "server.log"
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            [str(CLI), "serve", "--port", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp
        )
        server = Server(f"http://127.0.0.1:{port}", proc, log)
        try:
            wait_for_http(proc, f"{server.base}/health", log)
            yield server
        finally:
            stop(proc)


def seed(server: Server) -> dict[str, Any]:
    """The README's demo conversation (30 messages, more than one page), a fact that changed twice
    (a version chain), a few other users, and a memory whose text is markup; every post is
    ``async``, so each leaves an extraction job (dead: see :func:`serve`)."""
    lines = (REPO / "examples" / "demo_conversation.jsonl").read_text(encoding="utf-8").splitlines()
    messages = [{k: v for k, v in json.loads(line).items() if k != "user_id"} for line in lines if line.strip()]
    with server.client() as c:
        r = c.post(f"/v1/users/{DEMO_USER}/messages", json={"messages": messages, "mode": "async"})
        r.raise_for_status()
        porto = next(m for m in r.json()["memories"] if "I live in Porto" in m["content"])
        v2 = c.patch(
            f"/v1/users/{DEMO_USER}/memories/{porto['id']}",
            json={
                "content": "Maya lives in Lisbon now (moved from Porto in May 2025).",
                "category": "personal_details",
            },
        )
        v2.raise_for_status()
        v3 = c.patch(
            f"/v1/users/{DEMO_USER}/memories/{v2.json()['id']}",
            json={"content": "Maya lives in Lisbon, in Alfama, since May 2025.", "category": "personal_details"},
        )
        v3.raise_for_status()
        others = {
            "rui": ["I play chess on Thursdays", "My sister Ines is a nurse in Braga"],
            "ana": ["I'm training for the Lisbon half marathon", "I'm allergic to peanuts"],
            "markup-user": [MARKUP],
        }
        jobs = [r.json()["job"]["id"]]
        for user, texts in others.items():
            body = {"messages": [{"content": t} for t in texts], "mode": "async"}
            posted = c.post(f"/v1/users/{user}/messages", json=body)
            posted.raise_for_status()
            jobs.append(posted.json()["job"]["id"])
    return {"chain_head": v3.json(), "chain_first": porto, "messages": len(messages), "jobs": jobs}


@contextlib.contextmanager
def chromium(profile_dir: Path, *, width: int = 1440, height: int = 1000) -> Iterator[Any]:
    """A headless chromium (fresh profile in ``profile_dir``) driven by Selenium; quits on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    options.add_argument(f"--window-size={width},{height}")
    service = Service(executable_path=str(CHROMEDRIVER), log_output=str(profile_dir.parent / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile_dir, ignore_errors=True)


class Inspector:
    """The inspector page as a person uses it: every step waits for what it expects to see."""

    def __init__(self, driver: Any, base: str, *, timeout_s: float = 30) -> None:
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver, self.base = driver, base
        # A condition may read an element the page is replacing at that moment: ask again.
        self.wait = WebDriverWait(
            driver, timeout_s, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
        )

    # -- finding things -------------------------------------------------------------------------
    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def visible(self, css: str) -> Any:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec

        return self.wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def choose(self, css: str, value: str) -> None:
        """Pick the option of the ``<select>`` at ``css`` whose value is ``value``."""
        from selenium.webdriver.support.select import Select

        Select(self.find(css)).select_by_value(value)

    def until(self, condition: Any, message: str = "") -> Any:
        return self.wait.until(lambda _: condition(), message)

    # -- steps ----------------------------------------------------------------------------------
    def open(self) -> Inspector:
        self.driver.get(f"{self.base}/ui/")
        self.visible("#api-key")
        return self

    def connect(self, key: str) -> Inspector:
        box = self.visible("#api-key")
        box.clear()
        box.send_keys(key)
        self.find("#connect").click()
        self.visible("#session")
        self.until(lambda: self.find_all("#users button.user"), "the users list did not load")
        return self

    def pick_user(self, user: str) -> Inspector:
        self.find(f'#users button.user[data-user="{user}"]').click()
        self.until(lambda: self.find("#memories-title").text == f"Memories of {user}")
        self.until(lambda: self.find_all("#memories-table tbody tr[data-memory]"), "no memory rows")
        return self

    def tab(self, name: str) -> Inspector:
        self.find(f'.tabs button[data-tab="{name}"]').click()
        self.visible(f"#tab-{name}")
        return self

    def search(self, query: str) -> Inspector:
        self.tab("search")
        box = self.find("#search-query")
        box.clear()
        box.send_keys(query)
        self.find("#search-run").click()
        self.until(lambda: self.find_all("#hits li.hit"), "the search showed no hits")
        return self

    def open_chain(self, memory_id: str) -> list[Any]:
        """Page through the memories to ``memory_id``, open its version chain, return the version cards."""
        while not self.find_all(f'tr[data-memory="{memory_id}"]'):
            first = self.memory_rows()[0].get_attribute("data-memory")
            assert self.find("#memories-next").is_enabled(), f"memory {memory_id} is on no page"
            self.find("#memories-next").click()
            self.until(lambda first=first: self.memory_rows()[0].get_attribute("data-memory") != first, "no next page")
        self.find(f'tr[data-memory="{memory_id}"] button[data-action="history"]').click()
        self.visible("#chain")
        return self.until(lambda: self.find_all("#chain-versions .version"), "no versions shown")

    def memory_rows(self) -> list[Any]:
        return self.find_all("#memories-table tbody tr[data-memory]")

    def session_storage(self) -> dict[str, str]:
        return self.driver.execute_script(
            "const o = {}; for (let i = 0; i < sessionStorage.length; i++) {"
            " const k = sessionStorage.key(i); o[k] = sessionStorage.getItem(k); } return o;"
        )


def wait_for_dead_jobs(server: Server, count: int, *, timeout_s: float = 60) -> list[dict[str, Any]]:
    """The tenant's dead jobs once ``count`` of them are listed (their extraction could not reach the LLM)."""
    import time

    deadline = time.monotonic() + timeout_s
    with server.client(READ_KEY) as c:
        while True:
            jobs = c.get("/v1/jobs", params={"status": "dead", "limit": 1000}).json().get("jobs", [])
            if len(jobs) >= count or time.monotonic() > deadline:
                return jobs
            time.sleep(0.2)
