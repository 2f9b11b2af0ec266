"""The judge image of the Docker sandbox back-end: built here, from Debian's packages.

No image registry is reachable from the machines this project runs on, so the image
is built locally from a recipe (:data:`RECIPE` and the build steps below):

1. ``debootstrap --variant=minbase --include=python3 bookworm`` from Debian's mirror
   (Python 3.11, the task's language version);
2. pytest and its pure-Python dependencies at the versions pinned in :data:`RECIPE`
   (bookworm's ``python3-pytest`` is 7; the oracle needs >= 8) installed as wheels from
   PyPI into ``/usr/local/lib/python3.11/dist-packages`` by the host's pip, then
   byte-compiled by the image's own interpreter (the judge's root file system is
   read-only and the test command sets ``PYTHONDONTWRITEBYTECODE``);
3. the unprivileged user ``judge`` (uid/gid :data:`JUDGE_UID`) and the folders the
   sandbox mounts over (``/app``, ``/judge``);
4. apt's caches and lists, documentation, manual pages and translations removed;
5. ``tar | docker import`` with a label naming the recipe hash.

The tag is deterministic: ``procgrade-judge:py311-<first 12 hex of the recipe hash>``,
the hash covering :data:`RECIPE` and the source of the build steps, so changing either
names a new image and an image with the tag was built from this recipe (the build itself
is not bit-for-bit reproducible: Debian's mirror moves on within bookworm).

``python -m procgrade.oracles.judge_image`` builds the image when it is missing (``.ci/run``
does that); :func:`ensure_image` does the same from Python. Building needs root,
``debootstrap``, ``tar``, the Debian mirror and PyPI. Measured on 2026-12-01 on a 2-core machine
shared with other jobs (load average 8 to 9): 126 s, of which 109 s debootstrap (fetching and
unpacking Debian's packages: the mirror's speed decides most of it).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from procgrade.oracles.file_lock import exclusive_lock

__all__ = ["RECIPE", "JUDGE_UID", "JUDGE_USER", "IMAGE_PYTHON", "image_tag", "recipe_sha256", "ensure_image",
           "build_image", "docker_client", "ImageBuildError"]

JUDGE_USER = "judge"
JUDGE_UID = 10001
#: The judge interpreter inside the image.
IMAGE_PYTHON = "/usr/bin/python3"
REPOSITORY = "procgrade-judge"

RECIPE: dict[str, Any] = {
    "suite": "bookworm",
    "variant": "minbase",
    "mirror": "http://deb.debian.org/debian",
    "include": ["python3"],
    "python": "3.11",
    # pytest >= 8 and exactly what it imports; the versions the project's dev environment uses.
    "wheels": ["pytest==9.2.0", "pluggy==1.7.0", "iniconfig==2.3.1", "packaging==26.4", "pygments==2.21.0"],
    "user": {"name": JUDGE_USER, "uid": JUDGE_UID, "gid": JUDGE_UID, "home": "/nonexistent",
             "shell": "/usr/sbin/nologin"},
    # Folders the sandbox mounts over (mode): the workspace, and the judge's own volume
    # with the report channel and the reader's output.
    "folders": {"app": 0o755, "judge": 0o755, "judge/report": 0o755, "judge/out": 0o700},
    "remove": ["var/cache/apt/*", "var/lib/apt/lists/*", "usr/share/doc/*", "usr/share/man/*",
               "usr/share/info/*", "usr/share/locale/*", "usr/share/lintian/*", "var/log/*",
               "var/cache/debconf/*-old", "var/lib/dpkg/*-old", "tmp/*", "root/.cache"],
    "env": {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
}


class ImageBuildError(RuntimeError):
    """The judge image could not be built (a missing tool, the mirror, PyPI, the engine)."""


def _log_default(message: str) -> None:
    print(f"[judge-image] {message}", file=sys.stderr, flush=True)


def _run(argv: list[str], log: Callable[[str], None], *, what: str, timeout: float = 1800) -> None:
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise ImageBuildError(f"{what} failed (exit {done.returncode}): " + "\n".join(tail))
    log(f"{what}: {time.monotonic() - started:.1f}s")


# --- the build steps (their source is part of the recipe hash) -------------------------------------


def _debootstrap(rootfs: Path, log: Callable[[str], None]) -> None:
    r = RECIPE
    _run(["debootstrap", f"--variant={r['variant']}", "--include=" + ",".join(r["include"]), r["suite"],
          str(rootfs), r["mirror"]], log, what="debootstrap")


def _install_wheels(rootfs: Path, log: Callable[[str], None]) -> None:
    pyver = RECIPE["python"]
    site = rootfs / "usr" / "local" / "lib" / f"python{pyver}" / "dist-packages"
    site.mkdir(parents=True, exist_ok=True)
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
          "--no-compile", "--only-binary=:all:", "--python-version", pyver, "--implementation", "py",
          "--target", str(site), *RECIPE["wheels"]], log, what="pip install (wheels)")
    shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts: the judge runs `python3 -m pytest`
    # Byte-compile with the image's interpreter (a read-only root file system keeps no cache).
    _run(["chroot", str(rootfs), f"python{pyver}", "-m", "compileall", "-q",
          f"/usr/local/lib/python{pyver}/dist-packages"], log, what="compileall")
    check = ("import pytest, sys; v = tuple(int(x) for x in pytest.__version__.split('.')[:2]); "
             "sys.exit(0 if sys.version_info[:2] == (3, 11) and v >= (8, 0) else 1)")
    _run(["chroot", str(rootfs), "python3", "-c", check], log, what="check python3 and pytest")


def _add_user_and_folders(rootfs: Path) -> None:
    u = RECIPE["user"]
    with open(rootfs / "etc" / "passwd", "a", encoding="utf-8") as f:
        f.write(f"{u['name']}:x:{u['uid']}:{u['gid']}:procgrade judge:{u['home']}:{u['shell']}\n")
    with open(rootfs / "etc" / "group", "a", encoding="utf-8") as f:
        f.write(f"{u['name']}:x:{u['gid']}:\n")
    shadow = rootfs / "etc" / "shadow"
    if shadow.exists():
        with open(shadow, "a", encoding="utf-8") as f:
            f.write(f"{u['name']}:!:19000::::::\n")
    for rel, mode in RECIPE["folders"].items():
        path = rootfs / rel
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, 0, 0)
        os.chmod(path, mode)


def _clean(rootfs: Path) -> None:
    for pattern in RECIPE["remove"]:
        for path in rootfs.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()


_STEPS = (_debootstrap, _install_wheels, _add_user_and_folders, _clean)


def recipe_sha256() -> str:
    """sha256 over the recipe and the source of the build steps."""
    digest = hashlib.sha256(json.dumps(RECIPE, sort_keys=True, separators=(",", ":")).encode())
    for step in _STEPS:
        digest.update(inspect.getsource(step).encode())
    return digest.hexdigest()


def image_tag() -> str:
    return f"{REPOSITORY}:py{RECIPE['python'].replace('.', '')}-{recipe_sha256()[:12]}"


# --- docker -----------------------------------------------------------------------------------------


def docker_client(timeout: int = 120) -> Any:
    """A client of the engine named by ``DOCKER_HOST`` (default: the local socket); raises
    :class:`ImageBuildError` with how to start the engine when it does not answer."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - the `docker` extra is missing
        raise ImageBuildError("the Docker back-end needs the `docker` package: pip install 'procgrade[docker]'") from exc
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine is one answer
        raise ImageBuildError(
            f"the Docker engine does not answer ({exc.__class__.__name__}: {exc}); start it as root, e.g. "
            "`nohup dockerd >/tmp/dockerd.log 2>&1 &` (bash .ci/run does that)") from None
    return client


def _image_exists(client: Any, tag: str) -> bool:
    import docker

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def build_image(client: Any, tag: str | None = None, *, log: Callable[[str], None] = _log_default,
                workdir: str | Path | None = None) -> str:
    """Build the judge image and import it as ``tag`` (default :func:`image_tag`)."""
    tag = tag or image_tag()
    if os.geteuid() != 0:
        raise ImageBuildError("building the judge image needs root (debootstrap, chroot, file ownership)")
    missing = [tool for tool in ("debootstrap", "chroot", "tar") if shutil.which(tool) is None]
    if missing:
        raise ImageBuildError(f"missing tools: {', '.join(missing)} (apt-get install -y debootstrap)")
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="procgrade-judge-image-", dir=workdir or "/var/tmp"))
    try:
        rootfs = tmp / "rootfs"
        _debootstrap(rootfs, log)
        _install_wheels(rootfs, log)
        _add_user_and_folders(rootfs)
        _clean(rootfs)
        archive = tmp / "rootfs.tar"
        _run(["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs), "-cf", str(archive), "."], log, what="tar")
        repository, _, version = tag.rpartition(":")
        changes = [f"ENV {k}={v}" for k, v in RECIPE["env"].items()]
        changes += [f"LABEL procgrade.recipe_sha256={recipe_sha256()}", f"LABEL procgrade.python={IMAGE_PYTHON}",
                    f"LABEL procgrade.user={JUDGE_UID}:{JUDGE_UID}", 'CMD ["sleep", "infinity"]']
        t0 = time.monotonic()
        try:
            client.api.import_image_from_file(str(archive), repository=repository, tag=version, changes=changes)
            image = client.images.get(tag)
        except Exception as exc:  # noqa: BLE001
            raise ImageBuildError(f"docker import failed: {exc}") from None
        log(f"docker import: {time.monotonic() - t0:.1f}s")
        _smoke_test(client, tag)
        log(f"built {tag} ({image.attrs.get('Size', 0) / 1e6:.0f} MB) in {time.monotonic() - started:.0f}s")
        return tag
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _smoke_test(client: Any, tag: str) -> None:
    code = ("import sys, pytest, getpass; print(sys.version.split()[0], pytest.__version__, "
            "getpass.getuser())")
    try:
        out = client.containers.run(tag, [IMAGE_PYTHON, "-c", code], user=f"{JUDGE_UID}:{JUDGE_UID}",
                                    network_mode="none", read_only=True, remove=True, stdout=True, stderr=True)
    except Exception as exc:  # noqa: BLE001
        with contextlib.suppress(Exception):
            client.images.remove(tag, force=True)
        raise ImageBuildError(f"the new image does not run pytest: {exc}") from None
    words = out.decode().split()
    if len(words) != 3 or not words[0].startswith("3.11.") or int(words[1].split(".")[0]) < 8 or words[2] != JUDGE_USER:
        with contextlib.suppress(Exception):
            client.images.remove(tag, force=True)
        raise ImageBuildError(f"the new image answers {out!r}, expected Python 3.11, pytest >= 8, user {JUDGE_USER}")


def ensure_image(client: Any | None = None, *, build: bool = True, log: Callable[[str], None] = _log_default) -> str:
    """The judge image's tag; built first when the engine does not have it (and ``build``)."""
    client = client or docker_client()
    tag = image_tag()
    if _image_exists(client, tag):
        return tag
    if not build:
        raise ImageBuildError(f"the judge image {tag} is missing: build it with `python -m procgrade.oracles.judge_image`")
    with exclusive_lock(Path(tempfile.gettempdir()) / "procgrade-judge-image.lock"):
        if _image_exists(client, tag):  # another process built it meanwhile
            return tag
        log(f"building {tag} (about two minutes, most of it fetching Debian's packages)")
        return build_image(client, tag, log=log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m procgrade.oracles.judge_image",
                                     description="Build the Docker judge image when it is missing; print its tag.")
    parser.add_argument("--print-tag", action="store_true", help="print the tag only (no engine needed)")
    parser.add_argument("--rebuild", action="store_true", help="build even when the image exists")
    args = parser.parse_args(argv)
    if args.print_tag:
        print(image_tag())
        return 0
    try:
        client = docker_client()
        if args.rebuild:
            with exclusive_lock(Path(tempfile.gettempdir()) / "procgrade-judge-image.lock"):
                tag = build_image(client)
        else:
            tag = ensure_image(client)
        image = client.images.get(tag)
    except ImageBuildError as exc:
        print(f"judge image: {exc}", file=sys.stderr)
        return 1
    print(f"{tag} {image.short_id} {image.attrs.get('Size', 0) / 1e6:.0f}MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
