"""One HTTP exchange with the service, and the retries a call ID makes safe.

Standard library only: ``urllib.request`` with redirects refused (a bearer token and a signed
decision must not follow a redirect to another host), JSON in and out. Each attempt is bounded
as a whole by ``timeout_s`` (the name lookup and a TLS handshake included; a timer shuts its
socket down), and an answer the service sent while the request was still being written (a 413
for a body over its limit) is read and used.
"""

from __future__ import annotations

import email.utils
import functools
import http.client
import ipaddress
import json
import math
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._parse import ShapeError
from .errors import ConfigError, TesseraError, error_class

#: HTTP statuses that say "not now" rather than "no": the same request may succeed later.
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})

#: The longest bearer token the service reads (``MAX_BEARER_CHARS`` in ``@tessera/core/http``).
MAX_BEARER_CHARS = 16_384

#: The default ``max_response_bytes``: 64 MiB, far above any answer a service gives.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024

#: The largest integer a JSON number keeps through the service, which reads numbers as doubles
#: (``Number.MAX_SAFE_INTEGER``): beyond it, ``2**53 + 1`` arrives as ``2**53``.
MAX_SAFE_INTEGER = 2**53 - 1

# A RetryPolicy's bounds, the TS client's: the longest delay a timer takes is 2^31 - 1 ms.
_MAX_ATTEMPTS = 2**31 - 1
_MAX_DELAY_S = (2**31 - 1) / 1000


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
        # The TS client's bounds (a timer's longest delay, 2^31 - 1 ms), and its code: a policy
        # no call could follow is ``invalid_config`` when it is made (a ``ValueError`` too), not
        # an ``OverflowError`` from the sleep of a late retry.
        attempts = self.attempts
        if not isinstance(attempts, int) or isinstance(attempts, bool) or not 1 <= attempts <= _MAX_ATTEMPTS:
            raise ConfigError(
                "invalid_config",
                f"attempts must be a whole number from 1 to {_MAX_ATTEMPTS}",
                field="retry.attempts",
            )
        for name in ("base_delay_s", "max_delay_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= _MAX_DELAY_S:
                raise ConfigError(
                    "invalid_config",
                    f"{name} must be a number of seconds from 0 to {_MAX_DELAY_S}",
                    field=f"retry.{name}",
                )

    def backoff_s(self, retry: int, retry_after_s: float | None, draw: Callable[[], float]) -> float:
        """The wait before retry number ``retry`` (0 for the first retry).

        Any number of attempts is allowed (as by the TS client): past the cap the ceiling is
        ``max_delay_s``, computed without ``2**retry`` as a float, which overflows from the
        1,024th retry (``OverflowError``). A ``base_delay_s`` of 0 waits 0 however late."""
        try:
            grown = math.ldexp(float(self.base_delay_s), retry)
        except OverflowError:
            grown = math.inf
        ceiling = min(self.max_delay_s, grown)
        jittered = draw() * ceiling
        if retry_after_s is None:
            return jittered
        return min(self.max_delay_s, max(jittered, retry_after_s))


NO_RETRY = RetryPolicy(attempts=1)


# ---- options checked when the client is made ---------------------------------------------------

# What the service reads as a bearer token (no white space, at most MAX_BEARER_CHARS) and a
# header can carry (no control characters, nothing above U+00FF): the TS client's rule.
_SENDABLE_TOKEN = re.compile(r"[\x21-\x7e\xa1-\xff]{1,%d}" % MAX_BEARER_CHARS)
# Controls (C0, DEL, C1) and white space: a URL pasted with its newline is the usual slip.
_URL_UNSENDABLE = re.compile(r"[\x00-\x20\x7f-\x9f]")


def checked_token(token: object) -> str | None:
    """The token, or ``invalid_config`` (field ``token``) for one no request could carry.

    The message never shows the token (a secret), nor does the exception chain: a raw
    ``ValueError`` from ``http.client`` or a ``UnicodeEncodeError`` would hold all of it.
    """
    if token is None:
        return None
    if not isinstance(token, str):
        raise ConfigError("invalid_config", "token must be a string", field="token")
    if _SENDABLE_TOKEN.fullmatch(token) is not None:
        return token
    why = (
        "is empty"
        if token == ""
        else f"is longer than {MAX_BEARER_CHARS} characters"
        if len(token) > MAX_BEARER_CHARS
        else "holds whitespace, a control character (a newline?) or a character a header cannot carry"
    )
    raise ConfigError("invalid_config", f"token {why}", field="token")


def checked_base_url(url: object) -> str:
    """The base URL without its trailing slashes, or ``invalid_config`` (field ``url``).

    Refused: anything but an absolute http(s) URL; a control character or white space (a pasted
    newline); credentials (``user:password@``: the token authenticates, and a password in a URL
    ends up in logs); a query or fragment (every route's path is appended to the base); a port
    that is not a number up to 65535; a character outside ASCII in the path. The message never
    shows the URL, which may hold credentials.
    """

    def refuse(why: str) -> ConfigError:
        return ConfigError("invalid_config", f"url {why}", field="url")

    if not isinstance(url, str):
        raise refuse("must be a string: an absolute http:// or https:// URL")
    if _URL_UNSENDABLE.search(url) is not None:
        raise refuse("holds white space or a control character (a newline?)")
    try:
        parsed = urllib.parse.urlsplit(url)
        parsed.port  # noqa: B018 (raises ValueError for a port out of range or not a number)
    except ValueError:
        # Not echoed: urlsplit's message quotes the URL, credentials and all.
        raise refuse("is not a URL this client can send to (its host or port is malformed)") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc or not parsed.hostname:
        raise refuse("must be an absolute http:// or https:// URL")
    if "@" in parsed.netloc:
        raise refuse("must not carry credentials (user:password@): the token authenticates")
    if "?" in url or "#" in url:
        raise refuse("must not have a query or a fragment: each route's path is appended to it")
    if not parsed.path.isascii():
        raise refuse("has a character outside ASCII in its path: percent-encode it")
    return url.rstrip("/")


def checked_timeout(timeout_s: object) -> float:
    """``timeout_s`` as a float, or ``invalid_config`` (field ``timeout_s``)."""
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, (int, float))
        or not math.isfinite(timeout_s)
        or timeout_s <= 0
        or timeout_s > threading.TIMEOUT_MAX
    ):
        raise ConfigError(
            "invalid_config",
            f"timeout_s must be a finite number of seconds, above 0 and at most {threading.TIMEOUT_MAX:.0f}",
            field="timeout_s",
        )
    return float(timeout_s)


def checked_max_response_bytes(max_response_bytes: object) -> int:
    """``max_response_bytes`` as an int, or ``invalid_config`` (field ``max_response_bytes``)."""
    if isinstance(max_response_bytes, bool) or not isinstance(max_response_bytes, int) or max_response_bytes < 1:
        raise ConfigError(
            "invalid_config",
            "max_response_bytes must be a whole number of bytes above 0",
            field="max_response_bytes",
        )
    return max_response_bytes


# ---- one attempt, bounded as a whole ----------------------------------------------------------


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


#: One answer of ``socket.getaddrinfo``: family, type, protocol, canonical name, address.
_AddressInfo = tuple[socket.AddressFamily, socket.SocketKind, int, str, Any]


class _Deadline:
    """One attempt's bound: when ``timeout_s`` has passed, a timer shuts its socket down.

    A socket timeout bounds each read only, so a service trickling one byte a second would hold
    the caller forever. Shutting the socket down wakes a read (or a write) blocked on it, for
    the headers and the body alike; the attempt then sees that the deadline passed. The timer
    shuts down a duplicate of the socket's descriptor that this object owns and closes, so it
    can never touch a descriptor the connection already closed and the system gave to another.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._at = time.monotonic() + timeout_s
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._fired = False
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def passed(self) -> bool:
        return self._fired or time.monotonic() >= self._at

    def remaining(self) -> float:
        return max(0.0, self._at - time.monotonic())

    def resolve(self, host: str, port: int) -> list[_AddressInfo]:
        """``getaddrinfo`` within what is left of the attempt.

        The lookup has no timeout of its own (a resolver that does not answer holds the caller
        for as long as the system's retries last), so it runs in a daemon thread that is left
        behind, and its answer dropped, once the deadline passes.
        """
        if _is_ip_literal(host):
            # Nothing to look up: no thread for the usual loopback or IP address.
            return socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM, 0, socket.AI_NUMERICHOST)
        found: list[list[_AddressInfo]] = []
        failed: list[BaseException] = []

        def look_up() -> None:
            try:
                found.append(socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM))
            except BaseException as error:  # handed to the caller's thread as is
                failed.append(error)

        worker = threading.Thread(target=look_up, name="tessera-resolve", daemon=True)
        worker.start()
        worker.join(self.remaining())
        if failed:
            raise failed[0]
        if not found:
            raise TimeoutError(f"resolving {host} took longer than the attempt's {self.timeout_s} s")
        return found[0]

    def watch(self, sock: socket.socket | None) -> None:
        """Puts a connected socket under the deadline (shut down at once if it has passed)."""
        if sock is None:
            return
        try:
            own = socket.fromfd(sock.fileno(), sock.family, sock.type)
        except OSError:
            return
        with self._lock:
            if self._closed:
                own.close()
                return
            self._sockets.append(own)
            if self._fired:
                _shut_down(own)

    def _expire(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._fired = True
            for sock in self._sockets:
                _shut_down(sock)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._closed = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            sock.close()


def _shut_down(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _connect_within(
    deadline: _Deadline,
    address: tuple[str, int],
    timeout: Any = None,
    source_address: tuple[str, int] | None = None,
) -> socket.socket:
    """``socket.create_connection`` with the name lookup and the connect under ``deadline``.

    The socket is watched from before its connect, so the attempt's one bound also covers the
    connect and the TLS handshake (``http.client`` wraps this socket after it returns), not
    only what follows them.
    """
    host, port = address
    last: OSError | None = None
    for family, kind, proto, _, sockaddr in deadline.resolve(host, port):
        sock = socket.socket(family, kind, proto)
        try:
            step = deadline.remaining()
            sock.settimeout(step if not isinstance(timeout, (int, float)) else min(step, timeout))
            if source_address is not None:
                sock.bind(source_address)
            deadline.watch(sock)
            sock.connect(sockaddr)
            return sock
        except OSError as error:
            sock.close()
            last = error
            if deadline.passed():
                break
    raise last if last is not None else OSError(f"{host} resolved to no address")


class _Connection(http.client.HTTPConnection):
    """``http.client``'s connection, under a deadline, reading the answer to a cut-off send.

    A service answers a body over its limit with 413 and closes while the client is still
    writing: the write fails with a broken pipe or a reset, yet the answer is already here.
    So a failed send is kept, and ``getresponse`` reads what the service sent; only when there
    is nothing to read does the send's own error stand (no answer: ``service_unreachable``).
    """

    def __init__(self, *args: Any, deadline: _Deadline | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline = deadline
        self._send_error: OSError | None = None
        if deadline is not None:
            self._create_connection = functools.partial(_connect_within, deadline)

    def connect(self) -> None:
        super().connect()
        if self._deadline is not None:
            self._deadline.watch(self.sock)

    def request(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().request(*args, **kwargs)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as error:
            if self.sock is None:
                raise
            self._send_error = error

    def getresponse(self) -> http.client.HTTPResponse:
        cut_off = self._send_error
        if cut_off is None:
            return super().getresponse()
        try:
            return super().getresponse()
        except (OSError, http.client.HTTPException):
            raise cut_off from None


if hasattr(http.client, "HTTPSConnection"):

    class _TlsConnection(_Connection, http.client.HTTPSConnection):
        """The same over TLS (``connect`` watches the socket once the handshake is done)."""


class _Request(urllib.request.Request):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline


def _open_with(req: urllib.request.Request, tls: bool) -> Callable[..., http.client.HTTPConnection]:
    deadline = req.deadline if isinstance(req, _Request) else None
    connection: type[_Connection] = _TlsConnection if tls else _Connection
    return functools.partial(connection, deadline=deadline)


class _HTTPHandler(urllib.request.HTTPHandler):
    def do_open(self, http_class: Any, req: urllib.request.Request, **kwargs: Any) -> http.client.HTTPResponse:
        return super().do_open(_open_with(req, tls=False), req, **kwargs)


_HANDLER_CLASSES: list[type[urllib.request.BaseHandler]] = [_HTTPHandler]

if hasattr(urllib.request, "HTTPSHandler") and hasattr(http.client, "HTTPSConnection"):

    class _HTTPSHandler(urllib.request.HTTPSHandler):
        def do_open(
            self, http_class: Any, req: urllib.request.Request, **kwargs: Any
        ) -> http.client.HTTPResponse:
            # https_open passes the TLS context (and, before 3.12, check_hostname) as kwargs.
            return super().do_open(_open_with(req, tls=True), req, **kwargs)

    _HANDLER_CLASSES.append(_HTTPSHandler)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _TooLarge(Exception):
    """An answer's body is longer than ``max_response_bytes``: the rest of it is never read.

    Not an ``OSError`` or ``HTTPException``: it is an answer (with its status), not a failed
    exchange, and must not be taken for one."""

    def __init__(self, status: int, request_id: str | None) -> None:
        super().__init__(status)
        self.status = status
        self.request_id = request_id


class _Attempt(Exception):
    """A failed attempt: the error to raise if it is the last, and whether to try again."""

    def __init__(self, error: TesseraError, retryable: bool, retry_after_s: float | None = None):
        super().__init__(error.message)
        self.error = error
        self.retryable = retryable
        self.retry_after_s = retry_after_s


_READ_CHUNK = 65_536


class Transport:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        timeout_s: float,
        retry: RetryPolicy,
        user_agent: str,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.base = checked_base_url(base_url)
        self.token = checked_token(token)
        self.timeout_s = checked_timeout(timeout_s)
        self.max_response_bytes = checked_max_response_bytes(max_response_bytes)
        self.retry = retry
        self.user_agent = user_agent
        # build_opener ties each handler to its opener: fresh ones for each client. An empty
        # ProxyHandler replaces urllib's default one, which reads http_proxy / https_proxy from
        # the environment: every request goes straight to the base URL, as the TS client's
        # fetch sends it (a proxy set for the host's other traffic would otherwise receive the
        # bearer token, in clear over http, and a loopback service would be unreachable).
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), _NoRedirect(), *(cls() for cls in _HANDLER_CLASSES)
        )
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
        deadline = _Deadline(self.timeout_s)
        request = _Request(url, data=data, method=method, headers=headers, deadline=deadline)
        try:
            status, text, request_id, retry_after = self._exchange(request, deadline)
        except _TooLarge as large:
            # Not an answer the service gives: a stream without end (an impostor, a proxy's
            # download) would fill the host's memory until the deadline. Not retried: the same
            # request would get it again.
            raise _Attempt(
                error_class("invalid_response", large.status)(
                    "invalid_response",
                    f"{method} {path} answered {large.status} with a body over "
                    f"{self.max_response_bytes} bytes (max_response_bytes), which the client does not read",
                    status=large.status,
                    request_id=large.request_id,
                    attempts=attempt,
                ),
                retryable=False,
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
            # Past the deadline, whatever the shut-down socket raised is the timeout.
            if not deadline.passed() and isinstance(error, ValueError):
                raise
            why = f"no answer within {self.timeout_s} s" if deadline.passed() else _describe(error, self.timeout_s)
            raise _Attempt(
                error_class("service_unreachable", None)(
                    "service_unreachable",
                    f"{method} {path}: {why}",
                    attempts=attempt,
                ),
                retryable=True,
            ) from error
        finally:
            deadline.close()
        return self._answer(method, path, status, text, request_id, retry_after, attempt)

    def _exchange(
        self, request: _Request, deadline: _Deadline
    ) -> tuple[int, bytes, str | None, str | None]:
        """Status, body, ``x-request-id`` and ``Retry-After`` of one exchange, within the deadline."""
        try:
            response = self._opener.open(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as answered:
            # Not 2xx (or a refused redirect): still an answer, with a body to read.
            with answered:
                headers = answered.headers
                request_id = headers.get("x-request-id") if headers else None
                try:
                    text = _read_body(answered, deadline, self.max_response_bytes, answered.code, request_id)
                except (OSError, http.client.HTTPException):
                    if deadline.passed():
                        raise
                    text = b""
                if deadline.passed():
                    raise TimeoutError("the deadline passed while the answer was read") from None
                retry_after = headers.get("retry-after") if headers else None
                return answered.code, text, request_id, retry_after
        with response:
            status: int = response.status
            request_id = response.headers.get("x-request-id")
            text = _read_body(response, deadline, self.max_response_bytes, status, request_id)
            if deadline.passed():
                raise TimeoutError("the deadline passed while the answer was read")
            return status, text, request_id, None

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
            value: Any = _loads(text)
            unreadable = None
        except RecursionError:
            value, unreadable = None, "a JSON body nested deeper than Python's json can read"
        except _DuplicateKey:
            value, unreadable = None, "a JSON body that repeats a key in one object"
        except ValueError:  # JSONDecodeError, UnicodeDecodeError, NaN or Infinity
            value, unreadable = None, "a body that is not JSON"
        if 200 <= status < 300:
            if unreadable is None:
                return value
            raise _Attempt(
                error_class("invalid_response", status)(
                    "invalid_response",
                    f"{method} {path} answered {status} with {unreadable}",
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


def _read_body(response: Any, deadline: _Deadline, limit: int, status: int, request_id: str | None) -> bytes:
    """The whole body, read in chunks, stopping once the deadline has passed.

    A body longer than ``limit`` bytes (a ``Content-Length`` over it, or more bytes than it as
    they come) is ``_TooLarge``, and the rest is not read.

    A body shorter than its ``Content-Length`` (the service or a proxy closed the connection
    mid-answer: a crash, a restart) is ``IncompleteRead``, no answer, as fetch's "terminated"
    is to the TS client. ``http.client`` reads it as a normal end (``read(amt)`` returns
    ``b""`` and leaves ``length`` above 0), which made a cut-off answer to a send an
    ``invalid_response`` that was never retried, though the call ID makes the retry safe.
    """
    declared = response.headers.get("content-length") if response.headers else None
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise _TooLarge(status, request_id)
    chunks: list[bytes] = []
    size = 0
    while not deadline.passed():
        chunk: bytes = response.read(_READ_CHUNK)
        if not chunk:
            break
        size += len(chunk)
        if size > limit:
            raise _TooLarge(status, request_id)
        chunks.append(chunk)
    missing = getattr(response, "length", None)
    if isinstance(missing, int) and missing > 0 and not deadline.passed():
        raise http.client.IncompleteRead(b"".join(chunks), missing)
    return b"".join(chunks)


class _DuplicateKey(ValueError):
    """An object of an answer names one key twice: which one counts is the parser's guess."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _DuplicateKey("an object repeats a key")
    return value


def _no_constant(name: str) -> Any:
    # Python's json reads NaN, Infinity and -Infinity, which JSON (and the service) does not have.
    raise ValueError(f"{name} is not JSON")


def _loads(text: bytes) -> Any:
    """An answer's JSON, strictly: no repeated key, no NaN or Infinity (``RecursionError`` for
    one nested deeper than Python's json can read)."""
    return json.loads(text.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant)


def _json_body(body: Mapping[str, Any]) -> bytes:
    """The body as strict JSON, or a ``TypeError`` before anything is sent.

    ``json.dumps`` writes NaN and Infinity as bare words no JSON parser takes (the service would
    answer ``invalid_request``, "the body is not valid JSON"), so they are refused here, as a set
    or bytes are: a ``TypeError`` saying what cannot be written. So are a body nested deeper
    than ``json`` can write (its ``RecursionError``) and an integer beyond +/-(2**53 - 1): the
    service reads numbers as doubles, so ``2**53 + 1`` would arrive as ``2**53``, ``10**400`` as
    null, and a retry with another such integer would match the first call's body.
    """
    try:
        text = json.dumps(body, separators=(",", ":"), allow_nan=False)
    except ValueError as error:
        # allow_nan=False raises ValueError for NaN and Infinity (so does a cycle), where a set
        # raises TypeError: one exception type for "this value has no JSON form".
        raise TypeError(f"the request body is not JSON serializable: {error} (NaN, Infinity, a cycle)") from error
    except RecursionError as error:
        raise TypeError(
            "the request body is not JSON serializable: it is nested deeper than Python's json can write"
        ) from error
    where = _unsafe_integer(body)
    if where is not None:
        raise TypeError(
            f"the request body is not JSON serializable: the integer at {where} is outside "
            f"+/-(2**53 - 1), which the service reads as a double and would alter; send it as a string"
        )
    return text.encode("utf-8")


def _unsafe_integer(body: Mapping[str, Any]) -> str | None:
    """Where the first integer beyond +/-MAX_SAFE_INTEGER sits (``payload.amount``), or None.

    Walks the body without recursion; ``json.dumps`` has already refused a cycle."""
    stack: list[tuple[Any, str]] = [(body, "body")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            stack.extend((item, f"{where}.{_label(key)}") for key, item in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))
        elif isinstance(value, int) and not isinstance(value, bool):
            if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                return where
    return None


def _label(key: object) -> str:
    text = str(key)
    return text if len(text) <= 40 else text[:37] + "..."


def _error_body(value: Any) -> tuple[str, str, str | None] | None:
    """``{"error": {"code", "message", "field"?}}`` and nothing else (the service's
    ``ErrorBodySchema``, as the TS client reads it), or None."""
    if not isinstance(value, dict) or set(value) != {"error"} or not isinstance(value["error"], dict):
        return None
    inner = value["error"]
    if not set(inner) <= {"code", "message", "field"}:
        return None
    code, message, field = inner.get("code"), inner.get("message"), inner.get("field")
    if not isinstance(code, str) or not isinstance(message, str):
        return None
    if "field" in inner and not isinstance(field, str):
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
    if isinstance(
        reason, (ConnectionResetError, http.client.RemoteDisconnected, ConnectionAbortedError, BrokenPipeError)
    ):
        return "connection reset"
    if isinstance(reason, socket.gaierror):
        return "host name does not resolve"
    if isinstance(reason, http.client.IncompleteRead):
        return "the connection closed before the whole answer arrived (IncompleteRead)"
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
