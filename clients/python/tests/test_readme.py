"""The README's ten-line producer and worker, run as a new user would: the first `python` block
of README.md, as written, in a child process against the test server, stopped with SIGTERM once
it has handled the event (the worker runs until SIGTERM or ctrl-c)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import SluiceServer

README = Path(__file__).parent.parent / "README.md"
HANDLED_TIMEOUT_S = 30.0


def first_python_block() -> str:
    match = re.search(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    assert match, "README.md has a python block"
    return match.group(1)


def run_readme_worker(python: str, url: str, tmp_path: Path) -> None:
    """Runs the README's block with `python` against `url` until it has handled the event, then
    stops it with SIGTERM; fails unless it handled the event and exited 0."""
    script = tmp_path / "readme_worker.py"
    # A fresh queue name per run, so an earlier run's event cannot satisfy this one.
    queue = f"orders-{os.getpid()}-{time.monotonic_ns()}"
    script.write_text(first_python_block().replace('"orders"', f'"{queue}"'))
    child = subprocess.Popen(
        [python, str(script)],
        env={**os.environ, "SLUICE_URL": url},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert child.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + HANDLED_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            seen.append(line)
            if "charging 1001 attempt 1" in line:
                break
        assert any("charging 1001 attempt 1" in line for line in seen), "".join(seen)
        child.send_signal(signal.SIGTERM)
        rest, _ = child.communicate(timeout=30)
        assert child.returncode == 0, "".join(seen) + rest
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_the_readme_worker_handles_the_event_and_stops_on_sigterm(
    sluice_server: SluiceServer, tmp_path: Path
) -> None:
    run_readme_worker(sys.executable, sluice_server.url, tmp_path)
