"""The memory inspector in a real browser (Debian's headless chromium, driven by Selenium through
chromedriver) against a real ``cognis-memory serve`` holding the README's demo conversation."""

from __future__ import annotations

import os
import re

import httpx
import pytest

from tests.ui.harness import (
    DEMO_USER,
    MARKUP,
    READ_KEY,
    TENANT,
    WRITE_KEY,
    Inspector,
    browser_missing,
    chromium,
    seed,
    serve,
    wait_for_dead_jobs,
)

pytestmark = pytest.mark.integration

if (why := browser_missing()) and not os.environ.get("COGNIS_REQUIRE_SERVERS"):
    pytest.skip(why, allow_module_level=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("inspector")) as s:
        s.seeded = seed(s)
        yield s


@pytest.fixture
def ui(server, tmp_path):
    assert browser_missing() is None, browser_missing()
    with chromium(tmp_path / "profile") as driver:
        yield Inspector(driver, server.base).open()


def test_the_page_holds_no_data_and_is_locked_down(server):
    r = httpx.get(f"{server.base}/ui/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    for user in (DEMO_USER, "rui", "markup-user", TENANT):
        assert user not in r.text
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"
    assert (
        httpx.get(f"{server.base}/ui/app.js")
        .headers["content-type"]
        .startswith(("text/javascript", "application/javascript"))
    )
    assert httpx.get(f"{server.base}/ui").status_code in (200, 307)  # the bare path redirects to the page
    assert httpx.get(f"{server.base}/v1/users").status_code == 401  # the data needs a key


def test_a_key_connects_lists_the_users_and_stays_in_this_tab_only(ui, server):
    ui.connect(WRITE_KEY)
    assert ui.find("#tenant").text == TENANT and ui.find("#key-mode").text == "read-write key"
    users = [b.get_attribute("data-user") for b in ui.find_all("#users button.user")]
    assert users == sorted(["ana", DEMO_USER, "markup-user", "rui"])
    demo = ui.find(f'#users button.user[data-user="{DEMO_USER}"]').text
    assert f"{server.seeded['messages']} current" in demo
    assert WRITE_KEY not in ui.driver.current_url
    assert list(ui.session_storage().values()) == [WRITE_KEY]
    assert ui.driver.execute_script("return localStorage.length + document.cookie.length") == 0

    ui.driver.refresh()  # the tab keeps the key: connected again without asking
    ui.visible("#session")
    ui.until(lambda: ui.find_all("#users button.user"))
    ui.find("#disconnect").click()
    ui.visible("#api-key")
    assert ui.session_storage() == {} and not ui.find("#session").is_displayed()


def test_an_unknown_key_is_refused_and_not_kept(ui):
    box = ui.visible("#api-key")
    box.send_keys("not-a-key")
    ui.find("#connect").click()
    notice = ui.visible("#notice")
    assert "unknown key" in notice.text
    assert ui.session_storage() == {} and not ui.find("#app").is_displayed()


def test_after_a_refused_key_the_next_key_typed_is_not_appended_to_it(ui, server):
    box = ui.visible("#api-key")
    box.send_keys("not-a-key")
    ui.find("#connect").click()
    ui.until(lambda: "unknown key" in ui.find("#notice").text, "the key was not refused")
    assert box.get_attribute("value") == ""  # the refused key left the field
    box.send_keys(WRITE_KEY)  # typed as a person would, without clearing the field first
    ui.find("#connect").click()
    ui.visible("#session")
    assert ui.find("#tenant").text == TENANT and list(ui.session_storage().values()) == [WRITE_KEY]


def test_memories_are_browsed_in_pages_with_their_fields(ui, server):
    ui.connect(WRITE_KEY).pick_user(DEMO_USER)
    headers = [th.text for th in ui.find_all("#memories-table thead th")]
    assert headers[:6] == ["Content", "Category", "Scope · kind", "Event time (UTC)", "Written (UTC)", "Version"]
    first_page = [r.get_attribute("data-memory") for r in ui.memory_rows()]
    assert len(first_page) == 25 and "page 1" in ui.find("#page-info").text
    ui.find("#memories-next").click()
    ui.until(lambda: "page 2" in ui.find("#page-info").text)
    second_page = [r.get_attribute("data-memory") for r in ui.memory_rows()]
    with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {READ_KEY}"}) as c:
        listed = [m["id"] for m in c.get(f"/v1/users/{DEMO_USER}/memories", params={"limit": 1000}).json()["memories"]]
    assert first_page + second_page == listed  # every current memory, once, in the API's order
    assert not ui.find("#memories-next").is_enabled()
    row = ui.memory_rows()[0]
    cells = [td.text for td in row.find_elements("css selector", "td")]
    assert cells[2] in ("USER · raw", "USER · fact") and re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", cells[4])
    assert ui.driver.execute_script(
        "const w = arguments[0]; return w.scrollWidth <= w.clientWidth;", ui.find(".table-wrap")
    )  # the table fits: no sideways scrolling

    ui.choose("#filter-kind", "fact")  # the rewritten chain head is the only fact
    ui.until(lambda: len(ui.memory_rows()) <= 1)


def test_a_version_chain_is_shown_side_by_side_with_dates(ui, server):
    ui.connect(READ_KEY).pick_user(DEMO_USER)
    cards = ui.open_chain(server.seeded["chain_head"]["id"])
    assert [c.get_attribute("data-version") for c in cards] == ["1", "2", "3"]
    texts = [c.find_element("css selector", ".vcontent").text for c in cards]
    assert "I live in Porto" in texts[0] and "Lisbon now" in texts[1] and "Alfama" in texts[2]
    assert [c.find_element("css selector", ".badge").text for c in cards] == ["replaced", "replaced", "current"]
    for card in cards:
        assert card.find_element("css selector", "dd.written").text.endswith("UTC")
    boxes = [c.rect for c in cards]
    assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"] and abs(boxes[0]["y"] - boxes[2]["y"]) < 2  # one row
    assert "3 versions" in ui.find("#chain-summary").text


def test_a_search_shows_its_hits_the_stage_score_chart_and_the_timings(ui, server):
    ui.connect(READ_KEY).pick_user(DEMO_USER).search("Where does Maya live now?")
    hits = ui.find_all("#hits li.hit")
    with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {READ_KEY}"}, timeout=60) as c:
        api = c.post(f"/v1/users/{DEMO_USER}/search", json={"query": "Where does Maya live now?", "explain": True})
    expected = api.json()["results"]
    assert [h.get_attribute("data-memory") for h in hits] == [r["memory"]["id"] for r in expected]
    assert "Lisbon" in hits[0].find_element("css selector", ".hit-content").text

    chart = ui.find("#score-chart svg")
    bars = chart.find_elements("css selector", "rect.bar")
    drawn = {(b.get_attribute("data-hit"), b.get_attribute("data-stage")) for b in bars}
    shown = {"vector": "vector", "bm25": "bm25", "rrf": "rrf", "temporal": "temporal", "rerank": "rerank"}
    wanted = {(str(i), shown[k]) for i, r in enumerate(expected) for k in r["scores"] if k in shown}
    wanted |= {(str(i), "score") for i in range(len(expected))}  # the final score, which the order follows
    assert drawn == wanted and {s for _, s in drawn} >= {"vector", "rrf"}
    widths = [float(b.get_attribute("width")) for b in bars if b.get_attribute("data-stage") == "score"]
    assert widths[0] == max(widths) and widths == sorted(widths, reverse=True)  # hit #1 has the longest bar

    timing = ui.find("#timing-chart svg")
    stages = [b.get_attribute("data-stage") for b in timing.find_elements("css selector", "rect.bar")]
    # the same stages as the API's answer to the same search; their order is not compared: the vector
    # side and BM25 run at once, and the second search finds the query's vector in the query cache
    assert sorted(stages) == sorted(k.removesuffix("_ms") for k in api.json()["explain"]["stage_durations"])
    assert {"embed_query", "bm25", "rrf_fusion"} <= set(stages)


def test_every_stage_that_moved_a_hit_is_drawn_with_its_places(ui, server):
    query = "What is Maya's job now?"
    ui.connect(READ_KEY).pick_user(DEMO_USER).search(query)
    with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {READ_KEY}"}, timeout=60) as c:
        expected = c.post(f"/v1/users/{DEMO_USER}/search", json={"query": query, "explain": True}).json()["results"]
    moves = {(str(i), m["stage"]): m for i, r in enumerate(expected) for m in r["moves"]}
    assert moves, "no stage moved a hit of this search: the test shows nothing"
    assert any(m["rank_before"] != m["rank_after"] for m in moves.values())

    cells = ui.find_all("#moves-chart svg g.move")
    drawn = {(g.get_attribute("data-hit"), g.get_attribute("data-stage")): g for g in cells}
    assert set(drawn) == set(moves)  # every move of every hit, and nothing else
    for key, m in moves.items():
        text = drawn[key].find_element("css selector", "text").text
        assert text.startswith(f"#{m['rank_before']}→#{m['rank_after']}")
        assert text.endswith("no score") == (m["score_after"] == m["score_before"])

    hits = ui.find_all("#hits li.hit")
    for hit, r in zip(hits, expected, strict=True):
        listed = [s.get_attribute("data-stage") for s in hit.find_elements("css selector", ".moves .move")]
        assert listed == [m["stage"] for m in r["moves"]]  # in the order the stages ran
        assert f"fused #{int(r['scores']['rrf_rank'])}" in hit.find_element("css selector", ".moves").text


def test_a_read_only_key_sees_everything_and_cannot_change_anything(ui, server):
    ui.connect(READ_KEY).pick_user(DEMO_USER)
    assert ui.find("#key-mode").text == "read-only key"
    assert ui.memory_rows() and ui.find_all('button[data-action="history"]')
    assert ui.find_all('button[data-action="edit"]') == [] and ui.find_all('button[data-action="delete"]') == []
    head = server.seeded["chain_head"]
    # Even bypassing the page, its key is refused by the API itself.
    statuses = ui.driver.execute_async_script(
        """
        const [user, id, done] = arguments;
        const key = sessionStorage.getItem("cognis-inspector.api-key");
        const headers = {"Authorization": `Bearer ${key}`, "Content-Type": "application/json"};
        const url = `/v1/users/${user}/memories/${id}`;
        Promise.all([
          fetch(url, {method: "PATCH", headers, body: JSON.stringify({content: "changed by a read-only key"})}),
          fetch(url, {method: "DELETE", headers}),
        ]).then((rs) => done(rs.map((r) => r.status)));
        """,
        DEMO_USER,
        head["id"],
    )
    assert statuses == [403, 403]
    with server.client(READ_KEY) as c:
        now = c.get(f"/v1/users/{DEMO_USER}/memories/{head['id']}").json()
    assert now["content"] == head["content"] and now["is_current"] and not now["deleted"]


def test_a_write_key_writes_a_new_version_from_the_page(ui):
    ui.connect(WRITE_KEY).pick_user("rui")
    row = next(r for r in ui.memory_rows() if "chess" in r.text)
    row.find_element("css selector", 'button[data-action="edit"]').click()
    content = ui.visible("#edit-content")
    content.clear()
    content.send_keys("I play chess on Fridays now")
    ui.find("#edit-save").click()
    ui.until(lambda: "Saved version 2" in ui.find("#notice").text)
    cards = ui.until(lambda: ui.find_all("#chain-versions .version"))
    assert [c.get_attribute("data-version") for c in cards] == ["1", "2"]
    assert "Fridays" in cards[1].text and "Thursdays" in cards[0].text


def test_stored_markup_is_shown_as_text_and_never_runs(ui):
    title = ui.driver.title
    ui.connect(WRITE_KEY).pick_user("markup-user")
    (row,) = ui.memory_rows()
    assert MARKUP in row.find_element("css selector", "td.content").text
    assert ui.find_all("#memories-table img, #memories-table script") == []
    ui.search("img onerror script")
    assert MARKUP in ui.find("#hits .hit-content").text and ui.find_all("#hits img") == []
    assert ui.driver.title == title != "pwned"


def test_dead_jobs_are_listed_with_their_errors(ui, server):
    dead = wait_for_dead_jobs(server, len(server.seeded["jobs"]))
    assert {j["id"] for j in dead} == set(server.seeded["jobs"])  # the LLM was unreachable for every one
    ui.connect(READ_KEY).tab("jobs")
    assert ui.find("#job-status").get_attribute("value") == "dead"  # the dead letters first
    rows = ui.until(lambda: ui.find_all("#jobs-table tbody tr[data-job]"), "no jobs listed")
    assert {r.get_attribute("data-job") for r in rows} == {j["id"] for j in dead}
    row = next(r for r in rows if r.get_attribute("data-job") == server.seeded["jobs"][0])
    cells = [td.text for td in row.find_elements("css selector", "td")]
    assert cells[1] == DEMO_USER and cells[2] == "dead" and cells[3] == "1 / 1"
    assert "llm unavailable" in cells[5] and "ConnectError" in cells[5]

    ui.choose("#job-status", "done")  # nothing finished: an empty list that says so
    ui.until(lambda: "No done jobs." in ui.find("#jobs-table tbody").text)
    ui.choose("#job-status", "dead")
    ui.until(lambda: len(ui.find_all("#jobs-table tbody tr[data-job]")) == len(dead))
    row = next(r for r in ui.find_all("#jobs-table tbody tr[data-job]") if r.text.split()[1] == DEMO_USER)
    row.find_element("css selector", "button").click()  # the job's user opens in the memories view
    ui.until(lambda: ui.find("#memories-title").text == f"Memories of {DEMO_USER}")
