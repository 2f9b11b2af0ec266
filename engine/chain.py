"""The hash chain over a run's events: ``hash[n] = sha256(hash[n-1] || canonical(header[n]))``.

The header is the event with its payload replaced by the payload's sha256, so a
payload is hashed once and the chain stays cheap; the chain still covers every
byte of the payload through that digest. The chain starts from 32 zero bytes.
"""

from __future__ import annotations

import hashlib

__all__ = ["GENESIS", "link"]

#: The "previous hash" of seq 0, as hex.
GENESIS = "00" * 32


def link(prev_hash: str, header: bytes) -> str:
    """The hash of an event whose canonical header is ``header``, following ``prev_hash``."""
    return hashlib.sha256(bytes.fromhex(prev_hash) + header).hexdigest()
