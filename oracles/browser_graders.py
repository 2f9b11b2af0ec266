"""Graders of one test plan in real Chromium, behind one interface, and what a grade records.

A grader gets one plan and a :class:`BrowserSession` on the started product (one browser context per user of
the plan) and returns a :class:`GradeRecord`: per step, the actions it performed, a screenshot, the page's
text and accessibility snapshot (stored as evidence files, by digest), and per check the verdict and the
evidence it quotes from the screen. The grader rules (ViBench 2.0, Appendix C) hold for every grader: only
through the browser (no API calls, no database, no changes to the page's code), no reloads a step does not
allow, every check decided from what the page shows and quoted; a step passes only if every check in it
passes, and a plan only if every step does.

Graders are registered by name (:data:`GRADERS`): ``scripted`` (:class:`ScriptedGrader`, here: Playwright
locators by role, label or visible text, deterministic) and ``agent`` (:mod:`procgrade.oracles.browser_agent`, an LLM
acting through Playwright tools).

:func:`evidence_problem` is the protocol's test of a grade's evidence: every check needs a quote, and every
line of a quote must be on the screen the step recorded (its page text, address or accessibility snapshot).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from procgrade.oracles.browser_plans import Action, Check, Plan, Step
from procgrade.oracles.evidence_store import EvidenceStore

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "GRADERS",
    "CheckRecord",
    "StepRecord",
    "GradeRecord",
    "Observation",
    "BrowserSession",
    "Grader",
    "ScriptedGrader",
    "GraderRuleBroken",
    "launch_chromium",
    "evidence_problem",
    "normal_text",
    "register_grader",
    "make_grader",
]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
#: Milliseconds an action waits for its control to appear and be actionable, and a page load may take.
ACTION_TIMEOUT_MS = 8000
NAVIGATION_TIMEOUT_MS = 30000
_EXCERPT = 400


def normal_text(text: str) -> str:
    """Whitespace collapsed and case folded: how quotes and wordings are compared with the screen."""
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class CheckRecord:
    says: str
    passed: bool
    evidence: str
    detail: str = ""


@dataclass(frozen=True)
class StepRecord:
    index: int
    title: str
    user: str
    actions: list[str]
    passed: bool
    checks: list[CheckRecord]
    url: str = ""
    screenshot: str | None = None
    page_text: str | None = None
    snapshot: str | None = None
    #: Digest of the canonical JSON of this step's quoted evidence (one entry per check).
    quotes: str | None = None


@dataclass
class GradeRecord:
    """One grade of one plan. ``passed`` is None when the grade is discarded (``discarded`` says why)."""

    grader: str
    passed: bool | None
    steps: list[StepRecord] = field(default_factory=list)
    discarded: str | None = None
    failure: str | None = None
    seed: dict[str, Any] | None = None
    product: dict[str, Any] | None = None
    model: str | None = None

    def evidence_digests(self) -> list[str]:
        out: list[str] = []
        for part in (self.product or {}, self.seed or {}):
            out += [v for k, v in sorted(part.items()) if k.endswith("_sha256") and v]
        for step in self.steps:
            out += [d for d in (step.screenshot, step.page_text, step.snapshot, step.quotes) if d]
        return list(dict.fromkeys(out))

    def as_details(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: v for k, v in data.items() if v is not None and k not in ("grader", "passed", "discarded")}


class GraderRuleBroken(Exception):
    """The grader broke a grader rule (an API call, a reload the plan does not allow, ...): the grade is discarded.
    ``record`` keeps what the grade had recorded until then (its steps, its model), for audit."""

    def __init__(self, message: str, record: "GradeRecord | None" = None) -> None:
        super().__init__(message)
        self.record = record


@dataclass(frozen=True)
class Observation:
    """What the user sees after an action: the address, the page's visible text, its accessibility snapshot and
    a screenshot."""

    url: str
    text: str
    snapshot: str
    screenshot: bytes

    @property
    def screen(self) -> str:
        return f"address bar: {self.url}\n{self.text}\n{self.snapshot}"


def launch_chromium(playwright: Any) -> Any:
    """Debian's Chromium through Playwright (no browser is downloaded)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


class BrowserSession:
    """The started product in one browser: a context (own cookies and storage) and page per user."""

    def __init__(self, browser: Any, base_url: str, users: list[str]) -> None:
        self.browser, self.base_url = browser, base_url.rstrip("/")
        self._contexts: dict[str, Any] = {}
        self._pages: dict[str, Any] = {}
        self.users = list(users)

    def page(self, user: str) -> Any:
        if user not in self._pages:
            context = self.browser.new_context(viewport={"width": 1100, "height": 800}, base_url=self.base_url,
                                               timezone_id="UTC", locale="en-US")
            # Loopback only: the product under test, nothing else.
            context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(self.base_url)
                          else route.abort())
            page = context.new_page()
            page.set_default_timeout(ACTION_TIMEOUT_MS)
            page.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
            page.goto(self.base_url + "/", wait_until="load")
            self._contexts[user], self._pages[user] = context, page
        return self._pages[user]

    def observe(self, page: Any) -> Observation:
        page.wait_for_load_state("load")
        text = page.inner_text("body")
        snapshot = page.locator("body").aria_snapshot()
        return Observation(page.url, text, snapshot, page.screenshot())

    def close(self) -> None:
        for context in self._contexts.values():
            try:
                context.close()
            except Exception:  # noqa: BLE001 - a crashed context must not hide the grade
                pass

    @contextmanager
    def opened(self) -> Iterator["BrowserSession"]:
        try:
            yield self
        finally:
            self.close()


class Grader(Protocol):
    name: str

    def grade(self, plan: Plan, session: BrowserSession, evidence: EvidenceStore) -> GradeRecord:
        """Grade ``plan`` on the product behind ``session`` (raise :class:`GraderRuleBroken` to discard)."""
        ...


GRADERS: dict[str, Callable[..., Grader]] = {}


def register_grader(name: str) -> Callable[[Callable[..., Grader]], Callable[..., Grader]]:
    def add(factory: Callable[..., Grader]) -> Callable[..., Grader]:
        GRADERS[name] = factory
        return factory

    return add


def make_grader(name: str, **options: Any) -> Grader:
    if name == "agent" and "agent" not in GRADERS:
        import procgrade.oracles.browser_agent  # noqa: F401 - registers itself
    if name not in GRADERS:
        from procgrade.engine.errors import ProcgradeError

        raise ProcgradeError(f"unknown grader {name!r} (available: scripted, agent)")
    return GRADERS[name](**options)


def record_step(evidence: EvidenceStore, step_index: int, step: Step, user: str, actions: list[str],
                checks: list[CheckRecord], obs: Observation) -> StepRecord:
    """Store the step's screenshot, page text, snapshot and quotes; a step passes only if every check does."""
    from procgrade.engine.canonical import canonical_json

    quotes = [{"says": c.says, "passed": c.passed, "evidence": c.evidence} for c in checks]
    return StepRecord(
        index=step_index, title=step.title, user=user, actions=actions, passed=all(c.passed for c in checks),
        checks=checks, url=obs.url, screenshot=evidence.put(obs.screenshot),
        page_text=evidence.put(f"address bar: {obs.url}\n{obs.text}".encode()),
        snapshot=evidence.put(obs.snapshot.encode()), quotes=evidence.put(canonical_json(quotes)))


def evidence_problem(grade: GradeRecord, evidence: EvidenceStore) -> str | None:
    """Why the grade's evidence is not on-screen evidence (None when it is): a step without checks, a check
    without a quote, or a quoted line that the step's recorded screen does not show."""
    if not grade.steps:
        return "the grade records no step"
    for step in grade.steps:
        if not step.checks:
            return f"step {step.index + 1} records no check"
        if step.page_text is None or step.snapshot is None:
            return f"step {step.index + 1} recorded no screen"
        screen = normal_text(evidence.read(step.page_text).decode("utf-8", "replace") + "\n"
                             + evidence.read(step.snapshot).decode("utf-8", "replace"))
        for check in step.checks:
            lines = [line for line in check.evidence.splitlines() if line.strip()]
            if not lines:
                return f"step {step.index + 1}: the check {check.says!r} quotes no evidence"
            for line in lines:
                if normal_text(line) not in screen:
                    return (f"step {step.index + 1}: the check {check.says!r} quotes {line.strip()[:120]!r}, "
                            "which is not on the screen the step recorded")
    return None


# --- the scripted grader ----------------------------------------------------------------------------------


def _lines_with(text: str, wording: str) -> str | None:
    want = normal_text(wording)
    for line in text.splitlines():
        if want in normal_text(line):
            return line.strip()
    return wording if want in normal_text(text) else None


def _excerpt(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    out, size = [], 0
    for line in lines:
        if size + len(line) > _EXCERPT and out:
            break
        out.append(line[:_EXCERPT])
        size += len(line)
    return "\n".join(out) or "(the page shows no text)"


def _locate(page: Any, how: Any) -> Any:
    if how.role is not None:
        if how.name is not None:
            return page.get_by_role(how.role, name=how.name, exact=True).first
        return page.get_by_role(how.role).first
    if how.label is not None:
        return page.get_by_label(how.label, exact=True).first
    return page.get_by_text(how.text, exact=True).first


def perform(page: Any, action: Action, base_url: str) -> None:
    """Do one plan action the way a user would (typing key by key)."""
    verb = action.verb
    if verb == "goto":
        page.goto(base_url + action.goto, wait_until="load")
    elif verb == "click":
        _locate(page, action.click).click()
    elif verb == "fill":
        assert action.fill is not None
        field_ = page.get_by_label(action.fill.label, exact=True).first
        field_.fill("")
        if action.fill.value:
            field_.press_sequentially(action.fill.value)
    elif verb == "select":
        assert action.select is not None
        page.get_by_label(action.select.label, exact=True).first.select_option(label=action.select.option)
    elif verb == "press":
        page.keyboard.press(action.press)
    else:
        page.reload(wait_until="load")
    page.wait_for_load_state("load")


def _snapshot_line(snapshot: str, pattern: str) -> str | None:
    for line in snapshot.splitlines():
        if pattern.casefold() in line.casefold():
            return line.strip()
    return None


def evaluate_check(page: Any, check: Check, obs: Observation) -> CheckRecord:
    """Decide one check from what the page shows, quoting it."""
    kind = check.kind
    if kind in ("text_visible", "text_absent"):
        wanted = kind == "text_visible"  # text_absent passes exactly when text_visible would fail
        for wording in check.wordings:
            line = _lines_with(obs.text, wording)
            if line is not None:
                return CheckRecord(check.says, wanted, line, f"shows {wording!r}")
        return CheckRecord(check.says, not wanted, _excerpt(obs.text),
                           f"none of {', '.join(repr(w) for w in check.wordings)} is on screen")
    if kind == "field_value":
        assert check.field_value is not None
        spec = check.field_value
        locator = page.get_by_label(spec.label, exact=True)
        if locator.count() == 0:
            return CheckRecord(check.says, False, _excerpt(obs.text), f"no field labelled {spec.label!r}")
        value = locator.first.input_value()
        line = _snapshot_line(obs.snapshot, f'"{spec.label}"') or _excerpt(obs.text)
        return CheckRecord(check.says, value == spec.value, line, f"the field holds {value!r}")
    if kind == "count":
        assert check.count is not None
        spec = check.count
        locator = page.get_by_role(spec.role, name=spec.name) if spec.name else page.get_by_role(spec.role)
        found = locator.count()
        lines = [line.strip() for line in obs.snapshot.splitlines()
                 if line.strip().startswith(f"- {spec.role}") and (spec.name is None or spec.name.casefold() in line.casefold())]
        quote = "\n".join(lines) if lines else _excerpt(obs.text)
        return CheckRecord(check.says, found == spec.equals, quote, f"{found} {spec.role}(s) shown, {spec.equals} expected")
    assert check.url is not None
    from urllib.parse import urlsplit

    path = urlsplit(obs.url).path or "/"
    return CheckRecord(check.says, path == check.url, f"address bar: {obs.url}", f"the page is {path}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return re.sub(r"\s+", " ", text[0]) if text else type(exc).__name__


@register_grader("scripted")
class ScriptedGrader:
    """Plays the plan's actions with Playwright locators and decides each check from the page's text,
    accessibility snapshot and address. Deterministic: the same product gives the same verdicts. A step whose
    action cannot be done (its control is not there) fails, quoting what the page shows instead; the following
    steps are still graded against what actually happened."""

    name = "scripted"

    def __init__(self, **_: Any) -> None:
        pass

    def grade(self, plan: Plan, session: BrowserSession, evidence: EvidenceStore) -> GradeRecord:
        from playwright.sync_api import Error as PlaywrightError

        record = GradeRecord(self.name, None)
        for index, step in enumerate(plan.steps):
            user = plan.user_of(step)
            page = session.page(user)
            done: list[str] = []
            failed_action: CheckRecord | None = None
            for action in step.actions:
                if action.reload and not step.allow_reload:
                    raise GraderRuleBroken(f"step {index + 1}: a reload the plan does not allow")
                try:
                    perform(page, action, session.base_url)
                    done.append(action.describe())
                except PlaywrightError as exc:
                    done.append(f"could not {action.describe()}: {_first_line(exc)}")
                    failed_action = CheckRecord(f"The user can {action.describe()}", False, "", _first_line(exc))
                    break
            obs = session.observe(page)
            checks = [evaluate_check(page, check, obs) for check in step.checks]
            if failed_action is not None:
                checks.insert(0, CheckRecord(failed_action.says, False, _excerpt(obs.text), failed_action.detail))
            record.steps.append(record_step(evidence, index, step, user, done, checks, obs))
        record.passed = all(s.passed for s in record.steps)
        if not record.passed:
            bad = next(s for s in record.steps if not s.passed)
            check = next(c for c in bad.checks if not c.passed)
            record.failure = f"step {bad.index + 1} ({bad.title}): {check.says}: {check.detail}"
        return record
