"""The Tessera service over HTTP: one method per route, as ``@tessera/client`` has them."""

from __future__ import annotations

import dataclasses
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, TypeVar, cast

from . import _parse
from ._http import DEFAULT_MAX_RESPONSE_BYTES, RetryPolicy, Transport, parse_json_or_shape
from .errors import RequestError
from .models import (
    A2uiClaimResult,
    A2uiReply,
    AuditEvent,
    AuthorizeResult,
    Capability,
    Constraints,
    Denied,
    Explanation,
    Grant,
    GrantUsage,
    InDoubtClaim,
    JsonValue,
    Resource,
    SendResult,
    as_sequence,
    constraints_to_wire,
)

__version__ = "0.1.0"

T = TypeVar("T")


@dataclass(frozen=True)
class SettleError:
    """The host's function failed: the agent is told ``EXECUTION_FAILED``, never this text."""

    message: str
    code: str | None = None


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET = _Unset()


class TesseraClient:
    """The Tessera service over HTTP.

    A refusal is a normal return (``status == "denied"``); only "no usable answer" raises a
    ``TesseraError`` subclass. ``send_message`` and ``authorize`` are retried on a dropped
    connection, a timeout, 429/502/503/504 and ``call_in_progress``, with capped exponential
    backoff and full jitter, because they carry a call ID (a fresh UUID when the caller gives
    none and retries are on): the service answers a repeated call ID with the original
    decision, so nothing is decided, spent or delivered twice. No other call is retried: the
    A2UI gate answers a repeated ``functionCallId`` as a refusal, not as the original, and
    reads are the caller's to repeat.
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = RetryPolicy(),
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        """``url`` is the service's base URL (``http://127.0.0.1:8787``); ``token`` the bearer
        token that names the principal (agent or issuer); ``timeout_s`` how long each attempt
        may take as a whole (connecting, sending, and reading the answer to its last byte: a
        service that trickles its answer does not hold the caller past it); ``retry=None`` turns
        retries off (and with them the made-up call IDs); ``max_response_bytes`` (64 MiB by default)
        the most bytes of an answer's body the client reads: a longer one is a ``ServiceError``
        (``invalid_response``), not retried, and its rest is never read.

        Raises ``ConfigError`` (``invalid_config``, ``field`` naming the option) for a URL, token
        or timeout no call could use: a token with white space (a pasted newline), a control
        character or a character above U+00FF, or empty; a URL that is not absolute http(s),
        holds white space or a control character, carries credentials (``user:pass@``) or has a
        query or fragment; a timeout that is not a finite number of seconds above 0. The
        message never shows the token or the URL."""
        self._http = Transport(
            url,
            token,
            timeout_s,
            retry if retry is not None else RetryPolicy(attempts=1),
            f"tessera-client-python/{__version__}",
            max_response_bytes,
        )

    @property
    def retry(self) -> RetryPolicy:
        return self._http.retry

    # ---- probes -------------------------------------------------------------------------

    def health(self) -> bool:
        """Liveness: True when the process serves HTTP (never touches the store)."""
        return self._get("/healthz", _parse.parse_health)

    def ready(self) -> bool:
        """Readiness: True when every store port answered; a store outage is an UnavailableError."""
        return self._get("/readyz", _parse.parse_ready)

    # ---- decisions ----------------------------------------------------------------------

    def tools(self) -> tuple[str, ...]:
        """The tools this principal may see now (a spent send ticket hides the send tool)."""
        return self._get("/v1/tools", _parse.parse_tools)

    def authorize(
        self,
        action: str,
        resource: Resource | Mapping[str, Any],
        *,
        call_id: str | None = None,
    ) -> AuthorizeResult:
        """Decides one act: ``Allowed`` (a bounded grant is spent) or ``Denied`` with a code."""
        body: dict[str, Any] = {"action": action, "resource": _resource_to_wire(resource)}
        return self._decide("/v1/authorize", body, call_id, _parse.parse_authorize)

    def send_message(
        self,
        recipient: str,
        payload: JsonValue,
        *,
        call_id: str | None = None,
    ) -> SendResult:
        """Decided, spent and delivered once: ``Delivered`` with the reply, or ``Denied``."""
        body: dict[str, Any] = {"recipient": recipient, "payload": payload}
        return self._decide("/v1/messages", body, call_id, _parse.parse_send)

    # ---- the A2UI gate ------------------------------------------------------------------

    def a2ui_claim(self, message: Mapping[str, JsonValue]) -> A2uiClaimResult:
        """Claims an A2UI call: the refusal reply to send, or a handle to settle after running it."""
        return self._post("/v1/a2ui/claim", {"message": dict(message)}, _parse.parse_claim)

    def a2ui_settle(
        self,
        handle: str,
        value: JsonValue | _Unset = _UNSET,
        *,
        error: SettleError | None = None,
    ) -> A2uiReply:
        """Settles a claimed call with the function's ``value`` or its ``error``; returns the
        reply to send. Settle through the instance that issued the handle.

        Exactly one of them, as the service's settle schema says ("give the call's value or its
        error"): neither, or both, is a ``TypeError`` before anything is sent. A function that
        returned nothing settles with an explicit ``None`` (``value: null``)."""
        body: dict[str, Any] = {"handle": handle}
        if error is not None:
            if not isinstance(value, _Unset):
                raise TypeError("give the call's value or its error, not both")
            wire_error: dict[str, str] = {"message": error.message}
            if error.code is not None:
                wire_error["code"] = error.code
            body["error"] = wire_error
        elif isinstance(value, _Unset):
            raise TypeError(
                "give the call's value or its error: a2ui_settle(handle, value) or "
                "a2ui_settle(handle, error=SettleError(message)); a function that returned "
                "nothing settles with an explicit None"
            )
        else:
            body["value"] = value
        return self._post("/v1/a2ui/settle", body, _parse.parse_reply)

    def a2ui_call(self, message: Mapping[str, JsonValue]) -> A2uiReply:
        """One step: the service claims, calls the host's function endpoint and settles."""
        return self._post("/v1/a2ui/call", {"message": dict(message)}, _parse.parse_reply)

    # ---- audit, explain, claims ---------------------------------------------------------

    def explain(self, call_id: str) -> Explanation:
        """"Spent" or "never granted" (and revoked, expired, ...) for one of this principal's calls."""
        _sendable(call_id, "callId", required=True)
        return self._get("/v1/explain", _parse.parse_explain, {"callId": call_id})

    def audit(
        self,
        *,
        call_id: str | None = None,
        trace_id: str | None = None,
        limit: int | None = None,
    ) -> tuple[AuditEvent, ...]:
        """This principal's audit events for one call ID or one trace ID (exactly one of them)."""
        _sendable(call_id, "callId")
        _sendable(trace_id, "traceId")
        query: dict[str, str | int | None] = {"callId": call_id, "traceId": trace_id, "limit": limit}
        return self._get("/v1/audit", _parse.parse_audit, query)

    def in_doubt_claims(self) -> tuple[InDoubtClaim, ...]:
        """This principal's claims whose outcome was never recorded: never decided again."""
        return self._get("/v1/claims/in-doubt", _parse.parse_in_doubt)

    # ---- grants (issuer tokens) ---------------------------------------------------------

    def issue_grant(
        self,
        subject: str,
        capabilities: Sequence[Capability | Mapping[str, Any]],
        *,
        constraints: Constraints | Mapping[str, Any] | None = None,
        id: str | None = None,
        issued_at: str | None = None,
    ) -> Grant:
        """A grant in the token's namespace, issued by its authority (issuer tokens only)."""
        body = _grant_body(subject, capabilities, constraints, id, issued_at)
        return self._post("/v1/grants", body, _parse.parse_grant_body)

    def derive_grant(
        self,
        parent_id: str,
        subject: str,
        capabilities: Sequence[Capability | Mapping[str, Any]],
        *,
        constraints: Constraints | Mapping[str, Any] | None = None,
        id: str | None = None,
        issued_at: str | None = None,
    ) -> Grant:
        """A narrower child of ``parent_id`` for ``subject``; a widening is a DelegationError.
        Give an ``id`` to make a retried derive harmless (a taken ID carves nothing)."""
        body = {"parentId": parent_id, **_grant_body(subject, capabilities, constraints, id, issued_at)}
        return self._post("/v1/grants/derive", body, _parse.parse_grant_body)

    def list_grants(self) -> tuple[GrantUsage, ...]:
        """The namespace's grants of this issuer, with their usage counts."""
        return self._get("/v1/grants", _parse.parse_grant_list)

    def revoke_grant(self, grant_id: str) -> bool:
        """True if revoked; another issuer's grant answers False, like a missing one.

        The ID is one percent-encoded path segment. ``.`` and ``..`` are sent as ``%2E`` and
        ``%2E%2E`` on purpose: the service reads them back as the grant IDs, and no proxy or
        URL parser on the way can take them for dot segments and resolve them to the parent
        path, another route. (The TS client, whose fetch resolves even ``%2E``, refuses them.)"""
        _sendable(grant_id, "grantId", required=True)
        path = "/v1/grants/" + _path_segment(grant_id)
        return self._call("DELETE", path, _parse.parse_revoked)

    # ---- plumbing -----------------------------------------------------------------------

    def _decide(
        self,
        path: str,
        body: dict[str, Any],
        call_id: str | None,
        parse: Callable[[Any], T],
    ) -> T:
        # A call ID is what makes a retried decision safe; without one, a retry after a
        # dropped answer would be a second decision. One is made up only when retries are on.
        if call_id is None and self._http.retry.attempts > 1:
            call_id = str(uuid.uuid4())
        if call_id is not None:
            body["callId"] = call_id
        value = self._http.call("POST", path, body=body, retry_safe=call_id is not None)
        result: T = parse_json_or_shape(parse, value, "POST", path)
        if isinstance(result, Denied) and call_id is not None:
            # The service does not repeat the ID in a denial; the caller needs it to explain.
            refused: T = cast(T, dataclasses.replace(result, call_id=call_id))
            return refused
        return result

    def _get(
        self,
        path: str,
        parse: Callable[[Any], T],
        query: Mapping[str, str | int | None] | None = None,
    ) -> T:
        value = self._http.call("GET", path, query=query)
        result: T = parse_json_or_shape(parse, value, "GET", path)
        return result

    def _post(self, path: str, body: Mapping[str, Any], parse: Callable[[Any], T]) -> T:
        return self._call("POST", path, parse, body)

    def _call(
        self,
        method: str,
        path: str,
        parse: Callable[[Any], T],
        body: Mapping[str, Any] | None = None,
    ) -> T:
        value = self._http.call(method, path, body=body)
        result: T = parse_json_or_shape(parse, value, method, path)
        return result


def _sendable(value: object, field: str, *, required: bool = False) -> None:
    """An ID for a URL (path or query), or ``invalid_input`` before anything is sent: a lone
    surrogate has no UTF-8 form (``quote`` would raise a raw ``UnicodeEncodeError``), and the
    service refuses such IDs everywhere. The ID itself is not echoed.

    So is an ID that is not a ``str`` (``None`` too, unless the ID is optional): ``quote``
    raised a bare ``TypeError`` for ``revoke_grant(5)``, and ``explain(5)`` asked about the call
    ``"5"``. The TS client coerces such a value at runtime; this one refuses it."""
    if value is None and not required:
        return
    if not isinstance(value, str):
        raise RequestError(
            "invalid_input",
            f"{field} must be a string, not {type(value).__name__}: nothing was sent",
            field=field,
        )
    if not _parse.is_well_formed(value):
        raise RequestError(
            "invalid_input",
            f"{field} holds a lone surrogate (half of a UTF-16 pair), which UTF-8 cannot carry",
            field=field,
        )


def _path_segment(value: str) -> str:
    """One path segment, percent-encoded as ``encodeURIComponent`` does, dot segments too."""
    encoded = urllib.parse.quote(value, safe="")
    return "%2E" if encoded == "." else "%2E%2E" if encoded == ".." else encoded


def _resource_to_wire(resource: Resource | Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(resource, Resource):
        return dict(resource)
    wire: dict[str, Any] = {"namespace": resource.namespace, "path": list(resource.path)}
    if resource.owner is not None:
        wire["owner"] = resource.owner
    return wire


def _grant_body(
    subject: str,
    capabilities: Sequence[Capability | Mapping[str, Any]],
    constraints: Constraints | Mapping[str, Any] | None,
    id: str | None,
    issued_at: str | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"subject": subject, "capabilities": as_sequence(capabilities)}
    if constraints is not None:
        body["constraints"] = constraints_to_wire(constraints)
    if id is not None:
        body["id"] = id
    if issued_at is not None:
        body["issuedAt"] = issued_at
    return body
