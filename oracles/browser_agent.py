"""The agentic browser grader: an LLM operates Chromium through Playwright tools, one plan step at a time.

As ViBench 2.0's grader (Appendix C) it gets one plan and the rules all plans share, acts like a human tester
through the browser only (and at screen coordinates, ``click_at``, when it cannot locate an element), writes
its actions as it goes (no fixed script, so a build with a different interface
does not break it), and after each action sees the page's accessibility snapshot (and, when the endpoint takes
images, a screenshot); only the two newest screens are kept in full, older ones become notes naming their saved
files. For each step it reports every check with a verdict and a quote of what it saw on screen.

Grader rules enforced here (a broken rule discards the grade, :class:`GraderRuleBroken`): only the tools below
(no API calls: a ``goto`` to ``/api`` or to another host is refused), no reload in a step that does not allow
one, a report for every check of the step exactly once, no reply without a tool call, at most
``max_turns_per_step`` tool calls per step. Whether each quote is on screen is checked by the protocol
(:func:`procgrade.oracles.browser_graders.evidence_problem`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from procgrade.oracles.browser_graders import (
    BrowserSession,
    CheckRecord,
    GradeRecord,
    GraderRuleBroken,
    Observation,
    record_step,
    register_grader,
)
from procgrade.oracles.browser_plans import Action, FillSpec, Locator, Plan, SelectSpec, Step
from procgrade.oracles.evidence_store import EvidenceStore
from procgrade.oracles.grader_llm import ChatClient, client_from_config

__all__ = ["AgentGrader", "GRADER_RULES", "TOOLS"]

GRADER_RULES = """You are a meticulous human tester grading one test plan of a finished web product.
Rules:
- Work only through the browser tools. Never call an API, touch a database or change the page's code.
- Follow the plan's steps in order, acting as the step's user. Do the step's actions, then judge its checks.
- Reload the page only in a step that allows reloads.
- Judge each check solely from what the page shows. Quote, word for word, the text on screen that decides it
  (copy it from the latest screen; for an absent text, quote what the page shows instead).
- Never work around a defect: if something does not work as the plan says, the check fails.
- Accept the wording variants the plan lists; layout and control placement are the builder's choice.
- When a step's checks are judged, call report_step once with every check of the step."""

_LOCATOR = {"role": {"type": "string", "description": "ARIA role, e.g. button, link, textbox"},
            "name": {"type": "string", "description": "accessible name (with role)"},
            "label": {"type": "string", "description": "visible label of a form field"},
            "text": {"type": "string", "description": "visible text of the control"}}


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


TOOLS = [
    _tool("click", "Click a control, found by role and name, by label, or by visible text.", _LOCATOR, []),
    _tool("click_at", "Click at screen coordinates of the latest screenshot, when no role, label or text finds "
          "the control.", {"x": {"type": "integer"}, "y": {"type": "integer"}}, ["x", "y"]),
    _tool("type", "Clear a form field found by its label and type text into it key by key.",
          {"label": {"type": "string"}, "text": {"type": "string"}}, ["label", "text"]),
    _tool("select", "Choose an option (by its visible text) in a select field found by its label.",
          {"label": {"type": "string"}, "option": {"type": "string"}}, ["label", "option"]),
    _tool("press", "Press a key (e.g. Enter, Tab).", {"key": {"type": "string"}}, ["key"]),
    _tool("goto", "Open a path of the product in the address bar, e.g. /login.", {"path": {"type": "string"}}, ["path"]),
    _tool("reload", "Reload the page (only in a step that allows reloads).", {}, []),
    _tool("report_step", "Report the verdict of every check of the current step, quoting the screen.",
          {"checks": {"type": "array", "items": {"type": "object", "properties": {
              "check": {"type": "integer", "description": "the check's number in the step, from 1"},
              "passed": {"type": "boolean"},
              "evidence": {"type": "string", "description": "the text on screen that decides it, quoted exactly"}},
              "required": ["check", "passed", "evidence"], "additionalProperties": False}},
           "note": {"type": "string"}}, ["checks"]),
]
_KEPT_SCREENS = 2


def _screen_text(obs: Observation) -> str:
    return f"address bar: {obs.url}\naccessibility snapshot:\n{obs.snapshot}"


def _step_prompt(plan: Plan, index: int, step: Step) -> str:
    lines = [f"Step {index + 1} of {len(plan.steps)}: {step.title}", f"You act as user {plan.user_of(step)!r}.",
             "Reloads are allowed in this step." if step.allow_reload else "Reloads are NOT allowed in this step."]
    if step.actions:
        lines.append("Actions:")
        lines += [f"  - {a.describe()}" for a in step.actions]
    lines.append("Checks (what the user must see afterwards):")
    for n, check in enumerate(step.checks, 1):
        extra = f" (accepted wordings: {', '.join(repr(w) for w in check.wordings)})" if check.wordings else ""
        lines.append(f"  {n}. {check.says}{extra}")
    return "\n".join(lines)


def _action_of(name: str, args: dict[str, Any]) -> Action:
    """The tool call as a plan action (validated like a plan's own actions)."""
    if name == "click":
        return Action(click=Locator(**{k: v for k, v in args.items() if k in _LOCATOR}))
    if name == "type":
        return Action(fill=FillSpec(label=args["label"], value=args["text"]))
    if name == "select":
        return Action(select=SelectSpec(label=args["label"], option=args["option"]))
    if name == "press":
        return Action(press=args["key"])
    if name == "goto":
        return Action(goto=args["path"])
    return Action(reload=True)


@register_grader("agent")
class AgentGrader:
    name = "agent"

    def __init__(self, client: ChatClient | None = None, *, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, max_turns_per_step: int = 25, send_screenshots: bool = False) -> None:
        self.client = client or client_from_config(base_url, model, api_key)
        self.max_turns = max_turns_per_step
        self.send_screenshots = send_screenshots

    def grade(self, plan: Plan, session: BrowserSession, evidence: EvidenceStore) -> GradeRecord:
        record = GradeRecord(self.name, None, model=self.client.model)
        try:
            return self._grade(plan, session, evidence, record)
        except GraderRuleBroken as exc:
            exc.record = record
            raise

    def _grade(self, plan: Plan, session: BrowserSession, evidence: EvidenceStore, record: GradeRecord) -> GradeRecord:
        from playwright.sync_api import Error as PlaywrightError

        from procgrade.oracles.browser_graders import perform

        overview = "\n".join(f"- step {i + 1}: {s.title}" for i, s in enumerate(plan.steps))
        messages: list[dict[str, Any]] = [{"role": "system", "content": GRADER_RULES + "\n\n"
                                           f"The plan: {plan.title}\nUsers: {', '.join(plan.users)}\n{overview}"}]
        screens: list[tuple[int, str]] = []  # (message index, saved snapshot digest)

        def show(obs: Observation) -> str:
            digest = evidence.put(obs.snapshot.encode())
            screens.append((len(messages), digest))
            for idx, saved in screens[:-_KEPT_SCREENS]:
                msg = messages[idx]
                if isinstance(msg.get("content"), str) and "accessibility snapshot:" in msg["content"]:
                    head = msg["content"].split("accessibility snapshot:", 1)[0]
                    msg["content"] = head + f"(an older screen, saved as snapshot {saved})"
            return _screen_text(obs)

        for index, step in enumerate(plan.steps):
            user = plan.user_of(step)
            page = session.page(user)
            obs = session.observe(page)
            messages.append({"role": "user", "content": _step_prompt(plan, index, step) + "\n\nThe screen now:\n"
                             + show(obs)})
            done: list[str] = []
            for _turn in range(self.max_turns):
                reply = self.client.chat(messages, TOOLS)
                if not reply.tool_calls:
                    raise GraderRuleBroken(f"step {index + 1}: the grader replied without a tool call")
                messages.append({"role": "assistant", "content": reply.content, "tool_calls": [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments or
                                                                   json.dumps(c.arguments)}} for c in reply.tool_calls]})
                report: list[CheckRecord] | None = None
                for call in reply.tool_calls:
                    if call.arguments is None:
                        raise GraderRuleBroken(f"step {index + 1}: tool {call.name} got arguments that are not JSON")
                    if call.name == "report_step":
                        report = self._report(index, step, call.arguments)
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": "recorded"})
                        later = reply.tool_calls[reply.tool_calls.index(call) + 1:]
                        messages += [{"role": "tool", "tool_call_id": c.id, "content": "not run: the step is reported"}
                                     for c in later]
                        break
                    if call.name not in {t["function"]["name"] for t in TOOLS}:
                        raise GraderRuleBroken(f"step {index + 1}: unknown tool {call.name!r}")
                    if call.name == "reload" and not step.allow_reload:
                        raise GraderRuleBroken(f"step {index + 1}: a reload the plan does not allow")
                    if call.name == "goto" and (not str(call.arguments.get("path", "")).startswith("/")
                                                or str(call.arguments.get("path", "")).startswith(("/api", "//"))):
                        raise GraderRuleBroken(f"step {index + 1}: goto {call.arguments.get('path')!r} is not a page "
                                               "of the product (API calls and other hosts are not allowed)")
                    if call.name == "click_at":
                        x, y = call.arguments.get("x"), call.arguments.get("y")
                        if not isinstance(x, int) or not isinstance(y, int) or not (0 <= x < 4000 and 0 <= y < 4000):
                            result = "error: x and y must be whole pixel coordinates on the screenshot"
                        else:
                            page.mouse.click(x, y)
                            page.wait_for_load_state("load")
                            result = "done"
                        done.append(f"click at ({x}, {y}): {result}")
                        obs = session.observe(page)
                        messages.append({"role": "tool", "tool_call_id": call.id,
                                         "content": f"result: {result}\nThe screen now:\n{show(obs)}"})
                        continue
                    try:
                        action = _action_of(call.name, call.arguments)
                    except (KeyError, ValueError, TypeError) as exc:
                        result = f"error: bad arguments: {' '.join(str(exc).split())[:300]}"
                        done.append(f"{call.name} {call.raw_arguments}: {result}")
                    else:
                        try:
                            perform(page, action, session.base_url)
                            result = "done"
                            done.append(action.describe())
                        except PlaywrightError as exc:
                            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                            result = f"error: {first}"
                            done.append(f"could not {action.describe()}: {first}")
                    obs = session.observe(page)
                    messages.append({"role": "tool", "tool_call_id": call.id,
                                     "content": f"result: {result}\nThe screen now:\n{show(obs)}"})
                    if self.send_screenshots:
                        messages.append({"role": "user", "content": [
                            {"type": "text", "text": "Screenshot after the action:"},
                            {"type": "image_url", "image_url": {
                                "url": "data:image/png;base64," + base64.b64encode(obs.screenshot).decode()}}]})
                        self._forget_old_images(messages, evidence)
                if report is not None:
                    obs = session.observe(page)
                    record.steps.append(record_step(evidence, index, step, user, done, report, obs))
                    break
            else:
                raise GraderRuleBroken(f"step {index + 1}: no report after {self.max_turns} turns")
        record.passed = all(s.passed for s in record.steps)
        if not record.passed:
            bad = next(s for s in record.steps if not s.passed)
            check = next(c for c in bad.checks if not c.passed)
            record.failure = f"step {bad.index + 1} ({bad.title}): {check.says}: {check.evidence[:200]}"
        return record

    @staticmethod
    def _report(index: int, step: Step, args: dict[str, Any]) -> list[CheckRecord]:
        items = args.get("checks")
        if not isinstance(items, list):
            raise GraderRuleBroken(f"step {index + 1}: report_step without a list of checks")
        by_number: dict[int, dict[str, Any]] = {}
        for item in items:
            number = item.get("check") if isinstance(item, dict) else None
            if not isinstance(number, int) or not 1 <= number <= len(step.checks) or number in by_number:
                raise GraderRuleBroken(f"step {index + 1}: report_step names check {number!r} wrongly or twice")
            if not isinstance(item.get("passed"), bool) or not isinstance(item.get("evidence"), str):
                raise GraderRuleBroken(f"step {index + 1}: check {number} needs passed (true/false) and evidence")
            by_number[number] = item
        if len(by_number) != len(step.checks):
            missing = sorted(set(range(1, len(step.checks) + 1)) - set(by_number))
            raise GraderRuleBroken(f"step {index + 1}: report_step leaves out check(s) {missing}")
        return [CheckRecord(check.says, by_number[n]["passed"], by_number[n]["evidence"], "as the grader reported")
                for n, check in enumerate(step.checks, 1)]

    @staticmethod
    def _forget_old_images(messages: list[dict[str, Any]], evidence: EvidenceStore) -> None:
        images = [i for i, m in enumerate(messages) if isinstance(m.get("content"), list)]
        for i in images[:-_KEPT_SCREENS]:
            data = messages[i]["content"][1]["image_url"]["url"].split(",", 1)[1]
            digest = evidence.put(base64.b64decode(data))
            messages[i] = {"role": "user", "content": f"(an older screenshot, saved as {digest})"}
