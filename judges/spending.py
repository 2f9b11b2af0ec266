"""What judging spends, against the caps: tokens and dollars spent and reserved, thread-safe.

Before every call the caller reserves the worst case of that call (its prompt tokens and a reply
as long as ``max_tokens``); the call is made only when the worst case fits under both caps beside
what was spent and what calls in flight reserved, so a cap is never crossed. When the reply comes,
the reservation is replaced by what the endpoint says was used. Costs are exact rationals.
"""

from __future__ import annotations

import threading
from fractions import Fraction

from procgrade.engine.errors import ProcgradeError
from procgrade.judges.client import Endpoint, Usage

__all__ = ["BudgetExhausted", "Spending"]


class BudgetExhausted(ProcgradeError):
    """The next call could cross the cost cap or the token cap."""


class Spending:
    """Tokens and cost spent and reserved, against the caps (thread-safe)."""

    def __init__(self, endpoint: Endpoint, max_cost: Fraction | None, max_tokens: int | None) -> None:
        if max_cost is not None and endpoint.price is None:
            raise ProcgradeError("--max-cost needs the model's prices: --price-input and --price-output (USD per "
                                 "million tokens) or the config file's price_input and price_output")
        self.price, self.max_cost, self.max_tokens = endpoint.price, max_cost, max_tokens
        self._lock = threading.Lock()
        self.usage = Usage()
        self.cost = Fraction(0)
        self.calls = 0
        self._reserved_tokens = 0
        self._reserved_cost = Fraction(0)

    def worst(self, prompt_tokens: int, max_output: int) -> tuple[int, Fraction]:
        cost = self.price.cost(prompt_tokens, max_output) if self.price else Fraction(0)
        return prompt_tokens + max_output, cost

    def fits(self, tokens: int, cost: Fraction) -> str | None:
        """None, or which cap ``tokens``/``cost`` more would cross (caller holds the lock or accepts a race)."""
        if self.max_tokens is not None and self.usage.total + self._reserved_tokens + tokens > self.max_tokens:
            return (f"the token cap ({self.max_tokens}) could be crossed: {self.usage.total} spent, "
                    f"{self._reserved_tokens} in flight, up to {tokens} more needed")
        if self.max_cost is not None and self.cost + self._reserved_cost + cost > self.max_cost:
            return (f"the cost cap (${_money(self.max_cost)}) could be crossed: ${_money(self.cost)} spent, "
                    f"up to ${_money(cost)} more needed")
        return None

    def reserve(self, tokens: int, cost: Fraction) -> None:
        with self._lock:
            why = self.fits(tokens, cost)
            if why is not None:
                raise BudgetExhausted(why)
            self._reserved_tokens += tokens
            self._reserved_cost += cost

    def settle(self, tokens: int, cost: Fraction, usage: Usage) -> Fraction | None:
        actual = self.price.cost(usage.prompt_tokens, usage.completion_tokens) if self.price else None
        with self._lock:
            self._reserved_tokens -= tokens
            self._reserved_cost -= cost
            self.usage = self.usage + usage
            self.calls += 1
            if actual is not None:
                self.cost += actual
        return actual


def _money(value: Fraction) -> str:
    return f"{float(value):.6f}".rstrip("0").rstrip(".") if value else "0"
