"""What the client makes of answers no real service gives on cue, from a local server (no service
needed): bodies that are not their route's shape, an answer trickled a byte at a time, a 413 sent
while the request is still being written, and what goes on the wire for a few requests."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import unittest
import unittest.mock
from collections.abc import Callable
from typing import Any

from tessera_client import (
    A2uiReply,
    ConflictError,
    Denied,
    Explanation,
    RequestError,
    RetryPolicy,
    ServiceError,
    TesseraClient,
    TesseraError,
    UnavailableError,
)

from .support import RawServer, canned, raw_answer

FAST = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02)

GRANT: dict[str, Any] = {
    "id": "g-1",
    "namespaceId": "default",
    "issuer": "host",
    "subject": "asker",
    "capabilities": [
        {
            "resource": {"namespace": "messages", "path": ["bob"], "owner": "alice"},
            "actions": ["messages.send"],
            "scope": "exact",
        }
    ],
    "constraints": {"maxUses": 1, "notBefore": "2024-01-01T00:00:00Z", "expiresAt": "2024-01-01T00:00:00.5Z"},
    "issuedAt": "2024-01-01T00:00:00.000Z",
}
EVENT: dict[str, Any] = {
    "at": "2024-01-01T00:00:00.000Z",
    "source": "kernel",
    "outcome": "denied",
    "code": "tool_unavailable",
    "reason": "grant_exhausted",
    "traceId": "t-1",
    "callId": "c-1",
    "seq": 1,
    "hash": "0" * 64,
}


def server(status: int, body: bytes | str | dict[str, Any]) -> RawServer:
    data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return RawServer(canned(status, data))


class StrictAnswersTest(unittest.TestCase):
    """A 200 body the TS client refuses as ``invalid_response`` is refused here too: before, each
    of these came back as a value (a ``Denied`` with a code no caller knows, a ``Delivered``
    whose duplicated ``status`` had said ``denied``, ...)."""

    def answer(self, body: bytes | str | dict[str, Any], call: Callable[[TesseraClient], object]) -> object:
        fake = server(200, body)
        self.addCleanup(fake.close)
        return call(TesseraClient(fake.url, "t", retry=FAST))

    def refused(self, body: bytes | str | dict[str, Any], call: Callable[[TesseraClient], object]) -> ServiceError:
        with self.assertRaises(ServiceError) as caught:
            self.answer(body, call)
        error = caught.exception
        self.assertEqual((error.code, error.status, error.attempts), ("invalid_response", 200, 1))
        return error

    def test_a_denial_with_a_code_not_in_the_catalogue_is_invalid_response(self) -> None:
        send = lambda c: c.send_message("bob", {}, call_id="c-1")  # noqa: E731
        self.refused({"status": "denied", "code": "rate_limited"}, send)
        self.refused({"status": "denied", "code": None}, send)
        authorize = lambda c: c.authorize("a.b", {"namespace": "n", "path": []})  # noqa: E731
        self.refused({"status": "denied", "code": "rate_limited"}, authorize)
        denied = self.answer({"status": "denied", "code": "no_matching_grant"}, send)
        self.assertEqual(denied, Denied("no_matching_grant", call_id="c-1"))

    def test_an_answer_with_a_field_its_route_does_not_document_is_invalid_response(self) -> None:
        send = lambda c: c.send_message("bob", {}, call_id="c-1")  # noqa: E731
        self.refused({"status": "denied", "code": "no_matching_grant", "extra": 1}, send)
        self.refused({"status": "delivered", "messageId": "m", "grantId": "g", "callId": "c", "why": "x"}, send)
        self.refused({"tools": [], "debug": True}, lambda c: c.tools())
        self.refused({"reply": {}, "receipt": "dispatched", "x": 1}, lambda c: c.a2ui_call({}))
        self.refused({"events": [{**EVENT, "secret": "x"}]}, lambda c: c.audit(call_id="c-1"))
        self.refused({"grant": {**GRANT, "note": "x"}}, lambda c: c.issue_grant("asker", []))
        self.refused({"revoked": True, "at": "now"}, lambda c: c.revoke_grant("g-1"))

    def test_an_answer_that_repeats_a_key_is_invalid_response(self) -> None:
        error = self.refused(
            '{"status":"delivered","messageId":"m","grantId":"g","callId":"c",'
            '"status":"denied","code":"no_matching_grant"}',
            lambda c: c.send_message("bob", {}, call_id="c-1"),
        )
        self.assertIn("repeats a key", error.message)
        self.refused('{"tools":[],"tools":["messages.send"]}', lambda c: c.tools())

    def test_nan_or_infinity_in_an_answer_is_invalid_response(self) -> None:
        for literal in ("NaN", "Infinity", "-Infinity"):
            with self.subTest(literal=literal):
                self.refused(
                    '{"status":"delivered","messageId":"m","grantId":"g","callId":"c","reply":%s}' % literal,
                    lambda c: c.send_message("bob", {}, call_id="c-1"),
                )

    def test_a_reply_nested_deeper_than_json_can_read_is_invalid_response(self) -> None:
        for depth in (1_200, 5_000, 100_000):
            with self.subTest(depth=depth):
                body = '{"status":"delivered","messageId":"m","grantId":"g","callId":"c","reply":%s}' % (
                    "[" * depth + "]" * depth
                )
                error = self.refused(body, lambda c: c.send_message("bob", {}, call_id="c-1"))
                self.assertIn("nested deeper", error.message)
        # An error body that deep is no Tessera error body: its status's family, never a raw error.
        fake = server(409, '{"error":' + "[" * 5_000 + "]" * 5_000 + "}")
        self.addCleanup(fake.close)
        with self.assertRaises(ServiceError) as caught:
            TesseraClient(fake.url, "t").tools()
        self.assertEqual(caught.exception.code, "invalid_response")

    def test_values_outside_their_documented_range_are_invalid_response(self) -> None:
        self.refused({"ok": False}, lambda c: c.health())
        self.refused({"ready": False}, lambda c: c.ready())
        explained = {"callId": "c", "verdict": "spent", "code": "rate_limited", "summary": "s"}
        self.refused(explained, lambda c: c.explain("c"))
        self.refused({"reply": {}, "receipt": "maybe"}, lambda c: c.a2ui_call({}))
        self.refused({"claims": [{"functionCallId": "f", "claimedAt": 2**53}]}, lambda c: c.in_doubt_claims())
        self.refused({"claims": [{"functionCallId": "f", "claimedAt": 1.5}]}, lambda c: c.in_doubt_claims())
        self.refused(
            {"claims": [{"functionCallId": "f", "claimedAt": 1, "worker": None}]}, lambda c: c.in_doubt_claims()
        )
        self.refused({"grants": [{"grant": GRANT, "uses": -1}]}, lambda c: c.list_grants())
        events: list[dict[str, Any]] = [
            {**EVENT, "reason": "because"},
            {**EVENT, "source": "proxy"},
            {**EVENT, "code": "rate_limited"},
            {**EVENT, "at": "2024-02-30T00:00:00Z"},
            {**EVENT, "at": "2024-01-01T00:00Z"},
            {**EVENT, "seq": 0},
            {**EVENT, "hash": "A" * 64},
            {**EVENT, "chain": ["g"] * 18},
        ]
        for event in events:
            with self.subTest(event={k: v for k, v in event.items() if EVENT.get(k) != v}):
                self.refused({"events": [event]}, lambda c: c.audit(call_id="c-1"))
        capability = GRANT["capabilities"][0]
        grants: list[dict[str, Any]] = [
            {**GRANT, "id": ""},
            {**GRANT, "id": "g\ud800"},
            {**GRANT, "id": "x" * 513},
            {**GRANT, "capabilities": []},
            {**GRANT, "capabilities": [{**capability, "scope": "all"}]},
            {**GRANT, "capabilities": [{**capability, "actions": []}]},
            {**GRANT, "capabilities": [{**capability, "resource": {"namespace": "n", "path": [".."]}}]},
            {**GRANT, "capabilities": [{**capability, "resource": {"namespace": "n", "path": ["a/b"]}}]},
            {**GRANT, "issuedAt": "yesterday"},
            {**GRANT, "constraints": {"maxUses": 0}},
            {**GRANT, "constraints": {"maxDepth": 17}},
            {**GRANT, "constraints": {"purposes": []}},
            {**GRANT, "constraints": {"notBefore": "2024-01-02T00:00:00Z", "expiresAt": "2024-01-01T00:00:00Z"}},
            {**GRANT, "constraints": None},
            {**GRANT, "parentId": "p"},
            {**GRANT, "parentId": "p", "depth": 17},
        ]
        for grant in grants:
            with self.subTest(grant={k: str(v)[:60] for k, v in grant.items() if GRANT.get(k) != v}):
                self.refused({"grant": grant}, lambda c: c.issue_grant("asker", []))

    def test_answers_of_the_documented_shape_still_parse(self) -> None:
        grant = self.answer({"grant": {**GRANT, "parentId": "p", "depth": 1}}, lambda c: c.issue_grant("a", []))
        self.assertEqual(getattr(grant, "depth"), 1)
        astral = {**GRANT, "id": "\U0001f600" * 256, "constraints": {}}  # 512 UTF-16 units
        self.assertEqual(getattr(self.answer({"grant": astral}, lambda c: c.issue_grant("a", [])), "id"), astral["id"])
        allowed = {**EVENT, "code": None, "outcome": "allowed", "reason": "allowed"}
        events = self.answer({"events": [EVENT, allowed]}, lambda c: c.audit(call_id="c"))
        self.assertEqual(len(events), 2)  # type: ignore[arg-type]
        explained = self.answer({"callId": "c", "verdict": "spent", "code": None, "summary": "s"}, lambda c: c.explain("c"))
        self.assertEqual(explained, Explanation("c", "spent", None, "s"))
        self.assertTrue(self.answer({"ok": True}, lambda c: c.health()))
        settled = self.answer({"reply": {"x": 1}, "receipt": "in_doubt"}, lambda c: c.a2ui_settle("h", None))
        self.assertEqual(settled, A2uiReply({"x": 1}, "in_doubt"))

    def test_an_error_body_with_an_undocumented_field_is_no_tessera_error_body(self) -> None:
        # As the TS client reads it (ErrorBodySchema is closed): the status's fallback, not the code.
        bodies: list[dict[str, Any]] = [
            {"error": {"code": "call_id_conflict", "message": "m", "hint": 1}},
            {"error": {"code": "call_id_conflict", "message": "m", "field": None}},
        ]
        for body in bodies:
            with self.subTest(body=body):
                fake = server(409, body)
                self.addCleanup(fake.close)
                with self.assertRaises(ServiceError) as caught:
                    TesseraClient(fake.url, "t").tools()
                self.assertEqual(caught.exception.code, "invalid_response")
        fake = server(409, {"error": {"code": "call_id_conflict", "message": "m", "field": "callId"}})
        self.addCleanup(fake.close)
        with self.assertRaises(ConflictError) as conflict:
            TesseraClient(fake.url, "t").tools()
        self.assertEqual(conflict.exception.field, "callId")


def trickle_body(server: RawServer, connection: socket.socket) -> None:
    """Headers at once, then a chunked body one byte every 0.1 s, forever."""
    server.read_request(connection)
    connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
    while True:
        connection.sendall(b"1\r\n \r\n")
        time.sleep(0.1)


def trickle_headers(server: RawServer, connection: socket.socket) -> None:
    """The status line and then one header byte every 0.1 s, forever."""
    server.read_request(connection)
    connection.sendall(b"HTTP/1.1 200 OK\r\nx-slow: ")
    while True:
        connection.sendall(b"a")
        time.sleep(0.1)


class WholeExchangeTimeoutTest(unittest.TestCase):
    """``timeout_s`` bounds each attempt as a whole. Before, it bounded each socket read only, and
    a service answering one byte at a time held the caller forever."""

    def timed_out(self, handler: Callable[[RawServer, socket.socket], None], retry: RetryPolicy | None) -> tuple[TesseraError, float, RawServer]:
        fake = RawServer(handler)
        self.addCleanup(fake.close)
        client = TesseraClient(fake.url, "t", timeout_s=0.5, retry=retry)
        outcome: list[BaseException] = []
        started = time.monotonic()

        def run() -> None:
            try:
                client.send_message("bob", {}, call_id="slow-1")
            except BaseException as error:  # noqa: BLE001 (handed to the test thread)
                outcome.append(error)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(timeout=10)  # the old client never returns: fail rather than hang
        self.assertFalse(worker.is_alive(), "the call was still blocked 10 s later with timeout_s=0.5")
        elapsed = time.monotonic() - started
        self.assertEqual(len(outcome), 1)
        error = outcome[0]
        assert isinstance(error, TesseraError), repr(error)
        return error, elapsed, fake

    def test_an_answer_trickled_a_byte_at_a_time_times_out(self) -> None:
        error, elapsed, fake = self.timed_out(trickle_body, None)
        self.assertIsInstance(error, UnavailableError)
        self.assertEqual((error.code, error.attempts), ("service_unreachable", 1))
        self.assertIn("no answer within 0.5 s", error.message)
        self.assertLess(elapsed, 3.0)
        self.assertEqual(fake.connections, 1)

    def test_headers_trickled_a_byte_at_a_time_time_out(self) -> None:
        error, elapsed, _ = self.timed_out(trickle_headers, None)
        self.assertEqual(error.code, "service_unreachable")
        self.assertIn("no answer within 0.5 s", error.message)
        self.assertLess(elapsed, 3.0)

    def test_each_attempt_of_a_retried_call_has_its_own_bound(self) -> None:
        error, elapsed, fake = self.timed_out(trickle_body, FAST)
        self.assertEqual((error.code, error.attempts), ("service_unreachable", 3))
        self.assertEqual(fake.connections, 3)
        self.assertGreaterEqual(elapsed, 1.4)
        self.assertLess(elapsed, 6.0)


def trickle_tls(server: RawServer, connection: socket.socket) -> None:
    """Reads the ClientHello, then a TLS record header announcing 16 KiB, one byte every 0.1 s."""
    connection.recv(4096)
    for byte in b"\x16\x03\x03\x40\x00" + b"\x00" * 16384:
        connection.sendall(bytes([byte]))
        time.sleep(0.1)


SLOW_HOST = "tessera-slow-resolver.test"


class LookupAndHandshakeTimeoutTest(unittest.TestCase):
    """``timeout_s`` bounds the name lookup too. Before, the lookup had no bound at all: it
    lasted as long as the system's resolver retried. The TLS handshake was already bounded by
    CPython's own deadline for it (the socket's timeout, for the whole handshake); it now counts
    against the attempt's one bound, and this test keeps a trickled handshake from holding."""

    def outcome_of(self, call: Callable[[], object]) -> tuple[BaseException, float]:
        outcome: list[BaseException] = []
        started = time.monotonic()

        def run() -> None:
            try:
                call()
            except BaseException as error:  # noqa: BLE001 (handed to the test thread)
                outcome.append(error)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(timeout=20)
        self.assertFalse(worker.is_alive(), "the call was still blocked 20 s later with timeout_s=0.5")
        self.assertEqual(len(outcome), 1)
        return outcome[0], time.monotonic() - started

    def test_a_name_lookup_that_does_not_answer_times_out(self) -> None:
        real = socket.getaddrinfo

        def slow(host: Any, *args: Any, **kwargs: Any) -> Any:
            if host == SLOW_HOST:
                time.sleep(6)  # a resolver that does not answer, then gives up
                raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
            return real(host, *args, **kwargs)

        client = TesseraClient(f"http://{SLOW_HOST}:8787", "t", timeout_s=0.5, retry=RetryPolicy(attempts=1))
        with unittest.mock.patch("socket.getaddrinfo", slow):
            error, elapsed = self.outcome_of(client.tools)
        assert isinstance(error, UnavailableError), repr(error)
        self.assertEqual((error.code, error.attempts), ("service_unreachable", 1))
        self.assertIn("no answer within 0.5 s", error.message)
        self.assertLess(elapsed, 3.0)

    def test_a_trickled_tls_handshake_times_out(self) -> None:
        fake = RawServer(trickle_tls)
        self.addCleanup(fake.close)
        url = fake.url.replace("http://", "https://")
        client = TesseraClient(url, "t", timeout_s=0.5, retry=RetryPolicy(attempts=1))
        error, elapsed = self.outcome_of(client.tools)
        assert isinstance(error, UnavailableError), repr(error)
        self.assertEqual(error.code, "service_unreachable")
        self.assertIn("no answer within 0.5 s", error.message)
        self.assertLess(elapsed, 3.0)


def answer_before_reading(status: int, body: dict[str, Any] | None) -> Callable[[RawServer, socket.socket], None]:
    """Reads the request's head only, answers (or not), and closes with the body unread."""

    def handle(server: RawServer, connection: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = connection.recv(4096)
            if not chunk:
                return
            head += chunk
        if body is not None:
            data = json.dumps(body).encode()
            connection.sendall(raw_answer(status, data))

    return handle


class CutOffSendTest(unittest.TestCase):
    """A service answers a body over its limit (413) and closes while the client still writes it.
    Before, the client saw only the broken pipe: ``service_unreachable``, and a send went out three
    times. Now the answer already sent is read and used."""

    big = {"blob": "x" * 10_000_000}

    def test_an_answer_sent_before_the_body_was_read_is_used(self) -> None:
        too_large = {"error": {"code": "body_too_large", "message": "the body is larger than the limit"}}
        fake = RawServer(answer_before_reading(413, too_large))
        self.addCleanup(fake.close)
        with self.assertRaises(RequestError) as caught:
            TesseraClient(fake.url, "t", retry=FAST).send_message("bob", self.big, call_id="big-1")
        error = caught.exception
        self.assertEqual((error.code, error.status, error.attempts), ("body_too_large", 413, 1))
        self.assertEqual(fake.connections, 1)

    def test_with_no_answer_at_all_it_is_unreachable_and_retried(self) -> None:
        fake = RawServer(answer_before_reading(0, None))
        self.addCleanup(fake.close)
        with self.assertRaises(UnavailableError) as caught:
            TesseraClient(fake.url, "t", retry=FAST).send_message("bob", self.big, call_id="big-2")
        self.assertEqual((caught.exception.code, caught.exception.attempts), ("service_unreachable", 3))
        self.assertEqual(fake.connections, 3)


class OnTheWireTest(unittest.TestCase):
    def sent(self, answer: dict[str, Any], call: Callable[[TesseraClient], object]) -> bytes:
        fake = server(200, answer)
        self.addCleanup(fake.close)
        call(TesseraClient(fake.url, "t"))
        self.assertEqual(len(fake.requests), 1)
        return fake.requests[0]

    def test_a_denial_carries_the_call_id_the_request_was_sent_with(self) -> None:
        # The service does not repeat it in a denial; one the client made up is the caller's
        # only way to explain the refusal.
        denied = {"status": "denied", "code": "no_matching_grant"}
        calls: list[Callable[[TesseraClient], object]] = [
            lambda c: c.send_message("bob", {}),
            lambda c: c.authorize("a.b", {"namespace": "n", "path": []}),
            lambda c: c.send_message("bob", {}, call_id="mine"),
        ]
        for call in calls:
            results: list[object] = []

            def keep(c: TesseraClient, call: Callable[[TesseraClient], object] = call) -> None:
                results.append(call(c))

            request = self.sent(denied, keep)
            sent_id = json.loads(request.partition(b"\r\n\r\n")[2])["callId"]
            result = results[0]
            assert isinstance(result, Denied)
            self.assertEqual((result.code, result.call_id), ("no_matching_grant", sent_id))
        self.assertEqual(sent_id, "mine")
        # Without retries no ID is made up, and none is given back.
        fake = server(200, denied)
        self.addCleanup(fake.close)
        alone = TesseraClient(fake.url, "t", retry=RetryPolicy(attempts=1)).send_message("bob", {})
        self.assertEqual(alone, Denied("no_matching_grant"))

    def test_grant_ids_dot_and_dot_dot_are_sent_percent_encoded(self) -> None:
        # Intended: the service reads %2E back as "." (tests/test_service.py revokes both), and
        # nothing on the way can resolve an encoded dot segment to the parent path.
        for grant_id, path in ((".", b"/v1/grants/%2E"), ("..", b"/v1/grants/%2E%2E"), ("a/.", b"/v1/grants/a%2F.")):
            with self.subTest(grant_id=grant_id):
                request = self.sent({"revoked": True}, lambda c: c.revoke_grant(grant_id))
                self.assertTrue(request.startswith(b"DELETE " + path + b" HTTP/1.1\r\n"), request[:60])

    def test_an_explicit_none_settles_with_value_null(self) -> None:
        request = self.sent({"reply": {}, "receipt": "dispatched"}, lambda c: c.a2ui_settle("h-1", None))
        self.assertEqual(json.loads(request.partition(b"\r\n\r\n")[2]), {"handle": "h-1", "value": None})


class DirectConnectionTest(unittest.TestCase):
    """Requests go straight to the base URL, whatever proxy the environment names, as the TS
    client's fetch sends them. Before, urllib's default ProxyHandler read ``http_proxy``: a
    service on 127.0.0.1 was "connection refused" through a dead proxy, and a live one would
    have been sent the bearer token (in clear, over http)."""

    def test_proxy_variables_in_the_environment_are_not_followed(self) -> None:
        service = server(200, {"tools": ["messages.send"]})
        proxy = server(200, {"tools": ["from-the-proxy"]})
        self.addCleanup(service.close)
        self.addCleanup(proxy.close)
        names = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
        environment = {name: proxy.url for name in names}
        with unittest.mock.patch.dict(os.environ, environment):
            for bypass in ("no_proxy", "NO_PROXY", "REQUEST_METHOD"):
                os.environ.pop(bypass, None)
            client = TesseraClient(service.url, "t", retry=FAST)
            self.assertEqual(client.tools(), ("messages.send",))
        self.assertEqual(proxy.connections, 0)
        self.assertEqual(len(service.requests), 1)
        self.assertTrue(service.requests[0].startswith(b"GET /v1/tools HTTP/1.1\r\n"), service.requests[0][:40])


class ManyAttemptsTest(unittest.TestCase):
    """A policy of more than 1,025 attempts waits ``max_delay_s`` between the late ones, as the
    TS client (which takes up to 2**31 - 1 attempts) does. Before, the wait before the 1,026th
    attempt computed ``float(2**1024)`` and raised ``OverflowError`` out of the call."""

    def test_the_wait_is_capped_however_late_the_retry(self) -> None:
        policy = RetryPolicy(attempts=10**6, base_delay_s=0.1, max_delay_s=2.0)
        for retry in (1023, 1024, 1025, 5000, 10**6):
            with self.subTest(retry=retry):
                self.assertEqual(policy.backoff_s(retry, None, lambda: 1.0), 2.0)
                self.assertEqual(policy.backoff_s(retry, None, lambda: 0.25), 0.5)
                self.assertEqual(policy.backoff_s(retry, 60.0, lambda: 0.0), 2.0)
        no_base = RetryPolicy(attempts=10**6, base_delay_s=0, max_delay_s=2.0)
        self.assertEqual(no_base.backoff_s(5000, None, lambda: 1.0), 0.0)
        self.assertEqual(no_base.backoff_s(5000, 0.5, lambda: 1.0), 0.5)  # Retry-After honoured

    def test_a_send_makes_every_attempt_of_a_long_policy(self) -> None:
        fake = server(503, {"error": {"code": "unavailable", "message": "down"}})
        self.addCleanup(fake.close)
        client = TesseraClient(fake.url, "t", retry=RetryPolicy(attempts=1030, base_delay_s=0.1, max_delay_s=2.0))
        waits: list[float] = []
        client._http.sleep = waits.append
        client._http.draw = lambda: 1.0
        with self.assertRaises(UnavailableError) as caught:
            client.send_message("bob", {}, call_id="long-1")
        self.assertEqual(caught.exception.attempts, 1030)
        self.assertEqual(len(waits), 1029)
        self.assertEqual(waits[:3], [0.1, 0.2, 0.4])
        self.assertEqual(set(waits[5:]), {2.0})


MIB = 1024 * 1024


def big_tools(size: int, declared: bool) -> Callable[[RawServer, socket.socket], None]:
    """A valid tools answer of about ``size`` bytes, chunked (no Content-Length) or declared."""

    def handle(server: RawServer, connection: socket.socket) -> None:
        server.read_request(connection)
        body = b'{"tools":["' + b"a" * size + b'"]}'
        if declared:
            connection.sendall(raw_answer(200, body))
            return
        connection.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        step = 64 * 1024
        for at in range(0, len(body), step):
            piece = body[at : at + step]
            connection.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
        connection.sendall(b"0\r\n\r\n")

    return handle


class ResponseSizeTest(unittest.TestCase):
    """An answer's body is read up to ``max_response_bytes`` (64 MiB by default), never further.
    Before, a body streamed without end filled the host's memory until the attempt's deadline:
    15 GB in 8 s on loopback."""

    def too_large(self, handler: Callable[[RawServer, socket.socket], None]) -> tuple[ServiceError, RawServer]:
        fake = RawServer(handler)
        self.addCleanup(fake.close)
        client = TesseraClient(fake.url, "t", retry=FAST, max_response_bytes=MIB)
        with self.assertRaises(ServiceError) as caught:
            client.tools()
        return caught.exception, fake

    def test_a_chunked_answer_over_the_limit_is_invalid_response_and_not_read_to_its_end(self) -> None:
        error, fake = self.too_large(big_tools(4 * MIB, declared=False))
        self.assertEqual((error.code, error.status, error.attempts), ("invalid_response", 200, 1))
        self.assertIn("max_response_bytes", error.message)
        self.assertEqual(fake.connections, 1)

    def test_a_content_length_over_the_limit_is_refused_before_reading(self) -> None:
        error, fake = self.too_large(big_tools(4 * MIB, declared=True))
        self.assertEqual((error.code, error.status, error.attempts), ("invalid_response", 200, 1))
        self.assertEqual(fake.connections, 1)

    def test_a_send_is_not_retried_on_an_answer_over_the_limit(self) -> None:
        fake = RawServer(big_tools(4 * MIB, declared=False))
        self.addCleanup(fake.close)
        client = TesseraClient(fake.url, "t", retry=FAST, max_response_bytes=MIB)
        with self.assertRaises(ServiceError) as caught:
            client.send_message("bob", {}, call_id="big-1")
        self.assertEqual((caught.exception.code, caught.exception.attempts), ("invalid_response", 1))
        self.assertEqual(fake.connections, 1)

    def test_an_answer_within_the_limit_is_read_as_before(self) -> None:
        fake = RawServer(big_tools(MIB // 2, declared=False))
        self.addCleanup(fake.close)
        tools = TesseraClient(fake.url, "t", max_response_bytes=MIB).tools()
        self.assertEqual(len(tools[0]), MIB // 2)


if __name__ == "__main__":
    unittest.main()
