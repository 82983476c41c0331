"""``coffer-api``'s fetch metadata rules where a link may be followed, judged on a real server with
the headers sent exactly (raw sockets): the link exception (another site's page may link to the web
view) and the refusal of a link followed into ``/api/`` from a page of the server's own origin.

Each value is a case-sensitive token, sent by browsers exactly as the spec lists it; a value that is
not on the list, or a header sent twice, is read the way that refuses (``_http_hosts.fetch_refusal``).
Both faces' common rows are in ``test_http_faces_agree.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from served import Served
from test_http_faces_agree import exchange

API = "/api/v1/memory_stores"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    home = tmp_path_factory.mktemp("fetch-metadata") / "home"
    env = {**os.environ, "COFFER_HOME": str(home)}
    with Served([str(Path(sys.executable).parent / "coffer-api"), "--log-level", "warning"], env) as server:
        yield server.port


LINK = [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-Dest", "document")]
CLICKED = [("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Mode", "navigate"), ("Sec-Fetch-Dest", "document")]


def _with(base: list[tuple[str, str]], name: str, *values: str) -> list[tuple[str, str]]:
    """``base`` with the header ``name`` given ``values`` (one line each) in its place."""
    return [*((k, v) for k, v in base if k != name), *((name, v) for v in values)]


# (path, fetch metadata, status). Those marked "served" were served before: the REST guard read the
# last of two headers, and matched Sec-Fetch-Mode and -Site of a same-origin link case-sensitively.
CASES = [
    ("/ui", LINK, 200),  # a link to the web view from another site's page: the user's own
    ("/ui", _with(LINK, "Sec-Fetch-Site", "Cross-Site"), 200),  # read as another site's: still a link
    ("/ui", _with(LINK, "Sec-Fetch-Mode", "Navigate"), 403),
    ("/ui", _with(LINK, "Sec-Fetch-Dest", "Document"), 403),
    ("/ui", _with(LINK, "Sec-Fetch-Dest", "iframe"), 403),
    ("/ui", _with(LINK, "Sec-Fetch-Dest", "iframe", "document"), 403),  # served
    ("/ui", _with(LINK, "Sec-Fetch-Mode", "no-cors", "navigate"), 403),  # served
    # A prefetch another site's speculation rules asked for has a navigation's headers: served.
    ("/ui/search?q=deploys", [*LINK, ("Sec-Purpose", "prefetch")], 403),
    ("/ui/search?q=deploys", [*LINK, ("Sec-Purpose", "prefetch;prerender")], 403),
    ("/ui/search?q=deploys", [*CLICKED, ("Sec-Purpose", "prefetch")], 200),  # the view's own
    (f"{API}/global/recall?query=x", LINK, 403),  # no link into the API from another site
    (f"{API}/global/recall?query=x", CLICKED, 403),  # nor from a page of this origin
    (f"{API}/global/recall?query=x", _with(CLICKED, "Sec-Fetch-Mode", "Navigate"), 403),  # served
    (f"{API}/global/recall?query=x", _with(CLICKED, "Sec-Fetch-Mode", "NAVIGATE"), 403),  # served
    (f"{API}/global/recall?query=x", _with(CLICKED, "Sec-Fetch-Mode", "navigate", "cors"), 403),  # served
    (f"{API}/global/recall?query=x", _with(CLICKED, "Sec-Fetch-Site", "Same-Origin"), 403),  # served
    (f"{API}/global/recall?query=x", _with(CLICKED, "Sec-Fetch-Mode", "cors"), 200),  # the view's script
    (f"{API}/global/recall?query=x", _with(CLICKED, "Sec-Fetch-Mode", "cors "), 200),
    (f"{API}/global/recall?query=x", _with(CLICKED, "Sec-Fetch-Site", "none"), 200),  # typed by the user
    (f"{API}/global/recall?query=x", [("Sec-Fetch-Site", "same-origin")], 200),  # no mode: not read
    ("/ui", CLICKED, 200),  # a link between the view's own pages
]


@pytest.mark.parametrize(
    ("path", "fetch", "expected"),
    CASES,
    ids=[
        f"{p.split('?')[0]} " + " ".join(f"{k.removeprefix('Sec-Fetch-')}={v!r}" for k, v in f)
        for p, f, _ in CASES
    ],
)
def test_fetch_metadata_of_a_link_is_judged_by_exact_tokens(
    port: int, path: str, fetch: list[tuple[str, str]], expected: int
) -> None:
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *(f"{k}: {v}" for k, v in fetch)]
    request = "\r\n".join([*lines, "Connection: close", "", ""]).encode("latin-1")
    status, body = exchange(("127.0.0.1", port), request)
    assert status == expected, (path, fetch, status, body)
    if expected == 403:
        assert body["error"]["code"] == "ORIGIN_NOT_ALLOWED", body  # type: ignore[index]
