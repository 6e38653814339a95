"""The package passes ``mypy --strict`` wherever this interpreter has mypy."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


@unittest.skipIf(importlib.util.find_spec("mypy") is None, f"mypy is not installed for {sys.executable}")
class StrictTypingTest(unittest.TestCase):
    def test_mypy_strict(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "tessera_client", "tests"],
            cwd=HERE, capture_output=True, text=True, timeout=600,
        )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()
