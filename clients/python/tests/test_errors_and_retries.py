"""Each error family from a real service (or, where a real one cannot be provoked on cue, from a
proxy in front of it), and the retries a call ID makes safe."""

from __future__ import annotations

import socket
import unittest
import uuid

from tessera_client import (
    AuthenticationError,
    Capability,
    ConflictError,
    Constraints,
    DelegationError,
    Delivered,
    ForbiddenError,
    NotFoundError,
    RequestError,
    Resource,
    RetryPolicy,
    ServiceError,
    TesseraClient,
    TesseraError,
    UnavailableError,
    message_send_capability,
)

from . import require_service
from .support import Proxy, Service

service: Service
FAST = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05)


def setUpModule() -> None:
    global service
    require_service()
    service = Service().start()


def tearDownModule() -> None:
    if "service" in globals():
        service.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def ticket(uses: int = 1) -> str:
    """A recipient of the test's own, with one ticket of ``uses`` uses for the asker."""
    recipient = service.fresh_recipient()
    TesseraClient(service.url, service.issuer_token).issue_grant(
        "asker", [message_send_capability(recipient, "alice")], constraints=Constraints(max_uses=uses)
    )
    return recipient


def deliveries(call_id: str) -> int:
    return sum(1 for p in service.webhook.received if p["callId"] == call_id)


class ErrorFamiliesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.issuer = TesseraClient(service.url, service.issuer_token)
        self.asker = TesseraClient(service.url, service.agents["asker"].token)

    def test_unauthenticated(self) -> None:
        for client in (TesseraClient(service.url, "tsk_nobody"), TesseraClient(service.url)):
            with self.assertRaises(AuthenticationError) as caught:
                client.tools()
            self.assertEqual((caught.exception.code, caught.exception.status), ("unauthenticated", 401))

    def test_forbidden(self) -> None:
        with self.assertRaises(ForbiddenError) as caught:
            self.asker.list_grants()
        self.assertEqual(caught.exception.code, "forbidden")

    def test_request_error_names_the_field(self) -> None:
        with self.assertRaises(RequestError) as caught:
            self.issuer.issue_grant("asker", [])
        error = caught.exception
        self.assertEqual((error.code, error.status, error.field), ("invalid_request", 400, "capabilities"))
        self.assertIsInstance(error, TesseraError)
        self.assertIsNotNone(error.request_id)

    def test_request_error_for_a_payload_too_large(self) -> None:
        with self.assertRaises(RequestError) as caught:
            self.asker.send_message("bob", {"blob": "x" * 70_000})
        self.assertEqual((caught.exception.code, caught.exception.status), ("body_too_large", 413))

    def test_a_body_the_service_cuts_off_is_its_413_and_is_not_retried(self) -> None:
        # Over ~4 MB the service answers 413 and closes while the client is still writing. Before,
        # the client saw only the broken pipe: service_unreachable, after sending it three times.
        client = TesseraClient(service.url, service.agents["asker"].token, retry=FAST)
        with self.assertRaises(RequestError) as caught:
            client.send_message("bob", {"blob": "x" * 10_000_000}, call_id=unique("huge"))
        error = caught.exception
        self.assertEqual((error.code, error.status, error.attempts), ("body_too_large", 413, 1))

    def test_delegation_error_for_a_wider_child(self) -> None:
        parent = self.issuer.issue_grant(
            "asker", [Capability(Resource("files", ("reports",), "alice"), ("files.read",))]
        )
        with self.assertRaises(DelegationError) as caught:
            self.issuer.derive_grant(
                parent.id, "helper", [Capability(Resource("files", ("secrets",), "alice"), ("files.read",))]
            )
        self.assertEqual(caught.exception.code, "delegation_wider_path")
        self.assertIsInstance(caught.exception, RequestError)
        with self.assertRaises(RequestError) as missing:
            self.issuer.derive_grant(unique("none"), "helper", [message_send_capability("b", "a")])
        self.assertEqual((missing.exception.code, missing.exception.field), ("invalid_input", "parentId"))

    def test_not_found(self) -> None:
        with self.assertRaises(NotFoundError) as caught:
            self.asker.a2ui_settle(str(uuid.uuid4()), None)
        self.assertEqual((caught.exception.code, caught.exception.status), ("not_found", 404))

    def test_conflict_on_a_changed_body(self) -> None:
        to = ticket(uses=2)
        call_id = unique("conflict")
        first = self.asker.send_message(to, {"n": 1}, call_id=call_id)
        self.assertIsInstance(first, Delivered)
        with self.assertRaises(ConflictError) as caught:
            self.asker.send_message(to, {"n": 2}, call_id=call_id)
        self.assertEqual((caught.exception.code, caught.exception.status), ("call_id_conflict", 409))
        self.assertEqual(caught.exception.attempts, 1)  # a conflict is an answer: never retried
        self.assertEqual(deliveries(call_id), 1)
        # The same body again is the original answer, not a second delivery.
        self.assertEqual(self.asker.send_message(to, {"n": 1}, call_id=call_id), first)
        self.assertEqual(deliveries(call_id), 1)

    def test_unavailable_when_nothing_listens(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        client = TesseraClient(f"http://127.0.0.1:{port}", "t", retry=FAST)
        with self.assertRaises(UnavailableError) as caught:
            client.send_message("bob", {}, call_id="c-1")
        self.assertEqual(caught.exception.code, "service_unreachable")
        self.assertEqual(caught.exception.attempts, 3)
        with self.assertRaises(UnavailableError) as read:
            client.tools()
        self.assertEqual(read.exception.attempts, 1)

    def test_service_errors_from_the_service_and_from_a_drifted_one(self) -> None:
        internal = (500, {"error": {"code": "internal_error", "message": "the request failed"}})
        drifted = (200, {"tools": "not a list"})
        proxy = Proxy(service.url, [internal, drifted])
        try:
            client = TesseraClient(proxy.url, service.agents["asker"].token, retry=FAST)
            with self.assertRaises(ServiceError) as first:
                client.tools()
            self.assertEqual((first.exception.code, first.exception.status), ("internal_error", 500))
            with self.assertRaises(ServiceError) as second:
                client.tools()
            self.assertEqual(second.exception.code, "invalid_response")
        finally:
            proxy.close()

    def test_an_unknown_code_lands_in_its_status_family(self) -> None:
        proxy = Proxy(service.url, [(409, {"error": {"code": "brand_new_conflict", "message": "m"}})])
        try:
            with self.assertRaises(ConflictError) as caught:
                TesseraClient(proxy.url, "t").tools()
            self.assertEqual(caught.exception.code, "brand_new_conflict")
        finally:
            proxy.close()


class RetriesTest(unittest.TestCase):
    token: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.token = service.agents["asker"].token

    def test_a_dropped_answer_is_retried_and_gets_the_original(self) -> None:
        to = ticket()
        proxy = Proxy(service.url, ["drop"])
        try:
            client = TesseraClient(proxy.url, self.token, retry=FAST)
            call_id = unique("dropped")
            result = client.send_message(to, {"q": "once"}, call_id=call_id)
            assert isinstance(result, Delivered)
            self.assertEqual(proxy.connections, 2)
            self.assertEqual(proxy.forwarded, 2)  # the service saw both requests ...
            self.assertEqual(deliveries(call_id), 1)  # ... and delivered once
            # It is the original answer: the first request's message, read back from the claim.
            direct = TesseraClient(service.url, self.token).send_message(to, {"q": "once"}, call_id=call_id)
            self.assertEqual(direct, result)
            delivered = [p for p in service.webhook.received if p["callId"] == call_id]
            self.assertEqual(delivered[0]["messageId"], result.message_id)
        finally:
            proxy.close()

    def test_an_answer_cut_off_mid_body_is_retried_and_gets_the_original(self) -> None:
        # The service (or a proxy) closed the connection before the whole body arrived: no
        # answer, as a dropped one, so the send is retried under its call ID and the original
        # decision comes back; never an invalid_response that leaves the caller guessing.
        to = ticket()
        proxy = Proxy(service.url, ["cut"])
        try:
            call_id = unique("cut")
            result = TesseraClient(proxy.url, self.token, retry=FAST).send_message(to, {"q": "cut"}, call_id=call_id)
            assert isinstance(result, Delivered)
            self.assertEqual(proxy.connections, 2)
            self.assertEqual(deliveries(call_id), 1)
        finally:
            proxy.close()

    def test_an_answer_cut_off_mid_body_is_unreachable_when_not_retried(self) -> None:
        to = ticket()
        proxy = Proxy(service.url, ["cut"])
        try:
            with self.assertRaises(UnavailableError) as caught:
                TesseraClient(proxy.url, self.token, retry=None).send_message(to, {"q": "cut"})
            self.assertEqual((caught.exception.code, caught.exception.attempts), ("service_unreachable", 1))
            self.assertIn("before the whole answer arrived", caught.exception.message)
        finally:
            proxy.close()

    def test_a_generated_call_id_makes_the_retry_safe(self) -> None:
        to = ticket()
        proxy = Proxy(service.url, ["drop"])
        try:
            result = TesseraClient(proxy.url, self.token, retry=FAST).send_message(to, {"q": "gen"})
            assert isinstance(result, Delivered)
            self.assertEqual(proxy.connections, 2)
            self.assertEqual(deliveries(result.call_id), 1)
        finally:
            proxy.close()

    def test_503_and_call_in_progress_are_retried(self) -> None:
        to = ticket()
        unavailable = (503, {"error": {"code": "unavailable", "message": "a store did not answer"}})
        in_progress = (409, {"error": {"code": "call_in_progress", "message": "still running"}})
        proxy = Proxy(service.url, [unavailable, in_progress])
        try:
            result = TesseraClient(proxy.url, self.token, retry=FAST).send_message(
                to, {"q": 1}, call_id=unique("busy")
            )
            self.assertIsInstance(result, Delivered)
            self.assertEqual(proxy.connections, 3)
        finally:
            proxy.close()

    def test_the_last_error_is_raised_when_attempts_run_out(self) -> None:
        unavailable = (503, {"error": {"code": "unavailable", "message": "down"}})
        proxy = Proxy(service.url, [unavailable] * 3)
        try:
            with self.assertRaises(UnavailableError) as caught:
                TesseraClient(proxy.url, self.token, retry=FAST).authorize(
                    "x.read", Resource("x", ("y",)), call_id=unique("down")
                )
            self.assertEqual((caught.exception.code, caught.exception.attempts), ("unavailable", 3))
            self.assertEqual(proxy.forwarded, 0)
        finally:
            proxy.close()

    def test_never_retried_without_a_call_id(self) -> None:
        to = ticket()
        proxy = Proxy(service.url, ["drop"])
        try:
            client = TesseraClient(proxy.url, self.token, retry=None)
            before = len(service.webhook.received)
            with self.assertRaises(UnavailableError) as caught:
                client.send_message(to, {"q": "no id"})
            self.assertEqual(caught.exception.attempts, 1)
            self.assertEqual(proxy.connections, 1)
            # The service did deliver: a blind retry would have been a second decision.
            self.assertEqual(len(service.webhook.received), before + 1)
        finally:
            proxy.close()

    def test_the_gate_and_grant_changes_are_never_retried(self) -> None:
        unavailable = (503, {"error": {"code": "unavailable", "message": "down"}})
        proxy = Proxy(service.url, [unavailable] * 2)
        try:
            client = TesseraClient(proxy.url, self.token, retry=FAST)
            with self.assertRaises(UnavailableError):
                client.a2ui_claim({"version": "v1.0"})
            with self.assertRaises(UnavailableError):
                client.tools()
            self.assertEqual(proxy.connections, 2)
        finally:
            proxy.close()

    def test_backoff_is_capped_full_jitter(self) -> None:
        policy = RetryPolicy(attempts=5, base_delay_s=0.1, max_delay_s=0.3)
        self.assertEqual(policy.backoff_s(0, None, lambda: 1.0), 0.1)
        self.assertEqual(policy.backoff_s(1, None, lambda: 1.0), 0.2)
        self.assertEqual(policy.backoff_s(5, None, lambda: 1.0), 0.3)
        self.assertEqual(policy.backoff_s(5, None, lambda: 0.0), 0.0)
        self.assertEqual(policy.backoff_s(0, 0.25, lambda: 0.0), 0.25)  # Retry-After honoured
        self.assertEqual(policy.backoff_s(0, 60, lambda: 0.0), 0.3)  # ... up to the cap
        with self.assertRaises(ValueError):
            RetryPolicy(attempts=0)

    def test_waits_between_attempts_follow_the_policy(self) -> None:
        proxy = Proxy(service.url, [(503, {"error": {"code": "unavailable", "message": "m"}})] * 3)
        try:
            client = TesseraClient(proxy.url, self.token, retry=RetryPolicy(3, 1.0, 1.5))
            waits: list[float] = []
            client._http.sleep = waits.append
            client._http.draw = lambda: 1.0
            with self.assertRaises(UnavailableError):
                client.send_message("bob", {}, call_id=unique("waits"))
            self.assertEqual(waits, [1.0, 1.5])
        finally:
            proxy.close()


if __name__ == "__main__":
    unittest.main()
