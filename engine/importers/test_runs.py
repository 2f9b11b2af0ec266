"""Test runs recognised from the command line, with counts parsed from their output.

No harness logs "the agent ran the tests": it logs a shell command. Whether a
command is a test run is decided from its words (pytest, go test, cargo test,
npm test, make test, ...), per simple command of the line, so ``cd app && npm
test`` is a test run and ``pip install pytest`` is not. Counts come from the
runner's own summary line when the output shows one; a runner whose summary is
not recognised gives no counts, and the exit code alone decides pass or fail.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from engine.importers.shell import split_pipeline

__all__ = ["TestCounts", "is_test_command", "parse_test_counts"]


class TestCounts(NamedTuple):
    __test__ = False  # not a pytest test class
    passed: int | None = None
    failed: int | None = None
    errored: int | None = None
    skipped: int | None = None


# Programs that are test runners whatever their arguments.
_RUNNERS = {"pytest", "py.test", "jest", "vitest", "mocha", "rspec", "phpunit", "ctest", "tox", "nox",
            "karma", "ava", "tap", "nosetests", "trial", "behave", "cucumber", "bats", "prove"}
# program -> sub-command words that make it a test run.
_SUBCOMMAND_RUNNERS = {
    "go": {"test"}, "cargo": {"test", "nextest"}, "npm": {"test", "t"}, "yarn": {"test"}, "pnpm": {"test", "t"},
    "bun": {"test"}, "deno": {"test"}, "mvn": {"test", "verify"}, "gradle": {"test", "check"},
    "./gradlew": {"test", "check"}, "dotnet": {"test"}, "mix": {"test"}, "make": {"test", "check", "tests"},
    "swift": {"test"}, "sbt": {"test"}, "lein": {"test"}, "stack": {"test"}, "cabal": {"test"},
}
_MODULE_RUNNERS = {"pytest", "unittest", "nose", "nose2", "tox"}
_SCRIPT_NAMES = re.compile(r"(^|/)(run[_-]?tests?|runtests|test)\.(py|sh)$|(^|/)manage\.py$")


def is_test_command(command: str) -> bool:
    """True when some simple command of the line runs a test suite."""
    return any(_runs_tests(words) for words in split_pipeline(command))


def _runs_tests(words: list[str]) -> bool:
    while words and (words[0] in ("sudo", "time", "env", "nohup", "uv", "poetry", "pipenv", "hatch", "pdm", "npx", "pnpx", "bunx")
                     or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])
                     or (words[0] == "run" and len(words) > 1)
                     or (words[0] == "exec" and len(words) > 1)
                     or (words[0] == "bundle" and len(words) > 1)):
        words = words[1:]
    if words and words[0] == "timeout" and len(words) > 2:
        words = words[2:]
    if not words:
        return False
    program = words[0]
    base = program.rsplit("/", 1)[-1]
    if base in _RUNNERS:
        return True
    subcommands = _SUBCOMMAND_RUNNERS.get(program) or _SUBCOMMAND_RUNNERS.get(base)
    if subcommands:
        rest = [w for w in words[1:] if not w.startswith("-")]
        if program in ("npm", "yarn", "pnpm", "bun") and rest[:1] == ["run"]:
            rest = rest[1:]
            return bool(rest) and (rest[0] in ("test", "tests") or rest[0].startswith("test:"))
        return bool(rest) and rest[0] in subcommands
    if re.match(r"^python(\d(\.\d+)?)?$", base):
        args = words[1:]
        if "-m" in args:
            index = args.index("-m")
            if index + 1 < len(args) and args[index + 1] in _MODULE_RUNNERS:
                return True
        script = next((a for a in args if not a.startswith("-")), None)
        if script and script.endswith("manage.py"):
            return "test" in args
        if script and _SCRIPT_NAMES.search(script):
            return True
        return bool(script) and bool(re.search(r"(^|/)test_[^/]*\.py$|_test\.py$", script))
    if base in ("bash", "sh", "zsh", "dash"):
        script = next((w for w in words[1:] if not w.startswith("-")), None)
        return bool(script) and bool(_SCRIPT_NAMES.search(script)) and not script.endswith("manage.py")
    return bool(_SCRIPT_NAMES.search(program)) and not program.endswith("manage.py")


def _count(pattern: str, text: str) -> int | None:
    matches = re.findall(pattern, text)
    return int(matches[-1]) if matches else None


_PYTEST_SUMMARY = re.compile(r"(?m)^=+ (.*\b(?:passed|failed|error|errors|skipped|no tests ran)\b.*?) in [\d.]+s.*=+\s*$")
_PYTEST_SHORT = re.compile(r"(?m)^(\d+ (?:passed|failed)\b.*?) in [\d.]+s\s*$")


def _pytest(output: str) -> TestCounts | None:
    lines = _PYTEST_SUMMARY.findall(output) or _PYTEST_SHORT.findall(output)
    if not lines:
        return None
    summary = lines[-1]

    def number(word: str) -> int:
        found = re.findall(rf"(\d+) {word}\b", summary)
        return sum(int(n) for n in found)

    return TestCounts(number("passed") + number("xpassed"), number("failed"), number("errors?"),
                      number("skipped") + number("xfailed"))


def _unittest(output: str) -> TestCounts | None:
    ran = _count(r"(?m)^Ran (\d+) tests? in ", output)
    if ran is None:
        return None
    failures = _count(r"FAILED \((?:[^)]*?)failures=(\d+)", output) or 0
    errors = _count(r"FAILED \((?:[^)]*?)errors=(\d+)", output) or 0
    skipped = _count(r"(?:OK|FAILED) \((?:[^)]*?)skipped=(\d+)", output) or 0
    return TestCounts(ran - failures - errors - skipped, failures, errors, skipped)


def _cargo(output: str) -> TestCounts | None:
    results = re.findall(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", output)
    if not results:
        return None
    return TestCounts(sum(int(r[0]) for r in results), sum(int(r[1]) for r in results), 0,
                      sum(int(r[2]) for r in results))


def _jest(output: str) -> TestCounts | None:
    line = re.findall(r"(?m)^Tests:\s+(.*\d+ total)", output)
    if not line:
        return None
    summary = line[-1]
    get = lambda word: int(m.group(1)) if (m := re.search(rf"(\d+) {word}", summary)) else 0  # noqa: E731
    return TestCounts(get("passed"), get("failed"), 0, get("skipped") + get("todo"))


def _vitest(output: str) -> TestCounts | None:
    line = re.findall(r"(?m)^\s*Tests\s+(.*\(\d+\))", output)
    if not line:
        return None
    summary = line[-1]
    get = lambda word: int(m.group(1)) if (m := re.search(rf"(\d+) {word}", summary)) else 0  # noqa: E731
    return TestCounts(get("passed"), get("failed"), 0, get("skipped") + get("todo"))


def _mocha(output: str) -> TestCounts | None:
    passing = _count(r"(?m)^\s*(\d+) passing", output)
    if passing is None:
        return None
    return TestCounts(passing, _count(r"(?m)^\s*(\d+) failing", output) or 0, 0,
                      _count(r"(?m)^\s*(\d+) pending", output) or 0)


def _go(output: str) -> TestCounts | None:
    passed = len(re.findall(r"(?m)^\s*--- PASS: ", output))
    failed = len(re.findall(r"(?m)^\s*--- FAIL: ", output))
    skipped = len(re.findall(r"(?m)^\s*--- SKIP: ", output))
    if passed + failed + skipped == 0:
        return None
    return TestCounts(passed, failed, 0, skipped)


def _rspec(output: str) -> TestCounts | None:
    found = re.findall(r"(?m)^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?", output)
    if not found:
        return None
    total, failures, pending = found[-1]
    pending_n = int(pending or 0)
    return TestCounts(int(total) - int(failures) - pending_n, int(failures), 0, pending_n)


_PARSERS = (_pytest, _unittest, _cargo, _jest, _vitest, _mocha, _rspec, _go)


def parse_test_counts(output: str) -> TestCounts | None:
    """Counts from the first runner summary recognised in ``output``, or None."""
    for parser in _PARSERS:
        counts = parser(output)
        if counts is not None:
            return counts
    return None
