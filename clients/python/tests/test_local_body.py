"""A body with no JSON form is refused before anything is sent (no service needed).

Before, ``json.dumps`` wrote ``math.nan`` as the bare word ``NaN``: the request went out, and the
service answered ``invalid_request`` "the body is not valid JSON" (retried too, for a send).
"""

from __future__ import annotations

import math
import socket
import unittest

from tessera_client import RetryPolicy, TesseraClient


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


if __name__ == "__main__":
    unittest.main()
