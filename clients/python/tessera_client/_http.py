"""One HTTP exchange with the service, and the retries a call ID makes safe.

Standard library only: ``urllib.request`` with redirects refused (a bearer token and a signed
decision must not follow a redirect to another host), JSON in and out.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._parse import ShapeError
from .errors import TesseraError, error_class

#: HTTP statuses that say "not now" rather than "no": the same request may succeed later.
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How a call that carries a call ID is tried again.

    ``attempts`` counts the first try (1 turns retries off). Each wait is a random time up to
    ``base_delay_s * 2**n`` (full jitter: clients that failed together do not come back
    together), never longer than ``max_delay_s``, a ``Retry-After`` from the service included.
    """

    attempts: int = 3
    base_delay_s: float = 0.1
    max_delay_s: float = 2.0

    def __post_init__(self) -> None:
        if not isinstance(self.attempts, int) or isinstance(self.attempts, bool) or self.attempts < 1:
            raise ValueError("attempts must be an integer >= 1")
        for name in ("base_delay_s", "max_delay_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0 or value != value or value == float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0")

    def backoff_s(self, retry: int, retry_after_s: float | None, draw: Callable[[], float]) -> float:
        """The wait before retry number ``retry`` (0 for the first retry)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * float(2**retry))
        jittered = draw() * ceiling
        if retry_after_s is None:
            return jittered
        return min(self.max_delay_s, max(jittered, retry_after_s))


NO_RETRY = RetryPolicy(attempts=1)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Attempt(Exception):
    """A failed attempt: the error to raise if it is the last, and whether to try again."""

    def __init__(self, error: TesseraError, retryable: bool, retry_after_s: float | None = None):
        super().__init__(error.message)
        self.error = error
        self.retryable = retryable
        self.retry_after_s = retry_after_s


class Transport:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        timeout_s: float,
        retry: RetryPolicy,
        user_agent: str,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError("url must be an absolute http:// or https:// URL")
        self.base = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.retry = retry
        self.user_agent = user_agent
        self._opener = urllib.request.build_opener(_NoRedirect())
        # Overridable by tests: the waits between attempts and their jitter.
        self.sleep: Callable[[float], None] = time.sleep
        self.draw: Callable[[], float] = random.random

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Mapping[str, Any] | None = None,
        query: Mapping[str, str | int | None] | None = None,
        retry_safe: bool = False,
    ) -> Any:
        """The JSON of a 200 answer; raises a ``TesseraError`` subclass for anything else.

        Only ``retry_safe`` calls (a body carrying a call ID, which the service answers again
        with the original decision) are ever tried twice.
        """
        url = self.base + path
        pairs = [(k, str(v)) for k, v in (query or {}).items() if v is not None]
        if pairs:
            url += "?" + urllib.parse.urlencode(pairs)
        data = None if body is None else _json_body(body)
        attempts = self.retry.attempts if retry_safe else 1
        last: _Attempt | None = None
        for attempt in range(1, attempts + 1):
            if last is not None:
                self.sleep(self.retry.backoff_s(attempt - 2, last.retry_after_s, self.draw))
            try:
                return self._attempt(method, path, url, data, attempt)
            except _Attempt as failed:
                last = failed
                if not failed.retryable:
                    break
        assert last is not None  # attempts >= 1, so a loop that did not return has failed once
        raise last.error

    def _attempt(self, method: str, path: str, url: str, data: bytes | None, attempt: int) -> Any:
        headers = {"accept": "application/json", "user-agent": self.user_agent}
        if self.token is not None:
            headers["authorization"] = f"Bearer {self.token}"
        if data is not None:
            headers["content-type"] = "application/json"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                status: int = response.status
                text = response.read()
                request_id = response.headers.get("x-request-id")
                retry_after = None
        except urllib.error.HTTPError as answered:
            status = answered.code
            try:
                text = answered.read()
            except (OSError, http.client.HTTPException):
                text = b""
            request_id = answered.headers.get("x-request-id") if answered.headers else None
            retry_after = answered.headers.get("retry-after") if answered.headers else None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            raise _Attempt(
                error_class("service_unreachable", None)(
                    "service_unreachable",
                    f"{method} {path}: {_describe(error, self.timeout_s)}",
                    attempts=attempt,
                ),
                retryable=True,
            ) from error
        return self._answer(method, path, status, text, request_id, retry_after, attempt)

    def _answer(
        self,
        method: str,
        path: str,
        status: int,
        text: bytes,
        request_id: str | None,
        retry_after: str | None,
        attempt: int,
    ) -> Any:
        meta: dict[str, Any] = {"status": status, "request_id": request_id, "attempts": attempt}
        try:
            value: Any = json.loads(text.decode("utf-8"))
            is_json = True
        except (ValueError, UnicodeDecodeError):
            value, is_json = None, False
        if 200 <= status < 300:
            if is_json:
                return value
            raise _Attempt(
                error_class("invalid_response", status)(
                    "invalid_response",
                    f"{method} {path} answered {status} with a body that is not JSON",
                    **meta,
                ),
                retryable=False,
            )
        problem = _error_body(value)
        # The first request of this call ID is still running (or its instance stopped): asked
        # again later, the service answers the original once there is one.
        retryable = status in RETRYABLE_STATUSES or (
            problem is not None and problem[0] == "call_in_progress"
        )
        if problem is not None:
            code, message, field = problem
        else:
            code = "service_unreachable" if retryable else "invalid_response"
            message, field = f"{method} {path} answered {status} without a Tessera error body", None
        error = error_class(code, status)(code, message, field=field, **meta)
        raise _Attempt(error, retryable, _retry_after_s(retry_after))


def _json_body(body: Mapping[str, Any]) -> bytes:
    """The body as strict JSON, or a ``TypeError`` before anything is sent.

    ``json.dumps`` writes NaN and Infinity as bare words no JSON parser takes (the service would
    answer ``invalid_request``, "the body is not valid JSON"), so they are refused here, as a set
    or bytes are: a ``TypeError`` saying what cannot be written.
    """
    try:
        return json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except ValueError as error:
        # allow_nan=False raises ValueError for NaN and Infinity (so does a cycle), where a set
        # raises TypeError: one exception type for "this value has no JSON form".
        raise TypeError(f"the request body is not JSON serializable: {error} (NaN, Infinity, a cycle)") from error


def _error_body(value: Any) -> tuple[str, str, str | None] | None:
    if not isinstance(value, dict) or set(value) != {"error"} or not isinstance(value["error"], dict):
        return None
    inner = value["error"]
    code, message, field = inner.get("code"), inner.get("message"), inner.get("field")
    if not isinstance(code, str) or not isinstance(message, str):
        return None
    if field is not None and not isinstance(field, str):
        return None
    return code, message, field


def _retry_after_s(header: str | None) -> float | None:
    """``Retry-After`` as seconds or an HTTP date, in seconds from now; None when unreadable."""
    if header is None:
        return None
    header = header.strip()
    if header.isdigit():
        return float(header)
    try:
        at = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return max(0.0, at.timestamp() - time.time())


def _describe(error: BaseException, timeout_s: float) -> str:
    reason: object = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout_s} s"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, (ConnectionResetError, http.client.RemoteDisconnected, ConnectionAbortedError)):
        return "connection reset"
    if isinstance(reason, socket.gaierror):
        return "host name does not resolve"
    return type(reason).__name__


def parse_json_or_shape(parse: Callable[[Any], Any], value: Any, method: str, path: str) -> Any:
    """Runs a body parser; a ShapeError becomes ``invalid_response`` (a drifted service)."""
    try:
        return parse(value)
    except ShapeError as error:
        raise error_class("invalid_response", 200)(
            "invalid_response",
            f"{method} {path} answered 200 with a body that is not its documented shape: {error}",
            status=200,
        ) from error
