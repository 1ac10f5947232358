/**
 * {@link SluiceBackend}: the {@link Backend} of a sluice server, over its HTTP API. It keeps
 * every rule the server keeps (priorities, per-key lanes, dedup, backoff, dead-letter queue,
 * pause, cancel, drain), so its capabilities are all true.
 *
 * @module
 */
import type {
  Backend,
  CancelOutcome,
  CancelResult,
  Capabilities,
  DeadLetter,
  Delivery,
  Enqueued,
  MessageInfo,
  MessageRef,
  Nack,
  NackOutcome,
  NextStep,
  OutgoingMessage,
  QueueOptions,
  QueueStats,
  ReceiveOptions,
  ReleaseOptions,
} from "./backend.js";
import { type ClientOptions, SluiceClient } from "./client.js";
import { type Clock, SystemClock } from "./clock.js";
import { SluiceError, isStaleReceipt } from "./errors.js";
import type * as wire from "./wire.js";

/** Most messages one enqueue request carries (the server's batch limit). */
const BATCH_MAX = 1000;
/** The longest long poll the server allows, in ms. */
const WAIT_MAX_MS = 20_000;
/** Most receipts one ack request carries (the server's limit). */
const ACK_MAX = 1000;
/** Most messages one receive returns. */
const RECEIVE_MAX = 100;

/** Options of {@link SluiceBackend}: the client's, or a client of your own. */
export interface SluiceBackendOptions extends ClientOptions {
  /** Use this client instead of building one from the other options. */
  client?: SluiceClient;
}

/** A sluice server. */
export class SluiceBackend implements Backend {
  readonly kind = "sluice";
  readonly capabilities: Capabilities = {
    extend: true,
    pause: true,
    cancel: true,
    perKey: true,
    ordered: true,
    dedup: true,
    delays: true,
    drain: true,
    get: true,
    inFlightStats: true,
    priority: true,
    chaining: true,
  };
  readonly clock: Clock = new SystemClock();
  /** The typed HTTP client underneath, for the routes this interface does not cover. */
  readonly client: SluiceClient;

  /** A server at `url` (env `SLUICE_URL`, default http://127.0.0.1:7566), token from `SLUICE_TOKEN`. */
  constructor(options: SluiceBackendOptions = {}) {
    this.client = options.client ?? new SluiceClient(options);
  }

  async ensureQueue(queue: string, options: QueueOptions = {}): Promise<void> {
    const spec: wire.QueueSpec = {};
    if (options.maxAttempts !== undefined) spec.max_attempts = options.maxAttempts;
    if (options.perKey) spec.ordering = "per_key";
    if (options.visibilityTimeoutMs !== undefined) {
      spec.visibility_timeout_ms = options.visibilityTimeoutMs;
    }
    await this.client.putQueue(queue, spec);
  }

  async queueExists(queue: string): Promise<boolean> {
    try {
      await this.client.getQueue(queue);
      return true;
    } catch (error) {
      if (error instanceof SluiceError && error.code === "queue_not_found") return false;
      throw error;
    }
  }

  async enqueue(queue: string, messages: OutgoingMessage[]): Promise<Enqueued[]> {
    if (messages.length === 1 && messages[0] !== undefined) {
      return [enqueuedOf(await this.client.enqueue(queue, toWire(messages[0])))];
    }
    const results: Enqueued[] = [];
    for (let start = 0; start < messages.length; start += BATCH_MAX) {
      const batch = messages.slice(start, start + BATCH_MAX).map(toWire);
      const answer = await this.client.enqueueBatch(queue, batch);
      results.push(...answer.results.map(enqueuedOf));
    }
    return results;
  }

  async receive(queue: string, options: ReceiveOptions = {}): Promise<Delivery[]> {
    const request: wire.ReceiveIn = {
      max: Math.min(Math.max(options.max ?? 1, 1), RECEIVE_MAX),
      wait_ms: Math.min(Math.max(options.waitMs ?? 0, 0), WAIT_MAX_MS),
    };
    if (options.visibilityTimeoutMs !== undefined) {
      request.visibility_timeout_ms = Math.max(1, options.visibilityTimeoutMs);
    }
    // The signal is not passed on: cutting a long poll could strand a lease the server already
    // granted until it runs out. A receive asked to stop ends with its wait (at most 20 s).
    options.signal?.throwIfAborted();
    const answer = await this.client.receive(queue, request);
    return answer.messages.map((message) => ({
      messageId: message.message_id,
      receipt: message.receipt,
      body: bodyOf(message),
      id: message.id ?? undefined,
      key: message.key ?? undefined,
      attempt: message.attempts,
      enqueuedAt: Date.parse(message.enqueued_at),
      lastError: message.last_error ?? undefined,
      headers: message.headers,
    }));
  }

  async ack(queue: string, receipt: string, result?: unknown): Promise<void> {
    await this.client.ack(queue, receipt, result);
  }

  async ackThen(
    queue: string,
    receipt: string,
    then: NextStep[],
    result?: unknown,
  ): Promise<Enqueued[]> {
    if (then.length === 0) {
      await this.ack(queue, receipt, result);
      return [];
    }
    const steps = then.map(({ queue: target, ...message }) => ({
      queue: target,
      ...toWire(message),
    }));
    const answer = await this.client.ackThen(queue, receipt, steps, result);
    return (answer.then ?? []).map(enqueuedOf);
  }

  async ackMany(queue: string, receipts: string[]): Promise<boolean[]> {
    const acked: boolean[] = [];
    for (let start = 0; start < receipts.length; start += ACK_MAX) {
      const batch = receipts.slice(start, start + ACK_MAX);
      try {
        await this.client.ack(queue, batch);
        acked.push(...batch.map(() => true));
      } catch (error) {
        // A stale receipt refuses the request with 409 and says per receipt what was acked:
        // the current leases were acked all the same.
        const results = isStaleReceipt(error) ? staleResults(error, batch.length) : undefined;
        if (results === undefined) throw error;
        acked.push(...results);
      }
    }
    return acked;
  }

  async nack(queue: string, receipt: string, nack: Nack): Promise<NackOutcome> {
    const request: wire.NackIn = { receipt, error: nack.error };
    if (nack.delayMs !== undefined) request.delay_ms = Math.max(0, Math.round(nack.delayMs));
    if (nack.permanent) request.permanent = true;
    const answer = await this.client.nack(queue, request);
    return answer.state === "dead" ? "dead_lettered" : "retried";
  }

  /** An extend to 0 is the server's release: no failure counted, never dead-lettered. */
  async release(queue: string, receipt: string, options: ReleaseOptions = {}): Promise<void> {
    await this.client.extend(queue, receipt, 0, { unstarted: options.unstarted === true });
  }

  async extend(queue: string, receipt: string, visibilityTimeoutMs: number): Promise<void> {
    await this.client.extend(queue, receipt, Math.max(1, Math.round(visibilityTimeoutMs)));
  }

  async stats(queue: string): Promise<QueueStats> {
    const stats = await this.client.stats(queue);
    return {
      ready: stats.ready,
      delayed: stats.delayed,
      inFlight: stats.in_flight,
      deadLettered: stats.dead_lettered ?? null,
      paused: stats.paused,
    };
  }

  async setPaused(queue: string, paused: boolean): Promise<void> {
    if (paused) await this.client.pause(queue);
    else await this.client.resume(queue);
  }

  async cancel(queue: string, message: MessageRef, reason?: string): Promise<CancelResult> {
    const target =
      "messageId" in message
        ? { messageId: message.messageId, ...(reason === undefined ? {} : { reason }) }
        : { id: message.id, ...(reason === undefined ? {} : { reason }) };
    const answer = await this.client.cancel(queue, target);
    return {
      outcome: answer.outcome as CancelOutcome,
      messageId: answer.message_id ?? undefined,
      state: answer.state ?? undefined,
    };
  }

  async get(queue: string, message: MessageRef): Promise<MessageInfo | undefined> {
    try {
      const status =
        "messageId" in message
          ? await this.client.getMessage(queue, message.messageId)
          : await this.client.getMessageByIdempotencyId(queue, message.id);
      return {
        messageId: status.message_id,
        state: status.state,
        attempts: status.attempts,
        lastError: status.last_error ?? undefined,
      };
    } catch (error) {
      if (error instanceof SluiceError && error.code === "message_not_found") return undefined;
      throw error;
    }
  }

  async drain(queue: string, timeoutMs: number): Promise<boolean> {
    const answer = await this.client.drain(queue, Math.max(0, Math.round(timeoutMs)));
    return answer.drained;
  }

  async deadLetters(queue: string, limit = 100): Promise<DeadLetter[]> {
    const page = await this.client.listDeadLetters(queue, { limit: Math.min(limit, 1000) });
    // A listing leaves bodies out; each entry is read in full for its body.
    const entries = await Promise.all(
      page.entries.map((entry) =>
        entry.body === undefined && entry.body_base64 == null
          ? this.client.getDeadLetter(queue, entry.message_id)
          : entry,
      ),
    );
    return entries.map((entry) => ({
      messageId: entry.message_id,
      body: bodyOf(entry),
      id: entry.id ?? undefined,
      error: entry.last_error ?? undefined,
      attempts: entry.attempts,
      deadLetteredAt: Date.parse(entry.last_seen_at),
    }));
  }

  async deleteQueue(queue: string): Promise<void> {
    // The server deletes the dead-letter queue with it (one rule for every client).
    await this.client.deleteQueue(queue).catch((error: unknown) => {
      if (!(error instanceof SluiceError && error.code === "queue_not_found")) throw error;
    });
  }

  async close(): Promise<void> {}
}

function toWire(message: OutgoingMessage): wire.MessageIn {
  const out: wire.MessageIn =
    message.body instanceof Uint8Array
      ? { body_base64: Buffer.from(message.body).toString("base64") }
      : { body: message.body };
  if (message.id !== undefined) out.id = message.id;
  if (message.key !== undefined) out.key = message.key;
  if (message.priority !== undefined) out.priority = message.priority;
  if (message.delayMs !== undefined) out.delay_ms = Math.max(0, Math.round(message.delayMs));
  if (message.headers !== undefined) out.headers = message.headers;
  return out;
}

/** One enqueue answer (of an enqueue, a batch or an ack's next steps) in backend terms. */
function enqueuedOf(answer: wire.EnqueueOut): Enqueued {
  return {
    messageId: answer.message_id,
    created: answer.created,
    position: answer.created ? (answer.position ?? undefined) : 0,
  };
}

/** A JSON body as it is; a byte body (`body_base64`) as bytes. */
function bodyOf(message: { body?: unknown; body_base64?: string | null }): unknown {
  if (typeof message.body_base64 === "string") {
    return new Uint8Array(Buffer.from(message.body_base64, "base64"));
  }
  return message.body;
}

/** The per-receipt answers of a refused multi-receipt ack, when its details hold them all. */
function staleResults(error: unknown, count: number): boolean[] | undefined {
  const details = (error as SluiceError).details as { results?: { acked?: unknown }[] } | undefined;
  const results = details?.results;
  if (!Array.isArray(results) || results.length !== count) return undefined;
  return results.map((result) => result.acked === true);
}
