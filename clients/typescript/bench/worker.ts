/**
 * The worker's throughput end to end against SLUICE_URL: messages with 1 KiB bodies are
 * enqueued in batches, then a worker with an empty handler and default settings (lease,
 * poll wait, retry) receives and acks them all. Bounded in count (BENCH_MESSAGES, default
 * 20000) and time (BENCH_TIMEOUT_S, default 120). Concurrency: BENCH_CONCURRENCY (default 16).
 *
 *   SLUICE_URL=http://127.0.0.1:7566 npm run bench
 */
import { Queue, SluiceBackend } from "../src/index.js";

const messages = Number(process.env.BENCH_MESSAGES ?? 20_000);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const timeoutS = Number(process.env.BENCH_TIMEOUT_S ?? 120);
const body = { data: "x".repeat(1024 - 11) }; // 1 KiB of JSON text

const backend = new SluiceBackend();
const name = `bench-ts-${process.pid}`;
const queue = new Queue<typeof body>({
  name,
  backend,
  concurrency,
  execute: () => {},
  onEmpty: () => {
    void queue.worker?.stop();
  },
  worker: { handleSignals: true },
});
await queue.ensure();

const deadline = setTimeout(() => {
  console.error(`not done within ${timeoutS} s`);
  process.exit(1);
}, timeoutS * 1000);

let started = performance.now();
for (let sent = 0; sent < messages; sent += 1000) {
  await queue.enqueueMany(Array.from({ length: Math.min(1000, messages - sent) }, () => body));
}
const enqueueSeconds = (performance.now() - started) / 1000;

started = performance.now();
const worker = queue.start();
const report = await worker.done;
const workSeconds = (performance.now() - started) / 1000;
clearTimeout(deadline);
await backend.client.deleteQueue(name);

const result = {
  url: backend.client.url,
  messages,
  body_bytes: JSON.stringify(body).length,
  concurrency,
  enqueue_per_s: Math.round(messages / enqueueSeconds),
  worker_per_s: Math.round(report.processed / workSeconds),
  processed: report.processed,
  seconds: Number(workSeconds.toFixed(2)),
};
console.log(JSON.stringify(result));
process.exit(report.processed === messages ? 0 : 1);
