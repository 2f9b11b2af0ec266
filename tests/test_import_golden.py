"""Every bundled sample imports to the very bytes it imported to before import got faster: each
folder's event rows (every column, in order) and run heads, pinned as digests taken from the
importers as they stood (commit 96fc17f), read in process and by forked workers alike."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from import_checks import FIXTURES, snapshot
from procgrade.engine.importers import inspect_ai
from procgrade.engine.ingest import ingest_paths
from procgrade.engine.store import open_store

#: folder -> (event rows, sha256 of the rows as JSON lines, sha256 of the sorted (run, events, head)).
PINNED = {
    "atif": (180, "778b6d6b23f65d3b0a1f48f9dfa812522d8545a9d9761433eafc9128cce0b85e",
        "fc32459950a3be609c9fa2db65376cc7ac00539e26452f221e1a52fe6066c003"),
    "claude-code": (75, "7bbe89d27f5e972d2b35dfa83e636660c14ab11acd54e1403b03e9cb602ea992",
        "0110448a179698a765272a1ae0cbb3ae8bef08139a2903bcaf4294e41dd7e481"),
    "codex": (22, "7b389cbf796db03af9ec6ac4bf12de912a6232a9efb28e8a54f14e64f3e1185c",
        "721024f5eca7083f7889fa8773a4a73ad6e5372adb0dd2e477b7a9942f8aed37"),
    "devai": (75, "00220488302495e2300d47441ac702c0dd9e120f00f248b054a7b38ad394e699",
        "df70da44c1f0695305748dd1adfeb39ccdb3ac533028c21fcc7bcc40196418b0"),
    "inspect": (165, "a72819ba38d97810a8c067ad9b88349eedd068312238c0fb271ec288df434c67",
        "b13d4467aeb9a585a4f3e23c3545801759c7adb3dc39a626f7e4f2eb29f66daf"),
    "openhands": (304, "3a0c282ab72e35f0323aeb0d90d90bc30ccbacc2e17ce1dee7a267a20c4827d9",
        "f112d74c3b82551d0c81a136e03cd3a21c430dd74579dea6d6ef30bd5af705ca"),
    "swe-agent": (74, "6b3c3c1a60e608056264dc4516a4b6ffeb5f2106724508e2968dc2a1cf6b3e91",
        "d119e5aafd3f5da315fb16d730a5896bfce62096597e97aa1bea0518a5ba5511"),
    "terminal-bench-claude-code": (4927, "64f03d3f3cb462497c27e01b04b5f3bed4a660b2f2ee67dbefe21e3c238d24cf",
        "5d0c33b274f0efacbb9319744d550e82617a93a4c6186b9a8bc9d14fbebc02f6"),
}


def _digests(folder: Path, db: Path) -> tuple[int, str, str]:
    store = open_store(f"sqlite:///{db}", create=True)
    try:
        ingest_paths(store, [folder])
        _, events = snapshot(store)
        digest = hashlib.sha256()
        for row in events:
            digest.update(json.dumps(list(row), default=repr, ensure_ascii=False).encode() + b"\n")
        heads = json.dumps(sorted((i.run_id, i.event_count, i.head_hash) for i in store.runs()))
        return len(events), digest.hexdigest(), hashlib.sha256(heads.encode()).hexdigest()
    finally:
        store.close()


def test_every_sample_folder_is_pinned() -> None:
    assert sorted(p.name for p in FIXTURES.iterdir() if p.is_dir()) == sorted(PINNED)


@pytest.mark.parametrize("workers", ["0", "1", "2"])
@pytest.mark.parametrize("folder", sorted(PINNED))
def test_imported_rows_and_heads_are_byte_identical(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, folder: str, workers: str) -> None:
    monkeypatch.setenv("PROCGRADE_IMPORT_WORKERS", workers)
    monkeypatch.setattr(inspect_ai, "_WORKER_BYTES", 0)  # the Inspect log goes to the workers too
    assert _digests(FIXTURES / folder, tmp_path / "store.db") == PINNED[folder]
