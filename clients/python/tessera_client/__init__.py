"""``tessera_client``: the Tessera service over HTTP, for Python hosts (standard library only).

Mirrors ``@tessera/client``: one method per route, answers as frozen dataclasses, a refusal as
a value (``status == "denied"``), every "no usable answer" as a ``TesseraError`` subclass, safe
retries for calls that carry a call ID, and ``verify_webhook`` for the service's signed POSTs.
"""

from ._http import RETRYABLE_STATUSES, RetryPolicy
from .client import SettleError, TesseraClient, __version__
from .errors import (
    AuthenticationError,
    ConflictError,
    DelegationError,
    ForbiddenError,
    NotFoundError,
    RequestError,
    ServiceError,
    TesseraError,
    UnavailableError,
)
from .models import (
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
    JsonValue,
    Resource,
    SendResult,
    a2ui_function_capability,
    a2ui_function_resource,
    message_send_capability,
)
from .webhook import SIGNATURE_HEADER, signature_header, verify_webhook, webhook_signature

__all__ = [
    "RETRYABLE_STATUSES",
    "SIGNATURE_HEADER",
    "A2uiClaimResult",
    "A2uiDispatch",
    "A2uiRefused",
    "A2uiReply",
    "Allowed",
    "AuditEvent",
    "AuthenticationError",
    "AuthorizeResult",
    "Capability",
    "ConflictError",
    "Constraints",
    "DelegationError",
    "Delivered",
    "Denied",
    "Explanation",
    "ForbiddenError",
    "FunctionCall",
    "Grant",
    "GrantUsage",
    "InDoubtClaim",
    "JsonValue",
    "NotFoundError",
    "RequestError",
    "Resource",
    "RetryPolicy",
    "SendResult",
    "ServiceError",
    "SettleError",
    "TesseraClient",
    "TesseraError",
    "UnavailableError",
    "__version__",
    "a2ui_function_capability",
    "a2ui_function_resource",
    "message_send_capability",
    "signature_header",
    "verify_webhook",
    "webhook_signature",
]
