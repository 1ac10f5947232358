/**
 * The SQS backend reports a failed attempt to the server (issue 33, item 2): on sluice the
 * failure is a nack, so sluice retries or dead-letters the message itself, with its error,
 * counted in the queue's `dead_lettered` and replayable from the native API; the backend's own
 * reading of the dead-letter queue shows the same errors. Against a server that does not know
 * the report (AWS), the backend dead-letters by itself, as before.
 */
import { afterEach, describe, expect, inject, it } from "vitest";
import type { Backend } from "../src/index.js";

const sluiceUrl = inject("sluiceUrl");
const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

async function sqsBackend(): Promise<Backend> {
  const { SqsBackend } = await import("../src/sqs/index.js");
  return new SqsBackend({
    endpoint: sluiceUrl,
    region: "us-east-1",
    credentials: { accessKeyId: "any", secretAccessKey: "any" },
  });
}

async function getJson(path: string, init?: RequestInit): Promise<Record<string, unknown>> {
  const response = await fetch(`${sluiceUrl}${path}`, init);
  expect(response.ok).toBe(true);
  return (await response.json()) as Record<string, unknown>;
}

describe.skipIf(sluiceUrl === "")("failures through SQS on sluice", () => {
  it("are sluice dead letters: errors kept, counted, replayable", async () => {
    const backend = await sqsBackend();
    const queue = `tsfail_${Math.random().toString(36).slice(2, 10)}`;
    cleanups.push(async () => {
      await backend.deleteQueue(queue).catch(() => {});
      await backend.close();
    });
    await backend.ensureQueue(queue, { maxAttempts: 2 });
    await backend.enqueue(queue, [{ body: "used up" }, { body: "poison" }]);
    const first = await backend.receive(queue, { max: 10, waitMs: 2_000 });
    expect(first).toHaveLength(2);
    for (const delivery of first) {
      const poison = delivery.body === "poison";
      const outcome = await backend.nack(queue, delivery.receipt, {
        error: poison ? "bad input: é" : "timeout 1",
        delayMs: 0,
        permanent: poison,
      });
      expect(outcome).toBe(poison ? "dead_lettered" : "retried");
    }
    const again = await backend.receive(queue, { max: 10, waitMs: 5_000 });
    expect(again.map((d) => [d.body, d.attempt])).toEqual([["used up", 2]]);
    const last = await backend.nack(queue, again[0]?.receipt ?? "", {
      error: "timeout 2",
      delayMs: 0,
    });
    expect(last).toBe("dead_lettered");

    const listed = await getJson(`/v1/queues/${queue}/dlq`);
    const errors = (listed.entries as Array<{ last_error: string }>).map((e) => e.last_error);
    expect(errors.sort()).toEqual(["bad input: é", "timeout 2"]);
    const stats = await getJson(`/v1/queues/${queue}/stats`);
    expect((stats.counters as { dead_lettered: number }).dead_lettered).toBe(2);

    const letters = await backend.deadLetters(queue, 10);
    expect(
      letters
        .map((l) => [l.body, l.error, l.attempts])
        .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    ).toEqual([
      ["poison", "bad input: é", 1],
      ["used up", "timeout 2", 2],
    ]);
    expect(letters.every((l) => l.deadLetteredAt > 0)).toBe(true);

    const replayed = await getJson(`/v1/queues/${queue}/dlq/replay`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(replayed.replayed).toBe(2);
    const back = await backend.receive(queue, { max: 10, waitMs: 5_000 });
    expect(back.map((d) => d.attempt)).toEqual([1, 1]);
  });
});
