"""For receivers of the service's signed POSTs: webhook deliveries and one-step A2UI calls.

The service signs each POST with the recipient's own secret, in the ``tessera-signature``
header: ``t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`` (the rule of
``packages/server/src/transport/signed-post.ts``). A receiver checks it against the exact raw
body it read, before parsing it, and refuses stale timestamps, so a captured request cannot be
replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from typing import Protocol

SIGNATURE_HEADER = "tessera-signature"


class Headers(Protocol):
    """Anything with ``get(name)``: a dict, ``http.server``'s ``self.headers`` (an
    ``email.message.Message``), a framework's request headers."""

    def get(self, name: str, /) -> object: ...

# ASCII digits and lowercase hex only, the whole value: Python's \d would take any Unicode digit
# and $ would accept a trailing newline.
_HEADER = re.compile(r"t=([0-9]{1,12}),v1=([0-9a-f]{64})", re.ASCII)


def webhook_signature(secret: str, timestamp: int | str, body: bytes | str) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under ``secret``, as the service signs."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    message = str(timestamp).encode("ascii") + b"." + raw
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: bytes | str, now: int | None = None) -> str:
    """A ``tessera-signature`` value for ``body``, as the service would send it (for tests)."""
    timestamp = int(time.time()) if now is None else now
    return f"t={timestamp},v1={webhook_signature(secret, timestamp, body)}"


def verify_webhook(
    secret: str,
    headers: Headers,
    body: bytes | str,
    tolerance_s: int = 300,
    *,
    now: int | None = None,
) -> bool:
    """Does the ``tessera-signature`` header sign this exact raw ``body`` with ``secret``, at a
    timestamp within ``tolerance_s`` seconds of now? Compared in constant time.

    ``headers`` is any object with ``get(name)`` (see ``Headers``); the name is looked up without
    regard to case. Pass the body's bytes as received: re-serialised JSON would not match.
    """
    value = _header(headers, SIGNATURE_HEADER)
    if value is None:
        return False
    match = _HEADER.fullmatch(value)
    if match is None:
        return False
    timestamp, signature = match.group(1), match.group(2)
    current = int(time.time()) if now is None else now
    if abs(current - int(timestamp)) > tolerance_s:
        return False
    expected = webhook_signature(secret, timestamp, body)
    return hmac.compare_digest(expected, signature)


def _header(headers: Headers, name: str) -> str | None:
    direct = headers.get(name)
    if isinstance(direct, str):
        return direct
    # A plain dict is case-sensitive: scan it (Message and framework headers already are not).
    items = getattr(headers, "items", None)
    if callable(items):
        for key, value in items():
            if isinstance(key, str) and key.lower() == name and isinstance(value, str):
                return value
    return None
