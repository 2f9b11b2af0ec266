"""Per-task judge environments: the task's pinned test dependencies, built once, used offline.

A Zero2Repo case names what its hidden suite needs in ``runner.install_command`` (e.g.
``pip install pytest==8.3.5 freezegun==1.5.2``). :func:`parse_install_command` takes the
pip requirements out of it (apt and other steps are reported by name: procgrade builds
judge environments from the package registry only). An :class:`EnvSpec` is those
requirements (plus pytest at the judge image's pins when the case pins none, and any
local packages the caller adds, e.g. an upstream a control wraps); its key hashes them
with the base interpreter or image, so one environment serves every judgement of every
task with the same pins:

- **local** back-end: a virtualenv under the cache (``$PROCGRADE_CACHE`` or
  ``~/.cache/procgrade``), ``judge-envs/local-<key>``, made by the base interpreter
  (``--without-pip``, no system site packages) and filled by pip from PyPI;
- **docker** back-end: an image ``procgrade-judge-env:<key>`` layered on the judge image
  (a virtualenv at :data:`IMAGE_ENV_PYTHON`'s prefix whose ``site-packages`` the host's pip
  filled for the image's Python), built with the engine's network off.

Building needs the registry; judging never does (the sandboxes have no network). Each
environment records ``procgrade-env.json`` / image labels: key, requirements and the
exact distributions installed, which the verdict carries (``details.judge_env``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from procgrade.engine.canonical import canonical_json
from procgrade.oracles.file_lock import exclusive_lock

__all__ = ["EnvSpec", "JudgeEnv", "EnvBuildError", "parse_install_command", "ensure_local_env", "ensure_env_image",
           "DEFAULT_PYTEST", "IMAGE_ENV_PYTHON", "cache_dir"]

#: pytest and what it imports, when a task pins no pytest (the judge image's own pins).
DEFAULT_PYTEST = ("pytest==9.2.0", "pluggy==1.7.0", "iniconfig==2.3.1", "packaging==26.4", "pygments==2.21.0")
#: The judge interpreter of an environment image.
IMAGE_ENV_PREFIX = "/opt/procgrade-env"
IMAGE_ENV_PYTHON = f"{IMAGE_ENV_PREFIX}/bin/python3"
ENV_REPOSITORY = "procgrade-judge-env"
#: Bump when the way environments are built changes (part of every key).
BUILD_VERSION = 1

_PIP_NAMES = {"pip", "pip3"}
_PYTHON = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")
_REQ_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
#: pip options that take a value (their value is not a requirement).
_VALUE_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f",
                  "--find-links", "-t", "--target", "--prefix", "--root", "--src", "-e", "--editable",
                  "--platform", "--python-version", "--implementation", "--abi", "--progress-bar", "--cache-dir",
                  "--log", "--timeout", "--retries", "--trusted-host", "--upgrade-strategy", "--python",
                  "--only-binary", "--no-binary", "--config-settings", "-C"}
#: Options whose meaning procgrade keeps (or that change nothing in a fresh environment).
_HARMLESS = {"--no-cache-dir", "-U", "--upgrade", "-q", "--quiet", "--no-input", "--disable-pip-version-check",
             "--break-system-packages", "--user", "--force-reinstall", "--ignore-installed", "--no-warn-script-location",
             "--root-user-action", "--only-binary", "--prefer-binary", "--progress-bar", "--no-compile"}


class EnvBuildError(RuntimeError):
    """A judge environment could not be built (the registry, a pin that does not exist, the engine)."""


def cache_dir() -> Path:
    base = os.environ.get("PROCGRADE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "procgrade")
    return Path(base) / "judge-envs"


def parse_install_command(command: str) -> tuple[list[str], list[str]]:
    """The pip requirements of an install command, and each part procgrade does not honour
    (``"apt-get install -y python3-pip"``: why, by name)."""
    requirements: list[str] = []
    unhonoured: list[str] = []
    if not command.strip():
        return requirements, unhonoured
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as exc:
        return [], [f"cannot be parsed as a shell command ({exc})"]
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token and set(token) <= set(";&|"):
            commands.append([])
        else:
            commands[-1].append(token)
    for words in commands:
        while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
            unhonoured.append(f"environment assignment {words[0]!r} (not applied)")
            words = words[1:]
        if words and words[0] in ("sudo", "env"):
            words = words[1:]
        if not words or words[0] in ("true", ":"):
            continue
        rest: list[str] | None = None
        if os.path.basename(words[0]) in _PIP_NAMES and words[1:2] == ["install"]:
            rest = words[2:]
        elif _PYTHON.match(words[0]) and words[1:4] == ["-m", "pip", "install"]:
            rest = words[4:]
        elif words[0] == "uv" and words[1:3] == ["pip", "install"]:
            rest = words[3:]
        if rest is None:
            unhonoured.append(f"{' '.join(words)!r} (procgrade builds judge environments from PyPI with pip only)")
            continue
        i = 0
        while i < len(rest):
            word = rest[i]
            if word.startswith("-"):
                name = word.split("=", 1)[0]
                takes_value = name in _VALUE_OPTIONS and "=" not in word
                if name not in _HARMLESS:
                    shown = word + (f" {rest[i + 1]}" if takes_value and i + 1 < len(rest) else "")
                    unhonoured.append(f"pip option {shown!r} (not applied)")
                i += 2 if takes_value else 1
                continue
            if "/" in word or word.startswith("."):
                unhonoured.append(f"local requirement {word!r} (a path of the case's build image)")
            else:
                requirements.append(word)
            i += 1
    return requirements, unhonoured


def _names(requirements: list[str] | tuple[str, ...]) -> set[str]:
    out = set()
    for req in requirements:
        m = _REQ_NAME.match(req)
        if m:
            out.add(re.sub(r"[-_.]+", "-", m.group(1)).lower())
    return out


def _tree_sha256(path: Path) -> str:
    entries = []
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if "__pycache__" in rel.split("/") or any(part.endswith((".egg-info",)) for part in rel.split("/")):
            continue
        if p.is_file() and not p.is_symlink():
            entries.append([rel, hashlib.sha256(p.read_bytes()).hexdigest()])
    return hashlib.sha256(canonical_json(entries)).hexdigest()


@dataclass(frozen=True)
class EnvSpec:
    """What a task's judge environment holds: pip requirements and local packages (folders
    with a ``pyproject.toml``, or wheels) installed with them."""

    requirements: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()

    def effective_requirements(self) -> list[str]:
        reqs = list(self.requirements)
        if "pytest" not in _names(reqs):
            reqs += list(DEFAULT_PYTEST)
        return reqs

    def key(self, base: str) -> str:
        doc = {"build": BUILD_VERSION, "base": base, "requirements": sorted(self.effective_requirements()),
               "packages": sorted(_tree_sha256(Path(p)) for p in self.packages)}
        return hashlib.sha256(canonical_json(doc)).hexdigest()

    @property
    def empty(self) -> bool:
        return not self.requirements and not self.packages


@dataclass(frozen=True)
class JudgeEnv:
    """A built environment: the interpreter the judge runs and what it holds."""

    name: str
    python: str
    key: str
    requirements: tuple[str, ...]
    distributions: dict[str, str] = field(default_factory=dict)
    built_now: bool = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "python": self.python, "requirements": list(self.requirements),
                "distributions": dict(sorted(self.distributions.items())), "built_now": self.built_now}


def _log_default(message: str) -> None:
    print(f"[judge-env] {message}", file=sys.stderr, flush=True)


def _run(argv: list[str], what: str, timeout: float = 1800, env: dict[str, str] | None = None) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EnvBuildError(f"{what}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-12:]
        raise EnvBuildError(f"{what} failed (exit {done.returncode}): " + "\n".join(tail))
    return done.stdout


def _distributions(site: Path) -> dict[str, str]:
    """``{name: version}`` of the distributions installed in a site-packages folder."""
    out = {}
    for meta in sorted(site.glob("*.dist-info")):
        name = version = None
        try:
            for line in (meta / "METADATA").read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith("Name:") and name is None:
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version:") and version is None:
                    version = line.split(":", 1)[1].strip()
                elif not line.strip():
                    break
        except OSError:
            continue
        if name and version:
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def _wheels(spec: EnvSpec, into: Path, python_version: str | None) -> list[str]:
    """Local packages as wheel files (built from their folders when needed)."""
    out = []
    for pkg in spec.packages:
        path = Path(pkg).resolve()
        if path.is_file() and path.suffix == ".whl":
            out.append(str(path))
            continue
        if not (path / "pyproject.toml").is_file() and not (path / "setup.py").is_file():
            raise EnvBuildError(f"{path}: a local package must be a wheel or a folder with pyproject.toml")
        with tempfile.TemporaryDirectory(prefix="procgrade-pkg-") as tmp:
            copy = Path(tmp) / path.name
            shutil.copytree(path, copy, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist"))
            _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
                  "-w", str(into), str(copy)], f"build a wheel of {path}")
    out += sorted(str(w) for w in into.glob("*.whl") if str(w) not in out)
    return out


def _python_version(python: str) -> str:
    return _run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                f"run {python}").strip()


def ensure_local_env(spec: EnvSpec, python: str | None = None, *, log: Callable[[str], None] = _log_default) -> JudgeEnv:
    """The virtualenv for ``spec`` made from interpreter ``python`` (built when missing)."""
    base = os.path.realpath(python or getattr(sys, "_base_executable", None) or sys.executable)
    version = _python_version(base)
    key = spec.key(f"local:{base}:{version}")
    root = cache_dir()
    dest = root / f"local-{key[:16]}"
    built_now = False
    with exclusive_lock(root / f".lock-{key[:16]}"):
        if not (dest / "procgrade-env.json").is_file():
            log(f"building judge environment {dest.name} ({', '.join(spec.effective_requirements())})")
            shutil.rmtree(dest, ignore_errors=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".build-{key[:16]}-", dir=root))
            try:
                venv = tmp / "env"
                _run([base, "-m", "venv", "--without-pip", str(venv)], "create the virtualenv")
                wheels = _wheels(spec, tmp / "wheels", version)
                _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                      "--disable-pip-version-check", "--no-input", "--only-binary=:all:",
                      *spec.effective_requirements(), *wheels], "pip install (judge environment)")
                shutil.rmtree(tmp / "wheels", ignore_errors=True)
                site = next(venv.glob("lib/python*/site-packages"))
                doc = {"key": key, "base": base, "python_version": version,
                       "requirements": spec.effective_requirements(), "distributions": _distributions(site)}
                (venv / "procgrade-env.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
                for dirpath, dirnames, filenames in os.walk(venv):
                    for name in dirnames:
                        os.chmod(os.path.join(dirpath, name), 0o755)
                    for name in filenames:
                        p = os.path.join(dirpath, name)
                        if not os.path.islink(p):
                            os.chmod(p, 0o755 if os.stat(p).st_mode & 0o111 else 0o644)
                os.rename(venv, dest)
                built_now = True
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    doc = json.loads((dest / "procgrade-env.json").read_text())
    return JudgeEnv(str(dest), str(dest / "bin" / "python"), key, tuple(doc["requirements"]), doc["distributions"],
                    built_now)


_DOCKERFILE = """FROM {base}
RUN ["/usr/bin/python3", "-m", "venv", "--without-pip", "{prefix}"]
COPY site/ {site}/
RUN ["/usr/bin/python3", "-m", "compileall", "-q", "{site}"]
"""


def ensure_env_image(client: Any, base_tag: str, spec: EnvSpec, *, python_version: str = "3.11",
                     log: Callable[[str], None] = _log_default) -> JudgeEnv:
    """The image for ``spec`` layered on ``base_tag`` (built when missing, with no network)."""
    import docker

    base_id = client.images.get(base_tag).id
    key = spec.key(f"docker:{base_id}")
    tag = f"{ENV_REPOSITORY}:{key[:16]}"
    built_now = False
    with exclusive_lock(cache_dir() / f".lock-image-{key[:16]}"):
        try:
            image = client.images.get(tag)
        except docker.errors.ImageNotFound:
            image = None
        if image is None:
            log(f"building judge environment image {tag} on {base_tag} ({', '.join(spec.effective_requirements())})")
            with tempfile.TemporaryDirectory(prefix="procgrade-env-image-") as tmp:
                ctx = Path(tmp)
                wheels = _wheels(spec, ctx / "wheels", python_version)
                site = ctx / "site"
                _run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
                      "--only-binary=:all:", "--python-version", python_version, "--no-compile", "--target",
                      str(site), *spec.effective_requirements(), *wheels], "pip install (judge environment image)")
                shutil.rmtree(site / "bin", ignore_errors=True)
                shutil.rmtree(ctx / "wheels", ignore_errors=True)
                dists = _distributions(site)
                prefix = IMAGE_ENV_PREFIX
                site_in_image = f"{prefix}/lib/python{python_version}/site-packages"
                (ctx / "Dockerfile").write_text(_DOCKERFILE.format(base=base_id, prefix=prefix, site=site_in_image))
                labels = {"procgrade.env_key": key, "procgrade.base_image": base_tag,
                          "procgrade.python": IMAGE_ENV_PYTHON,
                          "procgrade.requirements": json.dumps(spec.effective_requirements()),
                          "procgrade.distributions": json.dumps(dists, sort_keys=True)}
                try:
                    buf = io.BytesIO()
                    with tarfile.open(fileobj=buf, mode="w") as tar:
                        def owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
                            info.uid = info.gid = 0
                            info.uname = info.gname = "root"
                            info.mode = 0o755 if info.isdir() or info.mode & 0o111 else 0o644
                            return info
                        tar.add(str(ctx), arcname=".", filter=owned)
                    buf.seek(0)
                    image, _ = client.images.build(fileobj=buf, custom_context=True, tag=tag, rm=True, forcerm=True,
                                                   network_mode="none", labels=labels, pull=False)
                except docker.errors.BuildError as exc:
                    lines = [str(x.get("stream", x.get("error", ""))).strip() for x in exc.build_log]
                    raise EnvBuildError(f"docker build of {tag}: {exc}: {' | '.join(l for l in lines if l)[-800:]}") \
                        from None
                except docker.errors.APIError as exc:
                    raise EnvBuildError(f"docker build of {tag}: {exc}") from None
                built_now = True
    labels = image.labels or {}
    return JudgeEnv(tag, labels.get("procgrade.python", IMAGE_ENV_PYTHON), key,
                    tuple(json.loads(labels.get("procgrade.requirements", "[]"))),
                    json.loads(labels.get("procgrade.distributions", "{}")), built_now)
