"""The service's answers as frozen dataclasses, and the request values a caller builds.

Field names are the wire's in snake case (``messageId`` → ``message_id``); ``_parse`` reads
them from the JSON strictly.
"""

from __future__ import annotations

import urllib.parse

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

#: A JSON value as ``json.loads`` returns it: payloads, replies and A2UI messages.
JsonValue = Any

RECEIPT_STATUSES = ("dispatched", "none", "denied", "failed", "in_doubt")

#: What a refusal may tell the caller (docs/codes.md, "Caller codes"): a ``Denied.code``.
CALLER_CODES = (
    "tool_unavailable",
    "no_matching_grant",
    "invalid_request",
    "authority_unavailable",
    "turn_closed",
    "delivery_failed",
    "INVALID_FUNCTION_CALL",
    "VALIDATION_FAILED",
    "EXECUTION_FAILED",
)

#: Why a decision went as it did, in audit only (docs/codes.md, "Audit reasons").
AUDIT_REASONS = (
    "allowed",
    "dispatched",
    "grant_exhausted",
    "revoked",
    "expired",
    "not_yet_valid",
    "purpose_mismatch",
    "issuer_mismatch",
    "owner_mismatch",
    "no_capability",
    "chain_broken",
    "usage_store_unavailable",
    "authority_unavailable",
    "turn_closed",
    "invalid_request",
    "delivery_failed",
    "no_transport",
    "use_returned",
    "act_withdrawn",
    "invalid_message",
    "unknown_catalog",
    "unknown_function",
    "caller_not_allowed",
    "user_activation_required",
    "invalid_args",
    "duplicate_call",
    "claim_store_unavailable",
    "policy_denied",
    "approval_denied",
    "callback_failed",
)


# ---- decisions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Denied:
    """A decision that refused (HTTP 200): ``code`` is what the caller may learn, never why.

    ``call_id`` is the call ID the request carried (the caller's, or the one the client made
    up), for ``explain``: the service does not repeat it in a denial. ``None`` for a request
    sent without one.
    """

    code: str
    status: Literal["denied"] = "denied"
    call_id: str | None = None


@dataclass(frozen=True)
class Delivered:
    """The message was authorized, its ticket spent and the transport delivered it."""

    message_id: str
    grant_id: str
    call_id: str
    reply: JsonValue = None
    status: Literal["delivered"] = "delivered"


@dataclass(frozen=True)
class Allowed:
    """The act is authorized by ``grant_id`` (bounded grants are spent by this decision)."""

    grant_id: str
    call_id: str
    status: Literal["allowed"] = "allowed"


SendResult = Union[Delivered, Denied]
AuthorizeResult = Union[Allowed, Denied]


# ---- the A2UI gate -----------------------------------------------------------------------


@dataclass(frozen=True)
class FunctionCall:
    """The call to run on the host after a ``dispatch`` claim."""

    function_call_id: str
    catalog_id: str
    call: str
    args: Mapping[str, JsonValue]


@dataclass(frozen=True)
class A2uiDispatch:
    """The claim is this caller's: run ``call``, then settle ``handle`` with its value or error."""

    handle: str
    call: FunctionCall
    status: Literal["dispatch"] = "dispatch"


@dataclass(frozen=True)
class A2uiRefused:
    """Nothing may run: send ``reply`` (an A2UI error message) to the agent."""

    reply: Mapping[str, JsonValue]
    receipt: str
    status: Literal["refused"] = "refused"


A2uiClaimResult = Union[A2uiDispatch, A2uiRefused]


@dataclass(frozen=True)
class A2uiReply:
    """The A2UI reply to send to the agent and the receipt recorded for the call."""

    reply: Mapping[str, JsonValue]
    receipt: str


# ---- audit, explain, claims --------------------------------------------------------------


@dataclass(frozen=True)
class Explanation:
    """What audit says about one of this principal's call IDs: ``spent``, ``never_granted``, ..."""

    call_id: str
    verdict: str
    code: str | None
    summary: str


@dataclass(frozen=True)
class AuditEvent:
    """One audit event; the optional fields are ``None`` when the event does not carry them."""

    at: str
    source: str
    outcome: str
    code: str | None
    reason: str
    trace_id: str
    call_id: str
    namespace_id: str | None = None
    actor: str | None = None
    authority: str | None = None
    owner: str | None = None
    purpose: str | None = None
    grant_id: str | None = None
    chain: tuple[str, ...] | None = None
    action: str | None = None
    resource: str | None = None
    session: str | None = None
    receipt: str | None = None
    detail: str | None = None
    seq: int | None = None
    prev: str | None = None
    hash: str | None = None


@dataclass(frozen=True)
class InDoubtClaim:
    """A call claimed and never answered: it will not be decided again."""

    function_call_id: str
    claimed_at: int
    worker: str | None = None


# ---- grants --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resource:
    namespace: str
    path: tuple[str, ...]
    owner: str | None = None


@dataclass(frozen=True)
class Capability:
    resource: Resource
    actions: tuple[str, ...]
    scope: Literal["exact", "descendants"] = "exact"


@dataclass(frozen=True)
class Constraints:
    max_uses: int | None = None
    not_before: str | None = None
    expires_at: str | None = None
    purposes: tuple[str, ...] | None = None
    max_depth: int | None = None


@dataclass(frozen=True)
class Grant:
    id: str
    namespace_id: str
    issuer: str
    subject: str
    capabilities: tuple[Capability, ...]
    issued_at: str
    constraints: Constraints = field(default_factory=Constraints)
    revoked_at: str | None = None
    parent_id: str | None = None
    depth: int | None = None


@dataclass(frozen=True)
class GrantUsage:
    grant: Grant
    uses: int


MESSAGE_SEND_ACTION = "messages.send"
MESSAGE_NAMESPACE = "messages"


def message_send_capability(recipient: str, owner: str) -> Capability:
    """Authority to send to exactly one recipient for ``owner``: one ticket per recipient."""
    return Capability(
        resource=Resource(MESSAGE_NAMESPACE, (recipient,), owner),
        actions=(MESSAGE_SEND_ACTION,),
        scope="exact",
    )


A2UI_CALL_ACTION = "a2ui.call"
A2UI_NAMESPACE = "a2ui"


def _segment(part: str) -> str:
    # JavaScript's encodeURIComponent, as the service encodes a catalog ID (usually a URL) or a
    # function name into one path segment; "." and ".." survive it, so they are escaped by hand.
    encoded = urllib.parse.quote(part, safe="!*'()")
    return "%2E" if encoded == "." else "%2E%2E" if encoded == ".." else encoded


def a2ui_function_resource(catalog_id: str, function: str, owner: str | None = None) -> Resource:
    """The resource an A2UI call of ``function`` in ``catalog_id`` asks the kernel for."""
    return Resource(A2UI_NAMESPACE, (_segment(catalog_id), _segment(function)), owner)


def a2ui_function_capability(
    catalog_id: str, function: str | None = None, owner: str | None = None
) -> Capability:
    """Authority to call one catalog function through the service's A2UI gate (``a2ui.call``);
    with ``function=None``, every function of the catalog (descendants scope)."""
    if function is None:
        resource = Resource(A2UI_NAMESPACE, (_segment(catalog_id),), owner)
        return Capability(resource, (A2UI_CALL_ACTION,), "descendants")
    return Capability(a2ui_function_resource(catalog_id, function, owner), (A2UI_CALL_ACTION,), "exact")


# ---- to the wire ----------------------------------------------------------------------------


def capability_to_wire(value: Capability | Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(value, Capability):
        return dict(value)
    resource: dict[str, Any] = {
        "namespace": value.resource.namespace,
        "path": list(value.resource.path),
    }
    if value.resource.owner is not None:
        resource["owner"] = value.resource.owner
    return {"resource": resource, "actions": list(value.actions), "scope": value.scope}


def constraints_to_wire(value: Constraints | Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(value, Constraints):
        return dict(value)
    wire: dict[str, Any] = {}
    if value.max_uses is not None:
        wire["maxUses"] = value.max_uses
    if value.not_before is not None:
        wire["notBefore"] = value.not_before
    if value.expires_at is not None:
        wire["expiresAt"] = value.expires_at
    if value.purposes is not None:
        wire["purposes"] = list(value.purposes)
    if value.max_depth is not None:
        wire["maxDepth"] = value.max_depth
    return wire


def as_sequence(value: Sequence[Capability | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Capabilities to send; a bare string would iterate as characters, so refuse it by name."""
    if isinstance(value, (str, bytes)) or isinstance(value, Mapping):
        raise TypeError("capabilities must be a sequence of Capability or mappings")
    return [capability_to_wire(item) for item in value]
