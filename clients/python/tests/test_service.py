"""Every method against a real ``tessera serve``, allowed and denied."""

from __future__ import annotations

import time
import unittest
import uuid
from collections.abc import Callable

from tessera_client import (
    A2uiDispatch,
    A2uiRefused,
    Allowed,
    Capability,
    Constraints,
    Delivered,
    Denied,
    ForbiddenError,
    NotFoundError,
    RequestError,
    Resource,
    SettleError,
    TesseraClient,
    message_send_capability,
)

from . import require_service
from .support import Service, quote_call

service: Service


def setUpModule() -> None:
    global service
    require_service()
    service = Service().start()


def tearDownModule() -> None:
    if "service" in globals():
        service.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class ServiceTest(unittest.TestCase):
    issuer: TesseraClient
    asker: TesseraClient
    other: TesseraClient

    @classmethod
    def setUpClass(cls) -> None:
        cls.issuer = TesseraClient(service.url, service.issuer_token)
        cls.asker = TesseraClient(service.url, service.agents["asker"].token)
        cls.other = TesseraClient(service.url, service.agents["other"].token)


class ProbesTest(ServiceTest):
    def test_health_and_ready_need_no_token(self) -> None:
        anonymous = TesseraClient(service.url)
        self.assertTrue(anonymous.health())
        self.assertTrue(anonymous.ready())


class GrantsTest(ServiceTest):
    def test_issue_list_revoke_as_issuer(self) -> None:
        recipient = unique("rcpt")
        grant = self.issuer.issue_grant(
            "asker",
            [message_send_capability(recipient, "alice")],
            constraints=Constraints(max_uses=1),
        )
        self.assertEqual(grant.namespace_id, "default")
        self.assertEqual(grant.issuer, "host")
        self.assertEqual(grant.subject, "asker")
        self.assertEqual(grant.constraints.max_uses, 1)
        self.assertEqual(grant.capabilities[0].resource.path, (recipient,))
        listed = {row.grant.id: row.uses for row in self.issuer.list_grants()}
        self.assertEqual(listed[grant.id], 0)
        self.assertTrue(self.issuer.revoke_grant(grant.id))
        revoked = [r.grant for r in self.issuer.list_grants() if r.grant.id == grant.id]
        self.assertIsNotNone(revoked[0].revoked_at)

    def test_grant_ids_dot_and_dot_dot_are_revoked(self) -> None:
        # Intended: sent as %2E and %2E%2E (tests/test_wire.py), which the service reads back as
        # the IDs themselves; the TS client refuses them, its fetch resolving even %2E.
        for grant_id in (".", ".."):
            with self.subTest(grant_id=grant_id):
                self.issuer.issue_grant("asker", [message_send_capability(unique("r"), "alice")], id=grant_id)
                self.assertTrue(self.issuer.revoke_grant(grant_id))
                listed = {row.grant.id: row.grant for row in self.issuer.list_grants()}
                self.assertIsNotNone(listed[grant_id].revoked_at)
        self.assertIsNotNone(listed["."].revoked_at)

    def test_revoking_a_missing_grant_answers_false(self) -> None:
        self.assertFalse(self.issuer.revoke_grant(unique("no-such-grant")))

    def test_an_agent_token_may_not_manage_grants(self) -> None:
        cap = [message_send_capability("bob", "alice")]
        attempts: list[Callable[[], object]] = [
            lambda: self.asker.issue_grant("asker", cap),
            lambda: self.asker.derive_grant("x", "asker", cap),
            lambda: self.asker.list_grants(),
            lambda: self.asker.revoke_grant("x"),
        ]
        for attempt in attempts:
            with self.assertRaises(ForbiddenError) as caught:
                attempt()
            self.assertEqual(caught.exception.code, "forbidden")
            self.assertEqual(caught.exception.status, 403)

    def test_derive_a_narrower_child_and_carve_its_uses(self) -> None:
        parent = self.issuer.issue_grant(
            "asker",
            [Capability(Resource("files", ("reports",), "alice"), ("files.read",), "descendants")],
            constraints={"maxUses": 3},
        )
        child = self.issuer.derive_grant(
            parent.id,
            "helper",
            [Capability(Resource("files", ("reports", "q3"), "alice"), ("files.read",))],
            constraints=Constraints(max_uses=1),
        )
        self.assertEqual(child.parent_id, parent.id)
        self.assertEqual(child.depth, 1)
        self.assertEqual(child.issuer, "asker")
        uses = {row.grant.id: row.uses for row in self.issuer.list_grants()}
        self.assertEqual(uses[parent.id], 1)  # carved for the child


class DecisionsTest(ServiceTest):
    def test_send_delivered_once_then_denied_and_explained(self) -> None:
        self.issuer.issue_grant(
            "asker", [message_send_capability("bob", "alice")], constraints=Constraints(max_uses=1)
        )
        self.assertIn("messages.send", self.asker.tools())
        call_id = unique("send")
        sent = self.asker.send_message("bob", {"question": "lunch?"}, call_id=call_id)
        assert isinstance(sent, Delivered)
        self.assertEqual(sent.status, "delivered")
        self.assertEqual(sent.call_id, call_id)
        self.assertEqual(sent.reply, {"ok": True, "echo": {"question": "lunch?"}})
        # The receiver got it signed, and verified it with verify_webhook.
        delivered = [p for p in service.webhook.received if p["callId"] == call_id]
        self.assertEqual(len(delivered), 1)
        self.assertEqual(delivered[0]["messageId"], sent.message_id)
        self.assertEqual(service.webhook.rejected, 0)

        refused_id = unique("send")
        again = self.asker.send_message("bob", {"question": "dinner?"}, call_id=refused_id)
        self.assertEqual(again, Denied(code="tool_unavailable", call_id=refused_id))
        self.assertEqual(self.asker.explain(call_id).verdict, "allowed")
        # A refusal of a call whose ID the client made up carries it: explain finds it.
        made_up = self.asker.send_message("bob", {"question": "tea?"})
        assert isinstance(made_up, Denied) and made_up.call_id is not None
        self.assertEqual(self.asker.explain(made_up.call_id).verdict, "spent")

    def test_send_to_a_recipient_without_a_ticket_is_denied(self) -> None:
        call_id = unique("stranger")
        result = self.other.send_message("carol", {"hi": 1}, call_id=call_id)
        assert isinstance(result, Denied)
        self.assertEqual(result.status, "denied")
        self.assertIn(result.code, ("tool_unavailable", "no_matching_grant"))
        self.assertEqual(self.other.explain(call_id).verdict, "never_granted")

    def test_authorize_allowed_and_denied(self) -> None:
        resource = Resource("docs", ("cell-3",), "alice")
        grant = self.issuer.issue_grant(
            "asker", [Capability(resource, ("docs.edit",))], constraints=Constraints(max_uses=1)
        )
        allowed = self.asker.authorize("docs.edit", resource, call_id=unique("auth"))
        self.assertEqual(allowed, Allowed(grant_id=grant.id, call_id=allowed.call_id if isinstance(allowed, Allowed) else ""))
        spent_id = unique("auth")
        spent = self.asker.authorize("docs.edit", {"namespace": "docs", "path": ["cell-3"], "owner": "alice"}, call_id=spent_id)
        self.assertEqual(spent.status, "denied")
        self.assertEqual(self.asker.explain(spent_id).verdict, "spent")
        other = self.asker.authorize("docs.delete", resource)
        self.assertIsInstance(other, Denied)

    def test_a_generated_call_id_comes_back(self) -> None:
        resource = Resource("boards", ("b1",), "alice")
        self.issuer.issue_grant("asker", [Capability(resource, ("boards.read",))])
        allowed = self.asker.authorize("boards.read", resource)
        assert isinstance(allowed, Allowed)
        uuid.UUID(allowed.call_id)  # made up by the client, since retries are on

    def test_an_issuer_token_may_not_decide(self) -> None:
        with self.assertRaises(ForbiddenError):
            self.issuer.tools()
        with self.assertRaises(ForbiddenError):
            self.issuer.send_message("bob", {})

    def test_audit_and_explain_read_only_the_callers_own_calls(self) -> None:
        call_id = unique("mine")
        self.asker.send_message("nobody", {"x": 1}, call_id=call_id)
        events = self.asker.audit(call_id=call_id)
        self.assertGreaterEqual(len(events), 1)
        self.assertEqual(events[0].call_id, call_id)
        self.assertEqual(events[0].outcome, "denied")
        self.assertEqual(events[0].actor, "asker")
        by_trace = self.asker.audit(trace_id=events[0].trace_id, limit=5)
        self.assertEqual([e.call_id for e in by_trace], [call_id])
        # Another principal's call ID reads like one nobody used.
        self.assertEqual(self.other.audit(call_id=call_id), ())
        self.assertEqual(self.other.explain(call_id).verdict, "unknown")

    def test_audit_needs_exactly_one_of_call_id_or_trace_id(self) -> None:
        with self.assertRaises(RequestError) as caught:
            self.asker.audit()
        self.assertEqual(caught.exception.code, "invalid_request")
        self.assertEqual(caught.exception.field, "callId")


class A2uiTest(ServiceTest):
    def test_claim_settle_and_a_replay_refused(self) -> None:
        fid = unique("fn")
        claim = self.asker.a2ui_claim(quote_call(fid, 2))
        assert isinstance(claim, A2uiDispatch)
        self.assertEqual(claim.call.function_call_id, fid)
        self.assertEqual(claim.call.args, {"sku": "tile-7", "quantity": 2})
        replay = self.asker.a2ui_claim(quote_call(fid, 2))
        assert isinstance(replay, A2uiRefused)
        self.assertEqual(replay.receipt, "none")
        self.assertEqual(replay.reply["error"]["code"], "INVALID_FUNCTION_CALL")
        self.assertEqual(replay.reply["error"]["functionCallId"], fid)
        # Another principal cannot settle this handle: it reads like one that never existed.
        with self.assertRaises(NotFoundError) as caught:
            self.other.a2ui_settle(claim.handle, {"total": 0})
        self.assertEqual(caught.exception.field, "handle")
        settled = self.asker.a2ui_settle(claim.handle, {"total": 6})
        self.assertEqual(settled.receipt, "dispatched")
        self.assertEqual(
            settled.reply["rendererFunctionResponse"], {"functionCallId": fid, "value": {"total": 6}}
        )

    def test_a_function_that_returned_nothing_settles_with_an_explicit_none(self) -> None:
        fid = unique("fn")
        claim = self.asker.a2ui_claim(quote_call(fid, 1))
        assert isinstance(claim, A2uiDispatch)
        # Neither a value nor an error is refused before sending, and the claim stays open ...
        with self.assertRaises(TypeError):
            self.asker.a2ui_settle(claim.handle)
        # ... for the explicit None the service takes as value null.
        settled = self.asker.a2ui_settle(claim.handle, None)
        self.assertEqual(settled.receipt, "dispatched")
        self.assertEqual(settled.reply["rendererFunctionResponse"], {"functionCallId": fid, "value": None})

    def test_settle_with_an_error_and_an_unknown_handle(self) -> None:
        claim = self.asker.a2ui_claim(quote_call(unique("fn"), 1))
        assert isinstance(claim, A2uiDispatch)
        failed = self.asker.a2ui_settle(claim.handle, error=SettleError("out of stock"))
        self.assertEqual(failed.receipt, "failed")
        self.assertEqual(
            failed.reply["rendererFunctionResponse"]["error"]["code"], "EXECUTION_FAILED"
        )
        with self.assertRaises(NotFoundError):
            self.asker.a2ui_settle(str(uuid.uuid4()), 1)
        with self.assertRaises(TypeError):
            self.asker.a2ui_settle(claim.handle, 1, error=SettleError("both"))

    def test_another_session_may_use_the_same_id(self) -> None:
        fid = unique("fn")
        mine = self.asker.a2ui_claim(quote_call(fid, 1))
        theirs = self.other.a2ui_claim(quote_call(fid, 1))
        assert isinstance(mine, A2uiDispatch) and isinstance(theirs, A2uiDispatch)
        self.asker.a2ui_settle(mine.handle, 1)
        self.other.a2ui_settle(theirs.handle, 1)

    def test_a_principal_without_an_a2ui_grant_is_refused_by_policy(self) -> None:
        stranger = TesseraClient(service.url, service.agents["stranger"].token)
        fid = unique("fn")
        refused = stranger.a2ui_claim(quote_call(fid, 1))
        assert isinstance(refused, A2uiRefused)
        self.assertEqual(refused.receipt, "denied")
        self.assertEqual(
            refused.reply["rendererFunctionResponse"]["error"]["code"], "EXECUTION_FAILED"
        )
        self.assertEqual(stranger.a2ui_call(quote_call(unique("fn"), 1)).receipt, "denied")
        self.assertEqual(stranger.explain(fid).verdict, "never_granted")

    def test_a_call_outside_the_catalog_is_refused(self) -> None:
        message = quote_call(unique("fn"), 1)
        message["callRendererFunction"]["callFunction"]["call"] = "launch"
        refused = self.asker.a2ui_claim(message)
        assert isinstance(refused, A2uiRefused)
        self.assertEqual(refused.receipt, "denied")

    def test_one_step_call_through_the_signed_function_endpoint(self) -> None:
        fid = unique("fn")
        answered = self.asker.a2ui_call(quote_call(fid, 4))
        self.assertEqual(answered.receipt, "dispatched")
        self.assertEqual(
            answered.reply["rendererFunctionResponse"]["value"], {"sku": "tile-7", "total": 12}
        )
        self.assertEqual(service.function.rejected, 0)
        again = self.asker.a2ui_call(quote_call(fid, 4))
        self.assertEqual(again.receipt, "none")
        self.assertEqual(again.reply["error"]["code"], "INVALID_FUNCTION_CALL")

    def test_an_unsettled_claim_is_in_doubt_for_its_principal_only(self) -> None:
        fid = unique("doubt")
        claim = self.asker.a2ui_claim(quote_call(fid, 1))
        assert isinstance(claim, A2uiDispatch)
        self.assertIn(fid, [c.function_call_id for c in self.asker.in_doubt_claims()])
        self.assertNotIn(fid, [c.function_call_id for c in self.other.in_doubt_claims()])
        self.asker.a2ui_settle(claim.handle, 1)
        # The gate writes the receipt just after the reply: allow it a moment to land.
        deadline = time.monotonic() + 5
        while fid in [c.function_call_id for c in self.asker.in_doubt_claims()]:
            self.assertLess(time.monotonic(), deadline, "the settled call stayed in doubt")
            time.sleep(0.02)


if __name__ == "__main__":
    unittest.main()
