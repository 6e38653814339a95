"""Tests of tessera_client against a real ``tessera serve`` (see support.py)."""

import os
import unittest

from .support import skip_reason


def require_service() -> None:
    """Skips a test module when the service cannot run here; under CI=true that is a failure."""
    reason = skip_reason()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"the service tests cannot run under CI: {reason}")
    raise unittest.SkipTest(reason)
