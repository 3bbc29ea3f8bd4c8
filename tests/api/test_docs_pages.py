"""The API docs pages (``/docs``, ``/redoc``) work without network access: every script, style sheet
and icon they reference is served by the app itself. Checked over HTTP for each page, and in a real
headless chromium that has no route to a CDN (Swagger UI must draw the operations)."""

from __future__ import annotations

import os
import re
from urllib.parse import urljoin

import httpx
import pytest

from cognis_memory.api.app import DOCS_ASSETS_PATH

# src="..." / href="..." attributes, and the url: '...' / spec-url="..." settings the pages pass to their scripts
REFERENCE = re.compile(r"""(?:\bsrc|\bhref|\burl|spec-url)\s*[=:]\s*["']([^"']+)["']""")


def references(page: str) -> list[str]:
    return REFERENCE.findall(page)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_docs_page_and_every_asset_it_references_come_from_the_app(api_env, page):
    async with api_env.client(key=None) as c:  # open, like /health: no key
        r = await c.get(page)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        refs = references(r.text)
        # a script, a style sheet (Swagger UI), the OpenAPI document and an icon at least
        assert "/openapi.json" in refs and any(ref.endswith(".js") for ref in refs), refs
        external = [ref for ref in refs if re.match(r"(?i)^(https?:)?//", ref)]
        assert external == [], f"{page} loads {external} from outside the app"
        assert "fonts.googleapis" not in r.text and "cdn." not in r.text
        for ref in refs:
            asset = await c.get(urljoin(f"http://testserver{page}", ref))
            assert asset.status_code == 200 and asset.content, (page, ref, asset.status_code)
            if ref.endswith(".js"):
                assert "javascript" in asset.headers["content-type"]
                assert len(asset.content) > 100_000  # the UI bundle itself, not a stub
            elif ref.endswith(".css"):
                assert asset.headers["content-type"].startswith("text/css")
        assert any(ref.startswith(f"{DOCS_ASSETS_PATH}/") for ref in refs)


def test_swagger_ui_draws_the_operations_in_a_browser_without_network(tmp_path):
    """Chromium started with every host name but 127.0.0.1 unresolvable: a page that needs a CDN
    stays blank here, the served one lists the API's operations."""
    from tests.ui.harness import CHROMIUM_FLAGS, browser_missing

    if (why := browser_missing()) and not os.environ.get("COGNIS_REQUIRE_SERVERS"):
        pytest.skip(why)
    import threading

    import uvicorn
    from cognis_dev.processes import free_port
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from cognis_memory.api.app import create_app
    from cognis_memory.config import Settings
    from cognis_memory.service import MemoryService

    port = free_port()
    app = create_app(MemoryService.from_settings(Settings(data_dir=tmp_path / "data")), manage_lifecycle=False)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        WebDriverWait(None, 30, poll_frequency=0.1).until(lambda _: server.started)
        assert httpx.get(f"http://127.0.0.1:{port}/docs").status_code == 200
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
        options.add_argument("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")
        service = Service(executable_path="/usr/bin/chromedriver", log_output=str(tmp_path / "chromedriver.log"))
        driver = webdriver.Chrome(options=options, service=service)
        try:
            driver.get(f"http://127.0.0.1:{port}/docs")
            WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock"))
            paths = {e.text for e in driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
            assert "/v1/users/{user_id}/search" in {p.replace("\u200b", "") for p in paths}
        finally:
            driver.quit()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
