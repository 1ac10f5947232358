/**
 * The worker runtime on every backend that can run it: memory (a manual clock, so backoff and
 * leases take no real time), a real `sluice serve`, and where their capabilities allow, SQS
 * (sluice's SQS API) and RabbitMQ. Each test opens a fresh queue.
 */
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  type Backend,
  Queue,
  type QueueConfig,
  SluiceBackend,
  UnsupportedError,
  ValidationError,
  type WorkerReport,
  envelope,
} from "../src/index.js";
import { backendCases } from "./support/backends.js";
import { isMemory, pass, waitFor } from "./support/time.js";

const quiet = { warn: () => {} };
const cleanups: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** `backend` with some methods replaced (the rest bound to it: its private fields stay reachable). */
function spy(backend: Backend, overrides: Partial<Backend>): Backend {
  return new Proxy(backend, {
    get(target, property) {
      if (property in overrides) return overrides[property as keyof Backend];
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

function name(test: string): string {
  return `tsw_${test}_${Math.random().toString(36).slice(2, 10)}`;
}

/** A queue on `backend` with test-friendly worker settings; stopped after the test. */
function queueOn<I, O>(
  backend: Backend,
  config: Omit<QueueConfig<I, O>, "name" | "backend"> & { name?: string },
): Queue<I, O> {
  const queue = new Queue<I, O>({
    name: config.name ?? name("q"),
    backend,
    create: true,
    ...config,
    worker: { pollWaitMs: 200, handleSignals: false, logger: quiet, ...config.worker },
  });
  cleanups.push(async () => {
    await queue.worker?.stop();
    await queue.delete().catch(() => {});
  });
  return queue;
}

// SQS on moto runs the worker scenarios (conformance.test.ts) rather than this whole suite: its
// SQS paths are the ones sluice's SQS API takes, and CI's time is bounded.
for (const backendCase of backendCases().filter((c) => c.name !== "sqs on moto")) {
  describe.skipIf(backendCase.skip !== undefined)(`worker on ${backendCase.name}`, () => {
    let backend: Backend;

    async function open(): Promise<Backend> {
      backend = await backendCase.make();
      const opened = backend;
      cleanups.unshift(() => opened.close());
      return backend;
    }

    it("a missing queue is queue_not_found and nothing creates it unless asked (issue 31)", async () => {
      await open();
      const typo = name("ordres");
      const queue = new Queue({ name: typo, backend, concurrency: 1 });
      await expect(queue.enqueue({ n: 1 })).rejects.toMatchObject({ code: "queue_not_found" });
      await expect(queue.stats()).rejects.toMatchObject({ code: "queue_not_found" });
      expect(await backend.queueExists(typo)).toBe(false);
      // Asked: created on first use, and once it exists opening it changes nothing.
      const made = new Queue({
        name: typo,
        backend,
        create: true,
        concurrency: 1,
        queue: { maxAttempts: 3 },
      });
      cleanups.push(() => made.delete().catch(() => {}));
      await made.enqueue({ n: 1 });
      expect(await backend.queueExists(typo)).toBe(true);
      if (backend instanceof SluiceBackend) {
        const other = new Queue({
          name: typo,
          backend,
          create: true,
          concurrency: 1,
          queue: { maxAttempts: 9 },
        });
        await other.enqueue({ n: 2 });
        const shown = await backend.client.getQueue(typo);
        expect(shown.config.max_attempts).toBe(3);
      }
    });

    it("enqueue answers eventId, position and created; a repeated id stores nothing", async () => {
      await open();
      const queue = queueOn(backend, {
        concurrency: 1,
        queue: { dedup: backend.capabilities.dedup },
      });
      const first = await queue.enqueue({ n: 1 }, backend.capabilities.dedup ? { id: "a-1" } : {});
      expect(first.created).toBe(true);
      expect(typeof first.eventId).toBe("string");
      if (backend.kind === "memory" || backend.kind === "sluice") expect(first.position).toBe(0);
      if (backend.capabilities.dedup && backend.kind !== "sqs") {
        const again = await queue.enqueue({ n: 1 }, { id: "a-1" });
        expect(again).toEqual({ eventId: first.eventId, position: 0, created: false });
      }
      const many = await queue.enqueueMany([{ n: 2 }, envelope({ n: 3 }, { headers: { h: "v" } })]);
      expect(many.map((r) => r.created)).toEqual([true, true]);
    });

    it("never runs more handlers at once than its concurrency", async () => {
      await open();
      let running = 0;
      let most = 0;
      let emptied = false;
      const queue = queueOn(backend, {
        concurrency: 3,
        execute: async () => {
          running++;
          most = Math.max(most, running);
          await backend.clock.sleep(20);
          running--;
        },
        onEmpty: () => {
          emptied = true;
        },
      });
      await queue.enqueueMany(Array.from({ length: 12 }, (_, n) => ({ n })));
      const worker = queue.start();
      await waitFor(
        backend,
        "12 processed and onEmpty",
        () => emptied && worker.status().processedCount === 12,
      );
      expect(most).toBe(3);
      const report = await worker.stop();
      expect(report.processed).toBe(12);
    });

    it("asks for no more messages than slots are free", async () => {
      await open();
      let delivered = 0;
      let finished = 0;
      const asks: { max: number; inHand: number }[] = [];
      const watched = spy(backend, {
        receive: async (queue, options) => {
          asks.push({ max: options?.max ?? 1, inHand: delivered - finished });
          const got = await backend.receive(queue, options);
          delivered += got.length;
          return got;
        },
      });
      const queue = queueOn(watched, {
        concurrency: 3,
        execute: async () => {
          await backend.clock.sleep(20);
          finished++;
        },
      });
      await queue.enqueueMany(Array.from({ length: 10 }, (_, n) => ({ n })));
      const worker = queue.start();
      await waitFor(backend, "10 processed", () => worker.status().processedCount === 10);
      expect(asks.length).toBeGreaterThan(0);
      for (const ask of asks) expect(ask.max + ask.inHand).toBeLessThanOrEqual(3);
      // Several at once where the slots were free: one receive for all of them.
      expect(asks[0]?.max).toBe(3);
    });

    it("acks handlers that finish together in one request; a result alone", async (context) => {
      // RabbitMQ and SQS hand out few messages per receive; the coalescing shows on the rest.
      if (backendCase.kind === "rabbitmq") context.skip("RabbitMQ receives one message at a time");
      await open();
      const requests: string[][] = [];
      let single = 0;
      const watched = spy(backend, {
        ackMany: (queue, receipts) => {
          requests.push(receipts);
          return backend.ackMany(queue, receipts);
        },
        ack: (queue, receipt, result) => {
          single++;
          return backend.ack(queue, receipt, result);
        },
      });
      // A result is kept per message: that ack goes alone.
      const queue = queueOn<{ n: number }, { n: number }>(watched, {
        concurrency: 8,
        execute: ({ event }) => (event.n === 7 ? { kept: true } : undefined),
      });
      await queue.enqueueMany(Array.from({ length: 40 }, (_, n) => ({ n })));
      const worker = queue.start();
      await waitFor(backend, "40 processed", () => worker.status().processedCount === 40);
      expect(single).toBe(1);
      expect(requests.flat().length).toBe(39);
      expect(new Set(requests.flat()).size).toBe(39);
      expect(requests.length).toBeLessThan(40);
      expect(Math.max(...requests.map((receipts) => receipts.length))).toBeGreaterThan(1);
    });

    it("counts a lease lost in a shared ack against that message only", async () => {
      await open();
      const warnings: string[] = [];
      let lost = false;
      const watched = spy(backend, {
        ackMany: async (queue, receipts) => {
          const acked = await backend.ackMany(queue, receipts);
          // The first receipt of the first request answers as a lease lost meanwhile.
          if (!lost && acked.length > 0) {
            lost = true;
            acked[0] = false;
          }
          return acked;
        },
      });
      const queue = queueOn(watched, {
        concurrency: 4,
        execute: () => {},
        worker: { logger: { warn: (text: string) => void warnings.push(text) } },
      });
      await queue.enqueueMany(Array.from({ length: 12 }, (_, n) => ({ n })));
      const worker = queue.start();
      await waitFor(backend, "11 processed", () => worker.status().processedCount === 11);
      await pass(backend, 100);
      expect(worker.status().processedCount).toBe(11);
      expect(warnings.filter((text) => text.includes("the lease was lost"))).toHaveLength(1);
      const report = await worker.stop();
      expect(report.processed).toBe(11);
    });

    it("retries with backoff, then succeeds", async () => {
      await open();
      const attempts: Array<{ attempt: number; at: number; lastError: string | undefined }> = [];
      const queue = queueOn(backend, {
        concurrency: 1,
        retry: { maxAttempts: 5, backoff: { initialMs: 1000, factor: 2 } },
        execute: async (ctx) => {
          attempts.push({
            attempt: ctx.attempt,
            at: backend.clock.now(),
            lastError: ctx.lastError,
          });
          if (ctx.attempt < 3) throw new Error(`flaky ${ctx.attempt}`);
        },
      });
      await queue.enqueue({ n: 1 });
      const worker = queue.start();
      await waitFor(
        backend,
        "the third attempt acked",
        () => worker.status().processedCount === 1,
        {
          stepMs: 100,
          timeoutMs: 15_000,
        },
      );
      expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3]);
      const [a1, a2, a3] = attempts.map((a) => a.at);
      // 1 s after the first failure, 2 s after the second (SQS rounds to whole seconds).
      expect(a2! - a1!).toBeGreaterThanOrEqual(950);
      expect(a3! - a2!).toBeGreaterThanOrEqual(1950);
      if (backend.kind !== "sqs") expect(attempts[2]?.lastError).toBe("flaky 2");
      expect(worker.status().retriedCount).toBe(2);
      expect(worker.instanceStatus(0)).toMatchObject({ failedCount: 2, processedCount: 1 });
    });

    it("dead-letters at once an error that is not retryable, and calls onDeadLetter", async () => {
      await open();
      const dead: Array<Record<string, unknown>> = [];
      let calls = 0;
      const queue = queueOn(backend, {
        concurrency: 1,
        retry: { maxAttempts: 5, isRetryable: (error) => !String(error).includes("fatal") },
        execute: async () => {
          calls++;
          throw new Error("fatal: card declined");
        },
        onDeadLetter: (ctx) => {
          dead.push({ ...ctx });
        },
      });
      const { eventId } = await queue.enqueue({ order: 9 });
      const worker = queue.start();
      await waitFor(backend, "onDeadLetter", () => dead.length === 1);
      expect(calls).toBe(1);
      const hook = dead[0]!;
      expect(hook.event).toEqual({ order: 9 });
      expect(hook.eventId).toBe(eventId);
      expect(hook.attempt).toBe(1);
      expect((hook.error as Error).message).toBe("fatal: card declined");
      expect(hook.enqueuedAt).toBeInstanceOf(Date);
      expect(hook.failedAt).toBeInstanceOf(Date);
      await worker.stop();
      const letters = await queue.deadLetters();
      expect(letters.map((l) => ({ body: l.body, error: l.error, attempts: l.attempts }))).toEqual([
        { body: { order: 9 }, error: "fatal: card declined", attempts: 1 },
      ]);
    });

    // The earlier option name `leaseMs` is still read (deprecated).
    it.for([
      ["visibilityTimeoutMs", (ms: number) => ({ visibilityTimeoutMs: ms })],
      ["leaseMs", (ms: number) => ({ leaseMs: ms })],
    ] as const)(
      "keeps a slow handler's lease with heartbeats (%s)",
      async ([, timeout], context) => {
        await open();
        if (!backend.capabilities.extend) context.skip(`${backend.kind} cannot extend a lease`);
        const leaseMs = backend.kind === "sqs" ? 3000 : 600;
        const attempts: number[] = [];
        let finished = false;
        let extends_ = 0;
        const counted = spy(backend, {
          extend: (queue: string, receipt: string, ms: number) => {
            extends_ += 1;
            return backend.extend(queue, receipt, ms);
          },
        });
        const queue = queueOn(counted, {
          concurrency: 2,
          worker: timeout(leaseMs),
          execute: async (ctx) => {
            attempts.push(ctx.attempt);
            // Three leases long: without heartbeats the message would go out again meanwhile.
            await backend.clock.sleep(leaseMs * 3);
            finished = true;
          },
        });
        await queue.enqueue({ slow: true });
        const worker = queue.start();
        await waitFor(
          backend,
          "the slow handler to finish",
          () => finished && worker.status().processedCount === 1,
          {
            stepMs: 50,
            timeoutMs: leaseMs * 6,
          },
        );
        expect(attempts).toEqual([1]);
        // A heartbeat every third of the visibility timeout: the option was read (with the
        // default 30 s there would be none in three short leases).
        expect(extends_).toBeGreaterThanOrEqual(3);
        const stats = await queue.stats();
        expect(stats.ready).toBe(0);
      },
    );

    it("stops gracefully: what ran finishes, nothing is lost", async () => {
      await open();
      const seen = new Set<number>();
      const queue = queueOn(backend, {
        concurrency: 4,
        worker: { shutdownGraceMs: 10_000 },
        execute: async (ctx) => {
          await backend.clock.sleep(30);
          seen.add((ctx.event as { n: number }).n);
        },
      });
      await queue.enqueueMany(Array.from({ length: 20 }, (_, n) => ({ n })));
      const worker = queue.start();
      await waitFor(backend, "a few processed", () => worker.status().processedCount >= 4);
      const stopping = worker.stop();
      // On memory the handlers' work is on the manual clock: keep it moving while they finish.
      await waitFor(backend, "the worker to stop", () => worker.stopped);
      const report: WorkerReport = await stopping;
      expect(report.released).toBe(0);
      expect(report.processed).toBe(seen.size);
      // Whatever was not processed is still in the queue, and nothing is left in flight.
      const stats = await queue.stats();
      expect(stats.ready + (stats.delayed ?? 0)).toBe(20 - report.processed);
      if (stats.inFlight !== null) expect(stats.inFlight).toBe(0);
    });

    it("releases a handler still running at the end of the grace period, without a failure", async () => {
      await open();
      let aborted = false;
      // One attempt: a release that counted as a failure (a nack, before issue 31) would
      // dead-letter the message.
      const queue = queueOn(backend, {
        concurrency: 1,
        queue: { maxAttempts: 1 },
        worker: { shutdownGraceMs: 100 },
        execute: (ctx) =>
          new Promise<void>((resolve) => {
            ctx.signal.addEventListener("abort", () => {
              aborted = true;
              resolve();
            });
          }),
      });
      await queue.enqueue({ stuck: true });
      const worker = queue.start();
      await waitFor(
        backend,
        "the handler to start",
        () => worker.status().slots[0]?.eventId !== undefined,
      );
      expect(worker.status().slots[0]?.attempt).toBe(1);
      const report = await worker.stop();
      expect(report).toMatchObject({ processed: 0, released: 1, deadLettered: 0, retried: 0 });
      expect(aborted).toBe(true);
      const stats = await queue.stats();
      expect(stats.ready).toBe(1);
      if (stats.inFlight !== null) expect(stats.inFlight).toBe(0);
      expect(await queue.deadLetters()).toEqual([]);
    });

    it("validates on enqueue and dead-letters a body that fails the schema on receive", async () => {
      await open();
      const schema = z.object({ order: z.number().int(), note: z.string().default("none") });
      let handled: unknown;
      const queue = queueOn(backend, {
        concurrency: 1,
        schema,
        execute: async (ctx) => {
          handled = ctx.event;
        },
      });
      await expect(queue.enqueue({ order: "x" } as never)).rejects.toBeInstanceOf(ValidationError);
      // A producer that skips the schema: the worker refuses the body, with the issues.
      await queue.ensure();
      await backend.enqueue(queue.name, [{ body: { order: "not a number" } }]);
      await queue.enqueue({ order: 5 });
      const worker = queue.start();
      await waitFor(backend, "one processed and one dead-lettered", () => {
        const status = worker.status();
        return status.processedCount === 1 && status.deadLetteredCount === 1;
      });
      expect(handled).toEqual({ order: 5, note: "none" });
      await worker.stop();
      const [letter] = await queue.deadLetters();
      expect(letter?.body).toEqual({ order: "not a number" });
      expect(letter?.error).toMatch(/does not match the queue's schema: order:/);
    });

    it("status shows what each slot runs; pause and resume of the instance", async () => {
      await open();
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      const queue = queueOn(backend, {
        concurrency: 2,
        execute: async () => {
          await gate;
        },
      });
      const { eventId } = await queue.enqueue({ n: 1 });
      const worker = queue.start();
      await waitFor(backend, "the event to run", () =>
        worker.status().slots.some((s) => s.eventId === eventId),
      );
      const status = worker.status();
      expect(status.slots).toHaveLength(2);
      expect(status.running).toBe(true);
      worker.pause();
      release();
      await waitFor(backend, "the event to finish", () => worker.status().processedCount === 1);
      // A receive already waiting when the pause came may still bring this message: it is
      // released, not run (issue 33: before, it ran).
      await queue.enqueue({ n: 2 });
      await pass(backend, backend.kind === "sqs" ? 2000 : 1000);
      expect(worker.status().processedCount).toBe(1);
      expect(worker.status().slots.every((slot) => slot.eventId === undefined)).toBe(true);
      expect(worker.status().paused).toBe(true);
      worker.resume();
      await waitFor(
        backend,
        "the second event after resume",
        () => worker.status().processedCount === 2,
      );
    });

    it("a message a pause gives back is not counted as an attempt", async () => {
      await open();
      const attempts: number[] = [];
      const queue = queueOn(backend, {
        concurrency: 1,
        worker: { pollWaitMs: 1000 },
        execute: async (ctx) => {
          attempts.push(ctx.attempt);
        },
      });
      const worker = queue.start();
      // The worker's receive is waiting now; the pause comes, then the message.
      await new Promise((resolve) => setTimeout(resolve, 300));
      worker.pause();
      await queue.enqueue({ n: 1 });
      await waitFor(backend, "the message given back", async () => {
        const stats = await queue.stats();
        return stats.ready === 1 && (stats.inFlight ?? 0) === 0;
      });
      worker.resume();
      await waitFor(backend, "the message processed", () => worker.status().processedCount === 1);
      // SQS counts every receive; the others do not count a delivery no handler started.
      expect(attempts).toEqual([backend.kind === "sqs" ? 2 : 1]);
    });

    it("per instance: status, pause, resume and drain; pendingCount is the worker's own", async () => {
      await open();
      const gates: Array<() => void> = [];
      const seen: Array<{ instance: number; pending: number }> = [];
      const queue = queueOn(backend, {
        concurrency: 2,
        execute: async (ctx) => {
          seen.push({ instance: ctx.instanceIndex, pending: ctx.pendingCount });
          await new Promise<void>((resolve) => gates.push(resolve));
        },
      });
      const worker = queue.start();
      expect(worker.instanceStatus(0)).toMatchObject({ state: "idle", pendingCount: 0 });
      expect(() => worker.instanceStatus(2)).toThrow(RangeError);
      // Both instances wait for a message now; instance 1 paused: one event runs at a time,
      // on instance 0.
      await new Promise((resolve) => setTimeout(resolve, 50));
      worker.pause(1);
      expect(worker.instanceStatus(1).state).toBe("paused");
      await queue.enqueue({ n: 1 });
      await queue.enqueue({ n: 2 });
      await waitFor(backend, "the first event to run", () => gates.length === 1);
      expect(worker.instanceStatus(0)).toMatchObject({ state: "processing", pendingCount: 1 });
      expect(worker.status().pendingCount).toBe(1);
      await pass(backend, 500);
      expect(gates).toHaveLength(1);
      expect(worker.instanceStatus(1).state).toBe("paused");
      // Draining instance 0 waits for its event, then it takes nothing new.
      const drained = worker.drain(0);
      gates.shift()?.();
      await drained;
      expect(worker.instanceStatus(0)).toMatchObject({ state: "paused", processedCount: 1 });
      await pass(backend, 500);
      expect(gates).toHaveLength(0);
      // Both resumed: the second event runs; what each handler saw was exact.
      worker.resume(0);
      worker.resume(1);
      await waitFor(backend, "the second event to run", () => gates.length === 1);
      gates.shift()?.();
      await waitFor(backend, "both events done", () => worker.status().processedCount === 2);
      expect(seen.map((s) => s.pending)).toEqual([0, 0]);
      expect(seen[0]?.instance).toBe(0);
      expect(worker.status().pendingCount).toBe(0);
      expect(worker.status().slots.map((slot) => slot.failedCount)).toEqual([0, 0]);
    });

    it("enqueues next steps with the ack, and none from a failed attempt", async (context) => {
      await open();
      if (!backend.capabilities.chaining) context.skip(`${backend.kind} cannot chain`);
      const seen: Array<{ event: unknown; id: string | undefined; key: string | undefined }> = [];
      const headers: Record<string, string>[] = [];
      const next = queueOn(backend, {
        concurrency: 1,
        execute: (ctx) => {
          seen.push({ event: ctx.event, id: ctx.idempotencyId, key: ctx.key });
          headers.push(ctx.headers);
        },
      });
      await next.ensure();
      const first = queueOn<{ order: number }, { order: number }>(backend, {
        concurrency: 1,
        retry: { maxAttempts: 3, delay: 10 },
        execute: (ctx) => {
          // Both attempts add a step; only the one that succeeds is acked, and with it its step.
          // The id differs per attempt, so dedup cannot hide a step stored by the failed one.
          ctx.addNextStep(
            next.name,
            { order: ctx.event.order, attempt: ctx.attempt },
            { id: `ship-${ctx.attempt}`, key: "k", headers: { h: "v" } },
          );
          if (ctx.attempt === 1) throw new Error("flaky");
        },
      });
      await first.enqueue({ order: 7 });
      const worker = first.start();
      await waitFor(backend, "the event acked", () => worker.status().processedCount === 1);
      expect((await next.stats()).ready).toBe(1);
      next.start();
      await waitFor(backend, "the next step handled", () => seen.length === 1);
      await pass(backend, 300);
      expect(seen).toEqual([{ event: { order: 7, attempt: 2 }, id: "ship-2", key: "k" }]);
      expect(headers[0]).toMatchObject({ h: "v" });
    });

    it("refuses next steps where the backend cannot chain them", async (context) => {
      await open();
      if (backend.capabilities.chaining) context.skip(`${backend.kind} can chain`);
      const dead: unknown[] = [];
      const queue = queueOn(backend, {
        concurrency: 1,
        retry: { maxAttempts: 1 },
        execute: (ctx) => {
          ctx.addNextStep("elsewhere", { n: 1 });
        },
        onDeadLetter: (ctx) => {
          dead.push(ctx.error);
        },
      });
      await queue.enqueue({ n: 1 });
      const worker = queue.start();
      await waitFor(backend, "the attempt to fail", () => dead.length === 1);
      expect(dead[0]).toBeInstanceOf(UnsupportedError);
      expect(dead[0]).toMatchObject({ backend: backend.kind, operation: "chaining" });
      expect(worker.status().processedCount).toBe(0);
      // The backend itself refuses too, before it acks anything.
      await expect(
        backend.ackThen(queue.name, "no-receipt", [{ queue: "elsewhere", body: 1 }]),
      ).rejects.toBeInstanceOf(UnsupportedError);
    });

    it("pauses the queue, cancels with a reason and drains", async (context) => {
      await open();
      if (!backend.capabilities.pause || !backend.capabilities.cancel) {
        context.skip(`${backend.kind} cannot pause or cancel`);
      }
      const queue = queueOn(backend, { concurrency: 1, execute: async () => {} });
      await queue.pause();
      const { eventId } = await queue.enqueue({ n: 1 });
      const keep = await queue.enqueue({ n: 2 });
      expect((await queue.stats()).paused).toBe(true);
      const cancelled = await queue.cancel(eventId, { reason: "customer withdrew" });
      expect(cancelled).toMatchObject({ outcome: "cancelled", reason: "customer withdrew" });
      expect((await queue.get(eventId))?.lastError).toBe("customer withdrew");
      const worker = queue.start();
      await pass(backend, 300);
      expect(worker.status().processedCount).toBe(0);
      await queue.resume();
      const drain = queue.drain({ timeoutMs: 10_000 });
      if (isMemory(backend))
        await waitFor(backend, "processed", () => worker.status().processedCount === 1);
      expect(await drain).toEqual({ drained: true });
      expect((await queue.get(keep.eventId))?.state).toBe("acked");
    });
  });
}
