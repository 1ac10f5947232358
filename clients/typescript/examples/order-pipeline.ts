/**
 * An order pipeline with retries and a dead-letter queue. Orders are validated by a schema on
 * enqueue and on receive; the payment step fails now and then (retried with backoff) and
 * declines some cards for good (not retryable: dead-lettered at once, and `onDeadLetter` tells
 * the customer). When the queue is empty the worker stops, the dead letters are listed, and
 * the process exits 0 if every order ended where it should.
 *
 *   SLUICE_URL=http://127.0.0.1:7566 npx tsx examples/order-pipeline.ts
 */
import { z } from "zod";
import { Queue, SluiceBackend } from "../src/index.js";

const Order = z.object({
  orderId: z.number().int().positive(),
  customer: z.string().email(),
  totalCents: z.number().int().positive(),
});

class CardDeclined extends Error {}

const ORDERS = 20;
const failuresLeft = new Map<number, number>();
const charged: number[] = [];
const notified: number[] = [];

/** The payment service: every 4th order fails twice first; every 7th card is declined. */
async function charge(orderId: number): Promise<void> {
  if (orderId % 7 === 0) throw new CardDeclined(`card declined for order ${orderId}`);
  const left = failuresLeft.get(orderId) ?? (orderId % 4 === 0 ? 2 : 0);
  if (left > 0) {
    failuresLeft.set(orderId, left - 1);
    throw new Error("payment service timed out");
  }
  charged.push(orderId);
}

const orders = new Queue({
  name: `orders-${process.pid}`,
  backend: new SluiceBackend(),
  create: true,
  schema: Order,
  concurrency: 4,
  retry: {
    maxAttempts: 4,
    backoff: { initialMs: 200, factor: 2, maxMs: 2000 },
    isRetryable: (error) => !(error instanceof CardDeclined),
  },
  execute: async ({ event, attempt }) => {
    await charge(event.orderId);
    console.log(`order ${event.orderId} charged (attempt ${attempt})`);
  },
  onDeadLetter: ({ event, error, attempt }) => {
    notified.push(event.orderId);
    console.log(`order ${event.orderId} dead-lettered after attempt ${attempt}: ${String(error)}`);
  },
  onEmpty: () => {
    void orders.worker?.stop();
  },
});

await orders.enqueueMany(
  Array.from({ length: ORDERS }, (_, n) => ({
    orderId: n + 1,
    customer: `customer${n + 1}@example.com`,
    totalCents: 1000 + n,
  })),
);
const worker = orders.start();
const timeout = setTimeout(() => {
  console.error("not done within 60 s");
  process.exit(1);
}, 60_000);
const report = await worker.done;
clearTimeout(timeout);

const dead = await orders.deadLetters();
console.log(
  `charged ${report.processed}, retried ${report.retried}, dead-lettered ${report.deadLettered}: ${dead
    .map((letter) => `${(letter.body as { orderId: number }).orderId} (${letter.error})`)
    .join(", ")}`,
);
const declined = Array.from({ length: ORDERS }, (_, n) => n + 1).filter((id) => id % 7 === 0);
const ok =
  charged.length === ORDERS - declined.length &&
  [...notified].sort((a, b) => a - b).join() === declined.join() &&
  dead.length === declined.length;
await new SluiceBackend().client.deleteQueue(orders.name);
process.exit(ok ? 0 : 1);
