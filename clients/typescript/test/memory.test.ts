/**
 * Rules of the memory backend beyond the shared scenarios, on its manual clock: each one is a
 * rule sluice keeps (docs/semantics.md), so a test written against memory holds on sluice.
 */
import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { SystemClock } from "../src/clock.js";
import { SluiceError } from "../src/index.js";
import { ManualClock, MemoryBackend } from "../src/memory/index.js";

async function fresh(options = {}) {
  const backend = new MemoryBackend();
  await backend.ensureQueue("q", options);
  return backend;
}

describe("memory backend", () => {
  it("leaves no listener on the caller's signal after each wait (issue 31)", async () => {
    const backend = new MemoryBackend({ clock: new SystemClock() });
    await backend.ensureQueue("q");
    const controller = new AbortController();
    for (let i = 0; i < 20; i++) {
      expect(await backend.receive("q", { waitMs: 1, signal: controller.signal })).toEqual([]);
    }
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    // An abort still ends a wait at once.
    const waiting = backend.receive("q", { waitMs: 60_000, signal: controller.signal });
    controller.abort(new Error("stopped"));
    await expect(waiting).rejects.toThrow("stopped");
  });

  it("delivers higher priority first, then in enqueue order", async () => {
    const backend = await fresh();
    await backend.enqueue("q", [
      { body: "a" },
      { body: "b", priority: 5 },
      { body: "c" },
      { body: "d", priority: 5 },
    ]);
    const got = await backend.receive("q", { max: 10 });
    expect(got.map((d) => d.body)).toEqual(["b", "d", "a", "c"]);
  });

  it("a lease that runs out on the last attempt dead-letters with sluice's error text", async () => {
    const backend = await fresh({ maxAttempts: 1 });
    await backend.enqueue("q", [{ body: 1 }]);
    await backend.receive("q", { visibilityTimeoutMs: 1000 });
    await backend.advance(1000);
    expect(await backend.receive("q")).toEqual([]);
    const [letter] = await backend.deadLetters("q");
    expect(letter).toMatchObject({ body: 1, error: "visibility timeout expired", attempts: 1 });
    expect(await backend.stats("q")).toMatchObject({ ready: 0, inFlight: 0, deadLettered: 1 });
  });

  it("acks a lease that ran out until the message goes out again; then the receipt is stale", async () => {
    const backend = await fresh();
    await backend.enqueue("q", [{ body: 1 }, { body: 2 }]);
    const [first, second] = await backend.receive("q", { max: 2, visibilityTimeoutMs: 1000 });
    await backend.advance(1500);
    await backend.ack("q", first?.receipt ?? "");
    const [again] = await backend.receive("q", { max: 10 });
    expect(again).toMatchObject({ body: 2, attempt: 2, lastError: "visibility timeout expired" });
    const error = await backend.ack("q", second?.receipt ?? "").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SluiceError);
    expect(error).toMatchObject({ status: 409, code: "stale_receipt" });
    await expect(backend.extend("q", again?.receipt ?? "", 1000)).resolves.toBeUndefined();
  });

  it("backs off 1 s doubling per failed attempt when a nack gives no delay", async () => {
    const backend = await fresh({ maxAttempts: 10 });
    await backend.enqueue("q", [{ body: 1 }]);
    const waits: number[] = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      const [delivery] = await backend.receive("q");
      expect(delivery?.attempt).toBe(attempt);
      await backend.nack("q", delivery?.receipt ?? "", { error: "e" });
      let waited = 0;
      // The message stays delayed until its backoff has passed.
      while ((await backend.stats("q")).ready === 0 && waited < 60_000) {
        await backend.advance(250);
        waited += 250;
      }
      waits.push(waited);
    }
    expect(waits).toEqual([1000, 2000, 4000, 8000]);
  });

  it("keeps an idempotency id for the dedup window only", async () => {
    const backend = new MemoryBackend({ dedupWindowMs: 60_000 });
    await backend.ensureQueue("q");
    const [first] = await backend.enqueue("q", [{ body: 1, id: "x" }]);
    const [duplicate] = await backend.enqueue("q", [{ body: 1, id: "x" }]);
    expect(duplicate).toEqual({ messageId: first?.messageId, created: false, position: 0 });
    await backend.advance(60_000);
    const [later] = await backend.enqueue("q", [{ body: 1, id: "x" }]);
    expect(later).toMatchObject({ created: true, position: 1 });
  });

  it("holds a key's lane while its head waits for a retry", async () => {
    const backend = await fresh({ perKey: true });
    await backend.enqueue("q", [
      { body: "a1", key: "a" },
      { body: "a2", key: "a" },
      { body: "free" },
    ]);
    const [a1] = await backend.receive("q", { max: 1 });
    await backend.nack("q", a1?.receipt ?? "", { error: "e", delayMs: 5000 });
    expect((await backend.receive("q", { max: 10 })).map((d) => d.body)).toEqual(["free"]);
    await backend.advance(5000);
    expect((await backend.receive("q", { max: 10 })).map((d) => d.body)).toEqual(["a1"]);
  });

  it("refuses a body that is not JSON and a queue that does not exist", async () => {
    const backend = await fresh();
    await expect(backend.enqueue("q", [{ body: 1n }])).rejects.toMatchObject({
      code: "invalid_field",
    });
    await expect(backend.stats("nope")).rejects.toMatchObject({
      status: 404,
      code: "queue_not_found",
    });
  });

  it("a receive that waits is woken by an enqueue, and by the clock reaching its deadline", async () => {
    const clock = new ManualClock(0);
    const backend = new MemoryBackend({ clock });
    await backend.ensureQueue("q");
    const waiting = backend.receive("q", { waitMs: 10_000 });
    await backend.enqueue("q", [{ body: "now" }]);
    expect((await waiting).map((d) => d.body)).toEqual(["now"]);
    const empty = backend.receive("q", { waitMs: 10_000 });
    await backend.advance(10_000);
    expect(await empty).toEqual([]);
    expect(clock.now()).toBe(10_000);
  });

  it("forgets finished records after an hour, as sluice's acked retention", async () => {
    const backend = await fresh();
    const [enqueued] = await backend.enqueue("q", [{ body: 1 }]);
    const [delivery] = await backend.receive("q");
    await backend.ack("q", delivery?.receipt ?? "");
    const ref = { messageId: enqueued?.messageId ?? "" };
    expect((await backend.get("q", ref))?.state).toBe("acked");
    await backend.advance(3_600_000);
    expect(await backend.get("q", ref)).toBeUndefined();
  });
});
