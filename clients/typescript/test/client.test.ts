/**
 * The HTTP client against real servers: the token (option and SLUICE_TOKEN), SLUICE_URL, and
 * errors as SluiceError with the server's status, code, details and Retry-After; no answer at
 * all as status 0 with code `network` or `timeout`; schedule administration, with a real run;
 * topics: a filtered, idempotent publish, its counts and its copies; alerts: their
 * administration, and a dead letter's notification read from the alert's queue.
 */
import { randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SluiceBackend, SluiceClient, SluiceError, type wire } from "../src/index.js";
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

describe.skipIf(sluiceUrl === "")("acks with next steps", () => {
  const client = new SluiceClient({ url: sluiceUrl });

  /** A queue with one message leased, and an empty queue for the next steps. */
  async function leased(): Promise<{ queue: string; next: string; receipt: string; id: string }> {
    const queue = name();
    const next = name();
    await client.putQueue(queue);
    await client.putQueue(next);
    await client.enqueue(queue, { body: { order: 1 } });
    const { messages } = await client.receive(queue, { max: 1 });
    return {
      queue,
      next,
      receipt: messages[0]?.receipt ?? "",
      id: messages[0]?.message_id ?? "",
    };
  }

  it("enqueues them in the ack's commit and answers their enqueue results, in order", async () => {
    const { queue, next, receipt, id } = await leased();
    const answer = await client.ackThen(
      queue,
      receipt,
      [
        { queue: next, body: { ship: 1 }, id: "ship-1", headers: { h: "v" } },
        { queue: next, body_base64: Buffer.from("raw").toString("base64"), priority: 5 },
      ],
      { charged: true },
    );
    expect(answer.acked).toBe(1);
    expect(answer.then).toHaveLength(2);
    expect(answer.then?.map((step) => step.created)).toEqual([true, true]);
    expect((await client.getMessage(queue, id)).state).toBe("acked");
    const { messages } = await client.receive(next, { max: 10 });
    // Priority first: the byte body, then the JSON one.
    expect(messages.map((m) => m.message_id)).toEqual([
      answer.then?.[1]?.message_id,
      answer.then?.[0]?.message_id,
    ]);
    expect(messages[1]).toMatchObject({ body: { ship: 1 }, id: "ship-1", headers: { h: "v" } });
    expect(Buffer.from(messages[0]?.body_base64 ?? "", "base64").toString()).toBe("raw");
  });

  it("a stale receipt enqueues nothing", async () => {
    const { queue, next, receipt } = await leased();
    await client.ack(queue, receipt);
    const error = await failure(client.ackThen(queue, receipt, [{ queue: next, body: 1 }]));
    expect(error).toMatchObject({ status: 409, code: "stale_receipt" });
    expect((await client.stats(next)).ready).toBe(0);
  });

  it("a refused step refuses the ack whole: the message stays leased", async () => {
    const { queue, next, receipt, id } = await leased();
    const missing = await failure(
      client.ackThen(queue, receipt, [
        { queue: next, body: 1 },
        { queue: name(), body: 2 },
      ]),
    );
    expect(missing).toMatchObject({ status: 404, code: "queue_not_found" });
    const invalid = await failure(
      client.ackThen(queue, receipt, [{ queue: next, body: 1, delay_ms: -1 }]),
    );
    expect(invalid).toMatchObject({ status: 422, code: "invalid_field" });
    expect(invalid.message).toMatch(/then\[0\]/);
    expect((await client.stats(next)).ready).toBe(0);
    expect((await client.getMessage(queue, id)).state).toBe("in_flight");
    await client.ack(queue, receipt);
  });

  it("SluiceBackend.ackThen answers one Enqueued per step", async () => {
    const { queue, next, receipt } = await leased();
    const backend = new SluiceBackend({ client });
    const enqueued = await backend.ackThen(queue, receipt, [
      { queue: next, body: { a: 1 } },
      { queue: next, body: { b: 2 }, delayMs: 60_000 },
    ]);
    expect(enqueued.map((e) => [e.created, typeof e.messageId])).toEqual([
      [true, "string"],
      [true, "string"],
    ]);
    const stats = await client.stats(next);
    expect([stats.ready, stats.delayed]).toEqual([1, 1]);
  });
});

describe.skipIf(sluiceUrl === "")("kept acked messages", () => {
  const client = new SluiceClient({ url: sluiceUrl });

  it("keep_acked_ms keeps them to browse, newest ack first, and to search", async () => {
    const queue = name();
    const created = await client.putQueue(queue, { keep_acked_ms: 3_600_000 });
    expect(created.queue.config.keep_acked_ms).toBe(3_600_000);
    const one = await client.enqueue(queue, { id: "one", key: "k1", body: { n: 1 } });
    const two = await client.enqueue(queue, { id: "two", key: "k2", body: { n: 2 } });
    for (const [index, result] of [{ done: 1 }, undefined].entries()) {
      const { messages } = await client.receive(queue, { max: 1 });
      expect(messages[0]?.message_id).toBe(index === 0 ? one.message_id : two.message_id);
      await client.ack(queue, messages[0]?.receipt ?? "", result);
    }

    const all = await client.browse(queue, { state: "acked" });
    expect(all.messages.map((message) => message.message_id)).toEqual([
      two.message_id,
      one.message_id,
    ]);
    const byKey = await client.browse(queue, { state: "acked", key: "k1", previewBytes: 100 });
    expect(byKey.messages).toHaveLength(1);
    expect(byKey.messages[0]).toMatchObject({
      message_id: one.message_id,
      state: "acked",
      id: "one",
      result: { done: 1 },
      body_preview: '{"n":1}',
    });
    expect(typeof byKey.messages[0]?.kept_until).toBe("string");
    const byIdAndTime = await client.browse(queue, {
      state: "acked",
      id: "two",
      messageId: two.message_id,
      since: new Date(Date.now() - 3_600_000).toISOString(),
      until: new Date(Date.now() + 60_000).toISOString(),
    });
    expect(byIdAndTime.messages.map((message) => message.message_id)).toEqual([two.message_id]);
    const none = await client.browse(queue, { state: "acked", until: "2000-01-01T00:00:00Z" });
    expect(none.messages).toEqual([]);

    const error = await failure(client.browse(queue, { state: "ready", key: "k1" }));
    expect(error).toMatchObject({ status: 422, code: "invalid_field" });
  });
});

describe.skipIf(sluiceUrl === "")("schedules", () => {
  const client = new SluiceClient({ url: sluiceUrl });

  it("define, list, show, pause, resume, a run's message, delete", async () => {
    const queue = name();
    const schedule = name();
    await client.putQueue(queue);
    const put = await client.putSchedule(schedule, {
      queue,
      every_ms: 1000,
      message: { body: { job: "sweep" }, headers: { h: "v" } },
    });
    expect(put).toMatchObject({ created: true, schedule: { name: schedule, paused: false } });
    const { schedules } = await client.listSchedules();
    expect(schedules.map((s) => s.name)).toContain(schedule);
    const shown = await client.getSchedule(schedule);
    expect(shown.spec).toMatchObject({ queue, every_ms: 1000 });
    expect(typeof shown.next_run_at).toBe("string");

    const paused = await client.pauseSchedule(schedule);
    expect(paused.paused).toBe(true);
    expect(paused.next_run_at ?? undefined).toBeUndefined();
    const resumed = await client.resumeSchedule(schedule);
    expect(resumed.paused).toBe(false);
    expect(typeof resumed.next_run_at).toBe("string");

    // A run is due within a second of resuming; the server makes due runs every 500 ms.
    const deadline = Date.now() + 5000;
    let messages: wire.ReceivedMessage[] = [];
    while (messages.length === 0 && Date.now() < deadline) {
      ({ messages } = await client.receive(queue, { max: 10, wait_ms: 1000 }));
    }
    expect(messages.length).toBeGreaterThan(0);
    expect(messages[0]).toMatchObject({
      body: { job: "sweep" },
      headers: { h: "v", "sluice-schedule": schedule },
    });

    expect(await client.deleteSchedule(schedule)).toEqual({ deleted: true });
    const error = await failure(client.getSchedule(schedule));
    expect(error).toMatchObject({ status: 404, code: "schedule_not_found" });
  });
});

describe.skipIf(sluiceUrl === "")("topics", () => {
  const client = new SluiceClient({ url: sluiceUrl });

  it("define, publish with a filter and an idempotency key, counts, receive, delete", async () => {
    const all = name();
    const big = name();
    const topic = name();
    await client.putQueue(all);
    await client.putQueue(big);
    const put = await client.putTopic(topic, {
      subscriptions: [{ queue: all }, { queue: big, filter: ".body.n > 1" }],
    });
    expect(put).toMatchObject({ created: true, topic: { name: topic } });
    expect(put.topic.spec.subscriptions).toEqual([
      { queue: all },
      { queue: big, filter: ".body.n > 1" },
    ]);
    const { topics } = await client.listTopics();
    expect(topics.map((t) => t.name)).toContain(topic);

    const small = await client.publish(topic, { body: { n: 1 } });
    expect(small.copies).toEqual([{ queue: all, message_id: expect.any(String), created: true }]);
    const first = await client.publish(topic, { body: { n: 2 }, id: "order-2" });
    expect(first.copies.map((c) => [c.queue, c.created])).toEqual([
      [all, true],
      [big, true],
    ]);
    const again = await client.publish(topic, { body: { n: 2 }, id: "order-2" });
    expect(again.copies).toEqual(first.copies.map((c) => ({ ...c, created: false })));

    const shown = await client.getTopic(topic);
    expect(shown.stats).toEqual({ published: 3, copies: 3, filtered: 1, duplicates: 2 });

    const fromAll = (await client.receive(all, { max: 10 })).messages;
    expect(fromAll.map((m) => m.message_id).sort()).toEqual(
      [small.copies[0]?.message_id, first.copies[0]?.message_id].sort(),
    );
    expect(fromAll.map((m) => m.body)).toEqual(expect.arrayContaining([{ n: 1 }, { n: 2 }]));
    const fromBig = (await client.receive(big, { max: 10 })).messages;
    expect(fromBig.map((m) => [m.message_id, m.body])).toEqual([
      [first.copies[1]?.message_id, { n: 2 }],
    ]);

    expect(await client.deleteTopic(topic)).toEqual({ deleted: true });
    const error = await failure(client.getTopic(topic));
    expect(error).toMatchObject({ status: 404, code: "topic_not_found" });
  });
});

describe.skipIf(sluiceUrl === "")("alerts", () => {
  const client = new SluiceClient({ url: sluiceUrl });

  it("define with a webhook destination, show, list, refuse a command, delete", async () => {
    const queue = name();
    const alert = name();
    // Scoped to a queue of its own, so the suite's other dead letters do not concern it.
    const spec: wire.AlertSpec = {
      queues: [queue],
      depth_above: 1000,
      window_ms: 60_000,
      destination: { webhook_url: "http://127.0.0.1:9/alerts", headers: { "x-team": "ops" } },
    };
    const put = await client.putAlert(alert, spec);
    expect(put).toMatchObject({ created: true, alert: { name: alert, spec } });
    expect(put.alert.queue).toBe(`sluice.alerts.${alert}`);
    expect(put.alert.sent).toEqual({
      dead_letters: 0,
      dead_letters_counted: 0,
      depth: 0,
      oldest_ready_age: 0,
    });
    const replaced = await client.putAlert(alert, { ...spec, depth_above: 500 });
    expect(replaced.created).toBe(false);

    const shown = await client.getAlert(alert);
    expect(shown.spec).toMatchObject({ queues: [queue], depth_above: 500 });
    expect(shown.spec.destination?.webhook_url).toBe("http://127.0.0.1:9/alerts");
    expect(shown.delivery?.ready).toBe(0);
    const { alerts } = await client.listAlerts();
    expect(alerts.map((a) => a.name)).toContain(alert);

    const refused = await failure(
      client.putAlert(name(), { destination: { command: ["sh", "-c", "id"] } }),
    );
    expect(refused).toMatchObject({ status: 422, code: "invalid_field" });
    expect(refused.message).toMatch(/destination\.command/);

    expect(await client.deleteAlert(alert)).toEqual({ deleted: true });
    const error = await failure(client.getAlert(alert));
    expect(error).toMatchObject({ status: 404, code: "alert_not_found" });
    const gone = await failure(client.deleteAlert(alert));
    expect(gone).toMatchObject({ status: 404, code: "alert_not_found" });
  });

  it("a dead letter's notification waits in the alert's queue without a destination", async () => {
    const queue = name();
    const alert = name();
    await client.putQueue(queue, { max_attempts: 1 });
    const { alert: defined } = await client.putAlert(alert, { queues: [queue] });
    await client.enqueue(queue, { body: { n: 1 } });
    const { messages } = await client.receive(queue, { max: 1 });
    const receipt = messages[0]?.receipt ?? "";
    expect(await client.nack(queue, { receipt, error: "boom" })).toMatchObject({ state: "dead" });

    // A dead letter is counted once it is a second old; the server's passes run every 500 ms.
    const deadline = Date.now() + 10_000;
    let notifications: wire.ReceivedMessage[] = [];
    while (notifications.length === 0 && Date.now() < deadline) {
      ({ messages: notifications } = await client.receive(defined.queue, {
        max: 10,
        wait_ms: 1000,
      }));
    }
    expect(notifications).toHaveLength(1);
    const notification = notifications[0]!;
    expect(notification.headers?.["sluice-alert"]).toBe(alert);
    const event = notification.body as wire.AlertEventOut;
    expect(event).toMatchObject({
      type: "dead_letters",
      status: "firing",
      alert,
      queue,
      count: 1,
      dead_letter_queue: `${queue}.dlq`,
    });
    expect(event.sample?.map((s) => [s.message_id, s.error])).toEqual([
      [messages[0]?.message_id, "boom"],
    ]);
    await client.ack(defined.queue, notification.receipt);
    const shown = await client.getAlert(alert);
    expect(shown.sent).toMatchObject({ dead_letters: 1, dead_letters_counted: 1 });
    expect(typeof shown.last_sent_at).toBe("string");
    await client.deleteAlert(alert);
  });
});

describe("client without an answer", () => {
  it("an unreachable server is status 0, code unreachable (as in Python)", async () => {
    const error = await failure(new SluiceClient({ url: "http://127.0.0.1:9" }).health());
    expect(error).toMatchObject({ status: 0, code: "unreachable" });
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

describe.skipIf(sluiceUrl === "")("deleting a queue", () => {
  const client = new SluiceClient({ url: sluiceUrl });

  it("takes its dead-letter queue along unless asked to keep it", async () => {
    const name = `del_${Math.random().toString(36).slice(2, 10)}`;
    await client.putQueue(name);
    const kept = await client.deleteQueue(name, { deadLetters: "keep" });
    expect(kept.dead_letter_queue ?? null).toBeNull();
    await client.getQueue(`${name}.dlq`);
    await client.deleteQueue(`${name}.dlq`);

    await client.putQueue(name);
    const deleted = await client.deleteQueue(name);
    expect(deleted.dead_letter_queue).toBe(`${name}.dlq`);
    await expect(client.getQueue(`${name}.dlq`)).rejects.toMatchObject({ code: "queue_not_found" });
  });
});
