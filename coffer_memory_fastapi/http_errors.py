"""``EnvelopeProtocol``: uvicorn's HTTP protocol, refusing a request it cannot parse with the envelope.

A request line or header that is not HTTP (an unknown method, a byte over 0x7F in the target, a
NUL in a header) never reaches the app: uvicorn answers it itself, in plain text. ``coffer-api``
serves with this protocol so that answer is ``400`` with ``{"error": {"code": "INVALID_INPUT",
...}}`` like every other refusal. The parser is uvicorn's own (httptools when installed, else h11).
"""

from __future__ import annotations

import json

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Parser
except ImportError:  # pragma: no cover - uvicorn's own fallback when httptools is missing
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Parser  # type: ignore[assignment]

_BODY = json.dumps(
    {"error": {"code": "INVALID_INPUT", "message": "the request is not valid HTTP", "details": {}}}
).encode()


class EnvelopeProtocol(_Parser):
    """uvicorn's HTTP protocol with its one plain-text answer replaced by the error envelope."""

    def send_400_response(self, msg: str) -> None:
        """Answer a request that does not parse (``msg`` is uvicorn's text for it) and close."""
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(_BODY)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + _BODY)
        self.transport.close()
