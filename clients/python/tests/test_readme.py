"""The README's example runs as written against a real service and prints what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unittest
from pathlib import Path

from . import require_service
from .support import Service

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


class ReadmeExampleTest(unittest.TestCase):
    def test_the_example_prints_what_the_readme_says(self) -> None:
        require_service()
        section = README[README.index("## Example") :]
        code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
        printed = re.search(r"It prints:\n\n```\n(.*?)```", section, re.DOTALL)
        assert code is not None and printed is not None
        service = Service().start()
        self.addCleanup(service.stop)
        done = subprocess.run(
            [sys.executable, "-c", code.group(1)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).resolve().parents[1],
            env={
                **os.environ,
                "TESSERA_URL": service.url,
                "TESSERA_TOKEN": service.agents["asker"].token,
                "TESSERA_ISSUER_TOKEN": service.issuer_token,
            },
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout, printed.group(1))


if __name__ == "__main__":
    unittest.main()
