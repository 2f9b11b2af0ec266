"""Canonical JSON of payloads holding floats: procgrade's fast path against rfc8785.dumps, same values.

Imported harness payloads carry floats (timestamps, working times, scores, token costs), which
used to send the whole payload through rfc8785's pure-Python serialiser. Both sides run in this
process, interleaved, timed in CPU seconds; the outputs are checked equal first.

    python bench/canonical.py [--payloads 20000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import rfc8785

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from procgrade.engine.canonical import canonical_json  # noqa: E402


def payloads(n: int) -> list[dict]:
    """Inspect-like event payloads: a message with text, tool calls, usage and float timings."""
    rng = random.Random(7)
    out = []
    for i in range(n):
        out.append({
            "event": "model", "timestamp": 1_764_000_000.0 + i * 0.137, "working_start": rng.random() * 300,
            "model": "openai/gpt-4o", "config": {"temperature": 0.7, "top_p": 1.0, "max_tokens": 4096},
            "output": {"choices": [{"message": {"role": "assistant", "content": "Let me look at the page. " * rng.randint(1, 40),
                                                "tool_calls": [{"id": f"call_{i}", "function": "web_browser_click",
                                                                "arguments": {"element_id": rng.randint(1, 500)}}]},
                                    "stop_reason": "tool_calls", "logprobs": None}],
                       "usage": {"input_tokens": rng.randint(100, 90_000), "output_tokens": rng.randint(1, 900),
                                 "total_tokens": rng.randint(100, 91_000), "input_tokens_cache_read": 0},
                       "time": rng.random() * 20},
            "scores": [rng.random(), 1.0, 0.0, 1e-7 * rng.random()],
        })
    return out


def cpu(fn, values: list[dict]) -> float:
    start = time.process_time()
    for value in values:
        fn(value)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payloads", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    values = payloads(args.payloads)
    assert all(canonical_json(v) == rfc8785.dumps(v) for v in values[:2000]), "fast path differs from rfc8785"
    size = sum(len(rfc8785.dumps(v)) for v in values[:2000]) / min(2000, len(values))
    reference, fast = [], []
    for _ in range(args.rounds):
        reference.append(cpu(rfc8785.dumps, values))
        fast.append(cpu(canonical_json, values))
    r, f = min(reference), min(fast)
    print(f"{len(values):,} payloads with floats, {size:,.0f} bytes each, best of {args.rounds} (CPU s)")
    print(f"rfc8785.dumps   {r:7.2f} s  {len(values) / r:10,.0f} payloads/s")
    print(f"canonical_json  {f:7.2f} s  {len(values) / f:10,.0f} payloads/s")
    print(f"canonical_json / rfc8785.dumps: {f / r:.2f}x the time")


if __name__ == "__main__":
    main()
