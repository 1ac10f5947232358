"""Enqueue inside your own PostgreSQL transaction (sluice's PostgreSQL store).

An order row and its "order-created" message are written in one transaction: the message exists
if and only if the order does. A second transaction that fails after enqueueing leaves neither.
Then a consumer receives the message from sluice as from any producer.

Needs a sluice server on the PostgreSQL store (SLUICE_URL) and the same database
(SLUICE_DATABASE_URL, schema SLUICE_SCHEMA, default "sluice"); exits 0 when it all held.

    export SLUICE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test
    python examples/postgres/enqueue_in_transaction.py
"""

from __future__ import annotations

import os
import sys

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from sluice_client import Client


def main() -> int:
    url = os.environ.get("SLUICE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
    schema = os.environ.get("SLUICE_SCHEMA", "sluice")
    queue = f"order-created-{os.urandom(3).hex()}"
    enqueue = sql.SQL("SELECT * FROM {}.enqueue(%s, %s, id => %s, key => %s)").format(
        sql.Identifier(schema)
    )

    with Client() as sluice, psycopg.connect(url, autocommit=True) as conn:
        sluice.put_queue(queue)
        conn.execute("CREATE TEMP TABLE orders (id int PRIMARY KEY, customer text)")

        # The business change and its message commit together.
        with conn.transaction():
            conn.execute("INSERT INTO orders (id, customer) VALUES (%s, %s)", (42, "c-7"))
            order = (queue, Jsonb({"order_id": 42}), "order-42", "c-7")
            row = conn.execute(enqueue, order).fetchone()
            assert row is not None
            message_id, created = row
        print(f"order 42 stored with message {message_id} (created: {created})")

        # A transaction that fails after enqueueing keeps neither the row nor the message.
        try:
            with conn.transaction():
                conn.execute("INSERT INTO orders (id, customer) VALUES (%s, %s)", (43, "c-8"))
                conn.execute(enqueue, (queue, Jsonb({"order_id": 43}), "order-43", "c-8"))
                raise RuntimeError("payment check failed")
        except RuntimeError:
            print("order 43 rolled back")

        received = sluice.receive(queue, 10, wait_ms=2_000)
        bodies = [message.body for message in received]
        for message in received:
            sluice.ack(queue, message.receipt)
        print(f"received {bodies}")
        if bodies != [{"order_id": 42}] or str(received[0].message_id) != str(message_id):
            print("expected exactly order 42's message", file=sys.stderr)
            return 1
        again = conn.execute(enqueue, order).fetchone()
        if again is None or again[1]:
            print("a second enqueue with id order-42 should not create a message", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
