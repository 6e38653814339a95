"""One local ``tessera serve`` for the demo, provisioned the way an operator would.

``tessera init`` provisions a fresh data directory (private claim directory, SQLite database,
principals file with one issuer token); the demo adds an agent principal per trusted host
session to the principals file, by token digest (docs/operations.md), writes the A2UI catalog,
starts ``tessera serve --port 0``, and has the issuer grant each host ``a2ui.call`` on the
catalog (a function call is an act the kernel decides, like a send). The service's claims live in ``<data>/claims``, one
marker file per claimed call, which is what the demo counts as claim markers.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

import tessera_client

REPO = Path(__file__).resolve().parents[2]
CLI = Path(os.environ.get("TESSERA_CLI", REPO / "packages" / "cli" / "dist" / "bin.js"))
NODE = os.environ.get("TESSERA_NODE", "node")


class LocalService:
    def __init__(self, catalog: dict[str, Any], sessions: list[str]) -> None:
        self.catalog = catalog
        self.sessions = sessions
        self.root = Path(tempfile.mkdtemp(prefix="tessera-py-two-workers-"))
        self.data = self.root / "data"
        #: Trusted host session → the bearer token of its agent principal.
        self.tokens: dict[str, str] = {}
        self.url = ""
        self._process: subprocess.Popen[str] | None = None

    @property
    def claims_dir(self) -> Path:
        return self.data / "claims"

    def __enter__(self) -> LocalService:
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        if not CLI.is_file():
            raise RuntimeError(f"{CLI} is missing: run `npm run build` in the repository first")
        made = subprocess.run(
            [NODE, str(CLI), "init", str(self.data), "--json"],
            check=True, capture_output=True, text=True, timeout=60,
        )
        issuer_token = json.loads(made.stdout)["issuerToken"]
        principals_file = self.data / "principals.json"
        principals = json.loads(principals_file.read_text(encoding="utf-8"))
        for index, session in enumerate(self.sessions):
            token = f"tsk_{secrets.token_urlsafe(24)}"
            self.tokens[session] = token
            principals["principals"].append({
                "tokenSha256": hashlib.sha256(token.encode()).hexdigest(),
                "namespaceId": "default",
                "actor": f"worker-host-{index}",
                "authority": "host",
                "session": session,
            })
        _write_private(principals_file, principals)
        a2ui = self.root / "a2ui.json"
        _write_private(a2ui, {"catalogs": [self.catalog]})
        self._process = subprocess.Popen(
            [NODE, str(CLI), "serve", "--data", str(self.data), "--port", "0", "--json",
             "--a2ui", str(a2ui)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        stdout = self._process.stdout
        assert stdout is not None
        for line in stdout:
            if '"event":"listening"' in line:
                self.url = json.loads(line)["url"]
                # Keep reading its log lines, so a full pipe never stalls the service.
                threading.Thread(target=_drain, args=(stdout,), daemon=True).start()
                break
        else:
            stderr = self._process.stderr.read() if self._process.stderr else ""
            raise RuntimeError(f"tessera serve exited before listening: {stderr.strip()[:2000]}")
        # An A2UI call is an act the kernel decides: each host's principal is granted
        # `a2ui.call` on the catalog's functions, by the issuer token init minted.
        issuer = tessera_client.TesseraClient(self.url, issuer_token)
        for index in range(len(self.sessions)):
            issuer.issue_grant(
                f"worker-host-{index}",
                [tessera_client.a2ui_function_capability(self.catalog["catalogId"])],
            )

    def __exit__(self, *exc: object) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)  # lets running requests answer, closes stores
            try:
                process.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
        shutil.rmtree(self.root, ignore_errors=True)


def _drain(stream: IO[str]) -> None:
    for _ in stream:
        pass


def _write_private(path: Path, value: Any) -> None:
    # Principals and A2UI files hold secrets: 0600, as the service's docs ask.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(value, out, indent=2)
    os.chmod(path, 0o600)
