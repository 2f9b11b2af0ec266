"""Grading evidence (screenshots, accessibility snapshots, quoted text, start logs), stored by content.

Events carry only digests; the bytes live in files named by their sha256 (``sha256/ab/abcdef...``) in a
folder beside the database (``<db file>.evidence/`` for SQLite; for PostgreSQL, a folder the caller names, by
default ``procgrade-evidence/`` in the current directory). Writing the same bytes twice is a no-op, nothing
is ever overwritten, and :meth:`EvidenceStore.read` checks the digest, so re-scoring never needs a browser
and gets the same bytes the grader saw.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from procgrade.engine.errors import ProcgradeError

__all__ = ["EvidenceStore", "EvidenceMissingError", "evidence_dir_for"]


class EvidenceMissingError(ProcgradeError):
    """An evidence file named by an event is missing or does not hash to its name."""


def evidence_dir_for(db: str) -> Path:
    """The evidence folder beside the database named by ``db`` (a URL or a SQLite file path)."""
    if db.startswith("sqlite:///"):
        return Path(db[len("sqlite:///"):] + ".evidence")
    if "://" not in db:
        return Path(db + ".evidence")
    return Path("procgrade-evidence")


class EvidenceStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def path_of(self, digest: str) -> Path:
        return self.root / "sha256" / digest[:2] / digest

    def put(self, data: bytes) -> str:
        """Store ``data`` (once) and return its sha256."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.path_of(digest)
        if path.exists():
            return digest
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest

    def read(self, digest: str) -> bytes:
        path = self.path_of(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise EvidenceMissingError(f"evidence {digest} is missing from {self.root}") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise EvidenceMissingError(f"evidence file {path} does not hash to its name: it was changed")
        return data

    def __contains__(self, digest: str) -> bool:
        return self.path_of(digest).is_file()
