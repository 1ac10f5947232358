/**
 * `@sluice/client/rabbitmq`: {@link RabbitMqBackend}, the {@link Backend} on RabbitMQ through
 * `amqplib` (an optional peer dependency, imported only here).
 *
 * The topology of a queue `q`:
 * - `q`: the main queue (classic, durable), bound to the direct exchange `sluice.retry` with
 *   routing key `q`;
 * - `q.retry.<ms>`: one delayed retry queue per retry delay. A failed message is published to
 *   it with a per-message TTL (`expiration`) of that delay; when it expires RabbitMQ
 *   dead-letters it through `sluice.retry` back to `q`. One queue per delay, because RabbitMQ
 *   expires messages only at the head of a queue; each one deletes itself (`x-expires`) a
 *   minute after its last use;
 * - `q.dlq`: the dead-letter queue. A nack that is permanent or uses up `maxAttempts` publishes
 *   the message there with its error, attempts and time in headers.
 * Every move is published with publisher confirms before the original is acked, so a crash
 * between the two can deliver a message twice but never loses one. Attempts are counted in the
 * header `x-sluice-attempts`.
 *
 * AMQP has no per-message lease: a received message is held until it is acked or nacked, or its
 * channel closes (the process ends, or the broker's `consumer_timeout` passes), and then it
 * comes back. So `extend` throws {@link UnsupportedError}, and `visibilityTimeoutMs` does not time anything.
 * RabbitMQ deduplicates nothing, so a queue opened with `dedup` and an enqueue with an `id` are
 * refused (an id is never silently ignored). RabbitMQ also has no ordering key, priority here, delayed enqueue, pause, cancel,
 * lookup, or count of messages in flight (so no `drain`): those throw too.
 *
 * @module
 */
import { randomUUID } from "node:crypto";
import amqp, { type ChannelModel, type ConfirmChannel, type GetMessage } from "amqplib";
import type {
  Backend,
  CancelResult,
  Capabilities,
  DeadLetter,
  Delivery,
  Enqueued,
  MessageInfo,
  Nack,
  NackOutcome,
  NextStep,
  OutgoingMessage,
  QueueOptions,
  QueueStats,
  ReceiveOptions,
} from "../backend.js";
import { ackEach, ackWithoutChaining } from "../backend.js";
import { type Clock, SystemClock, realSleep } from "../clock.js";
import { SluiceError, UnsupportedError } from "../errors.js";
import { type BackoffSettings, DEFAULT_BACKOFF, backoffDelay } from "../retry-delay.js";

export type { BackoffSettings } from "../retry-delay.js";

/** The exchange retry queues dead-letter through, back to their main queue. */
const RETRY_EXCHANGE = "sluice.retry";
/** How often a receive that waits looks again (AMQP's basic.get does not wait). */
const POLL_MS = 50;
/** A retry queue deletes itself this long after its delay has passed unused. */
const RETRY_QUEUE_IDLE_MS = 60_000;

const HEADER = {
  messageId: "x-sluice-message-id",
  attempts: "x-sluice-attempts",
  lastError: "x-sluice-last-error",
  key: "x-sluice-key",
  id: "x-sluice-id",
  enqueuedAt: "x-sluice-enqueued-at",
  deadLetteredAt: "x-sluice-dead-lettered-at",
  headers: "x-sluice-headers",
} as const;

/** Options of {@link RabbitMqBackend}. */
export interface RabbitMqBackendOptions {
  /** Backoff of a nack without a delay (default sluice's: 1 s doubling to 60 s). */
  backoff?: BackoffSettings;
}

interface Held {
  queue: string;
  message: GetMessage;
  generation: number;
}

/** RabbitMQ, over one connection and one confirm channel. */
export class RabbitMqBackend implements Backend {
  readonly kind = "rabbitmq";
  readonly capabilities: Capabilities = {
    extend: false,
    pause: false,
    cancel: false,
    perKey: false,
    ordered: true,
    dedup: false,
    delays: false,
    drain: false,
    get: false,
    inFlightStats: false,
    priority: false,
    chaining: false,
  };
  readonly clock: Clock = new SystemClock();
  readonly #connection: ChannelModel;
  readonly #backoff: BackoffSettings;
  readonly #maxAttempts = new Map<string, number>();
  readonly #held = new Map<string, Held>();
  /** Retry queues this process declared, by main queue (deleted with it). */
  readonly #retryQueues = new Map<string, Set<string>>();
  #channel: ConfirmChannel | undefined;
  /** Bumped when the channel is replaced: receipts of an older one are stale. */
  #generation = 0;
  #receiptSeq = 0;

  private constructor(connection: ChannelModel, options: RabbitMqBackendOptions) {
    this.#connection = connection;
    this.#backoff = options.backoff ?? DEFAULT_BACKOFF;
  }

  /** Connects to `url`, e.g. `amqp://guest:guest@127.0.0.1:5672`. */
  static async connect(url: string, options: RabbitMqBackendOptions = {}) {
    const connection = await amqp.connect(url);
    // An error closes the connection; the next call reports it instead of crashing the process.
    connection.on("error", () => {});
    return new RabbitMqBackend(connection, options);
  }

  async ensureQueue(queue: string, options: QueueOptions = {}): Promise<void> {
    if (options.perKey) {
      throw new UnsupportedError(
        this.kind,
        "perKey",
        "a classic RabbitMQ queue has no ordering key",
      );
    }
    if (options.dedup) {
      throw new UnsupportedError(this.kind, "dedup", "RabbitMQ does not deduplicate");
    }
    const channel = await this.#open();
    await channel.assertExchange(RETRY_EXCHANGE, "direct", { durable: true });
    await channel.assertQueue(queue, { durable: true });
    await channel.bindQueue(queue, RETRY_EXCHANGE, queue);
    await channel.assertQueue(`${queue}.dlq`, { durable: true });
    this.#maxAttempts.set(queue, options.maxAttempts ?? 5);
  }

  async queueExists(queue: string): Promise<boolean> {
    // A passive declare of a missing queue closes its channel (404): a channel of its own.
    const channel = await this.#guard(this.#connection.createChannel());
    channel.on("error", () => {});
    try {
      await this.#guard(channel.checkQueue(queue));
      await channel.close();
      return true;
    } catch (error) {
      if (error instanceof SluiceError && error.code === "queue_not_found") return false;
      throw error;
    }
  }

  async enqueue(queue: string, messages: OutgoingMessage[]): Promise<Enqueued[]> {
    for (const message of messages) {
      if ((message.priority ?? 0) !== 0) {
        throw new UnsupportedError(this.kind, "priority", "the queue has no priorities");
      }
      if ((message.delayMs ?? 0) > 0) {
        throw new UnsupportedError(
          this.kind,
          "delays",
          "delays need a TTL queue per delay; this backend uses them for retries only",
        );
      }
      if (message.id !== undefined) {
        throw new UnsupportedError(
          this.kind,
          "dedup",
          "RabbitMQ does not deduplicate, so an idempotency id would be ignored: enqueue without `id`",
        );
      }
    }
    const channel = await this.#open();
    const now = Date.now();
    const results: Enqueued[] = messages.map((message) => {
      const messageId = randomUUID();
      const headers: Record<string, unknown> = {
        [HEADER.messageId]: messageId,
        [HEADER.attempts]: 0,
        [HEADER.enqueuedAt]: now,
      };
      if (message.key !== undefined) headers[HEADER.key] = message.key;
      if (message.headers !== undefined) headers[HEADER.headers] = JSON.stringify(message.headers);
      channel.sendToQueue(queue, Buffer.from(JSON.stringify(message.body)), {
        persistent: true,
        messageId,
        contentType: "application/json",
        headers,
      });
      return { messageId, created: true, position: undefined };
    });
    await this.#confirmed(channel);
    return results;
  }

  async receive(queue: string, options: ReceiveOptions = {}): Promise<Delivery[]> {
    const max = Math.min(Math.max(options.max ?? 1, 1), 100);
    const deadline = Date.now() + Math.max(0, options.waitMs ?? 0);
    const got: Delivery[] = [];
    for (;;) {
      const channel = await this.#open();
      while (got.length < max) {
        const message = await this.#guard(channel.get(queue, { noAck: false }));
        if (message === false) break;
        got.push(this.#hold(queue, message));
      }
      if (got.length > 0 || Date.now() >= deadline) return got;
      await realSleep(Math.min(POLL_MS, deadline - Date.now()), options.signal);
    }
  }

  async ack(queue: string, receipt: string): Promise<void> {
    const held = this.#take(queue, receipt);
    this.#channel?.ack(held.message);
  }

  ackMany(queue: string, receipts: string[]): Promise<boolean[]> {
    return ackEach((receipt) => this.ack(queue, receipt), receipts);
  }

  /** Refuses next steps: see {@link ackWithoutChaining}. */
  ackThen(queue: string, receipt: string, then: NextStep[], result?: unknown): Promise<Enqueued[]> {
    return ackWithoutChaining(this, queue, receipt, then, result);
  }

  async nack(queue: string, receipt: string, nack: Nack): Promise<NackOutcome> {
    const held = this.#take(queue, receipt);
    const channel = await this.#open();
    const headers = { ...(held.message.properties.headers ?? {}) };
    const attempts = Number(headers[HEADER.attempts] ?? 0) + 1;
    const maxAttempts = this.#maxAttempts.get(queue) ?? 5;
    const properties = {
      persistent: true,
      messageId: held.message.properties.messageId,
      contentType: held.message.properties.contentType,
    };
    const deadLetter = nack.permanent || (maxAttempts > 0 && attempts >= maxAttempts);
    if (deadLetter) {
      channel.sendToQueue(`${queue}.dlq`, held.message.content, {
        ...properties,
        headers: {
          ...headers,
          [HEADER.attempts]: attempts,
          [HEADER.lastError]: nack.error.slice(0, 4096),
          [HEADER.deadLetteredAt]: Date.now(),
        },
      });
    } else {
      const delayMs = Math.max(
        0,
        Math.round(nack.delayMs ?? backoffDelay(this.#backoff, attempts)),
      );
      const retryHeaders = {
        ...headers,
        [HEADER.attempts]: attempts,
        [HEADER.lastError]: nack.error.slice(0, 4096),
      };
      if (delayMs === 0) {
        channel.sendToQueue(queue, held.message.content, { ...properties, headers: retryHeaders });
      } else {
        const retryQueue = `${queue}.retry.${delayMs}`;
        // Declared before each use: that also restarts its idle timer (x-expires).
        await channel.assertQueue(retryQueue, {
          durable: true,
          arguments: {
            "x-dead-letter-exchange": RETRY_EXCHANGE,
            "x-dead-letter-routing-key": queue,
            "x-expires": delayMs + RETRY_QUEUE_IDLE_MS,
          },
        });
        const known = this.#retryQueues.get(queue) ?? new Set<string>();
        known.add(retryQueue);
        this.#retryQueues.set(queue, known);
        channel.sendToQueue(retryQueue, held.message.content, {
          ...properties,
          headers: retryHeaders,
          expiration: String(delayMs),
        });
      }
    }
    // The copy is confirmed before the original goes: a crash in between duplicates, never loses.
    await this.#confirmed(channel);
    if (held.generation === this.#generation) channel.ack(held.message);
    return deadLetter ? "dead_lettered" : "retried";
  }

  /** A requeue: the broker delivers it again, its attempts header unchanged. */
  async release(queue: string, receipt: string): Promise<void> {
    const held = this.#take(queue, receipt);
    this.#channel?.nack(held.message, false, true);
  }

  async extend(): Promise<void> {
    throw new UnsupportedError(
      this.kind,
      "extend",
      "AMQP has no per-message lease: a message is held until ack, nack or its channel closes",
    );
  }

  async stats(queue: string): Promise<QueueStats> {
    const channel = await this.#open();
    const main = await this.#guard(channel.checkQueue(queue));
    const dlq = await this.#guard(channel.checkQueue(`${queue}.dlq`));
    return {
      ready: main.messageCount,
      delayed: null,
      inFlight: null,
      deadLettered: dlq.messageCount,
      paused: null,
    };
  }

  async setPaused(): Promise<void> {
    throw new UnsupportedError(this.kind, "pause", "RabbitMQ has no pause of a queue");
  }

  async cancel(): Promise<CancelResult> {
    throw new UnsupportedError(
      this.kind,
      "cancel",
      "RabbitMQ cannot remove one message from a queue",
    );
  }

  async get(): Promise<MessageInfo | undefined> {
    throw new UnsupportedError(this.kind, "get", "RabbitMQ cannot look a message up");
  }

  async drain(): Promise<boolean> {
    throw new UnsupportedError(
      this.kind,
      "drain",
      "RabbitMQ does not count messages delivered and not yet acked, so emptiness cannot be known",
    );
  }

  /**
   * Reads the dead-letter queue on a channel of its own, then closes that channel, which gives
   * every message back where it was. Newest first.
   */
  async deadLetters(queue: string, limit = 100): Promise<DeadLetter[]> {
    const channel = await this.#connection.createChannel();
    channel.on("error", () => {});
    const letters: DeadLetter[] = [];
    try {
      while (letters.length < limit) {
        const message = await this.#guard(channel.get(`${queue}.dlq`, { noAck: false }));
        if (message === false) break;
        const headers = message.properties.headers ?? {};
        letters.push({
          messageId: String(headers[HEADER.messageId] ?? message.properties.messageId ?? ""),
          body: parseBody(message.content),
          id: undefined,
          error:
            headers[HEADER.lastError] === undefined ? undefined : String(headers[HEADER.lastError]),
          attempts: Number(headers[HEADER.attempts] ?? 0),
          deadLetteredAt: Number(headers[HEADER.deadLetteredAt] ?? 0),
        });
      }
    } finally {
      await channel.close().catch(() => {});
    }
    return letters.sort((a, b) => b.deadLetteredAt - a.deadLetteredAt);
  }

  /**
   * Deletes the main queue, its `.dlq` and the retry queues this process used; other retry
   * queues delete themselves a minute after their last use.
   */
  async deleteQueue(queue: string): Promise<void> {
    const channel = await this.#open();
    const retryQueues = [...(this.#retryQueues.get(queue) ?? [])];
    for (const name of [queue, `${queue}.dlq`, ...retryQueues]) {
      await this.#guard(channel.deleteQueue(name));
    }
    this.#retryQueues.delete(queue);
    this.#maxAttempts.delete(queue);
  }

  async close(): Promise<void> {
    this.#held.clear();
    await this.#connection.close().catch(() => {});
  }

  /** The confirm channel, opened again after an error closed it. */
  async #open(): Promise<ConfirmChannel> {
    if (this.#channel !== undefined) return this.#channel;
    const channel = await this.#guard(this.#connection.createConfirmChannel());
    const generation = ++this.#generation;
    const forget = () => {
      if (this.#generation === generation) this.#channel = undefined;
      // Its unacked messages went back to their queues: their receipts are stale now.
      for (const [receipt, held] of this.#held) {
        if (held.generation === generation) this.#held.delete(receipt);
      }
    };
    channel.on("error", forget);
    channel.on("close", forget);
    this.#channel = channel;
    return channel;
  }

  #hold(queue: string, message: GetMessage): Delivery {
    const receipt = `${this.#generation}.${++this.#receiptSeq}`;
    this.#held.set(receipt, { queue, message, generation: this.#generation });
    const headers = message.properties.headers ?? {};
    let userHeaders: Record<string, string> = {};
    if (typeof headers[HEADER.headers] === "string") {
      userHeaders = JSON.parse(headers[HEADER.headers]) as Record<string, string>;
    }
    return {
      messageId: String(headers[HEADER.messageId] ?? message.properties.messageId ?? ""),
      receipt,
      body: parseBody(message.content),
      id: headers[HEADER.id] === undefined ? undefined : String(headers[HEADER.id]),
      key: headers[HEADER.key] === undefined ? undefined : String(headers[HEADER.key]),
      attempt: Number(headers[HEADER.attempts] ?? 0) + 1,
      enqueuedAt: Number(headers[HEADER.enqueuedAt] ?? message.properties.timestamp ?? Date.now()),
      lastError:
        headers[HEADER.lastError] === undefined ? undefined : String(headers[HEADER.lastError]),
      headers: userHeaders,
    };
  }

  /** The lease behind a receipt, given up by this call; stale when unknown or settled. */
  #take(queue: string, receipt: string): Held {
    const held = this.#held.get(receipt);
    if (held === undefined || held.queue !== queue || held.generation !== this.#generation) {
      throw new SluiceError({
        status: 409,
        code: "stale_receipt",
        message: "the receipt is not held (settled already, or its channel closed)",
      });
    }
    this.#held.delete(receipt);
    return held;
  }

  async #confirmed(channel: ConfirmChannel): Promise<void> {
    await this.#guard(channel.waitForConfirms());
  }

  /** Awaits an AMQP call; its errors become SluiceErrors by meaning. */
  async #guard<T>(call: Promise<T>): Promise<T> {
    try {
      return await call;
    } catch (error) {
      const code = (error as { code?: number }).code;
      const message = error instanceof Error ? error.message : String(error);
      if (code === 404) {
        throw new SluiceError({ status: 404, code: "queue_not_found", message, cause: error });
      }
      throw new SluiceError({ status: 503, code: "unavailable", message, cause: error });
    }
  }
}

function parseBody(content: Buffer): unknown {
  const text = content.toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
