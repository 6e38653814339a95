"""Which exception class a code lands in: by code, by family, then by HTTP status."""

from __future__ import annotations

import re
import unittest
from pathlib import Path

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
from tessera_client.models import AUDIT_REASONS, CALLER_CODES

CODES_MD = Path(__file__).resolve().parents[3] / "docs" / "codes.md"


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


@unittest.skipUnless(CODES_MD.is_file(), "docs/codes.md is not next to this checkout")
class VocabularyTest(unittest.TestCase):
    """The caller codes and audit reasons the client accepts in answers are docs/codes.md's."""

    def names(self, section: str) -> set[str]:
        text = CODES_MD.read_text(encoding="utf-8")
        body = text[text.index(f"## {section}") :]
        body = body[: body.index("\n## ", 1)]
        return set(re.findall(r"^\| `([A-Za-z_]+)`", body, re.MULTILINE))

    def test_caller_codes_are_the_documented_ones(self) -> None:
        self.assertEqual(set(CALLER_CODES), self.names("Caller codes"))
        self.assertEqual(len(CALLER_CODES), len(set(CALLER_CODES)))

    def test_audit_reasons_are_the_documented_ones(self) -> None:
        self.assertEqual(set(AUDIT_REASONS), self.names("Audit reasons"))
        self.assertEqual(len(AUDIT_REASONS), len(set(AUDIT_REASONS)))


if __name__ == "__main__":
    unittest.main()
