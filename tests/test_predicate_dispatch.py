"""The rule monitor's dispatch by actor and kind: a matcher's check made for a (kind, actor) pair,
with the actor tests decided ahead, says what the whole matcher says of every row of that kind
by that actor (and by any actor of the same class, which shares the check)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from procgrade.engine.facts import extract_facts
from procgrade.rules.model import Predicate
from procgrade.rules.predicates import compile_any

sys.path.insert(0, str(Path(__file__).parent))
from rule_traces import ACTORS, predicates, trace  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(wanted=st.lists(predicates(), min_size=1, max_size=3), events=trace("dispatch", min_size=1),
       default=st.sampled_from(("model", "any")), actors=st.lists(st.sampled_from(ACTORS), min_size=1))
def test_kind_and_actor_check_agrees_with_the_matcher(wanted: list, events: list, default: str, actors: list) -> None:
    matcher = compile_any([Predicate.model_validate(p) for p in wanted], default)
    for i, event in enumerate(events):
        actor = actors[i % len(actors)]
        row = (event.seq, event.kind, actor, getattr(event, "stage", None), *extract_facts(event),
               getattr(event, "stage", None))
        check = matcher.for_kind(event.kind, actor)
        fast = False if check is None else (check is True or check(row))
        assert fast == matcher(row), (event.kind, actor, wanted)
        same_class = actor.split(":", 1)[0] + ":other"
        again = matcher.for_kind(event.kind, same_class)
        assert (again is None) == (check is None) and (again is True) == (check is True)
