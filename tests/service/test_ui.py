"""The inspector (``/ui``) and the API docs (``/docs``, ``/redoc``) in a real headless Chromium (Debian's, driven by
Playwright) against a live ``memgas serve``: every view renders what the store holds, a delete goes through its
confirmation, a tenant key sees only its tenant, and no page requests anything but the server itself."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from memgas import Memory
from support.live_server import LiveServer, make_key, start_server

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (Debian: apt-get install chromium)")

SESSIONS = [
    ("hike", "2024-05-20T10:00:00", "I hiked Mount Hood with Ann last weekend.", "Great climb!"),
    ("hike-2", "2024-06-02T10:00:00", "Ann and I want to hike Mount Hood again in autumn.", "Plan for snow."),
    ("cat", "2024-06-10T10:00:00", "My cat Miso knocked over the plant again.", "Cats love plants."),
    ("bake", "2024-07-01T10:00:00", "I baked sourdough bread with rye flour.", "Rye gives a dense crumb."),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("ui")
    db = tmp / "ui.db"
    with Memory(db) as mem:
        for sid, when, said, reply in SESSIONS:
            mem.add([{"role": "user", "content": said}, {"role": "assistant", "content": reply}], user_id="alice",
                    session_id=sid, timestamp=when, agent_id="coach" if sid.startswith("hike") else None)
    keys = {"admin": make_key(db), "acme": make_key(db, "tenant:acme")}
    srv = start_server(db, tmp=tmp)
    srv.keys = keys
    httpx.post(f"{srv.url}/v1/sessions", headers={"Authorization": f"Bearer {keys['acme']}"},
               json={"user_id": "bob", "session_id": "b1", "messages": "Tenant acme's own note."}).raise_for_status()
    yield srv
    srv.stop()


@pytest.fixture
def page(server: LiveServer) -> Iterator[Any]:
    """A Chromium page that records every request and refuses any that leaves the server."""
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.outside, page.errors = [], []

        def guard(route: Any) -> None:
            if route.request.url.startswith(server.url) or route.request.url.startswith("data:"):
                route.continue_()
            else:
                page.outside.append(route.request.url)
                route.abort()

        page.route("**/*", guard)
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        # A refused API call (the bad filter below) is logged by the browser too: only script errors count here.
        page.on("console", lambda msg: page.errors.append(msg.text)
                if msg.type == "error" and not msg.text.startswith("Failed to load resource") else None)
        yield page
        browser.close()


def enter_key(page: Any, server: LiveServer, key: str) -> None:
    page.goto(f"{server.url}/ui")
    page.get_by_text("Enter an API key above").wait_for()
    page.fill("#key", key)
    page.click("#keyform button[type=submit]")


@pytest.mark.slow
def test_the_inspector_shows_users_sessions_units_graph_and_search(page: Any, server: LiveServer) -> None:
    response = httpx.get(f"{server.url}/ui")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert "unsafe-inline" not in response.headers["content-security-policy"]
    enter_key(page, server, server.keys["admin"])
    page.get_by_role("link", name="alice").click()
    page.locator("tr[data-session]").first.wait_for()
    assert page.locator("tr[data-session]").count() == 4
    assert page.locator("tr[data-session]").first.get_attribute("data-session") == "bake"  # newest first
    page.get_by_text("I baked sourdough bread with rye flour.").wait_for()
    page.get_by_role("link", name="hike", exact=True).click()
    page.locator(".msg.user").get_by_text("I hiked Mount Hood with Ann last weekend.").wait_for()
    assert "agent coach" in page.locator("p.muted").first.inner_text()
    units = page.locator(".unit")
    units.first.wait_for()
    assert units.count() >= 4 and page.get_by_role("heading", name="turn (1)").count() == 1
    assert page.get_by_role("link", name="hike-2").count() >= 1  # associated: the other Mount Hood session

    page.get_by_role("link", name="graph").click()
    page.locator("circle.node").first.wait_for()
    assert page.locator("circle.node").count() == 4 and page.locator("#graph line").count() >= 1
    labels = page.locator("#graph text.label")  # each session named on the graph, not only on hover
    assert sorted(labels.nth(i).get_attribute("data-session") for i in range(labels.count())) == sorted(
        page.locator("circle.node").nth(i).get_attribute("data-session") for i in range(4))
    assert any(labels.nth(i).text_content().startswith("hike · 20") for i in range(4))
    box = page.locator("#graph").bounding_box()
    for i in range(4):  # inside the drawing, legible size
        place = labels.nth(i).bounding_box()
        assert box["x"] <= place["x"] and place["x"] + place["width"] <= box["x"] + box["width"] + 1
        assert place["height"] >= 8

    page.get_by_role("link", name="search").click()
    page.fill("#query", "which mountain did we climb?")
    page.fill("#filters", '{"agent_id": "coach"}')
    page.get_by_role("button", name="Search").click()
    page.locator(".hit").first.wait_for()
    sessions = [page.locator(".hit").nth(i).get_attribute("data-session") for i in range(page.locator(".hit").count())]
    assert sessions[0] in ("hike", "hike-2") and set(sessions) <= {"hike", "hike-2"}
    assert page.locator(".turn.best").count() >= 1 and page.get_by_text("router weights:").count() >= 1
    assert "lexical" in page.locator(".hit .channels").first.inner_text()  # each channel's share of the evidence
    page.fill("#filters", '{"agent_id": {"$regex": "x"}}')
    page.get_by_role("button", name="Search").click()
    page.get_by_text("filters.agent_id.$regex").wait_for()

    page.fill("#filters", "")
    page.fill("#max-tokens", "200")
    page.get_by_role("button", name="Context").click()
    page.locator("#context").wait_for()
    block = page.locator("#context").inner_text()
    assert "· hike · user: I hiked Mount Hood with Ann last weekend." in block and "Miso" not in block
    assert page.get_by_text("The context at 200 tokens").count() == 1

    admin = {"Authorization": f"Bearer {server.keys['admin']}"}
    page.get_by_role("link", name="profile").click()
    page.get_by_role("heading", name="Standing instructions and preferences of alice").wait_for()
    said = [s["text"] for s in httpx.get(f"{server.url}/v1/profile", headers=admin,
                                         params={"user_id": "alice"}).json()["statements"]]
    # the table holds what the API returns, in its order (the learned detector reads a preference in "bake")
    page.locator("#profile").wait_for()
    assert said and [page.locator("#profile tr").nth(i + 1).locator("td").nth(2).inner_text()
                     for i in range(page.locator("#profile tr").count() - 1)] == said
    httpx.post(f"{server.url}/v1/sessions", headers={"Authorization": f"Bearer {server.keys['admin']}"},
               json={"user_id": "alice", "session_id": "rules", "timestamp": "2024-07-02T10:00:00",
                     "messages": "Always answer in metric units, please."}).raise_for_status()
    page.reload()
    page.locator("#profile").wait_for()
    row = page.locator("#profile tr").filter(has_text="Always answer in metric units, please.").inner_text()
    assert "instruction (always)" in row and "Always answer in metric units, please." in row and "rules #0" in row
    page.locator("#profile").get_by_role("link", name="rules").click()
    page.locator(".msg.user").get_by_text("Always answer in metric units, please.").wait_for()
    httpx.delete(f"{server.url}/v1/sessions/rules", headers={"Authorization": f"Bearer {server.keys['admin']}"},
                 params={"user_id": "alice"}).raise_for_status()

    page.get_by_role("link", name="course").click()
    page.locator("#course section").first.wait_for()
    course = [page.locator("#course h3").nth(i).inner_text() for i in range(page.locator("#course h3").count())]
    assert len(course) == 4 and course[0].startswith("hike")  # oldest first: each session's digest
    page.fill("#topic", "baking bread")
    page.get_by_role("button", name="Show").click()
    page.locator("#course li").get_by_text("I baked sourdough bread with rye flour.").wait_for()
    assert [h.split(" · ")[0] for h in page.locator("#course h3").all_inner_texts()] == ["bake"]

    page.get_by_role("link", name="facts").click()
    page.get_by_text("keeps no facts").wait_for()  # a memgas store: the server's own one-line answer
    httpx.post(f"{server.url}/v1/principles", headers={"Authorization": f"Bearer {server.keys['admin']}"},
               json={"agent_id": "coach", "situation": "When the user plans a hike", "action": "ask about snow",
                     "avoid": "assuming summer", "reason": "mountains stay cold"}).raise_for_status()
    page.goto(f"{server.url}/ui#/experience")
    page.fill("#agent", "coach")
    page.get_by_role("button", name="Show").click()
    page.get_by_text("When the user plans a hike").wait_for()
    assert page.get_by_text("Principles (1)").count() == 1
    assert page.outside == [] and page.errors == []


@pytest.mark.slow
def test_a_view_asked_for_earlier_never_replaces_one_asked_for_later(page: Any, server: LiveServer) -> None:
    # The user list that entering a key asks for is held back until a session has been opened meanwhile; once let
    # through, the session must still be what the page shows (it once showed the late user list instead).
    held: list[Any] = []
    page.route("**/v1/users", lambda route: held.append(route))
    enter_key(page, server, server.keys["admin"])
    page.goto(f"{server.url}/ui#/u/alice/s/cat")
    while not held:
        page.wait_for_timeout(20)
    page.wait_for_timeout(1000)  # time for the session to be read and shown, were nothing holding it back
    with page.expect_response("**/v1/users"):
        held[0].continue_()
    page.locator(".msg.user").get_by_text("My cat Miso knocked over the plant again.").wait_for()
    page.wait_for_timeout(200)
    assert page.get_by_role("button", name="delete session").count() == 1
    assert page.get_by_role("heading", name="Users").count() == 0
    assert page.outside == [] and page.errors == []


def test_a_delete_asks_first_and_a_tenant_key_sees_only_its_tenant(page: Any, server: LiveServer) -> None:
    enter_key(page, server, server.keys["admin"])
    page.goto(f"{server.url}/ui#/u/alice/s/cat")
    page.locator(".msg.user").get_by_text("My cat Miso knocked over the plant again.").wait_for()
    page.get_by_role("button", name="delete session").click()
    page.get_by_role("button", name="Cancel").click()  # refused: nothing deleted
    assert httpx.get(f"{server.url}/v1/sessions/cat", params={"user_id": "alice"},
                     headers={"Authorization": f"Bearer {server.keys['admin']}"}).status_code == 200
    page.get_by_role("button", name="delete session").click()
    page.locator("#confirm-ok").click()
    page.locator("tr[data-session]").first.wait_for()
    assert "cat" not in [page.locator("tr[data-session]").nth(i).get_attribute("data-session")
                         for i in range(page.locator("tr[data-session]").count())]
    page.goto(f"{server.url}/ui#/u/alice/s/bake")
    page.locator(".msg").nth(1).get_by_role("button", name="delete").click()
    page.locator("#confirm-ok").click()
    page.locator(".msg").first.wait_for()
    sync_api.expect(page.locator(".msg")).to_have_count(1)  # (wait_for_function would need eval: the CSP says no)
    got = httpx.get(f"{server.url}/v1/sessions/bake", params={"user_id": "alice"},
                    headers={"Authorization": f"Bearer {server.keys['admin']}"}).json()
    assert [m["content"] for m in got["messages"]] == ["I baked sourdough bread with rye flour."]
    page.click("#forget")
    enter_key(page, server, server.keys["acme"])
    page.get_by_role("link", name="bob").wait_for()
    assert page.get_by_role("link", name="alice").count() == 0
    page.goto(f"{server.url}/ui#/u/alice")
    page.get_by_text("No memory stored for this user.").wait_for()
    assert page.locator("tr[data-session]").count() == 0  # alice of another tenant is simply not there
    page.goto(f"{server.url}/ui#/u/bob/profile")  # a user who stated nothing that lasts
    page.get_by_text("No standing instructions or preferences.").wait_for()
    assert page.outside == [] and page.errors == []


@pytest.mark.slow
@pytest.mark.parametrize(("path", "rendered"), [("/docs", ".opblock"), ("/redoc", "[data-section-id]")])
def test_the_api_docs_render_with_no_network(page: Any, server: LiveServer, path: str, rendered: str) -> None:
    page.goto(server.url + path)
    page.locator(rendered).first.wait_for(timeout=30_000)
    assert page.locator(rendered).count() > 10
    assert page.get_by_text("/v1/search").count() >= 1
    assert page.outside == []  # every script, style and font came from the server


def test_the_static_files_ship_in_the_package() -> None:
    from memgas.service.routes.pages import STATIC

    for name in ("ui/index.html", "ui/app.js", "ui/app.css", "vendor/swagger-ui-bundle.js", "vendor/swagger-ui.css",
                 "vendor/redoc.standalone.js", "docs/swagger-init.js"):
        assert (STATIC / name).is_file(), name
    assert "http" not in Path(STATIC / "ui" / "app.js").read_text().replace("http://www.w3.org/2000/svg", "")
