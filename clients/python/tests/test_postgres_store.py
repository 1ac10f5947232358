"""The PostgreSQL store's examples run against a `sluice serve` on a fresh schema of the test
database (127.0.0.1:5432, user postgres, database test, or SLUICE_TEST_DATABASE_URL).

A missing database fails when `CI` is set and skips elsewhere, like every service here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from .conftest import _ready_url, missing, sluice_bin

DATABASE_URL = os.environ.get("SLUICE_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
EXAMPLES = sorted((Path(__file__).parent.parent / "examples" / "postgres").glob("*.py"))


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[tuple[str, str]]:
    """A `sluice serve` on the PostgreSQL store: its URL and its schema, dropped afterwards."""
    try:
        psycopg.connect(DATABASE_URL, connect_timeout=5).close()
    except psycopg.OperationalError as error:
        missing(f"PostgreSQL is not reachable at {DATABASE_URL}: {error}")
    binary = sluice_bin()
    if binary is None:
        missing("no sluice binary: set SLUICE_BIN or build target/debug/sluice")
        raise AssertionError("unreachable")
    # The store tests' prefix: schemas a killed run leaves are dropped by them after an hour.
    schema = f"sluice_test_{uuid.uuid4().hex}"
    data_dir = tempfile.mkdtemp(prefix="sluice-py-pg-")
    config = Path(data_dir) / "sluice.toml"
    config.write_text(f'[store]\nkind = "postgres"\nurl = "{DATABASE_URL}"\nschema = "{schema}"\n')
    process = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--data", data_dir, "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        yield _ready_url(process), schema
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        shutil.rmtree(data_dir, ignore_errors=True)
        with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_postgres_example_runs(example: Path, postgres_server: tuple[str, str]) -> None:
    url, schema = postgres_server
    env = {
        **os.environ,
        "SLUICE_URL": url,
        "SLUICE_DATABASE_URL": DATABASE_URL,
        "SLUICE_SCHEMA": schema,
    }
    done = subprocess.run(
        [sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{example.name}:\n{done.stdout}\n{done.stderr}"
    print(done.stdout)


def test_there_is_an_example() -> None:
    assert EXAMPLES, "examples/postgres holds the PostgreSQL store's examples"
