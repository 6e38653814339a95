"""Why a call produced no usable answer.

A refusal is not one of these: a decision that refused is a normal return whose ``status`` is
``"denied"`` (HTTP 200), which the caller must read. Every exception here means no decision
was taken. Match on the class or on ``code``, never on the message.
"""

from __future__ import annotations


class TesseraError(Exception):
    """Base class: the service's error body (``code``, ``message``, ``field``), or the client's own.

    ``code`` is the service's stable code (``unauthenticated``, ``invalid_request``, ...) or one
    of the client's: ``service_unreachable`` (no HTTP answer: refused, reset, timeout),
    ``invalid_response`` (an answer that is not the documented shape), ``invalid_config`` (a
    constructor option it cannot use) and ``invalid_input`` (a request it cannot put on the
    wire, refused before sending).
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        field: str | None = None,
        status: int | None = None,
        request_id: str | None = None,
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        #: The request field the service named as wrong (a 400), when it named one.
        self.field = field
        #: The HTTP status, when the service answered.
        self.status = status
        #: The service's ``x-request-id``, to find the request in its logs.
        self.request_id = request_id
        #: Attempts made, retries included.
        self.attempts = attempts

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field is not None else ""
        return f"{self.code}{where}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
            f"field={self.field!r}, status={self.status!r})"
        )


class RequestError(TesseraError):
    """400, 405, 413, 415: the request is wrong (``invalid_request``, ``invalid_grant``, ...), or
    ``invalid_input`` from the client itself: a request it cannot put on the wire (an ID holding
    a lone surrogate, which UTF-8 cannot carry), refused before anything is sent."""


class DelegationError(RequestError):
    """A derived grant would widen its parent (``delegation_*``), or the parent is spent."""


class AuthenticationError(TesseraError):
    """401 ``unauthenticated``: no token, or one no principal holds."""


class ForbiddenError(TesseraError):
    """403 ``forbidden``: the token's role may not use the route."""


class NotFoundError(TesseraError):
    """404 ``not_found``: an unknown dispatch handle, or A2UI not configured on the service."""


class ConflictError(TesseraError):
    """409: ``call_id_conflict`` (the call ID was used with another body) or ``call_in_progress``."""


class UnavailableError(TesseraError):
    """503 or no answer: nothing was decided; the same call may succeed later."""


class ConfigError(TesseraError, ValueError):
    """``invalid_config``: the client was made with an option it cannot use (``field`` names
    which: ``url``, ``token``, ``timeout_s``). Raised by the constructor, so a token or URL that
    could never be sent is not first seen on a call, after its retries, as if the service were
    down. The message never shows the token or the URL's credentials. Also a ``ValueError``, as
    a bad URL was before."""


class ServiceError(TesseraError):
    """500 ``internal_error``, or an answer that is not the documented shape (``invalid_response``)."""


_BY_CODE: dict[str, type[TesseraError]] = {
    "unauthenticated": AuthenticationError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "call_id_conflict": ConflictError,
    "call_in_progress": ConflictError,
    "service_unreachable": UnavailableError,
    "unavailable": UnavailableError,
    "internal_error": ServiceError,
    "invalid_response": ServiceError,
}

_BY_STATUS: dict[int, type[TesseraError]] = {
    400: RequestError,
    401: AuthenticationError,
    403: ForbiddenError,
    404: NotFoundError,
    405: RequestError,
    409: ConflictError,
    413: RequestError,
    415: RequestError,
    503: UnavailableError,
}


def error_class(code: str, status: int | None) -> type[TesseraError]:
    """The exception class of a code: by the code itself, then by its family, then by status.

    A code this client does not know yet still lands in the family its HTTP status names, so a
    newer service never turns a conflict into a generic error.
    """
    known = _BY_CODE.get(code)
    if known is not None:
        return known
    if code.startswith("delegation_"):
        return DelegationError
    if code.endswith("_unavailable"):
        return UnavailableError
    if status is not None:
        if status in _BY_STATUS:
            return _BY_STATUS[status]
        if 400 <= status < 500:
            return RequestError
    return ServiceError
