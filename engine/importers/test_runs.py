"""Test runs recognised from the command line, with counts parsed from their output.

No harness logs "the agent ran the tests": it logs a shell command. What a command line
does is decided from its words, per simple command of the line (:func:`command_role`), so
``cd app && npm test`` is a test run and ``pip install pytest`` is not:

- ``test``: a test suite or test script, in any ecosystem: pytest / ``python -m pytest`` /
  unittest / tox / nose, Django's ``runtests.py``, SymPy's ``bin/test``; ``go test``;
  ``cargo test``/``nextest``; Maven (``mvn``/``mvnw``/``mvnd`` with a ``test``/``verify``
  phase, whatever comes first), Gradle (``test``, ``check``, ``:mod:test``, ``testDebug...``),
  ant, sbt; npm/yarn/pnpm/bun ``test`` and ``run test*``, jest/vitest/mocha/qunit/ava through
  ``npx``/``yarn``/``pnpm``; ``node --test``, ``deno test``; rspec, rake, phpunit, ctest,
  ``make test|check``, dotnet, mix, swift; scripts named ``test_*``/``*_test``/``verify*``/
  ``check*``/``run_tests``/``runtests`` run directly or through an interpreter, and JVM
  classes named ``*Test``/``Test*`` run with ``java``;
- ``reproduction``: a script or program named ``repro*``/``reproduce*`` (any case, any
  interpreter: ``python reproduce_bug.py``, ``./repro.sh``, ``node repro.js``,
  ``go run repro.go``, ``cargo run --example repro``) or a JVM class of that name
  (``javac Repro.java && java Repro``): the agent checking a bug it is fixing. Both roles
  are recorded as ``test_run`` events (verification the model ran); a reproduction is told
  apart by its command line, with :func:`command_role` or :func:`is_reproduction_command`;
- ``check``: compile and static checks (``go vet``, ``go build``, ``cargo check|clippy``,
  ``tsc``, ``python -m py_compile``, ``node --check``, ``mypy``, ``ruff``, ``flake8``,
  ``eslint``), and ``build``: ``javac``, ``mvn compile|package``, ``gradle build``,
  ``cargo build``, ``npm run build``, ``make``: commands, not test runs.

A command that only prints (``echo "All tests passed"``) is none of these: its program is
``echo``. Counts come from the runner's own summary line when the output shows one (pytest,
unittest, cargo, jest, vitest, mocha, rspec, go, Maven surefire, Gradle, TAP); a runner whose
summary is not recognised gives no counts, and the exit code alone decides pass or fail.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from procgrade.engine.importers.shell import split_pipeline

__all__ = ["TestCounts", "ROLES", "command_role", "is_test_command", "is_reproduction_command", "parse_test_counts"]

#: What a command line does, most telling first: a line that builds and then tests is a test run.
ROLES = ("test", "reproduction", "check", "build")


class TestCounts(NamedTuple):
    __test__ = False  # not a pytest test class
    passed: int | None = None
    failed: int | None = None
    errored: int | None = None
    skipped: int | None = None


# Programs that are test runners whatever their arguments.
_RUNNERS = {"pytest", "py.test", "jest", "vitest", "mocha", "rspec", "phpunit", "ctest", "tox", "nox",
            "karma", "ava", "tap", "nosetests", "trial", "behave", "cucumber", "bats", "prove", "qunit",
            "jasmine", "playwright", "cypress", "pest", "codecept", "minitest", "busted", "ginkgo", "gotestsum"}
# program -> sub-command words that make it a test run (the first non-option word).
_SUBCOMMAND_RUNNERS = {
    "go": {"test"}, "cargo": {"test", "nextest"}, "npm": {"test", "t"}, "yarn": {"test"}, "pnpm": {"test", "t"},
    "bun": {"test"}, "deno": {"test"}, "dotnet": {"test"}, "mix": {"test"}, "swift": {"test"},
    "lein": {"test"}, "stack": {"test"}, "cabal": {"test"}, "rake": {"test", "spec"}, "flutter": {"test"},
    "dart": {"test"}, "zig": {"test"}, "bazel": {"test"}, "bazelisk": {"test"}, "pants": {"test"},
}
# Build tools whose test goals may come anywhere among their words.
_GOAL_RUNNERS = {"mvn", "mvnw", "mvnd", "gradle", "gradlew", "ant", "sbt", "make", "gmake", "ninja"}
_MAVEN_TEST_PHASES = {"test", "verify", "integration-test", "surefire:test", "failsafe:integration-test"}
_MODULE_RUNNERS = {"pytest", "unittest", "nose", "nose2", "tox", "nox"}
_INTERPRETERS = re.compile(r"^(?:python(?:\d(?:\.\d+)?)?|pypy\d?|node|nodejs|ts-node|tsx|deno|bun|ruby|perl|php|Rscript"
                           r"|bash|sh|zsh|dash|ksh|julia|lua|groovy|kotlin|scala|elixir|swift)$")
_PREFIXES = {"sudo", "time", "env", "nohup", "uv", "poetry", "pipenv", "hatch", "pdm", "npx", "pnpx", "bunx",
             "xvfb-run", "stdbuf", "nice", "ionice", "conda", "micromamba"}

# Script names (the file part, extension dropped) that say what a script is for.
_TEST_SCRIPT = re.compile(r"(?i)^(?:test[_-].*|.*[_-]tests?|tests?|run[_-]?tests?|runtests?|verify.*|check[_-].*"
                          r"|.*[_-]verify|.*[_-]check)$")
_REPRO_SCRIPT = re.compile(r"(?i)^(?:repro|reproduce|reproduction|reproducer)(?:[_-].*|\d.*)?$|^.*[_-](?:repro|reproduce|reproduction)(?:[_-].*)?$")
_JVM_REPRO = re.compile(r"(?i)^(?:.*\.)?(?:repro\w*|reproduce\w*|\w*repro(?:duce|duction|ducer)?)$")
_JVM_TEST = re.compile(r"^(?:.*\.)?(?:Test[A-Z0-9_]\w*|\w+Tests?|Test)$")
_SCRIPT_EXTENSIONS = re.compile(r"\.(?:py|sh|bash|js|mjs|cjs|ts|rb|pl|php|r|R|jl|lua|groovy|kts|exs|go|java|rs|swift)$")

_CHECK_PROGRAMS = {"tsc", "mypy", "pyright", "ruff", "flake8", "pylint", "eslint", "shellcheck", "clippy-driver",
                   "golangci-lint", "staticcheck"}
_BUILD_PROGRAMS = {"javac", "kotlinc", "scalac", "gcc", "g++", "cc", "clang", "clang++", "rustc", "cmake", "make",
                   "gmake", "ninja", "mvn", "mvnw", "mvnd", "gradle", "gradlew", "ant", "sbt", "tsup", "webpack",
                   "vite", "esbuild", "rollup"}


def command_role(command: str) -> str | None:
    """``test``, ``reproduction``, ``check``, ``build`` or None: what the command line does
    (the most telling role among its simple commands; see the module docstring)."""
    found = {role for words in split_pipeline(command) if (role := _role(words)) is not None}
    return next((role for role in ROLES if role in found), None)


def is_test_command(command: str) -> bool:
    """True when some simple command of the line runs tests or a reproduction: a test run."""
    return command_role(command) in ("test", "reproduction")


def is_reproduction_command(command: str) -> bool:
    """True when the line runs a reproduction (and no test suite)."""
    return command_role(command) == "reproduction"


def _strip_prefixes(words: list[str]) -> list[str]:
    while words:
        head = words[0]
        if head in _PREFIXES or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", head) \
                or (head in ("run", "exec") and len(words) > 1) or (head == "bundle" and len(words) > 1):
            words = words[1:]
        elif head in ("timeout", "gtimeout") and len(words) > 2:
            words = words[1:]
            while words and words[0].startswith("-"):  # -s KILL, -k 5, --foreground, --signal=KILL
                words = words[2:] if words[0] in ("-s", "-k", "--signal", "--kill-after") else words[1:]
            words = words[1:]  # the duration
        elif head.startswith("-") and words is not None and len(words) > 1:
            words = words[1:]  # an option of a stripped prefix (``env -i``, ``uv run --with x``)
        else:
            return words
    return words


def _script_role(path: str) -> str | None:
    """The role a script's name gives it (``reproduce_issue.py`` -> reproduction)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    stem = _SCRIPT_EXTENSIONS.sub("", name)
    if not stem or stem.startswith("-"):
        return None
    if _REPRO_SCRIPT.match(stem):
        return "reproduction"
    if name == "manage.py":
        return None
    if _TEST_SCRIPT.match(stem):
        return "test"
    return None


def _operand(args: list[str], takes_value: set[str] = frozenset()) -> str | None:  # type: ignore[assignment]
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            skip = arg in takes_value
            continue
        return arg
    return None


def _role(words: list[str]) -> str | None:
    words = _strip_prefixes(words)
    if not words:
        return None
    program = words[0]
    base = program.rsplit("/", 1)[-1]
    args = words[1:]
    rest = [w for w in args if not w.startswith("-")]
    if base in _RUNNERS:
        return "test"
    if base in ("npm", "yarn", "pnpm", "bun"):
        if rest[:1] in (["run"], ["run-script"]):
            script = rest[1] if len(rest) > 1 else ""
            if script.startswith("test") or script in ("spec", "e2e"):
                return "test"
            return "build" if script.startswith(("build", "compile")) else \
                "check" if script.startswith(("lint", "typecheck", "type-check", "tsc")) else None
        if rest[:1] == ["exec"] and len(rest) > 1:
            return _role(rest[1:])
        if base != "npm" and rest and rest[0].rsplit("/", 1)[-1] in _RUNNERS:
            return "test"  # yarn jest, pnpm vitest
    subcommands = _SUBCOMMAND_RUNNERS.get(program) or _SUBCOMMAND_RUNNERS.get(base)
    if base == "cargo":
        rest = [w for w in rest if not w.startswith("+")]  # cargo +nightly test
        if rest[:1] == ["run"]:
            target = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("--example", "--bin")), None)
            return _script_role(target) if target else None
        if rest[:1] in (["check"], ["clippy"]):
            return "check"
        if rest[:1] == ["build"]:
            return "build"
    if base == "go":
        if rest[:1] == ["run"]:
            target = next((w for w in rest[1:] if w.endswith(".go") or "/" in w), None)
            role = _script_role(target.rstrip("/").removesuffix("/main.go")) if target else None
            return role
        if rest[:1] in (["vet"], ["build"]):
            return "check"
    if subcommands:
        return "test" if rest and rest[0] in subcommands else None
    if base in _GOAL_RUNNERS:
        if base in ("make", "gmake", "ninja"):
            return "test" if any(w in ("test", "tests", "check", "test-all", "unittest") for w in rest) else "build"
        if base.startswith("mvn"):
            return "test" if any(w in _MAVEN_TEST_PHASES for w in rest) else "build"
        excluded = {args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-x", "--exclude-task")}
        goals = [w.rsplit(":", 1)[-1] for w in rest if w not in excluded]
        if any(g == "test" or g == "check" or g.startswith("test") or g.endswith(("Test", "Tests", "Check"))
               for g in goals):
            return "test"
        return "build"
    if _INTERPRETERS.match(base):
        return _interpreted(base, args)
    if base in ("java", "kotlin", "scala"):
        target = _operand(args, {"-cp", "-classpath", "--class-path", "-p", "--module-path", "-m", "--module",
                                 "--add-opens", "--add-exports", "--add-modules"})
        if "-jar" in args or target is None:
            return None
        klass = target.removesuffix(".java").removesuffix(".kt").rsplit("/", 1)[-1]
        if _JVM_REPRO.match(klass):
            return "reproduction"
        if _JVM_TEST.match(klass) or klass.endswith(("Tests", "Test")):
            return "test"
        return None
    if base in _CHECK_PROGRAMS:
        return "check"
    if base in _BUILD_PROGRAMS:
        return "build"
    if program.startswith(("./", "/", "../")) or "/" in program:
        if base in ("test", "runtest", "runtests") and "/" in program:
            return "test"  # SymPy's bin/test, ./runtest
        return _script_role(program)
    return None


def _interpreted(base: str, args: list[str]) -> str | None:
    """``python x.py``, ``node x.js``, ``bash x.sh``: the module or the script decides."""
    if base.startswith(("python", "pypy")):
        for index, arg in enumerate(args):
            if arg == "-c":
                return None  # code on the command line, not a script
            if arg == "-m":
                module = args[index + 1] if index + 1 < len(args) else ""
                if module in _MODULE_RUNNERS:
                    return "test"
                if module in ("py_compile", "compileall", "mypy", "pyflakes", "flake8", "pylint", "ruff"):
                    return "check"
                return _script_role(module.rsplit(".", 1)[-1]) if module else None
            if not arg.startswith("-"):
                break
    if base in ("node", "nodejs", "deno", "bun"):
        if "--test" in args:
            return "test"
        if "--check" in args or "-c" in args:
            return "check"
    if base in ("bash", "sh", "zsh", "dash", "ksh") and "-c" in args:
        index = args.index("-c")
        inner = args[index + 1] if index + 1 < len(args) else ""
        return command_role(inner) if inner and inner != " ".join(args) else None  # sh -c 'cd app && pytest'
    script = _operand(args, {"-W", "-X", "-I", "-r", "--require", "-e"})
    if script is None:
        return None
    if script.endswith("manage.py") or script.endswith("setup.py"):
        return "test" if "test" in args else None
    if script.rsplit("/", 1)[-1] in _RUNNERS:
        return "test"  # php vendor/bin/phpunit, node node_modules/.bin/jest
    return _script_role(script)


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


def _maven(output: str) -> TestCounts | None:
    """Surefire/Failsafe: the last ``Tests run: N, Failures: F, Errors: E, Skipped: S`` (the total)."""
    found = re.findall(r"Tests run: (\d+), Failures: (\d+), Errors: (\d+), Skipped: (\d+)\b(?!, Time)", output)
    if not found:
        return None
    run, failures, errors, skipped = (int(n) for n in found[-1])
    return TestCounts(max(run - failures - errors - skipped, 0), failures, errors, skipped)


def _gradle(output: str) -> TestCounts | None:
    found = re.findall(r"(?m)^(\d+) tests? completed(?:, (\d+) failed)?(?:, (\d+) skipped)?", output)
    if not found:
        return None
    total, failed, skipped = (int(n or 0) for n in found[-1])
    return TestCounts(max(total - failed - skipped, 0), failed, 0, skipped)


def _tap(output: str) -> TestCounts | None:
    """TAP summaries (``node --test``, ``prove``, bats): ``# pass N`` / ``# fail N``."""
    passed = _count(r"(?m)^[#ℹ] pass (\d+)", output)
    if passed is None:
        return None
    skipped = (_count(r"(?m)^[#ℹ] skip(?:ped)? (\d+)", output) or 0) + (_count(r"(?m)^[#ℹ] todo (\d+)", output) or 0)
    return TestCounts(passed, _count(r"(?m)^[#ℹ] fail (\d+)", output) or 0, 0, skipped)


def _junit_console(output: str) -> TestCounts | None:
    """JUnit Platform console launcher: ``[  10 tests successful ]``."""
    passed = _count(r"\[\s*(\d+) tests successful\s*\]", output)
    if passed is None:
        return None
    return TestCounts(passed, _count(r"\[\s*(\d+) tests failed\s*\]", output) or 0, 0,
                      (_count(r"\[\s*(\d+) tests skipped\s*\]", output) or 0)
                      + (_count(r"\[\s*(\d+) tests aborted\s*\]", output) or 0))


_PARSERS = (_pytest, _unittest, _cargo, _jest, _vitest, _mocha, _rspec, _go, _maven, _gradle, _tap, _junit_console)


def parse_test_counts(output: str) -> TestCounts | None:
    """Counts from the first runner summary recognised in ``output``, or None."""
    for parser in _PARSERS:
        counts = parser(output)
        if counts is not None:
            return counts
    return None
