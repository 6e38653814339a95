"""The package and its tests pass ``mypy --strict`` wherever mypy is installed."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def find_mypy() -> list[str] | None:
    """This interpreter's mypy, a ``mypy`` on the PATH, or Debian's (``apt-get install
    python3-mypy`` installs it for /usr/bin/python3 only, which may not be the python3 here)."""
    if importlib.util.find_spec("mypy") is not None:
        return [sys.executable, "-m", "mypy"]
    on_path = shutil.which("mypy")
    if on_path is not None:
        return [on_path]
    debian = Path("/usr/bin/python3")
    if debian.is_file():
        probe = subprocess.run([str(debian), "-m", "mypy", "--version"], capture_output=True)
        if probe.returncode == 0:
            return [str(debian), "-m", "mypy"]
    return None


MYPY = find_mypy()


@unittest.skipIf(MYPY is None, "mypy is not installed (apt-get install python3-mypy)")
class StrictTypingTest(unittest.TestCase):
    def test_mypy_strict(self) -> None:
        assert MYPY is not None
        done = subprocess.run(
            [*MYPY, "--strict", "--no-incremental", "--cache-dir", os.devnull, "tessera_client", "tests", "_build"],
            cwd=HERE, capture_output=True, text=True, timeout=600,
        )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)

    def test_mypy_strict_on_the_two_workers_example(self) -> None:
        assert MYPY is not None
        example = HERE.parent.parent / "examples" / "python-two-workers"
        done = subprocess.run(
            [*MYPY, "--strict", "--no-incremental", "--cache-dir", os.devnull, "two_workers.py", "local_service.py"],
            cwd=example, capture_output=True, text=True, timeout=600,
            env={**os.environ, "MYPYPATH": str(HERE)},
        )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)


if __name__ == "__main__":
    unittest.main()
