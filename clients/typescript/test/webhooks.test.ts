/**
 * Standard Webhooks verification of sluice's push deliveries: the spec's published test vector,
 * and a delivery signed by the server's own signer (a queue with a push destination pointing at
 * a small HTTP server of the test, on loopback).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { type IncomingHttpHeaders, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, inject, it } from "vitest";
import { SluiceClient } from "../src/index.js";
import { Webhook, WebhookVerificationError } from "../src/webhooks/index.js";

describe("webhooks: the Standard Webhooks test vector", () => {
  // From the spec's reference libraries (standard-webhooks/standard-webhooks, Svix docs).
  const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  const timestamp = 1614265330;
  const payload = '{"test": 2432232314}';
  const signature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
  const at = (seconds: number) => () => seconds * 1000;
  const headers = {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": signature,
  };

  it("signs as the spec does", () => {
    expect(new Webhook(secret).sign(id, timestamp, payload)).toBe(signature);
  });

  it("verifies the vector, from plain, fetch and svix headers", () => {
    const webhook = new Webhook(secret, { now: at(timestamp) });
    expect(webhook.verify(payload, headers).body).toEqual({ test: 2432232314 });
    expect(webhook.verify(Buffer.from(payload), new Headers(headers)).webhookId).toBe(id);
    const svix = {
      "svix-id": id,
      "svix-timestamp": String(timestamp),
      "svix-signature": `v1,bm90IGl0 ${signature}`,
    };
    expect(webhook.verify(payload, svix).timestamp.getTime()).toBe(timestamp * 1000);
  });

  it("refuses a changed body, a wrong secret, a stale timestamp and missing headers", () => {
    const webhook = new Webhook(secret, { now: at(timestamp) });
    expect(() => webhook.verify('{"test": 2432232315}', headers)).toThrow(WebhookVerificationError);
    const other = new Webhook(`whsec_${randomBytes(24).toString("base64")}`, {
      now: at(timestamp),
    });
    expect(() => other.verify(payload, headers)).toThrow("no signature matches");
    const late = new Webhook(secret, { now: at(timestamp + 301) });
    expect(() => late.verify(payload, headers)).toThrow("out of tolerance");
    const early = new Webhook(secret, { now: at(timestamp - 301) });
    expect(() => early.verify(payload, headers)).toThrow("out of tolerance");
    expect(() => webhook.verify(payload, { "webhook-id": id })).toThrow("missing");
    expect(() => webhook.verify(payload, { ...headers, "webhook-signature": "v2,abc" })).toThrow(
      "no signature matches",
    );
  });
});

const sluiceUrl = inject("sluiceUrl");

describe.skipIf(sluiceUrl === "")("webhooks: a delivery signed by sluice", () => {
  it("verifies what the server pushed, with sluice's delivery headers", async () => {
    const received: Array<{ body: string; headers: IncomingHttpHeaders }> = [];
    const receiver = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        received.push({ body: Buffer.concat(chunks).toString("utf8"), headers: request.headers });
        response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    const port = (receiver.address() as AddressInfo).port;
    const dir = mkdtempSync(join(tmpdir(), "sluice-ts-secret-"));
    const secret = `whsec_${randomBytes(32).toString("base64")}`;
    const secretFile = join(dir, "push-secret");
    writeFileSync(secretFile, secret, { mode: 0o600 });
    const client = new SluiceClient({ url: sluiceUrl });
    const queue = `tsw_push_${Math.random().toString(36).slice(2, 10)}`;
    try {
      await client.putQueue(queue, {
        push: { url: `http://127.0.0.1:${port}/hook`, signing_secret: { file: secretFile } },
      });
      const { message_id } = await client.enqueue(queue, {
        id: "ev-1",
        body: { hello: "world", n: 1 },
      });
      for (let waited = 0; received.length === 0 && waited < 15_000; waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(received).toHaveLength(1);
      const [delivery] = received;
      const verified = new Webhook(secret).verify(delivery!.body, delivery!.headers);
      expect(verified).toMatchObject({
        body: { hello: "world", n: 1 },
        webhookId: message_id,
        messageId: message_id,
        attempt: 1,
        queue,
        idempotencyKey: "ev-1",
      });
      expect(() =>
        new Webhook(`whsec_${randomBytes(32).toString("base64")}`).verify(
          delivery!.body,
          delivery!.headers,
        ),
      ).toThrow(WebhookVerificationError);
      expect(() => new Webhook(secret).verify(`${delivery!.body} `, delivery!.headers)).toThrow(
        WebhookVerificationError,
      );
    } finally {
      await client.deleteQueue(queue).catch(() => {});
      await new Promise((resolve) => receiver.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
