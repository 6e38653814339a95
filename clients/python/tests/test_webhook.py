"""verify_webhook: the service's signing rule, checked in constant time.

The good case against the real service's own signatures is in test_service (the receiver there
verifies every delivery and one-step A2UI call with verify_webhook, and counts rejections).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import unittest
from unittest import mock

from tessera_client import signature_header, verify_webhook, webhook_signature

from .support import CLI, NODE, REPO, skip_reason

SECRET = "a-secret-of-at-least-16-chars"
BODY = json.dumps({"messageId": "m-1", "payload": {"q": "lunch?"}}).encode()
NOW = 1_800_000_000


class VerifyWebhookTest(unittest.TestCase):
    def headers(self, secret: str = SECRET, body: bytes = BODY, at: int = NOW) -> dict[str, str]:
        return {"tessera-signature": signature_header(secret, body, now=at)}

    def test_a_good_signature_verifies(self) -> None:
        self.assertTrue(verify_webhook(SECRET, self.headers(), BODY, now=NOW))
        self.assertTrue(verify_webhook(SECRET, self.headers(), BODY.decode(), now=NOW))

    def test_the_rule_is_hmac_sha256_of_timestamp_dot_body(self) -> None:
        expected = hmac.new(SECRET.encode(), f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
        self.assertEqual(webhook_signature(SECRET, NOW, BODY), expected)
        self.assertEqual(self.headers()["tessera-signature"], f"t={NOW},v1={expected}")

    def test_a_tampered_body_is_refused(self) -> None:
        tampered = BODY.replace(b"lunch", b"dinner")
        self.assertFalse(verify_webhook(SECRET, self.headers(), tampered, now=NOW))
        # Re-serialised JSON is a different body too: verify the bytes as received.
        reserialised = json.dumps(json.loads(BODY), indent=1).encode()
        self.assertFalse(verify_webhook(SECRET, self.headers(), reserialised, now=NOW))

    def test_a_wrong_secret_is_refused(self) -> None:
        forged = self.headers(secret="another-secret-of-16-chars")
        self.assertFalse(verify_webhook(SECRET, forged, BODY, now=NOW))

    def test_a_stale_or_future_timestamp_is_refused(self) -> None:
        self.assertFalse(verify_webhook(SECRET, self.headers(at=NOW - 301), BODY, now=NOW))
        self.assertFalse(verify_webhook(SECRET, self.headers(at=NOW + 301), BODY, now=NOW))
        self.assertTrue(verify_webhook(SECRET, self.headers(at=NOW - 300), BODY, now=NOW))
        self.assertTrue(verify_webhook(SECRET, self.headers(at=NOW - 3600), BODY, 3600, now=NOW))

    def test_now_defaults_to_the_clock(self) -> None:
        with mock.patch("time.time", return_value=NOW + 10):
            self.assertTrue(verify_webhook(SECRET, self.headers(), BODY))
        with mock.patch("time.time", return_value=NOW + 1000):
            self.assertFalse(verify_webhook(SECRET, self.headers(), BODY))

    def test_malformed_or_missing_headers_are_refused(self) -> None:
        good = self.headers()["tessera-signature"]
        for value in (
            "",
            good + "\n",
            good.upper(),
            good.replace("v1=", "v0="),
            good[:-1],
            f"t=١٢٣,v1={'0' * 64}",  # non-ASCII digits
            f"v1={good.split('v1=')[1]},t={NOW}",
        ):
            self.assertFalse(verify_webhook(SECRET, {"tessera-signature": value}, BODY, now=NOW), value)
        self.assertFalse(verify_webhook(SECRET, {}, BODY, now=NOW))

    def test_header_names_are_matched_without_case(self) -> None:
        value = self.headers()["tessera-signature"]
        self.assertTrue(verify_webhook(SECRET, {"Tessera-Signature": value}, BODY, now=NOW))

    def test_the_comparison_is_constant_time(self) -> None:
        with mock.patch("hmac.compare_digest", return_value=False) as compare:
            self.assertFalse(verify_webhook(SECRET, self.headers(), BODY, now=NOW))
        compare.assert_called_once()


@unittest.skipIf(skip_reason() is not None, "node and the built repository are needed")
class SameRuleAsTheServerTest(unittest.TestCase):
    def test_the_servers_own_sign_and_verify_agree_with_python(self) -> None:
        """The server's sign() signs, Python verifies; Python signs, verifyWebhookSignature agrees."""
        module = (REPO / "packages/server/dist/transport/signed-post.js").as_uri()
        index = (REPO / "packages/server/dist/index.js").as_uri()
        header = signature_header(SECRET, BODY, now=NOW)
        script = f"""
          const {{ sign }} = await import({json.dumps(module)});
          const {{ verifyWebhookSignature }} = await import({json.dumps(index)});
          const body = {json.dumps(BODY.decode())};
          console.log(sign({json.dumps(SECRET)}, "{NOW}", body));
          console.log(verifyWebhookSignature({{ secret: {json.dumps(SECRET)}, body,
            header: {json.dumps(header)}, now: {NOW} }}));
        """
        out = subprocess.run(
            [NODE, "--input-type=module", "-e", script], capture_output=True, text=True, check=True,
            cwd=str(CLI.parent), timeout=60,
        ).stdout.split()
        self.assertEqual(out, [webhook_signature(SECRET, NOW, BODY), "true"])


if __name__ == "__main__":
    unittest.main()
