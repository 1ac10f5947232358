/**
 * Enqueue inside your own PostgreSQL transaction (sluice's PostgreSQL store), with node-postgres.
 * An order row and its "order-created" message are written in one transaction: the message
 * exists if and only if the order does. A transaction that fails after enqueueing leaves
 * neither. Then a consumer receives the message from sluice as from any producer.
 *
 * Needs a sluice server on the PostgreSQL store (SLUICE_URL) and the same database
 * (SLUICE_DATABASE_URL, schema SLUICE_SCHEMA, default "sluice"); exits 0 when it all held.
 *
 *   SLUICE_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx examples/postgres/enqueue-in-transaction.ts
 */
import { randomBytes } from "node:crypto";
import pg from "pg";
import { SluiceClient } from "../../src/index.js";

const databaseUrl = process.env.SLUICE_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const schema = process.env.SLUICE_SCHEMA ?? "sluice";
const queue = `order-created-${randomBytes(3).toString("hex")}`;
const enqueue = `SELECT * FROM ${pg.escapeIdentifier(schema)}.enqueue($1, $2::jsonb, id => $3, key => $4)`;

async function main(): Promise<number> {
  const sluice = new SluiceClient();
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    await sluice.putQueue(queue);
    await db.query("CREATE TEMP TABLE orders (id int PRIMARY KEY, customer text)");

    // The business change and its message commit together.
    await db.query("BEGIN");
    await db.query("INSERT INTO orders (id, customer) VALUES ($1, $2)", [42, "c-7"]);
    const { rows } = await db.query(enqueue, [
      queue,
      JSON.stringify({ order_id: 42 }),
      "order-42",
      "c-7",
    ]);
    await db.query("COMMIT");
    const { message_id: messageId, created } = rows[0];
    console.log(`order 42 stored with message ${messageId} (created: ${created})`);

    // A transaction that fails after enqueueing keeps neither the row nor the message.
    await db.query("BEGIN");
    await db.query("INSERT INTO orders (id, customer) VALUES ($1, $2)", [43, "c-8"]);
    await db.query(enqueue, [queue, JSON.stringify({ order_id: 43 }), "order-43", "c-8"]);
    await db.query("ROLLBACK");
    console.log("order 43 rolled back");

    const { messages: received } = await sluice.receive(queue, { max: 10, wait_ms: 2_000 });
    for (const message of received) await sluice.ack(queue, message.receipt);
    const bodies = received.map((message) => message.body);
    console.log(`received ${JSON.stringify(bodies)}`);
    if (
      JSON.stringify(bodies) !== JSON.stringify([{ order_id: 42 }]) ||
      received[0]?.message_id !== messageId
    ) {
      console.error("expected exactly order 42's message");
      return 1;
    }
    const again = await db.query(enqueue, [
      queue,
      JSON.stringify({ order_id: 42 }),
      "order-42",
      "c-7",
    ]);
    if (again.rows[0]?.created !== false) {
      console.error("a second enqueue with id order-42 should not create a message");
      return 1;
    }
    return 0;
  } finally {
    await db.end();
  }
}

process.exitCode = await main();
