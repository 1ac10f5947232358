"""The examples run against the test server and exit 0 (each checks its own outcome)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import SluiceServer

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_runs(example: Path, sluice_server: SluiceServer) -> None:
    env = {**os.environ, "SLUICE_URL": sluice_server.url}
    done = subprocess.run(
        [sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{example.name}:\n{done.stdout}\n{done.stderr}"
    print(done.stdout)
