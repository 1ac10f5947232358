/**
 * The worker's throughput end to end against SLUICE_URL, on the workload every SDK's worker
 * benchmark runs (crates/sluice-sdk/examples/bench_worker.rs, clients/python/bench/worker.py):
 * a fresh queue; a producer enqueues BENCH_MESSAGES (default 20000) JSON bodies of 1 KiB in
 * batches of 100 while a worker with BENCH_CONCURRENCY slots (default 16), an empty handler and
 * otherwise default settings runs; the clock runs from the first enqueue until the handler has
 * seen every message, and the worker's report must then count every message acked. Prints one
 * JSON line. Bounded in count and in time (BENCH_TIMEOUT_S, default 300).
 *
 *   SLUICE_URL=http://127.0.0.1:7566 npm run bench
 */
import { Queue, SluiceBackend } from "../src/index.js";

const messages = Number(process.env.BENCH_MESSAGES ?? 20_000);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const timeoutS = Number(process.env.BENCH_TIMEOUT_S ?? 300);
const BATCH = 100;
const pad = "x".repeat(1000); // {"n":..,"pad":"xxx..."}: 1 KiB of JSON

const backend = new SluiceBackend();
const name = `bench-ts-${process.pid}`;
let handled = 0;
const queue = new Queue<{ n: number; pad: string }>({
  name,
  backend,
  create: true,
  concurrency,
  execute: () => {
    handled++;
  },
  worker: { handleSignals: true },
});
await queue.ensure();

const deadline = setTimeout(() => {
  console.error(`not done within ${timeoutS} s`);
  process.exit(1);
}, timeoutS * 1000);

const started = performance.now();
const producer = (async () => {
  for (let n = 0; n < messages; n += BATCH) {
    const count = Math.min(BATCH, messages - n);
    await queue.enqueueMany(Array.from({ length: count }, (_, i) => ({ n: n + i, pad })));
  }
})();
const worker = queue.start();
while (handled < messages) await new Promise((resolve) => setTimeout(resolve, 5));
// Taken when the last message was handled (its ack follows within a request's time).
const seconds = (performance.now() - started) / 1000;
const report = await worker.stop();
await producer;
clearTimeout(deadline);
await backend.deleteQueue(name);

console.log(
  JSON.stringify({
    sdk: "typescript",
    messages,
    concurrency,
    seconds: Number(seconds.toFixed(3)),
    per_second: Math.round(messages / seconds),
    acked: report.processed,
  }),
);
process.exit(report.processed === messages ? 0 : 1);
