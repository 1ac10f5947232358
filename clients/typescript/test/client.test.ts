/**
 * The HTTP client against real servers: the token (option and SLUICE_TOKEN), SLUICE_URL, and
 * errors as SluiceError with the server's status, code, details and Retry-After; no answer at
 * all as status 0 with code `network` or `timeout`.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SluiceClient, SluiceError } from "../src/index.js";
import { type RunningServer, sluiceBinary, startSluice } from "./support/server.js";

const sluiceUrl = inject("sluiceUrl");

async function failure(promise: Promise<unknown>): Promise<SluiceError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(SluiceError);
  return error as SluiceError;
}

function name(): string {
  return `tsc_${Math.random().toString(36).slice(2, 10)}`;
}

describe.skipIf(sluiceUrl === "")("client errors", () => {
  const client = new SluiceClient({ url: sluiceUrl });

  it("a missing queue is queue_not_found", async () => {
    const error = await failure(client.getQueue(name()));
    expect(error).toMatchObject({ status: 404, code: "queue_not_found" });
    expect(error.isTransient).toBe(false);
  });

  it("a stale receipt is stale_receipt with the per-receipt results", async () => {
    const queue = name();
    await client.putQueue(queue);
    await client.enqueue(queue, { body: { n: 1 } });
    const { messages } = await client.receive(queue, { max: 1 });
    const receipt = messages[0]?.receipt ?? "";
    await client.ack(queue, receipt);
    const error = await failure(client.ack(queue, [receipt]));
    expect(error).toMatchObject({ status: 409, code: "stale_receipt" });
    expect(error.details).toBeDefined();
  });

  it("a full queue is queue_full with Retry-After and the counts", async () => {
    const queue = name();
    await client.putQueue(queue, { max_depth: 1 });
    await client.enqueue(queue, { body: 1 });
    const error = await failure(client.enqueueBatch(queue, [{ body: 2 }, { body: 3 }]));
    expect(error).toMatchObject({ status: 503, code: "queue_full" });
    expect(error.retryAfter).toBeGreaterThanOrEqual(1);
    expect(error.details).toMatchObject({ accepted: 0, refused: 2 });
    expect(error.isTransient).toBe(true);
  });

  it("a field out of range is invalid_field, naming the field", async () => {
    const queue = name();
    await client.putQueue(queue);
    const error = await failure(client.receive(queue, { max: 1000 }));
    expect(error).toMatchObject({ status: 422, code: "invalid_field" });
    expect(error.message).toMatch(/max/);
  });

  it("the whole delivery cycle: enqueue, receive, nack, extend, dead letters, replay", async () => {
    const queue = name();
    await client.putQueue(queue, { max_attempts: 1 });
    const enqueued = await client.enqueue(queue, {
      id: "k-1",
      body: { n: 1 },
      headers: { h: "v" },
    });
    expect(enqueued).toMatchObject({ created: true, position: 0 });
    const { messages } = await client.receive(queue, { max: 10, visibility_timeout_ms: 5000 });
    const receipt = messages[0]?.receipt ?? "";
    expect(messages[0]).toMatchObject({ id: "k-1", attempts: 1, headers: { h: "v" } });
    await client.extend(queue, receipt, 10_000);
    expect(await client.nack(queue, { receipt, error: "boom" })).toMatchObject({ state: "dead" });
    const listed = await client.listDeadLetters(queue, { error: "boom" });
    expect(listed.entries.map((e) => e.message_id)).toEqual([enqueued.message_id]);
    const replayed = await client.replayDeadLetter(queue, enqueued.message_id);
    expect(replayed.replayed).toBe(1);
    const lookup = await client.getMessageByIdempotencyId(queue, "k-1");
    expect(lookup.state).toBe("ready");
    expect((await client.stats(queue)).ready).toBe(1);
    expect(await client.purge(queue)).toMatchObject({ purged: 1 });
    expect(await client.drain(queue, 0)).toMatchObject({ drained: true });
  });
});

describe("client without an answer", () => {
  it("an unreachable server is status 0, code network", async () => {
    const error = await failure(new SluiceClient({ url: "http://127.0.0.1:9" }).health());
    expect(error).toMatchObject({ status: 0, code: "network" });
    expect(error.isTransient).toBe(true);
  });

  it("a server that does not answer in time is status 0, code timeout", async () => {
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    try {
      const error = await failure(new SluiceClient({ url, timeoutMs: 200 }).health());
      expect(error).toMatchObject({ status: 0, code: "timeout" });
    } finally {
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});

const binary = sluiceUrl === "" ? undefined : sluiceBinary();

describe.skipIf(binary === undefined)("client with access control", () => {
  const token = randomBytes(24).toString("hex");
  let server: RunningServer;

  beforeAll(async () => {
    server = await startSluice(binary ?? "", undefined, { SLUICE_ADMIN_TOKEN: token });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("without a token: unauthorized", async () => {
    const saved = process.env.SLUICE_TOKEN;
    Reflect.deleteProperty(process.env, "SLUICE_TOKEN");
    try {
      const error = await failure(new SluiceClient({ url: server.url }).listQueues());
      expect(error).toMatchObject({ status: 401, code: "unauthorized" });
    } finally {
      if (saved !== undefined) process.env.SLUICE_TOKEN = saved;
    }
  });

  it("with the token option, or SLUICE_TOKEN and SLUICE_URL from the environment", async () => {
    await new SluiceClient({ url: server.url, token }).putQueue("guarded");
    const saved = { url: process.env.SLUICE_URL, token: process.env.SLUICE_TOKEN };
    process.env.SLUICE_URL = server.url;
    process.env.SLUICE_TOKEN = token;
    try {
      const client = new SluiceClient();
      expect(client.url).toBe(server.url);
      const { queues } = await client.listQueues();
      expect(queues.map((queue) => queue.name)).toContain("guarded");
    } finally {
      for (const [key, value] of [
        ["SLUICE_URL", saved.url],
        ["SLUICE_TOKEN", saved.token],
      ] as const) {
        if (value === undefined) Reflect.deleteProperty(process.env, key);
        else process.env[key] = value;
      }
    }
  });
});
