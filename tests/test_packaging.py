"""The built distribution installs under one name, ``procgrade``, beside anything.

Builds the sdist and the wheel (``python -m build``: warnings are failures), then installs the wheel
into a fresh virtualenv that already holds packages named ``engine``, ``rules`` and ``migrations``
(tiny fakes made here) and checks that both work: the fakes import as themselves, ``import procgrade``
exposes the API, and the ``procgrade`` command creates a store and ingests a run with its own
migrations and rule sets. The fresh venv gets procgrade's dependencies through a ``.pth`` line naming
this venv's site-packages (no download; the editable install of this checkout is not visible there,
since ``.pth`` files are read only in site folders).

RENAME_DONE: the move of the installed packages under ``procgrade`` (``procgrade.engine``, ...) is
done by the lead after the helpers' branches are merged. Until then the wheel still installs
``engine`` at the top, and this test asserts exactly that (so it fails, loudly, the day the rename
lands: flip RENAME_DONE to True and the install checks run). Nothing is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "native" / "todo-app-run.jsonl"
#: Flipped by the lead once the installed packages live under ``procgrade`` (see the module docstring).
RENAME_DONE = False
FAKES = ("engine", "rules", "migrations")


def _build(out: Path) -> tuple[Path, Path, str]:
    # PYTHONDONTWRITEBYTECODE (set on some CI machines) makes setuptools say "warning: byte-compiling is
    # disabled": a note about this machine, not about the package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=900, env=env)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-5000:]
    wheel = next(out.glob("procgrade-*.whl"))
    sdist = next(out.glob("procgrade-*.tar.gz"))
    return wheel, sdist, log


def _top_level(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name.split("/", 1)[0] for name in archive.namelist() if not name.split("/", 1)[0].endswith(".dist-info")}


def test_the_wheel_installs_under_one_name_beside_packages_called_engine_rules_and_migrations(tmp_path: Path) -> None:
    wheel, sdist, log = _build(tmp_path / "dist")
    warnings = [line for line in log.splitlines() if "warning" in line.lower()]
    assert not warnings, "\n".join(warnings)  # e.g. "Package 'procgrade.rules.sets' is absent from the packages configuration"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert any(name.endswith("rules/sets/default.yaml") for name in names)
    assert any(name.endswith("migrations/script.py.mako") for name in names)
    assert any("/migrations/versions/" in name or name.startswith("migrations/versions/") for name in names)

    if not RENAME_DONE:
        # The known state before the rename: top-level engine, rules, oracles, judges, migrations.
        assert {"engine", "rules", "migrations"} <= _top_level(wheel), _top_level(wheel)
        return

    assert _top_level(wheel) == {"procgrade"}, _top_level(wheel)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    for name in FAKES:  # another project's packages, installed first
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(f"WHO = 'another project: {name}'\n")
    (site / "zz-procgrade-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                                "--no-index", str(wheel)], capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]

    fakes = subprocess.run([str(python), "-c", "import engine, rules, migrations; "
                            "print(engine.WHO, rules.WHO, migrations.WHO, sep='|')"], capture_output=True, text=True)
    assert fakes.stdout.strip() == "|".join(f"another project: {n}" for n in FAKES), fakes.stderr
    api = subprocess.run([str(python), "-c", "import procgrade; procgrade.open_store; procgrade.runs_df; "
                          "print(sorted(procgrade.__all__)[:3], procgrade.__version__)"],
                         capture_output=True, text=True)
    assert api.returncode == 0, api.stderr

    command = venv / "bin" / "procgrade"
    db = f"sqlite:///{tmp_path / 'p.db'}"
    for args in (["--version"], ["init", "--db", db], ["ingest", str(EXAMPLE), "--db", db], ["rescore", "--all", "--db", db],
                 ["verify", "--db", db]):
        done = subprocess.run([str(command), *args], capture_output=True, text=True, cwd=tmp_path, timeout=600)
        assert done.returncode == 0, (args, done.stderr)
    assert sdist.stat().st_size > 0
