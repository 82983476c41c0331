"""Bare base64 of an image, kept as the same bytes in a data URI are (secrets30, session 30).

A PNG, JPEG, GIF or WebP file's base64 without a ``data:`` URI (an API's JSON answer, a
``base64 logo.png`` pasted) is no secret: ``remember`` stores it, also under ``secrets =
"reject"``, and a transcript drops it as bulk (``encoded_image``), as it does a data URI's. Only a
run that decodes whole to an image counts: an image's head glued to other data is still an
encoded blob.
"""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest

from coffer_memory import MemoryService
from coffer_memory._transcripts.scrub import redact_secrets, scrub_text

_RNG = random.Random(3031)


def _remembered_in_reject_mode(tmp_home: Path, text: str) -> str:
    tmp_home.mkdir(parents=True)
    (tmp_home / "config.toml").write_text('[security]\nsecrets = "reject"\n')
    with MemoryService(tmp_home) as svc:
        return svc.remember(text, scope="global").fact.body.strip()


# Bare base64 of an image: public, like the same bytes in a data URI.
def _image(magic: bytes) -> str:
    return base64.b64encode(magic + _RNG.randbytes(300)).decode()


IMAGES = {
    "png": _image(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"),
    "jpeg": _image(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"),
    "gif": _image(b"GIF89a\x10\x00\x10\x00"),
    "webp": _image(b"RIFF\x00\x10\x00\x00WEBPVP8 "),
}


@pytest.mark.parametrize("kind", IMAGES)
def test_a_bare_base64_image_is_kept(tmp_home: Path, kind: str) -> None:
    text = f'the icon, as the API returned it: {{"icon": "{IMAGES[kind]}"}}'
    assert _remembered_in_reject_mode(tmp_home, text) == text
    assert redact_secrets(text) == text
    out, counts = scrub_text(text)  # in a transcript, bulk as in a data URI
    assert counts == {"encoded_image": 1} and IMAGES[kind][:40] not in out and '"icon": "' in out, out
    assert scrub_text(out) == (out, {})


def test_an_image_head_glued_to_other_data_is_still_an_encoded_blob() -> None:
    secret = base64.b64encode(_RNG.randbytes(120)).decode()
    for text in (
        IMAGES["png"][:16] + secret.rstrip("=") + "-_x",  # base64url marks: the run does not decode
        IMAGES["png"][:20] + "A" + secret,  # a length that does not decode
    ):
        out, counts = scrub_text(text)
        assert secret[:40] not in out and counts.get("encoded_blob") == 1, out
