"""The Python two-workers example measures the seed page's verdicts, case by case."""

from __future__ import annotations

import sys
import unittest

from . import require_service
from .support import REPO

EXAMPLE = REPO / "examples" / "python-two-workers"

# The seed's measured verdicts (shared/seeds/two-workers-one-id.txt), which the TypeScript demo
# reproduces: process memory runs the callback in every worker; the shared claim runs it once
# per trusted session.
BEFORE = {
    "tool_callbacks": 2,
    "claimed": 2,
    "reused": 0,
    "claim_markers": 0,
    "response_codes": ["value", "value"],
    "receipt_statuses": ["dispatched", "dispatched"],
}
AFTER_ONE = {
    "tool_callbacks": 1,
    "claimed": 1,
    "reused": 1,
    "claim_markers": 1,
    "response_codes": ["INVALID_FUNCTION_CALL", "value"],
    "receipt_statuses": ["dispatched", "none"],
}
AFTER_TWO_SESSIONS = {
    "tool_callbacks": 2,
    "claimed": 2,
    "reused": 0,
    "claim_markers": 2,
    "response_codes": ["value", "value"],
    "receipt_statuses": ["dispatched", "dispatched"],
}


class TwoWorkersExampleTest(unittest.TestCase):
    def setUp(self) -> None:
        require_service()
        if str(EXAMPLE) not in sys.path:
            sys.path.insert(0, str(EXAMPLE))

    def test_the_four_cases_measure_the_seed_verdicts(self) -> None:
        import two_workers  # type: ignore[import]  # beside the example, put on sys.path above

        report = two_workers.run_demo()
        self.assertEqual(
            report,
            {
                "two-workers-one-id": {"mode": "parallel OS processes", "before": BEFORE, "after": AFTER_ONE},
                "same-id-changed-body": {"mode": "parallel OS processes", "before": BEFORE, "after": AFTER_ONE},
                "new-worker-old-id": {"mode": "sequential new OS process", "before": BEFORE, "after": AFTER_ONE},
                "two-trusted-sessions": {
                    "mode": "parallel OS processes",
                    "before": BEFORE,
                    "after": AFTER_TWO_SESSIONS,
                },
            },
        )
        text = two_workers.format_report(report)
        self.assertIn("  Process memory: 2 callbacks / Shared claim: 1 callback\n", text)
        self.assertIn("  Process memory: 2 callbacks / Shared claim: 2 callbacks\n", text)
        self.assertIn(
            "    after:  claimed 1, reused 1, claim markers 1, responses [INVALID_FUNCTION_CALL, value], "
            "receipts [dispatched, none]",
            text,
        )


if __name__ == "__main__":
    unittest.main()
