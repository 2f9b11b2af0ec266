"""Signed seal receipts: tamper evidence that does not trust the database.

Whoever owns the database can disable its triggers and rewrite a run, its chain, its seal and
its scores so that every check made *inside* the database agrees again. A receipt is made when a
run is sealed (``procgrade seal --sign KEY``): the run id, its event count and head hash, the
digests of its stored rule sets and score documents, and the time, signed with Ed25519 (the
``cryptography`` package). Receipts go into an append-only log kept outside the database: a
folder of files ``00000001.json``, ``00000002.json``, ... each holding the sha256 of the one
before, so a receipt removed or changed in the middle breaks the log's own chain.
``verify-log --receipts DIR --public-key K`` checks that chain, every signature, and the store
against every receipt: a rewrite of a receipted run cannot be hidden without the private key.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from procgrade.engine.canonical import canonical_json
from procgrade.engine.chain import GENESIS
from procgrade.engine.errors import InputError, ProcgradeError
from procgrade.engine.store import EventStore
from procgrade.engine.store.scores import ScoreStore

__all__ = ["RECEIPT_FORMAT", "ReceiptProblem", "generate_keys", "write_receipt", "verify_receipts"]

RECEIPT_FORMAT = "procgrade-seal-receipt/1"
_NAME = re.compile(r"^(\d{8})\.json$")


@dataclass(frozen=True)
class ReceiptProblem:
    run_id: str | None
    seq: int | None
    reason: str

    def __str__(self) -> str:
        where = "receipts" if self.run_id is None else self.run_id
        return f"{where}: " + (f"seq {self.seq}: " if self.seq is not None else "") + self.reason


def generate_keys(private_path: Path, public_path: Path) -> str:
    """Write a new Ed25519 key pair as PEM (the private key readable by its owner only);
    never overwrite a key. Returns the public key's fingerprint (sha256 of its raw bytes)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    for path in (private_path, public_path):
        if path.exists():
            raise InputError(str(path), None, None, "already exists: procgrade never overwrites a key")
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(private)
    public_path.write_bytes(public)
    return _fingerprint(key.public_key())


def _fingerprint(public_key: Any) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def _load_private(path: Path) -> Any:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        raise InputError(str(path), None, None, f"cannot read: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise InputError(str(path), None, None, f"not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(str(path), None, None, "not an Ed25519 private key (make one with `procgrade keygen`)")
    return key


def _load_public(path: Path) -> Any:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except OSError as exc:
        raise InputError(str(path), None, None, f"cannot read: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise InputError(str(path), None, None, f"not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(str(path), None, None, "not an Ed25519 public key")
    return key


def _receipt_files(directory: Path) -> list[tuple[int, Path]]:
    if not directory.exists():
        return []
    if not directory.is_dir():
        raise InputError(str(directory), None, None, "not a folder of receipts")
    found = []
    for path in directory.iterdir():
        match = _NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def _body_of(store: EventStore, run_id: str) -> dict[str, Any]:
    info = store.run(run_id)
    if not info.sealed:
        raise ProcgradeError(f"run {run_id} is not sealed: seal it before signing a receipt")
    scores = [s for s in ScoreStore(store).scores(run_id)]
    return {
        "run_id": run_id,
        "event_count": info.sealed_event_count,
        "head_hash": info.sealed_head_hash,
        "rulesets": sorted({s.ruleset_hash for s in scores}),
        "scores": [{"ruleset_hash": s.ruleset_hash, "engine_version": s.engine_version,
                    "run_event_count": s.run_event_count, "run_head_hash": s.run_head_hash,
                    "document_sha256": s.document_sha256} for s in scores],
    }


def write_receipt(store: EventStore, run_id: str, private_key: Path, directory: Path,
                  *, now: dt.datetime | None = None) -> Path:
    """Sign a receipt of the sealed run ``run_id`` and append it to the log in ``directory``."""
    key = _load_private(private_key)
    body = _body_of(store, run_id)
    body["format"] = RECEIPT_FORMAT
    body["signed_at"] = (now or dt.datetime.now(dt.timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body["public_key_sha256"] = _fingerprint(key.public_key())
    directory.mkdir(parents=True, exist_ok=True)
    while True:
        files = _receipt_files(directory)
        index = files[-1][0] + 1 if files else 1
        body["index"] = index
        body["prev"] = hashlib.sha256(files[-1][1].read_bytes()).hexdigest() if files else GENESIS
        signed = canonical_json(body)
        record = canonical_json({"receipt": body, "signature": key.sign(signed).hex()}) + b"\n"
        path = directory / f"{index:08d}.json"
        try:  # O_EXCL: a concurrent signer that took this index makes us take the next one
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(record)
            handle.flush()
            os.fsync(handle.fileno())
        return path


def _read_log(directory: Path, public_key: Any) -> tuple[list[dict[str, Any]], list[ReceiptProblem]]:
    """The receipts, in order, with every break of the log's chain or of a signature."""
    from cryptography.exceptions import InvalidSignature

    problems: list[ReceiptProblem] = []
    receipts: list[dict[str, Any]] = []
    prev = GENESIS
    expected = 1
    for index, path in _receipt_files(directory):
        if index != expected:
            problems.append(ReceiptProblem(None, None, f"{path.name}: receipt {expected} is missing from the log"))
        expected = index + 1
        data = path.read_bytes()
        try:
            record = orjson.loads(data)
            body, signature = record["receipt"], bytes.fromhex(record["signature"])
            if not isinstance(body, dict):
                raise TypeError("receipt is not an object")
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            problems.append(ReceiptProblem(None, None, f"{path.name}: not a receipt ({exc})"))
            prev = hashlib.sha256(data).hexdigest()
            continue
        try:
            public_key.verify(signature, canonical_json(body))
        except InvalidSignature:
            problems.append(ReceiptProblem(body.get("run_id"), None,
                                           f"{path.name}: the signature does not verify with this public key"))
            prev = hashlib.sha256(data).hexdigest()
            continue
        if body.get("index") != index:
            problems.append(ReceiptProblem(body.get("run_id"), None, f"{path.name}: signed as receipt {body.get('index')}"))
        if body.get("prev") != prev:
            problems.append(ReceiptProblem(body.get("run_id"), None,
                                           f"{path.name}: the log's chain is broken: the receipt before it was changed or removed"))
        prev = hashlib.sha256(data).hexdigest()
        receipts.append(body)
    return receipts, problems


def verify_receipts(store: EventStore, directory: Path, public_key: Path,
                    run_ids: list[str] | None = None) -> tuple[int, list[ReceiptProblem]]:
    """Check the receipts log's chain and signatures, and the store against every receipt
    (of ``run_ids``, default all). Returns (receipts checked, problems)."""
    from procgrade.engine.errors import UnknownRunError
    from procgrade.engine.log_verification import verify_log

    key = _load_public(public_key)
    if not directory.is_dir():
        raise InputError(str(directory), None, None, "no such folder of receipts")
    receipts, problems = _read_log(directory, key)
    wanted = None if run_ids is None else set(run_ids)
    heads: dict[str, str | None] = {}
    checked = 0
    for body in receipts:
        run_id = body.get("run_id")
        if not isinstance(run_id, str) or (wanted is not None and run_id not in wanted):
            continue
        checked += 1
        count, head = body.get("event_count"), body.get("head_hash")
        last = count - 1 if isinstance(count, int) and count else None
        try:
            info = store.run(run_id)
        except UnknownRunError:
            problems.append(ReceiptProblem(run_id, last, "a signed receipt names this run, but it is not stored"))
            continue
        if run_id not in heads:  # the chain recomputed from the stored events, not the stored hashes
            heads[run_id] = verify_log(store, run_id).head_hash
        if info.event_count != count or info.sealed_event_count != count:
            problems.append(ReceiptProblem(run_id, last, f"the receipt signs {count} events; the store holds "
                                           f"{info.event_count} (sealed at {info.sealed_event_count})"))
        stored = store.hash_at(run_id, last) if last is not None else None
        if count and (stored != head or (info.event_count == count and heads[run_id] != head)):
            problems.append(ReceiptProblem(run_id, last, f"the log was rewritten: the signed head {str(head)[:12]} "
                                           f"is not the stored chain's ({str(stored)[:12]})"))
        if info.sealed_head_hash != head:
            problems.append(ReceiptProblem(run_id, last, f"the run's sealed head {str(info.sealed_head_hash)[:12]} "
                                           f"is not the signed {str(head)[:12]}"))
        stored_scores = {(s.ruleset_hash, s.engine_version, s.run_head_hash): s for s in ScoreStore(store).scores(run_id)}
        for score in body.get("scores", []):
            key_ = (score["ruleset_hash"], score["engine_version"], score["run_head_hash"])
            seq = score["run_event_count"] - 1 if score["run_event_count"] else None
            found = stored_scores.get(key_)
            if found is None:
                problems.append(ReceiptProblem(run_id, seq, f"the score under rule set {score['ruleset_hash'][:16]} "
                                               "named by the signed receipt is no longer stored"))
            elif found.document_sha256 != score["document_sha256"] or found.run_event_count != score["run_event_count"]:
                problems.append(ReceiptProblem(run_id, seq, f"the score under rule set {score['ruleset_hash'][:16]} "
                                               "differs from the one the receipt signed"))
    return checked, problems
