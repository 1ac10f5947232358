/**
 * `@sluice/client/webhooks`: verify sluice's push deliveries. A queue with a push destination
 * and a `signing_secret` (a `whsec_` secret) signs every request it sends the Standard Webhooks
 * way (https://www.standardwebhooks.com): `webhook-id` (the message id), `webhook-timestamp`
 * (seconds) and `webhook-signature` (`v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, several
 * separated by spaces). {@link Webhook.verify} checks them in constant time, refuses a timestamp
 * more than five minutes away, and hands back the body with sluice's delivery headers.
 *
 * ```ts
 * const webhook = new Webhook(process.env.PUSH_SIGNING_SECRET!);
 * http.createServer(async (req, res) => {
 *   const delivery = webhook.verify(await readBody(req), req.headers); // throws if forged
 *   res.writeHead(204).end();
 * });
 * ```
 *
 * @module
 */
import { createHmac, timingSafeEqual } from "node:crypto";

/** The signature is missing, malformed, wrong, or its timestamp is out of tolerance. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError";
}

/** Headers as Node's `IncomingMessage`, a fetch `Headers` or a plain object gives them. */
export type HeadersLike =
  | Headers
  | Record<string, string | string[] | undefined>
  | ReadonlyMap<string, string>;

/** A verified push delivery. */
export interface PushDelivery {
  /** The body: parsed JSON for `application/json`, else the raw text. */
  body: unknown;
  /** The raw body as it was signed. */
  raw: string;
  /** `webhook-id`: the message id, the same on every retry (use it to deduplicate). */
  webhookId: string;
  /** `webhook-timestamp`, when sluice signed this attempt. */
  timestamp: Date;
  /** `sluice-message-id`. */
  messageId: string | undefined;
  /** `sluice-attempt`, from 1. */
  attempt: number | undefined;
  /** `sluice-queue`. */
  queue: string | undefined;
  /** `idempotency-key`: the message's idempotency id, when it has one. */
  idempotencyKey: string | undefined;
}

/** Options of {@link Webhook}. */
export interface WebhookOptions {
  /** How far the timestamp may be from now, in seconds (default 300, the spec's). */
  toleranceSeconds?: number;
  /** Now, in ms since the epoch (for tests). */
  now?: () => number;
}

const PREFIX = "whsec_";

/** A Standard Webhooks verifier (and signer) for one secret. */
export class Webhook {
  readonly #key: Buffer;
  readonly #toleranceSeconds: number;
  readonly #now: () => number;

  /** `secret`: the `whsec_...` secret given to sluice (its base64 part is the key), or raw key bytes. */
  constructor(secret: string | Uint8Array, options: WebhookOptions = {}) {
    if (typeof secret === "string") {
      const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret;
      this.#key = Buffer.from(encoded, "base64");
    } else {
      this.#key = Buffer.from(secret);
    }
    if (this.#key.length === 0) throw new TypeError("the webhook secret is empty");
    this.#toleranceSeconds = options.toleranceSeconds ?? 300;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Checks a delivery's signature and returns it. `payload` must be the body exactly as
   * received (bytes or text), not re-serialized JSON. Throws {@link WebhookVerificationError}.
   */
  verify(payload: string | Uint8Array, headers: HeadersLike): PushDelivery {
    const raw = typeof payload === "string" ? payload : Buffer.from(payload).toString("utf8");
    const id = header(headers, "webhook-id") ?? header(headers, "svix-id");
    const timestamp = header(headers, "webhook-timestamp") ?? header(headers, "svix-timestamp");
    const signatures = header(headers, "webhook-signature") ?? header(headers, "svix-signature");
    if (id === undefined || timestamp === undefined || signatures === undefined) {
      throw new WebhookVerificationError(
        "missing webhook-id, webhook-timestamp or webhook-signature",
      );
    }
    if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError("malformed webhook-timestamp");
    const seconds = Number(timestamp);
    const nowSeconds = Math.floor(this.#now() / 1000);
    if (Math.abs(nowSeconds - seconds) > this.#toleranceSeconds) {
      throw new WebhookVerificationError("webhook-timestamp is out of tolerance");
    }
    const expected = this.#mac(id, seconds, payload);
    const matches = signatures.split(" ").some((entry) => {
      const [version, signature] = entry.split(",", 2);
      if (version !== "v1" || signature === undefined) return false;
      const given = Buffer.from(signature, "base64");
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
    if (!matches) throw new WebhookVerificationError("no signature matches");
    const attempt = header(headers, "sluice-attempt");
    return {
      body: parse(raw, header(headers, "content-type")),
      raw,
      webhookId: id,
      timestamp: new Date(seconds * 1000),
      messageId: header(headers, "sluice-message-id"),
      attempt: attempt === undefined ? undefined : Number(attempt),
      queue: header(headers, "sluice-queue"),
      idempotencyKey: header(headers, "idempotency-key"),
    };
  }

  /** The `webhook-signature` value for a message, as a sender writes it: `v1,<base64>`. */
  sign(id: string, timestamp: Date | number, payload: string | Uint8Array): string {
    const seconds =
      timestamp instanceof Date ? Math.floor(timestamp.getTime() / 1000) : Math.floor(timestamp);
    return `v1,${this.#mac(id, seconds, payload).toString("base64")}`;
  }

  #mac(id: string, seconds: number, payload: string | Uint8Array): Buffer {
    return createHmac("sha256", this.#key)
      .update(`${id}.${seconds}.`)
      .update(typeof payload === "string" ? Buffer.from(payload, "utf8") : payload)
      .digest();
  }
}

function header(headers: HeadersLike, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") {
    return (headers as Headers | ReadonlyMap<string, string>).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  const found =
    record[name] ??
    Object.entries(record).find(([key]) => key.toLowerCase() === name)?.[1] ??
    undefined;
  return Array.isArray(found) ? found.join(" ") : found;
}

function parse(raw: string, contentType: string | undefined): unknown {
  if (contentType !== undefined && !contentType.includes("json")) return raw;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}
