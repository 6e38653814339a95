"""Strict parsing of 200 bodies into the dataclasses of ``models``.

A body that does not have its route's documented shape raises ``ShapeError``, which the client
turns into a ``ServiceError`` with code ``invalid_response``: a drifted or impostor service is
never a silently wrong value. The checks are the TS client's, which parses every answer with the
route's schema from ``@tessera/core/http``: every object is closed (a field the route does not
document is refused), a denial's code is one of docs/codes.md's caller codes, an audit event's
reason one of its audit reasons, IDs are 1 to 512 characters of well-formed text, instants are
ISO 8601 in UTC, and integers are whole numbers within a double's exact range.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from .models import (
    AUDIT_REASONS,
    CALLER_CODES,
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


#: ``Number.MAX_SAFE_INTEGER``: zod's ``int()`` takes no integer beyond it.
_MAX_SAFE = 2**53 - 1
#: The deepest a derived grant may sit (``MAX_DELEGATION_DEPTH``).
_MAX_DELEGATION_DEPTH = 16
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# zod's iso.datetime({ offset: false }): a real calendar date, seconds required, any fraction, Z.
_INSTANT = re.compile(
    r"(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29"
    r"|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)"
    r"|(?:02)-(?:0[1-9]|1\d|2[0-8])))"
    r"T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?Z",
    re.ASCII,
)
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}", re.ASCII)
# A path segment a host could resolve, split or misprint (path-segment.ts): controls, DEL, C1,
# line and paragraph separators, bidi marks, embeddings, overrides and isolates, "/" and "\".
_UNSAFE_SEGMENT_CHARACTER = re.compile(
    "[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069/\\\\]"
)


def _utf16_length(value: str) -> int:
    """The length JavaScript sees (``string.length``): a character beyond U+FFFF counts twice."""
    return len(value) + sum(1 for ch in value if ord(ch) > 0xFFFF)


def is_well_formed(value: str) -> bool:
    """No lone surrogate (``String.prototype.isWellFormed``): UTF-8 cannot carry one."""
    return _LONE_SURROGATE.search(value) is None


def _is_id(value: str) -> bool:
    return is_well_formed(value) and 1 <= _utf16_length(value) <= 512


def _is_segment(value: str) -> bool:
    return (
        value not in ("", ".", "..")
        and _utf16_length(value) <= 512
        and _UNSAFE_SEGMENT_CHARACTER.search(value) is None
        and is_well_formed(value)
    )


def _instant_key(value: str) -> tuple[str, str]:
    """An instant as a key that orders as ``Date.parse`` does (to the millisecond)."""
    seconds, _, fraction = value[:-1].partition(".")
    return seconds, (fraction + "000")[:3]


# ---- from the wire ----------------------------------------------------------------------------


class _Reader:
    """Typed field access on one closed JSON object; every miss is a ShapeError naming the field.

    ``fields`` are the keys the object may have: any other is refused (zod's ``strictObject``).
    The unknown key is not echoed: an answer's made-up names stay out of messages and logs.
    """

    def __init__(self, value: object, where: str, fields: Collection[str]) -> None:
        if not isinstance(value, dict):
            raise ShapeError(f"{where} is not an object")
        if any(key not in fields for key in value):
            raise ShapeError(f"{where} has a field its route does not document")
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
            if got is None and type(None) in _tuple(kinds):
                return None
            raise ShapeError(f"{self._where}.{key} has the wrong type")
        return got

    def _wrong(self, key: str, why: str) -> ShapeError:
        return ShapeError(f"{self._where}.{key} {why}")

    def text(self, key: str) -> str:
        value: str = self._get(key, str, False)
        return value

    def opt_text(self, key: str) -> str | None:
        value: str | None = self._get(key, str, True)
        return value

    def id(self, key: str) -> str:
        value = self.text(key)
        if not _is_id(value):
            raise self._wrong(key, "is not an ID (1 to 512 characters of well-formed text)")
        return value

    def opt_id(self, key: str) -> str | None:
        return self.id(key) if key in self._value else None

    def instant(self, key: str) -> str:
        value = self.text(key)
        if _INSTANT.fullmatch(value) is None:
            raise self._wrong(key, "is not an ISO 8601 instant in UTC")
        return value

    def opt_instant(self, key: str) -> str | None:
        return self.instant(key) if key in self._value else None

    def choice(self, key: str, choices: Collection[str]) -> str:
        value = self.text(key)
        if value not in choices:
            raise self._wrong(key, "is not one of the documented values")
        return value

    def nullable_choice(self, key: str, choices: Collection[str]) -> str | None:
        value: str | None = self._get(key, (str, type(None)), False)
        if value is not None and value not in choices:
            raise self._wrong(key, "is not one of the documented values")
        return value

    def integer(self, key: str, low: int = -_MAX_SAFE, high: int = _MAX_SAFE) -> int:
        value: int = self._get(key, int, False)
        if not low <= value <= high:
            raise self._wrong(key, f"is not an integer from {low} to {high}")
        return value

    def opt_integer(self, key: str, low: int = -_MAX_SAFE, high: int = _MAX_SAFE) -> int | None:
        return self.integer(key, low, high) if key in self._value else None

    def boolean(self, key: str) -> bool:
        value: bool = self._get(key, bool, False)
        return value

    def true(self, key: str) -> bool:
        if self.boolean(key) is not True:
            raise self._wrong(key, "is not true")
        return True

    def obj(self, key: str) -> dict[str, Any]:
        value: dict[str, Any] = self._get(key, dict, False)
        return value

    def array(self, key: str, low: int = 0, high: int | None = None) -> list[Any]:
        value: list[Any] = self._get(key, list, False)
        if len(value) < low or (high is not None and len(value) > high):
            raise self._wrong(key, "has too few or too many items")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.array(key)
        if not all(isinstance(item, str) for item in value):
            raise self._wrong(key, "holds a non-string")
        return tuple(value)

    def opt_texts(self, key: str, high: int | None = None) -> tuple[str, ...] | None:
        if key not in self._value:
            return None
        value = self.texts(key)
        if high is not None and len(value) > high:
            raise self._wrong(key, "has too many items")
        return value

    def ids(self, key: str, low: int, high: int) -> tuple[str, ...]:
        value = self.array(key, low, high)
        if not all(isinstance(item, str) and _is_id(item) for item in value):
            raise self._wrong(key, "holds an item that is not an ID")
        return tuple(value)

    def raw(self, key: str) -> Any:
        return self._value.get(key)

    def has(self, key: str) -> bool:
        return key in self._value


def _tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _status(body: object) -> str:
    """The ``status`` that says which of a route's shapes a body is."""
    if not isinstance(body, dict):
        raise ShapeError("body is not an object")
    status = body.get("status")
    if not isinstance(status, str):
        raise ShapeError("body.status is missing or not a string")
    return status


def _denied(body: object) -> Denied:
    r = _Reader(body, "body", ("status", "code"))
    return Denied(code=r.choice("code", CALLER_CODES))


def parse_health(body: object) -> bool:
    return _Reader(body, "body", ("ok",)).true("ok")


def parse_ready(body: object) -> bool:
    return _Reader(body, "body", ("ready",)).true("ready")


def parse_send(body: object) -> SendResult:
    status = _status(body)
    if status == "denied":
        return _denied(body)
    if status == "delivered":
        r = _Reader(body, "body", ("status", "messageId", "grantId", "callId", "reply"))
        return Delivered(
            message_id=r.text("messageId"),
            grant_id=r.text("grantId"),
            call_id=r.text("callId"),
            reply=r.raw("reply"),
        )
    raise ShapeError("body.status is neither delivered nor denied")


def parse_authorize(body: object) -> AuthorizeResult:
    status = _status(body)
    if status == "denied":
        return _denied(body)
    if status == "allowed":
        r = _Reader(body, "body", ("status", "grantId", "callId"))
        return Allowed(grant_id=r.text("grantId"), call_id=r.text("callId"))
    raise ShapeError("body.status is neither allowed nor denied")


def parse_claim(body: object) -> A2uiClaimResult:
    status = _status(body)
    if status == "refused":
        r = _Reader(body, "body", ("status", "reply", "receipt"))
        return A2uiRefused(reply=r.obj("reply"), receipt=r.choice("receipt", RECEIPT_STATUSES))
    if status == "dispatch":
        r = _Reader(body, "body", ("status", "handle", "call"))
        c = _Reader(r.obj("call"), "body.call", ("functionCallId", "catalogId", "call", "args"))
        call = FunctionCall(
            function_call_id=c.text("functionCallId"),
            catalog_id=c.text("catalogId"),
            call=c.text("call"),
            args=c.obj("args"),
        )
        return A2uiDispatch(handle=r.text("handle"), call=call)
    raise ShapeError("body.status is neither dispatch nor refused")


def parse_reply(body: object) -> A2uiReply:
    r = _Reader(body, "body", ("reply", "receipt"))
    return A2uiReply(reply=r.obj("reply"), receipt=r.choice("receipt", RECEIPT_STATUSES))


def parse_tools(body: object) -> tuple[str, ...]:
    return _Reader(body, "body", ("tools",)).texts("tools")


def parse_explain(body: object) -> Explanation:
    r = _Reader(body, "body", ("callId", "verdict", "code", "summary"))
    return Explanation(
        call_id=r.text("callId"),
        verdict=r.text("verdict"),
        code=r.nullable_choice("code", CALLER_CODES),
        summary=r.text("summary"),
    )


def parse_audit(body: object) -> tuple[AuditEvent, ...]:
    events = _Reader(body, "body", ("events",)).array("events")
    return tuple(_event(item, f"body.events[{i}]") for i, item in enumerate(events))


_EVENT_FIELDS = (
    "at", "source", "outcome", "code", "reason", "traceId", "callId", "namespaceId", "actor",
    "authority", "owner", "purpose", "grantId", "chain", "action", "resource", "session",
    "receipt", "detail", "seq", "prev", "hash",
)  # fmt: skip


def _event(value: object, where: str) -> AuditEvent:
    r = _Reader(value, where, _EVENT_FIELDS)
    digests = {key: r.opt_text(key) for key in ("prev", "hash")}
    for key, digest in digests.items():
        if digest is not None and _HEX_DIGEST.fullmatch(digest) is None:
            raise ShapeError(f"{where}.{key} is not a SHA-256 hex digest")
    return AuditEvent(
        at=r.instant("at"),
        source=r.choice("source", ("kernel", "gate")),
        outcome=r.choice("outcome", ("allowed", "denied")),
        code=r.nullable_choice("code", CALLER_CODES),
        reason=r.choice("reason", AUDIT_REASONS),
        trace_id=r.text("traceId"),
        call_id=r.text("callId"),
        namespace_id=r.opt_text("namespaceId"),
        actor=r.opt_text("actor"),
        authority=r.opt_text("authority"),
        owner=r.opt_text("owner"),
        purpose=r.opt_text("purpose"),
        grant_id=r.opt_text("grantId"),
        chain=r.opt_texts("chain", high=_MAX_DELEGATION_DEPTH + 1),
        action=r.opt_text("action"),
        resource=r.opt_text("resource"),
        session=r.opt_text("session"),
        receipt=r.opt_text("receipt"),
        detail=r.opt_text("detail"),
        seq=r.opt_integer("seq", low=1),
        prev=digests["prev"],
        hash=digests["hash"],
    )


def parse_in_doubt(body: object) -> tuple[InDoubtClaim, ...]:
    claims = _Reader(body, "body", ("claims",)).array("claims")
    out: list[InDoubtClaim] = []
    for i, item in enumerate(claims):
        r = _Reader(item, f"body.claims[{i}]", ("functionCallId", "claimedAt", "worker"))
        out.append(
            InDoubtClaim(
                function_call_id=r.text("functionCallId"),
                claimed_at=r.integer("claimedAt"),
                worker=r.opt_text("worker"),
            )
        )
    return tuple(out)


def parse_grant_body(body: object) -> Grant:
    return _grant(_Reader(body, "body", ("grant",)).obj("grant"), "body.grant")


def parse_grant_list(body: object) -> tuple[GrantUsage, ...]:
    rows = _Reader(body, "body", ("grants",)).array("grants")
    out: list[GrantUsage] = []
    for i, item in enumerate(rows):
        r = _Reader(item, f"body.grants[{i}]", ("grant", "uses"))
        out.append(
            GrantUsage(grant=_grant(r.obj("grant"), f"body.grants[{i}].grant"), uses=r.integer("uses", low=0))
        )
    return tuple(out)


def parse_revoked(body: object) -> bool:
    return _Reader(body, "body", ("revoked",)).boolean("revoked")


_GRANT_FIELDS = (
    "id", "namespaceId", "issuer", "subject", "capabilities", "constraints", "issuedAt",
    "revokedAt", "parentId", "depth",
)  # fmt: skip
_CONSTRAINT_FIELDS = ("maxUses", "notBefore", "expiresAt", "purposes", "maxDepth")


def _grant(value: object, where: str) -> Grant:
    r = _Reader(value, where, _GRANT_FIELDS)
    capabilities = tuple(
        _capability(item, f"{where}.capabilities[{i}]")
        for i, item in enumerate(r.array("capabilities", 1, 1024))
    )
    k = _Reader(r.raw("constraints") if r.has("constraints") else {}, f"{where}.constraints", _CONSTRAINT_FIELDS)
    not_before, expires_at = k.opt_instant("notBefore"), k.opt_instant("expiresAt")
    if not_before is not None and expires_at is not None:
        if _instant_key(not_before) > _instant_key(expires_at):
            raise ShapeError(f"{where}.constraints.notBefore is after expiresAt")
    constraints = Constraints(
        max_uses=k.opt_integer("maxUses", low=1),
        not_before=not_before,
        expires_at=expires_at,
        purposes=k.ids("purposes", 1, 64) if k.has("purposes") else None,
        max_depth=k.opt_integer("maxDepth", low=0, high=_MAX_DELEGATION_DEPTH),
    )
    parent_id = r.opt_id("parentId")
    depth = r.opt_integer("depth", low=1, high=_MAX_DELEGATION_DEPTH)
    if (parent_id is None) != (depth is None):
        raise ShapeError(f"{where}.parentId and depth go together")
    return Grant(
        id=r.id("id"),
        namespace_id=r.id("namespaceId"),
        issuer=r.id("issuer"),
        subject=r.id("subject"),
        capabilities=capabilities,
        issued_at=r.instant("issuedAt"),
        constraints=constraints,
        revoked_at=r.opt_instant("revokedAt"),
        parent_id=parent_id,
        depth=depth,
    )


def _capability(value: object, where: str) -> Capability:
    c = _Reader(value, where, ("resource", "actions", "scope"))
    res = _Reader(c.obj("resource"), f"{where}.resource", ("namespace", "path", "owner"))
    path = res.array("path", 0, 64)
    if not all(isinstance(segment, str) and _is_segment(segment) for segment in path):
        raise ShapeError(f"{where}.resource.path holds a segment that is not a safe path segment")
    scope = c.choice("scope", ("exact", "descendants"))
    return Capability(
        resource=Resource(res.id("namespace"), tuple(path), res.opt_id("owner")),
        actions=c.ids("actions", 1, 64),
        scope="exact" if scope == "exact" else "descendants",
    )
