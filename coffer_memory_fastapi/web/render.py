"""Markdown to safe HTML: markdown-it-py renders, nh3 sanitises what it rendered."""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

# Only links a reader can follow without running anything; no javascript:, data: or vbscript:.
URL_SCHEMES = frozenset({"http", "https", "mailto"})


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # html=False: raw HTML in a fact is shown as text, never passed through.
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])


def markdown(text: str | None) -> Markup:
    """``text`` as sanitised HTML, safe to place in a page unescaped."""
    if not text:
        return Markup("")
    html = _parser().render(text)
    # Defence in depth: markdown-it already refuses javascript: links and escapes raw HTML; nh3
    # (ammonia) guarantees the output holds no script, event handler or unsafe URL either way.
    cleaned = nh3.clean(html, url_schemes=set(URL_SCHEMES), link_rel="noopener noreferrer nofollow")
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
