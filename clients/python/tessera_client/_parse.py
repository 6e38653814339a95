"""Strict parsing of 200 bodies into the dataclasses of ``models``.

A body that does not have its route's documented shape raises ``ShapeError``, which the client
turns into a ``ServiceError`` with code ``invalid_response``: a drifted or impostor service is
never a silently wrong value.
"""

from __future__ import annotations

from typing import Any

from .models import (
    RECEIPT_STATUSES,
    A2uiClaimResult,
    A2uiDispatch,
    A2uiRefused,
    A2uiReply,
    Allowed,
    AuditEvent,
    AuthorizeResult,
    Capability,
    Constraints,
    Delivered,
    Denied,
    Explanation,
    FunctionCall,
    Grant,
    GrantUsage,
    InDoubtClaim,
    Resource,
    SendResult,
)


class ShapeError(ValueError):
    """A 200 body that is not its route's documented shape."""


# ---- from the wire ----------------------------------------------------------------------------


class _Reader:
    """Typed field access on one JSON object; every miss is a ShapeError naming the field."""

    def __init__(self, value: object, where: str) -> None:
        if not isinstance(value, dict):
            raise ShapeError(f"{where} is not an object")
        self._value: dict[str, Any] = value
        self._where = where

    def _get(self, key: str, kinds: type | tuple[type, ...], optional: bool) -> Any:
        if key not in self._value:
            if optional:
                return None
            raise ShapeError(f"{self._where}.{key} is missing")
        got = self._value[key]
        # bool is an int in Python: a JSON true where a number belongs is still wrong.
        if not isinstance(got, kinds) or (isinstance(got, bool) and bool not in _tuple(kinds)):
            if optional and got is None and type(None) in _tuple(kinds):
                return None
            raise ShapeError(f"{self._where}.{key} has the wrong type")
        return got

    def text(self, key: str) -> str:
        value: str = self._get(key, str, False)
        return value

    def opt_text(self, key: str) -> str | None:
        value: str | None = self._get(key, str, True)
        return value

    def nullable_text(self, key: str) -> str | None:
        value: str | None = self._get(key, (str, type(None)), False)
        return value

    def integer(self, key: str) -> int:
        value: int = self._get(key, int, False)
        return value

    def opt_integer(self, key: str) -> int | None:
        value: int | None = self._get(key, int, True)
        return value

    def boolean(self, key: str) -> bool:
        value: bool = self._get(key, bool, False)
        return value

    def obj(self, key: str) -> dict[str, Any]:
        value: dict[str, Any] = self._get(key, dict, False)
        return value

    def array(self, key: str) -> list[Any]:
        value: list[Any] = self._get(key, list, False)
        return value

    def texts(self, key: str, optional: bool = False) -> tuple[str, ...] | None:
        value: list[Any] | None = self._get(key, list, optional)
        if value is None:
            return None
        if not all(isinstance(item, str) for item in value):
            raise ShapeError(f"{self._where}.{key} holds a non-string")
        return tuple(value)

    def raw(self, key: str) -> Any:
        return self._value.get(key)

    def has(self, key: str) -> bool:
        return key in self._value


def _tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _receipt(value: str, where: str) -> str:
    if value not in RECEIPT_STATUSES:
        raise ShapeError(f"{where} is not a receipt status")
    return value


def parse_send(body: object) -> SendResult:
    r = _Reader(body, "body")
    status = r.text("status")
    if status == "denied":
        return Denied(code=r.text("code"))
    if status == "delivered":
        return Delivered(
            message_id=r.text("messageId"),
            grant_id=r.text("grantId"),
            call_id=r.text("callId"),
            reply=r.raw("reply"),
        )
    raise ShapeError("body.status is neither delivered nor denied")


def parse_authorize(body: object) -> AuthorizeResult:
    r = _Reader(body, "body")
    status = r.text("status")
    if status == "denied":
        return Denied(code=r.text("code"))
    if status == "allowed":
        return Allowed(grant_id=r.text("grantId"), call_id=r.text("callId"))
    raise ShapeError("body.status is neither allowed nor denied")


def parse_claim(body: object) -> A2uiClaimResult:
    r = _Reader(body, "body")
    status = r.text("status")
    if status == "refused":
        return A2uiRefused(reply=r.obj("reply"), receipt=_receipt(r.text("receipt"), "receipt"))
    if status == "dispatch":
        c = _Reader(r.obj("call"), "body.call")
        call = FunctionCall(
            function_call_id=c.text("functionCallId"),
            catalog_id=c.text("catalogId"),
            call=c.text("call"),
            args=c.obj("args"),
        )
        return A2uiDispatch(handle=r.text("handle"), call=call)
    raise ShapeError("body.status is neither dispatch nor refused")


def parse_reply(body: object) -> A2uiReply:
    r = _Reader(body, "body")
    return A2uiReply(reply=r.obj("reply"), receipt=_receipt(r.text("receipt"), "receipt"))


def parse_tools(body: object) -> tuple[str, ...]:
    tools = _Reader(body, "body").texts("tools")
    assert tools is not None  # not optional: a missing list raised already
    return tools


def parse_explain(body: object) -> Explanation:
    r = _Reader(body, "body")
    return Explanation(
        call_id=r.text("callId"),
        verdict=r.text("verdict"),
        code=r.nullable_text("code"),
        summary=r.text("summary"),
    )


def parse_audit(body: object) -> tuple[AuditEvent, ...]:
    events = _Reader(body, "body").array("events")
    return tuple(_event(item, f"body.events[{i}]") for i, item in enumerate(events))


def _event(value: object, where: str) -> AuditEvent:
    r = _Reader(value, where)
    return AuditEvent(
        at=r.text("at"),
        source=r.text("source"),
        outcome=r.text("outcome"),
        code=r.nullable_text("code"),
        reason=r.text("reason"),
        trace_id=r.text("traceId"),
        call_id=r.text("callId"),
        namespace_id=r.opt_text("namespaceId"),
        actor=r.opt_text("actor"),
        authority=r.opt_text("authority"),
        owner=r.opt_text("owner"),
        purpose=r.opt_text("purpose"),
        grant_id=r.opt_text("grantId"),
        chain=r.texts("chain", optional=True),
        action=r.opt_text("action"),
        resource=r.opt_text("resource"),
        session=r.opt_text("session"),
        receipt=r.opt_text("receipt"),
        detail=r.opt_text("detail"),
        seq=r.opt_integer("seq"),
        prev=r.opt_text("prev"),
        hash=r.opt_text("hash"),
    )


def parse_in_doubt(body: object) -> tuple[InDoubtClaim, ...]:
    claims = _Reader(body, "body").array("claims")
    out: list[InDoubtClaim] = []
    for i, item in enumerate(claims):
        r = _Reader(item, f"body.claims[{i}]")
        out.append(
            InDoubtClaim(
                function_call_id=r.text("functionCallId"),
                claimed_at=r.integer("claimedAt"),
                worker=r.opt_text("worker"),
            )
        )
    return tuple(out)


def parse_grant_body(body: object) -> Grant:
    return _grant(_Reader(body, "body").obj("grant"), "body.grant")


def parse_grant_list(body: object) -> tuple[GrantUsage, ...]:
    rows = _Reader(body, "body").array("grants")
    out: list[GrantUsage] = []
    for i, item in enumerate(rows):
        r = _Reader(item, f"body.grants[{i}]")
        out.append(GrantUsage(grant=_grant(r.obj("grant"), f"body.grants[{i}].grant"), uses=r.integer("uses")))
    return tuple(out)


def parse_revoked(body: object) -> bool:
    return _Reader(body, "body").boolean("revoked")


def _grant(value: object, where: str) -> Grant:
    r = _Reader(value, where)
    capabilities: list[Capability] = []
    for i, item in enumerate(r.array("capabilities")):
        c = _Reader(item, f"{where}.capabilities[{i}]")
        res = _Reader(c.obj("resource"), f"{where}.capabilities[{i}].resource")
        path = res.texts("path")
        actions = c.texts("actions")
        scope = c.text("scope")
        if scope not in ("exact", "descendants"):
            raise ShapeError(f"{where}.capabilities[{i}].scope is not exact or descendants")
        assert path is not None and actions is not None
        capabilities.append(
            Capability(
                resource=Resource(res.text("namespace"), path, res.opt_text("owner")),
                actions=actions,
                scope="exact" if scope == "exact" else "descendants",
            )
        )
    k = _Reader(r.raw("constraints") if r.has("constraints") else {}, f"{where}.constraints")
    constraints = Constraints(
        max_uses=k.opt_integer("maxUses"),
        not_before=k.opt_text("notBefore"),
        expires_at=k.opt_text("expiresAt"),
        purposes=k.texts("purposes", optional=True),
        max_depth=k.opt_integer("maxDepth"),
    )
    return Grant(
        id=r.text("id"),
        namespace_id=r.text("namespaceId"),
        issuer=r.text("issuer"),
        subject=r.text("subject"),
        capabilities=tuple(capabilities),
        issued_at=r.text("issuedAt"),
        constraints=constraints,
        revoked_at=r.opt_text("revokedAt"),
        parent_id=r.opt_text("parentId"),
        depth=r.opt_integer("depth"),
    )
