"""Celery on kombu's SQS transport, unchanged, against an SQS endpoint: only the broker URL (keys,
host, port) and the region are set. A producer sends N jobs with `.delay()`, a `celery worker`
process (kombu's async receive path over pycurl) runs them, and every job's effect appears once.

    python celery_jobs.py http://127.0.0.1:PORT [N]     (in a venv with .ci/sqs-celery-requirements.txt)

When Celery imports this file as the app module (`celery -A celery_jobs worker`), it only defines
the app and the task; the configuration comes from the environment the producer gives it.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

from celery import Celery

APP_ENV = "CELERY_JOBS_SETTINGS"


def make_app(url, prefix, done_file):
    from sqs_common import credentials

    key, secret, region = credentials()
    parts = urllib.parse.urlsplit(url)
    broker = "sqs://{}:{}@{}".format(
        urllib.parse.quote(key, safe=""), urllib.parse.quote(secret, safe=""), parts.netloc
    )
    app = Celery("celery_jobs", broker=broker)
    app.conf.update(
        broker_transport_options={
            "region": region,
            "is_secure": parts.scheme == "https",
            "queue_name_prefix": prefix,
            "visibility_timeout": 30,
            "wait_time_seconds": 1,
            "polling_interval": 0.1,
        },
        broker_connection_retry_on_startup=False,
        broker_connection_max_retries=2,
        task_ignore_result=True,
        worker_prefetch_multiplier=4,
        worker_hijack_root_logger=False,
    )

    @app.task(name="record")
    def record(n, text):
        # The job's effect: one line per run, so a job run twice shows up twice. The last field
        # says whether the worker has kombu's async HTTP client (pycurl) loaded, as its async
        # receive path does (boto3's own calls would not load it).
        import sys

        via = "curl" if "kombu.asynchronous.http.curl" in sys.modules else "sync"
        with open(done_file, "a") as out:
            out.write(f"{n} {text} {via}\n")

    return app, record


if __name__ != "__main__":
    # Imported by `celery -A celery_jobs worker`.
    settings = os.environ.get(APP_ENV)
    if settings:
        app, record = make_app(*settings.split("|"))


def main():
    from sqs_common import Checks, client, endpoint, unique

    url = endpoint()
    jobs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    checks = Checks(f"Celery (kombu SQS transport) against {url}")
    prefix = unique("celery") + "-"
    here = os.path.dirname(os.path.abspath(__file__))
    done_file = os.path.join(tempfile.gettempdir(), prefix + "done.txt")
    app, record = make_app(url, prefix, done_file)
    state = {}

    def produce():
        for n in range(jobs):
            record.delay(n, f"job {n} \u00e9\u4e2d")
        sqs = client(url)
        queue_url = sqs.get_queue_url(QueueName=prefix + "celery")["QueueUrl"]
        state["queue_url"] = queue_url
        got = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
        assert got["Attributes"]["ApproximateNumberOfMessages"] == str(jobs), got

    def work():
        env = dict(os.environ, **{APP_ENV: f"{url}|{prefix}|{done_file}"})
        env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "celery_jobs", "worker", "--pool=solo",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel=INFO"],
            cwd=here,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            deadline = time.monotonic() + 30
            lines = []
            while time.monotonic() < deadline and worker.poll() is None:
                if os.path.exists(done_file):
                    with open(done_file) as f:
                        lines = f.read().splitlines()
                if len(lines) >= jobs:
                    break
                time.sleep(0.2)
            assert worker.poll() is None, "the worker exited early"
            # A moment more: a job run twice would show up now.
            time.sleep(1.5)
            with open(done_file) as f:
                done = sorted(f.read().splitlines())
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                output, _ = worker.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                worker.kill()
                output, _ = worker.communicate()
            if os.path.exists(done_file):
                os.remove(done_file)
        wanted = sorted(f"{n} job {n} \u00e9\u4e2d curl" for n in range(jobs))
        if done != wanted:
            print(output[-6000:])
        assert done == wanted, f"{len(done)} job runs of {jobs}: {done[:5]}..."
        sqs = client(url)
        got = sqs.get_queue_attributes(
            QueueUrl=state["queue_url"],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        assert got == {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0"}, got

    def cleanup():
        client(url).delete_queue(QueueUrl=state["queue_url"])

    checks.run(f"{jobs} jobs sent with .delay()", produce)
    if "queue_url" in state:
        checks.run("a celery worker runs each job once and deletes it", work)
        checks.run("delete the queue", cleanup)
    checks.finish()


if __name__ == "__main__":
    main()
