"""Make the inspector's screenshots for the README and the docs (``docs/images/``), so they can be made again.

It stores the demo conversation that ships with memgas in a temporary store, starts ``memgas serve`` on a free
loopback port, and drives Debian's Chromium through Playwright (no browser download) through the inspector's search
and graph views. Run from the repository root::

    .venv/bin/python scripts/screenshots.py            # needs playwright (pip) and chromium (apt)
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path

from playwright.sync_api import sync_playwright

from memgas import Memory
from memgas.service.keys import create_key
from memgas.service.spawn import spawn_server, stop_server
from memgas.store import open_store

OUT = Path(__file__).resolve().parents[1] / "docs" / "images"
QUERY = "where did I go hiking?"


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("screenshots: no chromium binary (Debian: apt-get install chromium)", file=sys.stderr)
        return 2
    data = json.loads(resources.files("memgas").joinpath("data/demo_conversation.json").read_text("utf-8"))
    user = data["user_id"]
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "demo.db"
        with Memory(db) as mem:
            for s in data["sessions"]:
                mem.add(s["messages"], user_id=user, session_id=s["session_id"], timestamp=s["timestamp"])
        with open_store(str(db)) as store:
            key = create_key(store, "admin")[0]
        proc, url, _ = spawn_server(db, log=Path(tmp) / "server.log", env={"MEMGAS_CACHE_DIR": f"{tmp}/cache"})
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1200, "height": 800})
                page.goto(f"{url}/ui")
                page.fill("#key", key)
                page.click("#keyform button[type=submit]")
                page.get_by_role("link", name=user).click()
                page.locator("tr[data-session]").first.wait_for()
                page.get_by_role("link", name="search").click()
                page.fill("#query", QUERY)
                page.get_by_role("button", name="Search").click()
                page.locator(".hit").first.wait_for()
                page.screenshot(path=str(OUT / "inspector-search.png"))
                page.get_by_role("link", name="graph").click()
                page.locator("circle.node").first.wait_for()
                page.wait_for_timeout(500)  # the layout settles
                page.screenshot(path=str(OUT / "inspector-graph.png"), full_page=True)
                browser.close()
        finally:
            stop_server(proc)
    print(f"screenshots: {OUT / 'inspector-search.png'}, {OUT / 'inspector-graph.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
