"""SIGTERM stops a worker gracefully: the running handler finishes and is acked, nothing is
lost, and the process exits on its own. The worker runs in a child process against the test
server, as a deployed worker would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from sluice_client import SluiceQueue

from .conftest import SluiceServer, unique
from .harness import wait_until

CHILD = textwrap.dedent(
    """
    import json, sys, time
    from sluice_client import SluiceQueue, Worker

    queue = SluiceQueue(sys.argv[1], url=sys.argv[2])
    worker = Worker(queue, lambda ctx: time.sleep(1.0), concurrency=1, poll_wait=0.2)
    report = worker.run()
    print(json.dumps(report.__dict__), flush=True)
    """
)


def test_sigterm_lets_the_running_handler_finish(sluice_server: SluiceServer) -> None:
    name = unique("sigterm")
    queue = SluiceQueue(name, url=sluice_server.url, create=True)
    for n in range(4):
        queue.push({"n": n})
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, name, sluice_server.url],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    try:
        wait_until(lambda: queue.stats().in_flight == 1, what="the child's first event")
        child.send_signal(signal.SIGTERM)
        out, _ = child.communicate(timeout=20)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0
    report = json.loads(out.strip().splitlines()[-1])
    stats = queue.stats()
    assert report["released"] == 0 and report["processed"] >= 1
    assert stats.in_flight == 0
    assert report["processed"] + (stats.ready or 0) == 4
    queue.close()


IDLE_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from sluice_client import AsyncSluiceQueue, AsyncWorker, SluiceQueue, Worker

    async def handle(ctx):
        return None

    if sys.argv[3] == "sync":
        Worker(SluiceQueue(sys.argv[1], url=sys.argv[2]), lambda ctx: None, concurrency=4).run()
    else:
        queue = AsyncSluiceQueue(sys.argv[1], url=sys.argv[2])
        asyncio.run(AsyncWorker(queue, handle, concurrency=4).run())
    print("stopped", flush=True)
    """
)

IDLE_EXIT_S = 2.0
"""How long an idle worker may take to exit on Ctrl-C: well under the 2.5 s issue 31 saw, and
well over the 0.2-0.7 s it takes (a long poll of the default `poll_wait`, 1 s, is cut short)."""


def test_an_idle_worker_exits_promptly_on_ctrl_c(sluice_server: SluiceServer) -> None:
    name = unique("idle")
    SluiceQueue(name, url=sluice_server.url, create=True).ensure()
    for flavor in ("sync", "async"):
        child = subprocess.Popen(
            [sys.executable, "-c", IDLE_CHILD, name, sluice_server.url, flavor],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            # Idle: its fetcher is in a long poll of an empty queue.
            time.sleep(1.5)
            assert child.poll() is None, f"{flavor}: the worker exited on its own"
            started = time.monotonic()
            child.send_signal(signal.SIGINT)
            out, _ = child.communicate(timeout=10)
            took = time.monotonic() - started
        finally:
            child.kill()
        assert child.returncode == 0 and "stopped" in out, f"{flavor}: {child.returncode} {out}"
        assert took < IDLE_EXIT_S, f"{flavor}: {took:.2f} s to exit"
