"""Markdown to safe HTML: markdown-it-py renders, nh3 sanitises what it rendered."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markupsafe import Markup

# Only links a reader can follow without running anything; no javascript:, data: or vbscript:.
URL_SCHEMES = frozenset({"http", "https", "mailto"})
# ammonia's tags less the one a browser loads a URL for by itself (see _image_as_link).
_TAGS = set(nh3.ALLOWED_TAGS) - {"img"}
_URL_ATTRIBUTES = frozenset({"href", "src", "cite", "action", "formaction", "poster", "background"})
# Unicode's Bidi_Control characters (embeddings, overrides, isolates and marks: U+061C, U+200E,
# U+200F, U+202A-U+202E, U+2066-U+2069) and the zero-width ones (ZERO WIDTH SPACE, NON-JOINER,
# JOINER, WORD JOINER and the BOM/ZERO WIDTH NO-BREAK SPACE: U+200B-U+200D, U+2060, U+FEFF).
_BIDI_CONTROLS = re.compile(r"[\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def bidi_shown(text: str) -> str:
    """``text`` with each bidirectional control written out as ``\\u202e``, as ``coffer`` shows it on a
    terminal: a title holding RIGHT-TO-LEFT OVERRIDE is displayed in an order that lies about what
    it says ("Trojan Source"). Zero-width characters are written out the same way (``\\u200b``):
    shown as nothing, ``pay\\u200bpal`` reads as ``paypal`` and a search for what the page shows
    misses. The stored text keeps them; the page shows where they are."""
    return _BIDI_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class Exact(str):
    """A value the page holds exactly as stored, bidi controls and all: an attribute a script copies
    (a path) or a form sends back (the query). ``finalize`` leaves it alone; it is still escaped."""


def finalize(value: Any) -> Any:
    """Jinja's ``finalize``: every value a page shows, with its bidi controls written out
    (``bidi_shown``). Markup is HTML the page built from values already shown so (a macro's,
    ``markdown``'s)."""
    if isinstance(value, Markup | Exact) or value is None:
        return value
    text = str(value)
    return bidi_shown(text) if _BIDI_CONTROLS.search(text) else value


def names_another_host_without_a_scheme(url: str) -> bool:
    """Whether a browser resolves ``url`` to another host although it names no scheme: ``//host/x``
    (protocol-relative), and ``\\\\host``, ``/\\host``, ``\\/host`` (a backslash is a slash in an
    http(s) URL), after what the URL standard strips (leading blanks and controls; tabs and line
    breaks anywhere). Such a link reads like one into the view and leaves for another site.
    """
    kept = url.lstrip("".join(map(chr, range(0x21)))).replace("\t", "").replace("\n", "").replace("\r", "")
    return len(kept) >= 2 and kept[0] in "/\\" and kept[1] in "/\\"


def _validate_link(url: str) -> bool:
    """markdown-it's own check (no ``javascript:``, ``vbscript:``, ``file:``, ``data:`` but images),
    and no address that names another host without a scheme: such a link stays text, as a
    ``javascript:`` one does. An off-site link names its scheme (``https://…``)."""
    return MarkdownIt.validateLink(_parser(), url) and not names_another_host_without_a_scheme(url)


def _safe_url_attribute(element: str, attribute: str, value: str) -> str | None:
    """nh3's filter: drop a URL attribute naming another host without a scheme (defence in depth)."""
    if attribute in _URL_ATTRIBUTES and names_another_host_without_a_scheme(value):
        return None
    return value


def _image_as_link(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """``![alt](src)`` as a link to ``src`` the reader may follow, never an ``<img>``.

    The browser fetches an image by itself, with the page's origin: a fact holding
    ``![x](/api/v1/agents?check_mcp=true)`` started processes as soon as its page was shown (the
    CSP's ``img-src 'self'`` allowed exactly that address). A link runs only when clicked.
    """
    token = tokens[idx]
    src = str(token.attrs.get("src", ""))
    alt = renderer.renderInlineAsText(token.children or [], options, env) or src
    return f'<a href="{escapeHtml(src)}">{escapeHtml(alt)}</a>'


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # html=False: raw HTML in a fact is shown as text, never passed through.
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
    parser.add_render_rule("image", _image_as_link)
    parser.validateLink = _validate_link  # type: ignore[method-assign]
    return parser


def markdown(text: str | None) -> Markup:
    """``text`` as sanitised HTML, safe to place in a page unescaped."""
    if not text:
        return Markup("")
    html = _parser().render(bidi_shown(text))
    # Defence in depth: markdown-it already refuses javascript: links and escapes raw HTML; nh3
    # (ammonia) guarantees the output holds no script, event handler or unsafe URL either way.
    cleaned = nh3.clean(
        html,
        tags=_TAGS,
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        attribute_filter=_safe_url_attribute,
    )
    return Markup(cleaned)  # sanitised by nh3 just above


def split_frontmatter(text: str) -> tuple[str, str]:
    """A fact file's raw YAML frontmatter and its body (``""`` for a missing frontmatter)."""
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            rest = text[end + 4 :]
            return text[4:end], rest.removeprefix("\n")
    return "", text


def document(text: str | None) -> Markup:
    """A lane file (journal day, handoff, rules, changelog) as sanitised HTML, frontmatter left out."""
    return markdown(split_frontmatter(text)[1] if text else text)
