"""A PEP 517 / PEP 660 build backend for ``tessera-client``, in the standard library only.

Why not setuptools: pip builds a local directory in an isolated environment and downloads the
backend named in ``requires`` from an index; with setuptools that fails offline unless the
caller knows to pass ``--no-build-isolation``. A pure-Python package of a few modules needs only
a zip file with the right metadata, so this backend writes it: ``requires = []``, nothing is
fetched, and ``pip install ./clients/python`` works with no network on any pip that speaks
PEP 517. It packs ``tessera_client/`` (``*.py`` and ``py.typed``) and nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "tessera_client"


def _project() -> dict[str, str]:
    """name, version, description, requires-python and license from pyproject.toml's [project]."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # 3.10: read the few plain `key = "value"` lines of our own file
        table = text.split("[project]", 1)[1].split("\n[", 1)[0]
        found = dict(re.findall(r'^([a-z-]+) = "([^"]*)"$', table, re.MULTILINE))
        license_text = re.search(r'^license = \{ text = "([^"]*)" \}$', table, re.MULTILINE)
        found["license"] = license_text.group(1) if license_text else ""
        return found
    project: dict[str, Any] = tomllib.loads(text)["project"]
    out = {k: v for k, v in project.items() if isinstance(v, str)}
    out["license"] = project.get("license", {}).get("text", "")
    return out


def _dist_name(project: dict[str, str]) -> str:
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project: dict[str, str]) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License: {project['license']}",
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Typing :: Typed",
        "Description-Content-Type: text/markdown",
        "",
        readme,
    ]
    return "\n".join(lines)


def _package_files() -> list[Path]:
    base = ROOT / PACKAGE
    return sorted(
        p for p in base.iterdir() if p.is_file() and (p.suffix == ".py" or p.name == "py.typed")
    )


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(directory: str, files: list[tuple[str, bytes]]) -> str:
    project = _project()
    dist = _dist_name(project)
    info = f"{dist}-{project['version']}.dist-info"
    entries = list(files) + [
        (f"{info}/METADATA", _metadata(project).encode("utf-8")),
        (
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: tessera_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (f"{info}/top_level.txt", f"{PACKAGE}\n".encode("ascii")),
    ]
    record = "\n".join(_record_line(n, d) for n, d in entries) + f"\n{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode("utf-8")))
    filename = f"{dist}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            # A fixed date: the same sources make the same wheel.
            entry = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data)
    return filename


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: Any = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
    return []


def build_wheel(
    wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None
) -> str:
    files = [(f"{PACKAGE}/{p.name}", p.read_bytes()) for p in _package_files()]
    return _write_wheel(wheel_directory, files)


def build_editable(
    wheel_directory: str, config_settings: Any = None, metadata_directory: Any = None
) -> str:
    # A .pth line puts this directory on sys.path: edits to the sources take effect at once.
    pth = (str(ROOT) + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [(f"__editable__.{PACKAGE}.pth", pth)])


def build_sdist(sdist_directory: str, config_settings: Any = None) -> str:
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    members = [ROOT / "pyproject.toml", ROOT / "README.md", ROOT / "_build" / "tessera_build.py"]
    members += _package_files()
    filename = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as sdist:
        pkg_info = _metadata(project).encode("utf-8")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mtime, info.mode = len(pkg_info), int(time.time()), 0o644
        sdist.addfile(info, io.BytesIO(pkg_info))
        for path in members:
            sdist.add(path, arcname=f"{base}/{path.relative_to(ROOT).as_posix()}")
    return filename
