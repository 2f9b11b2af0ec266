"""Counting tokens of what a judge is sent: a real tokenizer where installed, else a stated estimate.

With the ``tokens`` extra (``bpe-openai``: OpenAI's BPE tables compiled into the wheel, so nothing is
downloaded at run time, unlike ``tiktoken``, which fetches its tables on first use) counts are exact
for OpenAI models (``o200k_base`` for the gpt-4o/4.1/5 families, ``cl100k_base`` for gpt-4/3.5) and a
close guide for other models' tokenizers. Without it, the estimate is one token per three bytes of
UTF-8, rounded up: BPE tokenizers average about four bytes per token on English prose and about three
on code, JSON and logs (what a rendered run is), so the estimate errs towards too many tokens, which
keeps a rendered run inside its budget. Which counter was used is recorded with every verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["ESTIMATE_BYTES_PER_TOKEN", "TokenCounter", "token_counter"]

ESTIMATE_BYTES_PER_TOKEN = 3


@dataclass(frozen=True)
class TokenCounter:
    """``count(text)``; ``name`` says which tokenizer (``bpe-openai/o200k_base``) or ``estimate/3-bytes``."""

    name: str
    exact: bool
    _count: Callable[[str], int]

    def count(self, text: str) -> int:
        return self._count(text)


def _estimate(text: str) -> int:
    return -(-len(text.encode("utf-8")) // ESTIMATE_BYTES_PER_TOKEN)


def token_counter(model: str | None = None, *, prefer_estimate: bool = False) -> TokenCounter:
    """The best counter available for ``model``."""
    if not prefer_estimate:
        try:
            import bpe_openai
        except ImportError:
            pass
        else:
            try:
                name = bpe_openai.encoding_name_for_model(model) if model else "o200k_base"
            except Exception:  # an unknown (non-OpenAI) model: the newest OpenAI table is the closest guide
                name = "o200k_base"
            encoding = bpe_openai.get_encoding(name)

            def count(text: str) -> int:
                return len(encoding.encode(text, disallowed_special=()))

            return TokenCounter(f"bpe-openai/{name}", True, count)
    return TokenCounter(f"estimate/{ESTIMATE_BYTES_PER_TOKEN}-bytes", False, _estimate)
