"""The package as a user gets it (issue 31): a wheel and an sdist built by `python -m build`,
`twine check --strict` clean, each carrying the LICENSE and the type marker; the wheel installed
into a fresh virtual environment of its own (its dependencies from the package index, as
`pip install` gets them) and the README's ten-line worker run there against the test server."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

from .conftest import SluiceServer
from .test_readme import run_readme_worker

PACKAGE = Path(__file__).parent.parent
STEP_TIMEOUT_S = 300


def run(*args: str, cwd: Path = PACKAGE) -> str:
    done = subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_built_wheel_installs_in_a_fresh_venv_and_runs_the_readme(
    sluice_server: SluiceServer, tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    # The build tools are pinned in requirements-dev.txt, so no isolated build environment.
    run(sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), ".")
    wheels = list(dist.glob("*.whl"))
    sdists = list(dist.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(dist.iterdir())
    run(sys.executable, "-m", "twine", "check", "--strict", str(wheels[0]), str(sdists[0]))

    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel_files = wheel.namelist()
        metadata = wheel.read(
            next(name for name in wheel_files if name.endswith(".dist-info/METADATA"))
        )
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in wheel_files)
    assert "sluice_client/py.typed" in wheel_files
    assert not any(name.startswith("tests/") for name in wheel_files), wheel_files
    with tarfile.open(sdists[0]) as sdist:
        sdist_files = sdist.getnames()
    root = sdists[0].name.removesuffix(".tar.gz")
    for name in ["LICENSE", "README.md", "pyproject.toml", "src/sluice_client/__init__.py"]:
        assert f"{root}/{name}" in sdist_files, name
    assert not any("/.venv/" in name or "__pycache__" in name for name in sdist_files)
    assert b"License-Expression: Apache-2.0" in metadata, metadata[:400]

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    run(python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheels[0]))
    # Run from outside the source tree, so the installed package is what is imported.
    where = run(python, "-c", "import sluice_client; print(sluice_client.__file__)", cwd=tmp_path)
    assert str(env_dir) in where, where
    run_readme_worker(python, sluice_server.url, tmp_path)
