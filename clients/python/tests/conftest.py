"""Shared fixtures: a real `sluice serve` for the session, and the services the backends need.

The binary is `SLUICE_BIN`, else `<repo>/target/debug/sluice`. A missing binary or broker fails
the tests when `CI` is set, and skips them otherwise (with the reason).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

READY_PREFIX = "sluice listening on "
START_TIMEOUT_S = 30.0
RABBITMQ_ADDRESS = ("127.0.0.1", 5672)


def repo_root() -> Path:
    """The repository: the first directory above this file with a `conformance` folder."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "conformance" / "scenarios.json").is_file():
            return parent
    raise FileNotFoundError("conformance/scenarios.json not found above the tests")


def missing(reason: str) -> NoReturn:
    """A missing service fails under CI and skips elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this fails instead of skipping)")
    pytest.skip(reason)


@dataclass(frozen=True)
class SluiceServer:
    url: str
    data_dir: str


def sluice_bin() -> str | None:
    configured = os.environ.get("SLUICE_BIN")
    if configured:
        return configured
    try:
        built = repo_root() / "target" / "debug" / "sluice"
    except FileNotFoundError:
        return None
    return str(built) if built.is_file() else None


@pytest.fixture(scope="session")
def sluice_server() -> Iterator[SluiceServer]:
    """A `sluice serve` on a free loopback port with a fresh data directory."""
    binary = sluice_bin()
    if binary is None or not Path(binary).is_file():
        missing("no sluice binary: set SLUICE_BIN or build target/debug/sluice")
        raise AssertionError("unreachable")
    data_dir = tempfile.mkdtemp(prefix="sluice-py-tests-")
    process = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--data", data_dir, "--durability", "os"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = _ready_url(process)
        yield SluiceServer(url=url, data_dir=data_dir)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        shutil.rmtree(data_dir, ignore_errors=True)


def _ready_url(process: subprocess.Popen[str]) -> str:
    """Reads the ready line, bounded in time (a reader thread, since a pipe read blocks)."""
    found: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(READY_PREFIX):
                found.append(line[len(READY_PREFIX) :].strip())
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    if not found:
        process.kill()
        raise RuntimeError(f"sluice did not say it was listening within {START_TIMEOUT_S} s")
    return found[0]


@pytest.fixture(scope="session")
def rabbitmq() -> str:
    """The RabbitMQ broker's URL (guest/guest on 127.0.0.1:5672)."""
    try:
        with socket.create_connection(RABBITMQ_ADDRESS, timeout=2):
            pass
    except OSError as error:
        missing(f"RabbitMQ is not reachable at 127.0.0.1:5672: {error}")
    return "amqp://guest:guest@127.0.0.1:5672/%2F"


@pytest.fixture(scope="session")
def moto_url() -> str:
    """moto_server's URL, from `SLUICE_TEST_MOTO_URL`: a second SQS implementation that knows
    nothing of sluice, standing in for AWS. The Rust test that runs this suite
    (crates/sluice-cli/tests/clients.rs) starts one and passes its URL; by hand,
    `moto_server -H 127.0.0.1 -p 5055 &` and `SLUICE_TEST_MOTO_URL=http://127.0.0.1:5055`."""
    url = os.environ.get("SLUICE_TEST_MOTO_URL", "")
    if not url:
        missing("SLUICE_TEST_MOTO_URL is not set (moto_server for the SQS backend)")
    parsed = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parsed.hostname or "", parsed.port or 80), timeout=2):
            pass
    except OSError as error:
        missing(f"moto_server does not answer at {url}: {error}")
    return url


def unique(prefix: str) -> str:
    """A queue name no earlier test used."""
    return f"{prefix}-{int(time.time() * 1000) % 10**9}-{os.urandom(3).hex()}"
