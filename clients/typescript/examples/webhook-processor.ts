/**
 * A webhook processor at a fixed pace. Incoming webhooks are enqueued (as sluice's `/hooks`
 * endpoints or a producer would); a worker handles them no faster than the downstream allows:
 * the queue's rate limit (sluice's token bucket) sets the pace, whatever the worker's
 * concurrency. Exits 0 once every event was handled at that pace.
 *
 *   SLUICE_URL=http://127.0.0.1:7566 npx tsx examples/webhook-processor.ts
 */
import { Queue, SluiceBackend } from "../src/index.js";

const EVENTS = 30;
const PER_SECOND = 20;

interface WebhookEvent {
  delivery: string;
  type: "push" | "pull_request";
  repository: string;
}

const backend = new SluiceBackend(); // SLUICE_URL, SLUICE_TOKEN
const name = `webhook-events-${process.pid}`;
// The pace: at most 20 deliveries a second, in bursts of 1.
await backend.client.putQueue(name, { rate_limit: { per_second: PER_SECOND, burst: 1 } });

const handledAt: number[] = [];
const events = new Queue<WebhookEvent>({
  name,
  backend,
  concurrency: 8,
  execute: async ({ event, attempt }) => {
    handledAt.push(Date.now());
    if (handledAt.length % 10 === 0) {
      console.log(
        `handled ${handledAt.length}: ${event.type} on ${event.repository} (attempt ${attempt})`,
      );
    }
  },
  onEmpty: () => {
    void events.worker?.stop();
  },
});

// Webhooks arrive all at once; each delivery id is an idempotency id, so a redelivery is stored once.
const results = await events.enqueueMany(
  Array.from({ length: EVENTS }, (_, n) => ({
    delivery: `d-${n}`,
    type: n % 3 === 0 ? "pull_request" : "push",
    repository: "acme/api",
  })),
);
console.log(`enqueued ${results.filter((r) => r.created).length} webhook events`);

const started = Date.now();
const worker = events.start();
const timeout = setTimeout(() => {
  console.error("not done within 30 s");
  process.exit(1);
}, 30_000);
const report = await worker.done;
clearTimeout(timeout);
const seconds = (Date.now() - started) / 1000;
const rate = (handledAt.length - 1) / ((handledAt.at(-1)! - handledAt[0]!) / 1000);
console.log(
  `handled ${report.processed} events in ${seconds.toFixed(1)} s: ${rate.toFixed(1)}/s (limit ${PER_SECOND}/s)`,
);
await backend.client.deleteQueue(name);
// At the pace asked for: never faster than the limit (a little slack for clocks).
if (report.processed !== EVENTS || rate > PER_SECOND * 1.15) process.exit(1);
