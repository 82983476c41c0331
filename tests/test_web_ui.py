"""The read-only web view at /ui: pages, safety headers, the token cookie, and a real browser.

The browser tests drive Debian's chromium through chromedriver (selenium) against a real uvicorn on
127.0.0.1; screenshots land in ``.artifacts/web/``. They skip only when chromium is not installed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import serve_in_thread
from fastapi import FastAPI
from fastapi.testclient import TestClient
from served import Served

from coffer_memory import MemoryService
from coffer_memory_fastapi import create_app
from coffer_memory_fastapi.cli import ui_url

ARTIFACTS = Path(__file__).resolve().parent.parent / ".artifacts" / "web"
HOSTILE = """# Hostile

<script>window.__pwned = "script"</script>

<img src="x" onerror="window.__pwned = 'img'">

[click me](javascript:window.__pwned='link')

<a href="javascript:window.__pwned='anchor'">raw anchor</a>

A [fine link](https://example.org/) stays.
"""


@pytest.fixture
def filled(svc: MemoryService, repo: Path) -> dict[str, Any]:
    """A project store with something in every lane, a hostile fact, and the global store."""
    sqlite = svc.remember(
        "SQLite WAL mode lets readers run while one writer appends; checkpoint on close.",
        title="SQLite runs in WAL mode",
        description="why readers never block",
        cwd=repo,
        origin_session_id="sess-42",
    )
    hostile = svc.remember(HOSTILE, title="Hostile markdown", cwd=repo)
    svc.append_rule("Never commit generated files.", cwd=repo)
    svc.journal_append("Switched the index to WAL; tests green.", cwd=repo)
    svc.save_handoff("Next: measure recall on the big corpus.", cwd=repo)
    store = sqlite.store
    svc.log_change(store, "merge", "folded two WAL notes into one")
    svc.set_label(store, "Demo project")
    svc.remember("Prefer ripgrep for grep mode.", title="Grep backend", scope="global")
    return {"store": store, "fact": sqlite, "hostile": hostile, "repo": repo}


def page(c: TestClient, url: str, status: int = 200) -> str:
    r = c.get(url)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("text/html")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "unsafe-inline" not in csp
    assert "img-src 'none'" in csp  # should an image slip through the renderer, it still loads nothing
    return r.text


# -- pages over TestClient ----------------------------------------------------------------------
def test_overview_lists_every_store(client: TestClient, filled: dict[str, Any]) -> None:
    html = page(client, "/ui")
    assert "Demo project" in html and str(filled["repo"]) in html
    assert "global" in html
    assert 'data-copy="' in html and "copy path" in html
    r = client.get("/", follow_redirects=False)
    assert r.status_code == 307 and r.headers["location"].endswith("/ui")


def test_store_page_shows_the_four_lanes_and_the_changelog(
    client: TestClient, filled: dict[str, Any]
) -> None:
    html = page(client, f"/ui/stores/{filled['store']}")
    for lane in ("Knowledge", "Rules", "Journal", "Handoff", "Consolidation changelog"):
        assert f">{lane}</h2>" in html
    assert "SQLite runs in WAL mode" in html
    assert "Never commit generated files." in html
    assert "Switched the index to WAL" in html
    assert "measure recall on the big corpus" in html
    assert "folded two WAL notes into one" in html
    assert str(filled["fact"].path) in html
    # Times as the CLI shows them: the server's local time with the offset stated (a handoff's
    # time is written with its local offset, which "%H:%M UTC" labelled UTC).
    from coffer_memory._localtime import local_text

    scene = handoff_time(filled)
    assert f">{local_text(scene, 'minutes')}</time>" in html and " UTC</time>" not in html


def handoff_time(filled: dict[str, Any]) -> Any:
    """The ``updated_at`` of the store's one handoff, read from its file."""
    from coffer_memory._store.lanes import read_handoff

    (path,) = (Path(filled["fact"].path).parents[2] / "handoff").glob("*.md")
    scene = read_handoff(path)
    assert scene is not None
    return scene.updated_at


def test_the_knowledge_lane_pages_with_the_cursor(
    client: TestClient, filled: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from coffer_memory_fastapi.web import views

    monkeypatch.setattr(views, "PAGE_SIZE", 1)
    first = page(client, f"/ui/stores/{filled['store']}")
    more = re.search(r'<a class="more" href="([^"]+)"', first)
    assert more is not None
    second = page(client, more.group(1).replace("&amp;", "&"))
    titles = ("SQLite runs in WAL mode", "Hostile markdown")
    on_first = [t for t in titles if t in first]
    on_second = [t for t in titles if t in second]
    assert len(on_first) == len(on_second) == 1 and on_first != on_second
    assert 'class="more"' not in second


def test_fact_page_shows_frontmatter_provenance_and_path(client: TestClient, filled: dict[str, Any]) -> None:
    fact = filled["fact"]
    html = page(client, f"/ui/stores/{fact.store}/facts/{fact.fact.id}")
    assert "sess-42" in html  # origin session
    assert ">Demo project</a> › Knowledge" in html
    assert f'data-copy="{fact.path}"' in html
    assert "Frontmatter" in html and "kind: knowledge" in html and "origin_session_id: sess-42" in html
    assert "readers run while one writer appends" in html


def test_hostile_markdown_is_inert_in_the_html(client: TestClient, filled: dict[str, Any]) -> None:
    hostile = filled["hostile"]
    html = page(client, f"/ui/stores/{hostile.store}/facts/{hostile.fact.id}")
    body = html.split('class="md fact-body">', 1)[1].split("</article>", 1)[0]
    assert "<script" not in body and "<img" not in body
    assert not re.search(r"<a [^>]*href=\S*javascript", body, re.IGNORECASE)
    assert "&lt;script&gt;" in body  # shown as text, not dropped silently
    assert 'href="https://example.org/"' in body and 'rel="noopener noreferrer nofollow"' in body
    # Only our own script file, nothing inline, on any page.
    assert html.count("<script") == 1 and 'src="http://testserver/ui/static/app.js"' in html


# A Markdown image is fetched by the browser as soon as the page shows, from the page's own origin
# (the CSP's img-src 'self' let it; it is 'none' now): GET /api/v1/agents?check_mcp=true starts
# every registered coffer-mcp, the request the guard refuses when another site's page makes it.
LOADS_ITSELF = """Status ![status](/api/v1/agents?check_mcp=true "checked") and
[![badge](/api/v1/export)](https://example.org/)
"""


def test_a_markdown_image_is_a_link_not_a_load(client: TestClient, svc: MemoryService) -> None:
    fact = svc.remember(LOADS_ITSELF, title="Images", scope="global")
    html = page(client, f"/ui/stores/{fact.store}/facts/{fact.fact.id}")
    body = html.split('class="md fact-body">', 1)[1].split("</article>", 1)[0]
    assert "<img" not in body
    assert '<a href="/api/v1/agents?check_mcp=true" rel="noopener noreferrer nofollow">status</a>' in body
    assert ">badge</a>" in body  # the alt text stays readable


# An address that starts with two slashes (or a backslash for one: the URL standard reads it so)
# names another host with no scheme: it reads like a link into the view and went to another site.
OFF_SITE = """See [the docs](//evil.example/x), ![shot](//evil.example/i.png),
[tabbed](	//evil.example/t), [ref][r] and [kept](https://example.org/) or [here](/ui).

[r]: //evil.example/r
"""


def test_a_protocol_relative_link_is_text_not_a_link(client: TestClient, svc: MemoryService) -> None:
    fact = svc.remember(OFF_SITE, title="Off site", scope="global")
    html = page(client, f"/ui/stores/{fact.store}/facts/{fact.fact.id}")
    body = html.split('class="md fact-body">', 1)[1].split("</article>", 1)[0]
    hrefs = re.findall(r'href="([^"]*)"', body)
    assert hrefs == ["https://example.org/", "/ui"], hrefs  # before: four hrefs to //evil.example
    assert "[the docs](//evil.example/x)" in body  # shown as it was written, as a javascript: link is


def test_a_backslashed_address_to_another_host_is_dropped_by_the_sanitiser() -> None:
    from coffer_memory_fastapi.web.render import names_another_host_without_a_scheme

    assert names_another_host_without_a_scheme("//evil.example") and names_another_host_without_a_scheme(
        "\\\\x"
    )
    assert names_another_host_without_a_scheme(" \t/\\evil.example")
    assert not names_another_host_without_a_scheme("/ui/x") and not names_another_host_without_a_scheme(
        "https://a"
    )


def test_recall_box_shows_mode_store_and_score(client: TestClient, filled: dict[str, Any]) -> None:
    html = page(client, "/ui/search?q=WAL+readers&mode=keyword")
    assert "SQLite runs in WAL mode" in html and 'class="mode">keyword<' in html
    assert filled["store"] in html and "score " in html
    # The journal day matches too and opens on its store's page, not as a fact.
    assert f'/ui/stores/{filled["store"]}#journal"' in html
    html = page(client, "/ui/search?q=ripgrep&store=global")
    assert "Grep backend" in html and "SQLite runs" not in html
    assert "Nothing found." in page(client, f"/ui/search?q=zebra&store={filled['store']}&mode=keyword")


def test_search_hits_name_their_store_by_its_label(client: TestClient, filled: dict[str, Any]) -> None:
    """A hit's store showed as ``project-<ULID>`` where the overview and the store page say "Demo
    project"; the name stays in the tooltip."""
    html = page(client, "/ui/search?q=WAL+readers&mode=keyword")
    assert f'<span class="store" title="{filled["store"]}">Demo project</span>' in html, html
    assert f'<span title="{filled["store"]}">Demo project</span>' in html  # the "stores:" line too


BIDI_TITLE = "Release \u202eetats\u202c"
BIDI_TEXT = "deploy: approved\u202e devorppa ton\u202c and \u2066isolated\u2069 \u200fmark"


def test_bidi_controls_are_shown_written_out_on_every_page(client: TestClient, svc: MemoryService) -> None:
    """ "Trojan Source": a RIGHT-TO-LEFT OVERRIDE in a title or a text made the browser show it in an
    order that lies about what it says. Every page shows each bidi control as ``\\u202e`` (as the
    CLI does on a terminal); the file keeps them, and the query box sends back what was typed."""
    fact = svc.remember(BIDI_TEXT, title=BIDI_TITLE, scope="global")
    svc.set_label(fact.store, "Team \u202eoops")
    urls = (
        "/ui",
        f"/ui/stores/{fact.store}",
        f"/ui/stores/{fact.store}/facts/{fact.fact.id}",
        "/ui/search?q=approved&store=global&mode=keyword",
    )
    for url in urls:
        html = page(client, url)
        assert not any(c in html for c in "\u202e\u202c\u2066\u2069\u200f"), url
        assert "\\u202e" in html, url
    html = page(client, f"/ui/stores/{fact.store}/facts/{fact.fact.id}")
    assert "<h1>Release \\u202eetats\\u202c</h1>" in html
    assert "\\u2066isolated\\u2069 \\u200fmark" in html
    assert BIDI_TEXT in fact.path.read_text(encoding="utf-8")
    html = page(client, "/ui/search?q=approved%E2%80%AE&store=global")
    assert 'value="approved\u202e"' in html  # the box holds the query as typed


def test_errors_are_pages_with_the_api_status(client: TestClient, filled: dict[str, Any]) -> None:
    assert "MEMORY_NOT_FOUND" in page(client, f"/ui/stores/{filled['store']}/facts/01NOPE", 404)
    assert "MEMORY_STORE_NOT_FOUND" in page(client, "/ui/stores/Not%20A%20Store!", 404)
    assert "INVALID_INPUT" in page(client, "/ui/search?q=x&mode=telepathy", 422)


def test_static_files_and_no_pages_in_the_openapi(client: TestClient) -> None:
    js = client.get("/ui/static/app.js")
    assert js.status_code == 200 and "copy" in js.text
    assert client.get("/ui/static/app.css").status_code == 200
    assert not [p for p in client.get("/openapi.json").json()["paths"] if p.startswith("/ui") or p == "/"]


def test_the_guard_covers_the_pages(client: TestClient) -> None:
    r = client.get("/ui", headers={"Host": "attacker.example"})
    assert r.status_code == 421
    r = client.get("/ui", headers={"Origin": "https://evil.example"})
    assert r.status_code == 403


def test_a_token_is_passed_once_and_kept_in_a_strict_cookie(service: MemoryService) -> None:
    with TestClient(create_app(service, token="s3cret"), base_url="http://127.0.0.1") as c:
        assert c.get("/ui").status_code == 401
        assert c.get("/ui?token=wrong").status_code == 401
        r = c.get("/ui/search?q=x&token=s3cret", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/ui/search?q=x"
        cookie = r.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "s3cret" not in cookie
        assert c.get("/ui/search?q=x").status_code == 200  # the client kept the cookie
        assert c.get("/ui/static/app.js").status_code == 200
        # The cookie opens the read-only pages only: the API still wants the bearer token.
        assert c.get("/api/v1/memory_stores").status_code == 401
        assert c.get("/api/v1/memory_stores?token=s3cret").status_code == 401
        headers = {"Authorization": "Bearer s3cret"}
        assert c.get("/api/v1/memory_stores", headers=headers).status_code == 200
        c.cookies.clear()
        c.cookies.set("coffer_ui", "forged", domain="127.0.0.1")
        assert c.get("/ui").status_code == 401


def test_pages_work_mounted_under_a_prefix(service: MemoryService, filled: dict[str, Any]) -> None:
    outer = FastAPI()
    outer.mount("/coffer", create_app(service, token="t", allowed_hosts=["proxy.internal"]))
    with TestClient(outer, base_url="http://proxy.internal") as c:
        r = c.get("/coffer/ui?token=t", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/coffer/ui"
        assert "path=/coffer/" in r.headers["set-cookie"].lower()
        html = c.get("/coffer/ui").text
        assert f'href="http://proxy.internal/coffer/ui/stores/{filled["store"]}"' in html
        assert 'src="http://proxy.internal/coffer/ui/static/app.js"' in html
        assert c.get("/coffer/ui/static/app.css").status_code == 200
        assert c.get("/coffer/", follow_redirects=False).headers["location"].endswith("/coffer/ui")


def test_open_builds_the_loopback_address() -> None:
    assert ui_url("127.0.0.1", 8765, None) == "http://127.0.0.1:8765/ui"
    assert ui_url("0.0.0.0", 9000, "a b/c") == "http://127.0.0.1:9000/ui?token=a%20b%2Fc"
    assert ui_url("::1", 1, None) == "http://[::1]:1/ui"


def test_coffer_api_open_starts_the_server_then_the_browser(tmp_home: Path, tmp_path: Path) -> None:
    """``coffer-api --open`` in a subprocess; $BROWSER (honoured by ``webbrowser``) records the URL."""
    opened = tmp_path / "opened.txt"
    opener = tmp_path / "opener.sh"
    opener.write_text(f'#!/bin/sh\necho "$1" > "{opened}"\n')
    opener.chmod(0o755)
    exe = Path(sys.executable).parent / "coffer-api"
    args = [str(exe), "--token", "tok", "--open", "--log-level", "warning"]
    env = {**os.environ, "COFFER_HOME": str(tmp_home), "BROWSER": str(opener)}
    server = Served(args, env)  # --port 0: before, --open opened port 0
    port = server.port
    try:
        deadline = time.monotonic() + 60  # a bound on start-up on a loaded machine, not an assertion
        while not (opened.exists() and opened.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        url = opened.read_text().strip()
        assert url == f"http://127.0.0.1:{port}/ui?token=tok"
        with httpx.Client(timeout=10, follow_redirects=True) as http:  # up when the browser was asked
            r = http.get(url)
            assert r.status_code == 200 and "Stores" in r.text
    finally:
        server.stop()


# -- a real browser -------------------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
browser_only = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="chromium and chromedriver are not installed (apt-get install chromium chromium-driver)",
)


@contextlib.contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """``app`` on a real uvicorn at 127.0.0.1:<free port>, in a thread of this process."""
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def served(service: MemoryService) -> Iterator[str]:
    """The app over ``service`` on a real uvicorn."""
    with serve(create_app(service)) as url:
        yield url


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless chromium driven by chromedriver; nothing is downloaded. Its profile is a folder
    the fixture removes: the one chromedriver makes itself (/tmp/org.chromium.Chromium.*) outlived
    every run. A short path, as the profile's singleton socket must fit a Unix socket's name
    (pytest's tmp_path did not: chromium would not start)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="coffer-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={profile}")
    try:
        driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
        driver.set_page_load_timeout(60)
        try:
            yield driver
        finally:
            driver.quit()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def shot(driver: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def no_alert(driver: Any) -> bool:
    from selenium.common.exceptions import NoAlertPresentException

    try:
        _ = driver.switch_to.alert
    except NoAlertPresentException:
        return True
    return False


@browser_only
def test_browser_walks_overview_store_fact_and_search(
    served: str, browser: Any, filled: dict[str, Any]
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{served}/")
    assert browser.current_url == f"{served}/ui"
    shot(browser, "overview")
    browser.find_element(By.LINK_TEXT, "Demo project").click()
    lanes = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "section.lane > h2")]
    assert lanes == ["Knowledge", "Rules", "Journal", "Handoff", "Consolidation changelog"]
    for lane in ("knowledge", "rules", "journal", "handoff", "changelog"):
        assert browser.find_elements(By.CSS_SELECTOR, f"#{lane} .path"), lane
    shot(browser, "store")
    # The copy button runs our script (allowed by the CSP as a same-origin file) and answers.
    button = browser.find_element(By.CSS_SELECTOR, "#knowledge button.copy")
    button.click()
    WebDriverWait(browser, 10).until(lambda _: button.text != "copy path")
    assert button.text in ("copied", "select and copy")
    browser.find_element(By.LINK_TEXT, "SQLite runs in WAL mode").click()
    assert "sess-42" in browser.find_element(By.CSS_SELECTOR, "dl.provenance").text
    assert str(filled["fact"].path) in browser.page_source
    shot(browser, "fact")
    box = browser.find_element(By.CSS_SELECTOR, "header input[name=q]")
    box.send_keys("WAL readers")
    box.submit()
    # submit() returns before the results page has loaded: wait for it, not for a fixed time.
    WebDriverWait(browser, 15).until(lambda b: b.find_elements(By.CSS_SELECTOR, "ol.hits li.hit"))
    hits = browser.find_elements(By.CSS_SELECTOR, "ol.hits li.hit")
    assert hits and "SQLite runs in WAL mode" in hits[0].text and "score" in hits[0].text
    assert browser.find_element(By.CSS_SELECTOR, ".mode").text in ("grep", "keyword", "vector", "hybrid")
    shot(browser, "search")


@browser_only
def test_browser_runs_nothing_from_a_hostile_fact(served: str, browser: Any, filled: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By

    hostile = filled["hostile"]
    browser.get(f"{served}/ui/stores/{hostile.store}/facts/{hostile.fact.id}")
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert no_alert(browser)
    body = browser.find_element(By.CSS_SELECTOR, "article.fact-body")
    assert "<script>" in body.text  # shown as text
    for link in body.find_elements(By.TAG_NAME, "a"):
        href = link.get_attribute("href") or ""
        assert not href.lower().startswith("javascript:"), href
    # Clicking what looks like the javascript: link does nothing either.
    with contextlib.suppress(Exception):
        body.find_element(By.PARTIAL_LINK_TEXT, "click me").click()
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert no_alert(browser)
    shot(browser, "hostile")


@browser_only
def test_browser_loads_nothing_a_fact_names(served: str, browser: Any, svc: MemoryService) -> None:
    fact = svc.remember(LOADS_ITSELF, title="Images", scope="global")
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{served}/ui/stores/{fact.store}/facts/{fact.fact.id}")

    def loaded_now(b: Any) -> list[str]:
        names: list[str] = b.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        return names

    # The list is real once it holds the page's own stylesheet: read at once it was empty under a
    # load of 2 (the entries are added as the loads end), so wait for that, not for a fixed time.
    WebDriverWait(browser, 15).until(lambda b: any(u.endswith("/ui/static/app.css") for u in loaded_now(b)))
    loaded = loaded_now(browser)
    assert not [url for url in loaded if "/api/" in url], loaded


@browser_only
def test_browser_finds_no_link_to_another_host_without_a_scheme(
    served: str, browser: Any, svc: MemoryService
) -> None:
    from urllib.parse import urlsplit

    from selenium.webdriver.common.by import By

    fact = svc.remember(OFF_SITE, title="Off site", scope="global")
    browser.get(f"{served}/ui/stores/{fact.store}/facts/{fact.fact.id}")
    body = browser.find_element(By.CSS_SELECTOR, "article.fact-body")
    # The browser's own resolution of every link left: our host, or the one the fact named with a scheme.
    hosts = {urlsplit(a.get_attribute("href") or "").hostname for a in body.find_elements(By.TAG_NAME, "a")}
    assert hosts == {"127.0.0.1", "example.org"}, hosts
    assert "//evil.example/x" in body.text


@browser_only
def test_browser_gets_in_with_a_token_once(service: MemoryService, browser: Any) -> None:
    with serve(create_app(service, token="s3cret")) as base:
        browser.get(f"{base}/ui?token=s3cret")
        assert browser.current_url == f"{base}/ui"  # the token left the address bar
        assert browser.execute_script("return document.cookie") == ""  # HttpOnly
        browser.get(f"{base}/ui/search?q=anything")
        assert "Recall" in browser.title
        assert httpx.get(f"{base}/ui", timeout=10).status_code == 401


@browser_only
def test_browser_keeps_a_files_headings_below_the_lane_and_shows_bidi_controls(
    served: str, browser: Any, filled: dict[str, Any], svc: MemoryService
) -> None:
    """A rules file's "# Heading" rendered at 2em, larger than the lane's title above it; a title
    holding U+202E showed reversed."""
    from selenium.webdriver.common.by import By

    svc.append_rule("# House rules\n\nNever force-push main.", cwd=filled["repo"])
    browser.get(f"{served}/ui/stores/{filled['store']}")

    def size(css: str) -> float:
        return float(browser.find_element(By.CSS_SELECTOR, css).value_of_css_property("font-size")[:-2])

    lane_title = size("#rules > h2")
    assert size("#rules .md h1") < lane_title, (size("#rules .md h1"), lane_title)
    shot(browser, "rules-heading")
    fact = svc.remember(BIDI_TEXT, title=BIDI_TITLE, scope="global")
    browser.get(f"{served}/ui/stores/{fact.store}/facts/{fact.fact.id}")
    assert browser.find_element(By.TAG_NAME, "h1").text == "Release \\u202eetats\\u202c"
    assert size("article.fact-body") <= size("h1")
