"""A token, URL or timeout no call could use is refused when the client is made (no service needed).

Before, a token pasted with its newline (or holding a character above U+00FF) went as far as the
first call, which raised a raw ``ValueError`` / ``UnicodeEncodeError`` whose text or ``object``
held the whole token; a URL with a newline or ``user:pass@`` went out as it was; ``timeout_s``
of -1, NaN or infinity raised a raw ``ValueError`` / ``OverflowError`` on the first call.
"""

from __future__ import annotations

import math
import traceback
import unittest

from tessera_client import ConfigError, RetryPolicy, TesseraClient, TesseraError

SECRET = "tsk_s3cr3t-Token-value-0123456789"


def everything_shown(error: BaseException) -> str:
    """All an exception can show: its text, repr, args and whole chain, as a log would."""
    parts = ["".join(traceback.format_exception(error)), repr(error), repr(error.args)]
    for name in ("object", "message", "field"):
        parts.append(repr(getattr(error, name, None)))
    return "\n".join(parts)


class TokenTest(unittest.TestCase):
    def refused(self, token: str) -> ConfigError:
        with self.assertRaises(ConfigError) as caught:
            TesseraClient("http://127.0.0.1:8787", token)
        error = caught.exception
        self.assertIsInstance(error, TesseraError)
        self.assertIsInstance(error, ValueError)
        self.assertEqual((error.code, error.field, error.status), ("invalid_config", "token", None))
        self.assertIsNone(error.__cause__)
        return error

    def test_a_token_with_a_pasted_newline_is_refused_without_showing_it(self) -> None:
        for token in (SECRET + "\n", SECRET + "\r\n", SECRET + " ", " " + SECRET, SECRET[:8] + "\t" + SECRET[8:]):
            with self.subTest(token=repr(token[-3:])):
                error = self.refused(token)
                self.assertIn("newline", error.message)
                self.assertNotIn(SECRET.strip(), everything_shown(error))
                self.assertNotIn(SECRET[4:20], everything_shown(error))

    def test_a_token_a_header_cannot_carry_is_refused_without_showing_it(self) -> None:
        for token in (SECRET[:10] + "\u0100" + SECRET[10:], SECRET + "\u20ac", SECRET + "\x00", SECRET + "\x7f"):
            with self.subTest(token=ascii(token[-3:])):
                error = self.refused(token)
                self.assertNotIn(SECRET[4:20], everything_shown(error))

    def test_an_empty_or_overlong_token_is_refused(self) -> None:
        self.assertIn("empty", self.refused("").message)
        self.assertIn("longer than 16384", self.refused("x" * 16_385).message)

    def test_tokens_the_service_reads_are_kept(self) -> None:
        # Printable ASCII and Latin-1 above U+00A0, up to the service's 16384 characters.
        for token in (SECRET, "tsk_\u00e4\u00ff", "x" * 16_384, "!~"):
            with self.subTest(token=token[:8]):
                self.assertEqual(TesseraClient("http://127.0.0.1:8787", token)._http.token, token)
        self.assertIsNone(TesseraClient("http://127.0.0.1:8787")._http.token)

    def test_a_token_that_is_not_a_string_is_refused(self) -> None:
        with self.assertRaises(ConfigError):
            TesseraClient("http://127.0.0.1:8787", SECRET.encode())  # type: ignore[arg-type]


class UrlTest(unittest.TestCase):
    def refused(self, url: object) -> ConfigError:
        with self.assertRaises(ConfigError) as caught:
            TesseraClient(url, SECRET)  # type: ignore[arg-type]
        error = caught.exception
        self.assertEqual((error.code, error.field), ("invalid_config", "url"))
        self.assertNotIn(SECRET, everything_shown(error))
        return error

    def test_a_url_with_a_newline_or_a_control_character_is_refused(self) -> None:
        for url in (
            "http://127.0.0.1:8787\n",
            "http://127.0.0.1:8787\r\n",
            " http://127.0.0.1:8787",
            "http://127.0.0.1:8787/a b",
            "http://127.0.0.1\t:8787",
            "http://127.0.0.1:8787/\x00",
            "http://127.0.0.1:8787/\x85",
        ):
            with self.subTest(url=url):
                self.assertIn("control character", self.refused(url).message)

    def test_a_url_with_credentials_is_refused_without_showing_them(self) -> None:
        for url in ("http://user:hunter2@127.0.0.1:8787", "https://hunter2@example.com", "http://:hunter2@h:1"):
            with self.subTest(url=url.split("@")[1]):
                error = self.refused(url)
                self.assertIn("credentials", error.message)
                self.assertNotIn("hunter2", everything_shown(error))

    def test_a_url_no_route_can_be_appended_to_is_refused(self) -> None:
        for url in (
            "http://127.0.0.1:8787/?x=1",
            "http://127.0.0.1:8787/#frag",
            "http://127.0.0.1:99999",
            "http://127.0.0.1:port",
            "http://[::1:8787",
            "ftp://127.0.0.1",
            "127.0.0.1:8787",
            "http:///v1",
            "",
            "http://127.0.0.1:8787/caf\u00e9",
            None,
        ):
            with self.subTest(url=url):
                self.refused(url)

    def test_usable_urls_are_kept(self) -> None:
        cases = {
            "http://127.0.0.1:8787": "http://127.0.0.1:8787",
            "http://127.0.0.1:8787/": "http://127.0.0.1:8787",
            "https://tessera.example.com/base//": "https://tessera.example.com/base",
            "http://[::1]:8787": "http://[::1]:8787",
            "HTTP://127.0.0.1:8787": "HTTP://127.0.0.1:8787",
        }
        for url, base in cases.items():
            with self.subTest(url=url):
                self.assertEqual(TesseraClient(url)._http.base, base)


class TimeoutTest(unittest.TestCase):
    def test_a_timeout_that_is_not_a_finite_positive_number_is_refused(self) -> None:
        for timeout in (-1, -0.5, 0, math.nan, math.inf, -math.inf, 1e12, True, "3", None):
            with self.subTest(timeout=timeout):
                with self.assertRaises(ConfigError) as caught:
                    TesseraClient("http://127.0.0.1:8787", timeout_s=timeout)  # type: ignore[arg-type]
                self.assertEqual((caught.exception.code, caught.exception.field), ("invalid_config", "timeout_s"))

    def test_usable_timeouts_are_kept(self) -> None:
        for timeout in (0.001, 1, 10.0, 86_400 * 365):
            with self.subTest(timeout=timeout):
                self.assertEqual(TesseraClient("http://127.0.0.1:8787", timeout_s=timeout)._http.timeout_s, timeout)


class MaxResponseBytesTest(unittest.TestCase):
    def test_a_limit_that_is_not_a_whole_number_above_0_is_refused(self) -> None:
        for limit in (0, -1, 1.5, True, "64", None):
            with self.subTest(limit=limit):
                with self.assertRaises(ConfigError) as caught:
                    TesseraClient("http://127.0.0.1:8787", max_response_bytes=limit)  # type: ignore[arg-type]
                self.assertEqual(
                    (caught.exception.code, caught.exception.field), ("invalid_config", "max_response_bytes")
                )

    def test_the_default_is_64_mib(self) -> None:
        self.assertEqual(TesseraClient("http://127.0.0.1:8787")._http.max_response_bytes, 64 * 1024 * 1024)


if __name__ == "__main__":
    unittest.main()


class RetryPolicyTest(unittest.TestCase):
    """A policy no call could follow is ``invalid_config`` (a ``ValueError`` too) when it is made,
    within the TS client's bounds. Before, it was a bare ``ValueError``, and a delay past what a
    sleep takes (``max_delay_s=1e300``) was accepted, then raised ``OverflowError`` on a retry."""

    def test_a_policy_out_of_bounds_is_refused_naming_its_field(self) -> None:
        cases: list[tuple[dict[str, object], str]] = [
            ({"attempts": 0}, "retry.attempts"),
            ({"attempts": 2**31}, "retry.attempts"),
            ({"attempts": True}, "retry.attempts"),
            ({"attempts": 2.5}, "retry.attempts"),
            ({"base_delay_s": -1}, "retry.base_delay_s"),
            ({"base_delay_s": math.nan}, "retry.base_delay_s"),
            ({"max_delay_s": math.inf}, "retry.max_delay_s"),
            ({"max_delay_s": 1e300}, "retry.max_delay_s"),
            ({"max_delay_s": 2_147_484.0}, "retry.max_delay_s"),
        ]
        for arguments, field in cases:
            with self.subTest(arguments=arguments):
                with self.assertRaises(ConfigError) as caught:
                    RetryPolicy(**arguments)  # type: ignore[arg-type]
                self.assertIsInstance(caught.exception, ValueError)
                self.assertEqual((caught.exception.code, caught.exception.field), ("invalid_config", field))

    def test_the_bounds_themselves_are_kept(self) -> None:
        policy = RetryPolicy(attempts=2**31 - 1, base_delay_s=0, max_delay_s=2_147_483.647)
        self.assertEqual(policy.backoff_s(5_000, None, lambda: 1.0), 0.0)
        late = RetryPolicy(attempts=2**31 - 1, base_delay_s=0.1, max_delay_s=2_147_483.647)
        self.assertEqual(late.backoff_s(5_000, None, lambda: 1.0), 2_147_483.647)
