"""Headers that keep the web view's pages inert even if sanitising ever missed something."""

from __future__ import annotations

# No inline script or style, nothing fetched from elsewhere, forms post only here, no framing.
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'none'",  # the pages show no image; a fact's is a link (render.py)
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)

PAGE_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
"""Sent with every page of the web view."""
