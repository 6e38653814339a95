"""Which exception class a code lands in: by code, by family, then by HTTP status."""

from __future__ import annotations

import unittest

from tessera_client import (
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
from tessera_client.errors import error_class


class ErrorClassTest(unittest.TestCase):
    def test_the_services_codes(self) -> None:
        cases: list[tuple[str, int | None, type[TesseraError]]] = [
            ("invalid_request", 400, RequestError),
            ("invalid_grant", 400, RequestError),
            ("method_not_allowed", 405, RequestError),
            ("body_too_large", 413, RequestError),
            ("unsupported_media_type", 415, RequestError),
            ("unauthenticated", 401, AuthenticationError),
            ("forbidden", 403, ForbiddenError),
            ("not_found", 404, NotFoundError),
            ("call_id_conflict", 409, ConflictError),
            ("call_in_progress", 409, ConflictError),
            ("delegation_wider_path", 400, DelegationError),
            ("delegation_budget_exhausted", 409, DelegationError),
            ("unavailable", 503, UnavailableError),
            ("claim_store_unavailable", 503, UnavailableError),
            ("service_unreachable", None, UnavailableError),
            ("internal_error", 500, ServiceError),
            ("invalid_response", 200, ServiceError),
            ("something_new", 418, RequestError),
            ("something_new", 500, ServiceError),
        ]
        for code, status, expected in cases:
            self.assertIs(error_class(code, status), expected, code)

    def test_an_error_carries_code_message_and_field(self) -> None:
        error = RequestError("invalid_request", "capabilities: too small", field="capabilities", status=400)
        self.assertEqual((error.code, error.message, error.field, error.status), ("invalid_request", "capabilities: too small", "capabilities", 400))
        self.assertEqual(str(error), "invalid_request (capabilities): capabilities: too small")
        self.assertIsInstance(DelegationError("delegation_wider_path", "m"), RequestError)


if __name__ == "__main__":
    unittest.main()
