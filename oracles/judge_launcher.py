"""The judge-side launcher: runs pytest inside the sandbox with the task's bans in force.

This file is injected, as it is, beside the hidden tests and run by the judge interpreter
instead of ``python -m pytest`` (stdlib only: it runs in whatever judge environment the
task has). In order, before any of the product's code can load:

1. ``import pytest`` (with the script's own folder off ``sys.path``): the runner comes
   from the judge environment, never from the workspace;
2. the **import ban**: a ``sys.meta_path`` finder (first in line) and an audit hook
   (``sys.addaudithook``: it cannot be removed, and it also sees imports that skip the
   finders and ``open`` of a banned package's files, the way to load it without the import
   system). A banned module is one named by an ``import_ban`` entry (itself or below it).
   Modules of a banned name the runner already loaded are dropped from ``sys.modules`` so
   the product has to import them again. When the hidden suite itself imports a banned
   module (an oracle, ``--allow-tests``), an import whose nearest caller is a hidden test
   or the runner, with no workspace code on the stack, is let through; otherwise every
   import of a banned name fails;
3. the **judge bans** (Zero2Repo's ``judge_bans``: ``socket``, ``subprocess``): the audit
   hook refuses the matching operations while a test runs;
4. the product paths (``--product``) put first on ``sys.path``; then ``pytest.main``.

The ban holds in this process only; a fresh interpreter the product starts is covered by the
back-end masking the banned packages' files for the whole run (``mask_modules``), which
the judge asks for whenever the suite does not import them itself.

Every refused attempt raises (``ImportError`` / ``PermissionError`` / ``RuntimeError``
naming ``PROCGRADE_IMPORT_BAN`` or ``PROCGRADE_JUDGE_BANS``) and is reported to the judge
as one line ``procgrade-policy {json}`` on a duplicate of the original standard error,
taken before the product loads. Trust model: the product runs in this process, so code
written against this launcher may still defeat it (e.g. forge frames); the ban raises
the bar, the static scan stays the first line, and a reported attempt costs the reward.
"""

import json
import os
import sys

MARK = "procgrade-policy "
_SELF = os.path.realpath(__file__)


def _parse(argv):
    opts = {"ban": [], "product": [], "judge_ban": [], "workspace": None, "tests": None, "mode": "isolated",
            "allow_tests": False}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return opts, argv[i + 1:]
        if arg == "--allow-tests":
            opts["allow_tests"] = True
            i += 1
            continue
        key = arg[2:].replace("-", "_")
        if key not in opts or i + 1 >= len(argv):
            raise SystemExit("procgrade launcher: bad argument %r" % arg)
        if isinstance(opts[key], list):
            opts[key].append(argv[i + 1])
        else:
            opts[key] = argv[i + 1]
        i += 2
    raise SystemExit("procgrade launcher: missing -- before pytest's arguments")


def main():
    opts, pytest_args = _parse(sys.argv[1:])
    here = os.path.dirname(os.path.realpath(__file__))
    if opts["mode"] == "module":
        # Like `python -m pytest`: the working folder first on sys.path, not this script's folder.
        sys.path[0] = os.getcwd()
    else:
        sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != here]
    report_fd = os.dup(2)
    os.set_inheritable(report_fd, False)

    import pytest  # noqa: E402 - the runner first, from the judge environment

    workspace = os.path.realpath(opts["workspace"]) if opts["workspace"] else None
    tests = os.path.realpath(opts["tests"]) if opts["tests"] else here
    bans = tuple(b.rstrip("/").strip() for b in opts["ban"] if b.rstrip("/").strip())
    judge_bans = frozenset(opts["judge_ban"])
    reported = set()

    def report(kind, name, detail):
        key = (kind, name)
        if key in reported or len(reported) >= 100:
            return
        reported.add(key)
        line = "\n" + MARK + json.dumps({"kind": kind, "name": name, "detail": detail[:300]}, sort_keys=True) + "\n"
        try:
            os.write(report_fd, line.encode("utf-8", "replace"))
        except OSError:
            pass

    def banned(name):
        for ban in bans:
            if name == ban or name.startswith(ban + "."):
                return ban
        return None

    def under(path, top):
        return top is not None and (path == top or path.startswith(top + os.sep))

    machinery = (os.path.realpath(os.path.dirname(__import__("importlib").__file__)),)

    def verdict_for_stack():
        """(allowed, importer file): who asks for this import."""
        frame = sys._getframe(2)
        nearest = None
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith("<frozen"):
                frame = frame.f_back
                continue
            real = os.path.realpath(filename) if filename and not filename.startswith("<") else filename
            if under(real, workspace):
                return False, real
            if nearest is None and not any(under(real, m) for m in machinery) and real != _SELF:
                nearest = real
            frame = frame.f_back
        if not opts["allow_tests"] or nearest is None:
            return False, nearest or "?"
        if under(nearest, tests) or "site-packages" in nearest.split(os.sep) or "dist-packages" in nearest.split(os.sep):
            return True, nearest
        return False, nearest

    def refuse_import(name):
        ban = banned(name)
        if ban is None:
            return
        allowed, who = verdict_for_stack()
        if allowed:
            return
        report("import_ban", name, "imported from %s" % who)
        raise ImportError("PROCGRADE_IMPORT_BAN: the task bans importing %r (denylist entry %r)" % (name, ban),
                          name=name)

    class BanFinder:
        """First on sys.meta_path: refuses banned names before any other finder looks."""

        @staticmethod
        def find_spec(name, path=None, target=None):
            refuse_import(name)
            return None

        @staticmethod
        def invalidate_caches():
            pass

    # Where the banned packages live in the judge environment: their files may not be opened.
    import importlib.util
    locations = []
    for ban in bans:
        root = ban.split(".")[0]
        try:
            spec = importlib.util.find_spec(root) if root not in sys.modules else getattr(sys.modules[root], "__spec__", None)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        for place in list(spec.submodule_search_locations or []) + ([spec.origin] if spec.origin else []):
            if place and os.path.isabs(place) and place not in ("built-in", "frozen"):
                real = os.path.realpath(place)
                if not real.startswith(machinery[0]) and "lib-dynload" not in real:
                    locations.append(real)
    locations = tuple(sorted(set(locations)))
    for name in list(sys.modules):
        if banned(name):
            del sys.modules[name]

    active = {"on": False}

    def hook(event, args):
        if event == "import":
            if bans and args and isinstance(args[0], str):
                refuse_import(args[0])
        elif event == "open":
            if locations and args:
                path = args[0]
                if isinstance(path, bytes):
                    path = os.fsdecode(path)
                if isinstance(path, str) and path:
                    real = os.path.realpath(path)
                    if any(under(real, loc) for loc in locations):
                        allowed, who = verdict_for_stack()
                        if not allowed:
                            report("import_ban", real, "opened from %s" % who)
                            raise PermissionError("PROCGRADE_IMPORT_BAN: the task bans reading %s" % real)
        elif active["on"] and judge_bans:
            if "socket" in judge_bans and event.startswith("socket."):
                report("judge_ban", "socket", event)
                raise RuntimeError("PROCGRADE_JUDGE_BANS: %s is banned by the task" % event)
            if "subprocess" in judge_bans and event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                                                         "os.spawn", "os.fork", "os.forkpty", "pty.spawn"):
                report("judge_ban", "subprocess", event)
                raise RuntimeError("PROCGRADE_JUDGE_BANS: %s is banned by the task" % event)

    sys.meta_path.insert(0, BanFinder())
    sys.addaudithook(hook)
    importlib.invalidate_caches()

    for product in reversed(opts["product"]):
        sys.path.insert(0, product)

    class JudgeBans:
        """Switches the judge bans on while tests (and the product they import) run."""

        @pytest.hookimpl(hookwrapper=True)
        def pytest_collection(self, session):
            active["on"] = True
            yield

        @pytest.hookimpl(hookwrapper=True)
        def pytest_sessionfinish(self, session, exitstatus):
            active["on"] = False
            yield

    if opts["workspace"] and os.path.isdir(opts["workspace"]) and opts["mode"] != "module":
        os.chdir(opts["workspace"])
    code = pytest.main(pytest_args, plugins=[JudgeBans()] if judge_bans else [])
    try:
        code = int(code)
    except (TypeError, ValueError):
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
