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
