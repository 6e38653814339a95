"""A body with no JSON form is refused before anything is sent (no service needed).

Before, ``json.dumps`` wrote ``math.nan`` as the bare word ``NaN``: the request went out, and the
service answered ``invalid_request`` "the body is not valid JSON" (retried too, for a send). An
integer beyond +/-(2**53 - 1) went out too, and the service (which reads numbers as doubles)
altered it silently: ``2**53 + 1`` arrived as ``2**53``, ``10**400`` as null, and a retry of the
call ID with another big integer got the first answer. A body nested too deep for ``json``
raised a raw ``RecursionError``. IDs holding a lone surrogate raised a raw
``UnicodeEncodeError`` from ``explain`` and ``revoke_grant``; ``a2ui_settle(handle)`` with
neither a value nor an error settled the call with ``value: null``.
"""

from __future__ import annotations

import math
import socket
import unittest
from collections.abc import Callable
from typing import Any

from tessera_client import (
    RequestError,
    RetryPolicy,
    TesseraClient,
    TesseraError,
    message_send_capability,
)


class LocalBodyTest(unittest.TestCase):
    def setUp(self) -> None:
        # A listener that never answers: an accepted connection means a request was sent.
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.settimeout(0.2)
        port = self.listener.getsockname()[1]
        self.client = TesseraClient(
            f"http://127.0.0.1:{port}",
            "t",
            timeout_s=0.5,
            retry=RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02),
        )

    def tearDown(self) -> None:
        self.listener.close()

    def assert_nothing_sent(self) -> None:
        with self.assertRaises(socket.timeout):
            connection, _ = self.listener.accept()
            connection.close()

    def test_nan_and_infinity_fail_locally_as_a_set_does(self) -> None:
        for value in (math.nan, math.inf, -math.inf):
            with self.subTest(value=value):
                with self.assertRaises(TypeError) as caught:
                    self.client.send_message("bob", {"x": value}, call_id="nan-1")
                self.assertIn("not JSON serializable", str(caught.exception))
        self.assert_nothing_sent()

    def test_a_set_and_bytes_are_type_errors_too(self) -> None:
        # The behaviour NaN now matches: json.dumps's own TypeError, raised before sending.
        for value in ({1, 2}, b"raw"):
            with self.subTest(value=value):
                with self.assertRaises(TypeError):
                    self.client.send_message("bob", {"x": value}, call_id="set-1")
        self.assert_nothing_sent()

    def test_an_integer_the_service_would_alter_fails_locally(self) -> None:
        bodies = [
            {"amount": 2**53 + 1},
            {"amount": 2**53},
            {"amount": -(2**53)},
            {"huge": 10**400},
            {"nested": [1, {"deeper": [2**64]}]},
        ]
        for payload in bodies:
            with self.subTest(payload=str(payload)[:40]):
                with self.assertRaises(TypeError) as caught:
                    self.client.send_message("bob", payload, call_id="big-1")
                self.assertIn("not JSON serializable", str(caught.exception))
                self.assertIn("2**53", str(caught.exception))
        with self.assertRaises(TypeError) as where:
            self.client.authorize("x.read", {"namespace": "x", "path": ["y"]}, call_id=2**60)  # type: ignore[arg-type]
        self.assertIn("body.callId", str(where.exception))
        with self.assertRaises(TypeError):
            TesseraClient(self.client._http.base, "t").issue_grant(
                "asker", [message_send_capability("bob", "alice")], constraints={"maxUses": 2**53}
            )
        self.assert_nothing_sent()

    def test_the_largest_exact_integers_and_bools_still_go_out(self) -> None:
        # Only beyond +/-(2**53 - 1): these are sent (the listener never answers: a timeout).
        client = TesseraClient(self.client._http.base, "t", timeout_s=0.3, retry=None)
        for payload in ({"n": 2**53 - 1, "m": -(2**53 - 1)}, {"flag": True, "x": 1e300}):
            with self.subTest(payload=payload):
                with self.assertRaises(TesseraError) as caught:
                    client.send_message("bob", payload, call_id="fits-1")
                self.assertEqual(caught.exception.code, "service_unreachable")
                connection, _ = self.listener.accept()
                connection.close()

    def test_a_body_too_deep_for_json_is_a_type_error(self) -> None:
        deep: dict[str, object] = {}
        for _ in range(100_000):
            deep = {"d": deep}
        with self.assertRaises(TypeError) as caught:
            self.client.send_message("bob", deep, call_id="deep-1")
        self.assertIn("nested deeper", str(caught.exception))
        self.assert_nothing_sent()

    def test_an_id_with_a_lone_surrogate_fails_locally_as_invalid_input(self) -> None:
        calls: dict[str, Callable[[], object]] = {
            "callId": lambda: self.client.explain("c-\ud800"),
            "grantId": lambda: self.client.revoke_grant("g-\udfff-x"),
            "traceId": lambda: self.client.audit(trace_id="t-\ud83d"),
        }
        for field, call in calls.items():
            with self.subTest(field=field):
                with self.assertRaises(RequestError) as caught:
                    call()
                error = caught.exception
                self.assertEqual((error.code, error.field, error.status), ("invalid_input", field, None))
        with self.assertRaises(RequestError):
            self.client.audit(call_id="\udc00")
        self.assert_nothing_sent()

    def test_an_id_that_is_not_a_string_fails_locally_as_invalid_input(self) -> None:
        # Before, revoke_grant(5) raised a bare TypeError from urllib's quote, and explain(5)
        # asked about the call "5". (The TS client coerces such a value with String().)
        client: Any = self.client  # what an untyped caller passes
        calls: list[tuple[str, Callable[[], object]]] = [
            ("grantId", lambda: client.revoke_grant(5)),
            ("grantId", lambda: client.revoke_grant(None)),
            ("grantId", lambda: client.revoke_grant(b"g-1")),
            ("callId", lambda: client.explain(5)),
            ("callId", lambda: client.explain(None)),
            ("callId", lambda: client.audit(call_id=5)),
            ("traceId", lambda: client.audit(trace_id=["t-1"])),
        ]
        for field, call in calls:
            with self.subTest(field=field):
                with self.assertRaises(RequestError) as caught:
                    call()
                error = caught.exception
                self.assertEqual((error.code, error.field, error.status), ("invalid_input", field, None))
                self.assertIn("must be a string", error.message)
        self.assert_nothing_sent()

    def test_settling_with_neither_a_value_nor_an_error_fails_locally(self) -> None:
        with self.assertRaises(TypeError) as caught:
            self.client.a2ui_settle("handle-1")
        self.assertIn("give the call's value or its error", str(caught.exception))
        with self.assertRaises(TypeError):
            self.client.a2ui_settle("handle-1", error=None)
        self.assert_nothing_sent()


if __name__ == "__main__":
    unittest.main()
