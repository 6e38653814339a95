"""``pip install ./clients/python`` works with no index at all, build isolation on or off."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def offline_env() -> dict[str, str]:
    """pip with no configuration file, no index and no local wheel directory: nothing to fetch."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def has_pip() -> bool:
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    return probe.returncode == 0


class BackendTest(unittest.TestCase):
    def test_python_3_10_reads_the_project_table_as_tomllib_does(self) -> None:
        sys.path.insert(0, str(HERE / "_build"))
        self.addCleanup(sys.path.remove, str(HERE / "_build"))
        tessera_build = importlib.import_module("tessera_build")  # on sys.path, as pip puts it

        with_tomllib = tessera_build._project()
        saved = sys.modules.get("tomllib")
        sys.modules["tomllib"] = None  # type: ignore[assignment]  # as on 3.10: ImportError
        try:
            without = tessera_build._project()
        finally:
            if saved is None:
                del sys.modules["tomllib"]
            else:
                sys.modules["tomllib"] = saved
        self.assertEqual(without, with_tomllib)
        self.assertEqual(without["name"], "tessera-client")
        self.assertEqual(without["requires-python"], ">=3.10")


@unittest.skipUnless(has_pip(), f"{sys.executable} has no pip")
class OfflineInstallTest(unittest.TestCase):
    def install(self, *flags: str) -> Path:
        target = Path(tempfile.mkdtemp(prefix="tessera-py-install-"))
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", str(target)]))
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-index", *flags, "--target", str(target), str(HERE)],
            capture_output=True, text=True, env=offline_env(), timeout=300,
        )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        return target

    def check_installed(self, target: Path) -> None:
        package = target / "tessera_client"
        self.assertTrue((package / "py.typed").is_file())
        info = next(target.glob("tessera_client-*.dist-info"))
        metadata = (info / "METADATA").read_text()
        self.assertIn("Name: tessera-client", metadata)
        self.assertIn("Requires-Python: >=3.10", metadata)
        self.assertNotIn("Requires-Dist", metadata)  # standard library only
        probe = subprocess.run(
            [sys.executable, "-c", "import tessera_client as t; print(t.__file__, t.__version__)"],
            capture_output=True, text=True, cwd=tempfile.gettempdir(),
            env={**os.environ, "PYTHONPATH": str(target)}, timeout=60,
        )
        self.assertEqual(probe.returncode, 0, probe.stderr)
        self.assertTrue(probe.stdout.startswith(str(package)), probe.stdout)
        # One version: pyproject.toml's (the metadata) is the module's __version__.
        version = probe.stdout.split()[1]
        self.assertIn(f"Version: {version}\n", metadata)

    def test_plain_install_needs_no_index(self) -> None:
        self.check_installed(self.install())

    def test_install_without_build_isolation(self) -> None:
        self.check_installed(self.install("--no-build-isolation"))

    def test_the_wheel_holds_the_package_and_nothing_else(self) -> None:
        out = Path(tempfile.mkdtemp(prefix="tessera-py-wheel-"))
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", str(out)]))
        done = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-index", "--no-deps", "-w", str(out), str(HERE)],
            capture_output=True, text=True, env=offline_env(), timeout=300,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        wheel = next(out.glob("tessera_client-*-py3-none-any.whl"))
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
        self.assertTrue(all(n.startswith(("tessera_client/", "tessera_client-")) for n in names), names)
        self.assertIn("tessera_client/py.typed", names)
        self.assertFalse(any("tests" in n or "_build" in n for n in names), names)


if __name__ == "__main__":
    unittest.main()
