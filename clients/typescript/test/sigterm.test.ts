/**
 * Graceful shutdown on a real SIGTERM: a worker process is signalled while handlers run; it
 * lets them finish, acks them, exits 0 by itself, and every event is either processed once or
 * still in the queue, none left in flight.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, inject, it } from "vitest";
import { SluiceClient } from "../src/index.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const sluiceUrl = inject("sluiceUrl");

describe.skipIf(sluiceUrl === "")("SIGTERM", () => {
  it("stops the worker gracefully and loses nothing", async () => {
    const client = new SluiceClient({ url: sluiceUrl });
    const queue = `tss_${Math.random().toString(36).slice(2, 10)}`;
    await client.putQueue(queue);
    await client.enqueueBatch(
      queue,
      Array.from({ length: 10 }, (_, n) => ({ body: { n } })),
    );
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(root, "test", "fixtures", "sigterm-worker.ts")],
      {
        cwd: root,
        env: { ...process.env, SLUICE_URL: sluiceUrl, QUEUE: queue },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    const started = new Promise<void>((resolve) => {
      child.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        if (/started \d+/.test(output)) resolve();
      });
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    await started;
    child.kill("SIGTERM");
    const code = await exited;
    clearTimeout(killer);
    expect(code, output).toBe(0);
    const startedEvents = [...output.matchAll(/started (\d+)/g)].map((m) => m[1]);
    const doneEvents = [...output.matchAll(/done (\d+)/g)].map((m) => m[1]);
    // Every handler that started finished within the grace period.
    expect(doneEvents.sort()).toEqual(startedEvents.sort());
    const report = JSON.parse(/report (.*)/.exec(output)?.[1] ?? "{}") as {
      processed: number;
      released: number;
    };
    expect(report.released).toBe(0);
    expect(report.processed).toBe(doneEvents.length);
    const stats = await client.stats(queue);
    expect(stats.in_flight).toBe(0);
    expect(stats.ready).toBe(10 - doneEvents.length);
  }, 40_000);
});
