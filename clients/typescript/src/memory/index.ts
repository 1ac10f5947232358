/**
 * `@sluice/client/memory`: {@link MemoryBackend}, a queue inside the process that keeps every
 * rule of conformance/scenarios.json (priorities, per-key lanes, dedup window, backoff,
 * leases that run out, max attempts, dead-letter queue, pause, cancel, drain). Its clock is a
 * {@link ManualClock} by default: time moves only with {@link MemoryBackend.advance}, so tests of
 * delays, retries and leases take no real time and run the same way every time.
 *
 * @module
 */
import type {
  Backend,
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
} from "../backend.js";
import { ackEach, ackWithoutChaining } from "../backend.js";
import { type Clock, ManualClock } from "../clock.js";
import { SluiceError } from "../errors.js";
import { type MemoryQueue, type Stored, type Waiter, backoffDelay, newQueue } from "./state.js";

export { ManualClock, SystemClock } from "../clock.js";
export type { Clock } from "../clock.js";

/** Options of {@link MemoryBackend}. */
export interface MemoryBackendOptions {
  /**
   * The clock (default: a new {@link ManualClock}). Pass a `SystemClock` to run in real time,
   * e.g. for a demo whose retries should happen by themselves.
   */
  clock?: Clock;
  /** Default backoff after a failed attempt (sluice's: 1 s doubling to 60 s; no jitter here). */
  backoff?: { initialMs: number; maxMs: number; factor: number };
  /** How long an idempotency id deduplicates, in ms (default 24 h, as sluice). */
  dedupWindowMs?: number;
}

/** How long acked, dead-lettered and cancelled records are kept (sluice's default). */
const FINISHED_RETENTION_MS = 3_600_000;

/** The error text of a lease that ran out, as sluice words it. */
const LEASE_EXPIRED = "visibility timeout expired";

/** A queue inside the process. Deterministic with its default manual clock. */
export class MemoryBackend implements Backend {
  readonly kind = "memory";
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
    chaining: false,
  };
  readonly clock: Clock;
  readonly #queues = new Map<string, MemoryQueue>();
  readonly #backoff: { initialMs: number; maxMs: number; factor: number };
  readonly #dedupWindowMs: number;
  #seq = 0;
  #receiptSeq = 0;

  constructor(options: MemoryBackendOptions = {}) {
    this.clock = options.clock ?? new ManualClock();
    this.#backoff = options.backoff ?? { initialMs: 1000, maxMs: 60_000, factor: 2 };
    this.#dedupWindowMs = options.dedupWindowMs ?? 86_400_000;
  }

  /**
   * Moves a {@link ManualClock} forward by `ms`, waking every wait due on the way (receives,
   * drains, worker heartbeats). Throws with any other clock.
   */
  async advance(ms: number): Promise<void> {
    if (!(this.clock instanceof ManualClock)) {
      throw new TypeError("advance() needs the memory backend's ManualClock");
    }
    await this.clock.advance(ms);
  }

  async ensureQueue(queue: string, options: QueueOptions = {}): Promise<void> {
    if (this.#queues.has(queue)) return;
    const dlq = `${queue}.dlq`;
    if (!this.#queues.has(dlq)) {
      this.#queues.set(dlq, newQueue(dlq, { maxAttempts: 0 }, undefined));
    }
    this.#queues.set(queue, newQueue(queue, options, dlq));
  }

  async queueExists(queue: string): Promise<boolean> {
    return this.#queues.has(queue);
  }

  async enqueue(queue: string, messages: OutgoingMessage[]): Promise<Enqueued[]> {
    const state = this.#queue(queue);
    const now = this.clock.now();
    this.#sweep(state, now);
    // Validate the whole batch before storing any of it, as the server does.
    const bodies = messages.map((message, index) => copyBody(message.body, index));
    const results: Enqueued[] = [];
    for (const [index, message] of messages.entries()) {
      const duplicate = message.id === undefined ? undefined : state.dedup.get(message.id);
      if (duplicate !== undefined && now - duplicate.at < this.#dedupWindowMs) {
        results.push({ messageId: duplicate.messageId, created: false, position: 0 });
        continue;
      }
      const position = live(state);
      const delay = Math.max(0, message.delayMs ?? 0);
      const stored: Stored = {
        messageId: crypto.randomUUID(),
        seq: this.#seq++,
        body: bodies[index],
        id: message.id,
        key: message.key,
        priority: message.priority ?? 0,
        headers: { ...(message.headers ?? {}) },
        enqueuedAt: now,
        state: delay > 0 ? "delayed" : "ready",
        visibleAt: now + delay,
        attempts: 0,
        lastError: undefined,
        receipt: undefined,
        leaseExpiresAt: 0,
        deadLetter: undefined,
      };
      state.messages.set(stored.messageId, stored);
      if (message.id !== undefined) {
        state.dedup.set(message.id, { messageId: stored.messageId, at: now });
      }
      results.push({ messageId: stored.messageId, created: true, position });
    }
    wake(state);
    return results;
  }

  async receive(queue: string, options: ReceiveOptions = {}): Promise<Delivery[]> {
    const state = this.#queue(queue);
    const max = Math.min(Math.max(options.max ?? 1, 1), 100);
    const leaseMs = Math.max(1, options.visibilityTimeoutMs ?? state.visibilityTimeoutMs);
    const deadline = this.clock.now() + Math.max(0, options.waitMs ?? 0);
    for (;;) {
      const now = this.clock.now();
      this.#sweep(state, now);
      const taken = this.#take(state, max, leaseMs, now);
      if (taken.length > 0 || now >= deadline) return taken;
      await this.#wait(state, deadline, options.signal);
    }
  }

  async ack(queue: string, receipt: string, result?: unknown): Promise<void> {
    const state = this.#queue(queue);
    this.#sweep(state, this.clock.now());
    const message = this.#leased(state, receipt, true);
    message.state = "acked";
    message.finishedAt = this.clock.now();
    message.receipt = undefined;
    message.result = result;
    message.body = undefined;
    wake(state);
  }

  ackMany(queue: string, receipts: string[]): Promise<boolean[]> {
    return ackEach((receipt) => this.ack(queue, receipt), receipts);
  }

  /** Refuses next steps: see {@link ackWithoutChaining}. */
  ackThen(queue: string, receipt: string, then: NextStep[], result?: unknown): Promise<Enqueued[]> {
    return ackWithoutChaining(this, queue, receipt, then, result);
  }

  async nack(queue: string, receipt: string, nack: Nack): Promise<NackOutcome> {
    const state = this.#queue(queue);
    const now = this.clock.now();
    this.#sweep(state, now);
    const message = this.#leased(state, receipt, false);
    message.lastError = nack.error;
    message.receipt = undefined;
    const outOfAttempts = state.maxAttempts > 0 && message.attempts >= state.maxAttempts;
    if (nack.permanent && state.deadLetterQueue === undefined) {
      throw new SluiceError({
        status: 422,
        code: "invalid_field",
        message: "permanent: the queue has no dead-letter queue",
      });
    }
    if ((nack.permanent || outOfAttempts) && state.deadLetterQueue !== undefined) {
      this.#deadLetter(state, message, now);
      wake(state);
      return "dead_lettered";
    }
    const delay = Math.max(0, nack.delayMs ?? backoffDelay(this.#backoff, message.attempts));
    message.state = delay > 0 ? "delayed" : "ready";
    message.visibleAt = now + delay;
    wake(state);
    return "retried";
  }

  async release(queue: string, receipt: string, options: ReleaseOptions = {}): Promise<void> {
    const state = this.#queue(queue);
    const now = this.clock.now();
    this.#sweep(state, now);
    const message = this.#leased(state, receipt, false);
    // As sluice's release: ready at once, no error, no failure; the receipt still settles it
    // until it is delivered again. Unstarted, the delivery is not counted either.
    if (options.unstarted === true) message.attempts = Math.max(0, message.attempts - 1);
    message.state = "ready";
    message.visibleAt = now;
    wake(state);
  }

  async extend(queue: string, receipt: string, leaseMs: number): Promise<void> {
    const state = this.#queue(queue);
    const now = this.clock.now();
    this.#sweep(state, now);
    const message = this.#leased(state, receipt, false);
    message.leaseExpiresAt = now + Math.max(1, leaseMs);
  }

  async stats(queue: string): Promise<QueueStats> {
    const state = this.#queue(queue);
    this.#sweep(state, this.clock.now());
    const counts = count(state);
    const dlq =
      state.deadLetterQueue === undefined ? undefined : this.#queues.get(state.deadLetterQueue);
    return {
      ready: counts.ready,
      delayed: counts.delayed,
      inFlight: counts.inFlight,
      deadLettered: dlq === undefined ? 0 : deadLettersFrom(dlq, queue).length,
      paused: state.paused,
    };
  }

  async setPaused(queue: string, paused: boolean): Promise<void> {
    const state = this.#queue(queue);
    state.paused = paused;
    wake(state);
  }

  async cancel(queue: string, message: MessageRef, reason?: string): Promise<CancelResult> {
    const state = this.#queue(queue);
    this.#sweep(state, this.clock.now());
    const found = this.#find(state, message);
    if (found === undefined)
      return { outcome: "not_found", messageId: undefined, state: undefined };
    if (found.state === "ready" || found.state === "delayed") {
      found.state = "cancelled";
      found.finishedAt = this.clock.now();
      found.body = undefined;
      // Kept as the last error, as sluice keeps it.
      if (reason !== undefined) found.lastError = reason.slice(0, 4096);
      wake(state);
      return { outcome: "cancelled", messageId: found.messageId, state: "cancelled" };
    }
    if (found.state === "in_flight") {
      return { outcome: "already_processing", messageId: found.messageId, state: "in_flight" };
    }
    return { outcome: "already_completed", messageId: found.messageId, state: found.state };
  }

  async get(queue: string, message: MessageRef): Promise<MessageInfo | undefined> {
    const state = this.#queue(queue);
    this.#sweep(state, this.clock.now());
    const found = this.#find(state, message);
    if (found === undefined) return undefined;
    return {
      messageId: found.messageId,
      state: found.state,
      attempts: found.attempts,
      lastError: found.lastError,
    };
  }

  async drain(queue: string, timeoutMs: number): Promise<boolean> {
    const state = this.#queue(queue);
    const deadline = this.clock.now() + Math.max(0, timeoutMs);
    for (;;) {
      const now = this.clock.now();
      this.#sweep(state, now);
      if (live(state) === 0) return true;
      if (now >= deadline) return false;
      await this.#wait(state, deadline, undefined);
    }
  }

  async deadLetters(queue: string, limit = 100): Promise<DeadLetter[]> {
    const state = this.#queue(queue);
    this.#sweep(state, this.clock.now());
    if (state.deadLetterQueue === undefined) return [];
    const dlq = this.#queue(state.deadLetterQueue);
    return deadLettersFrom(dlq, queue)
      .sort((a, b) => (b.deadLetter?.at ?? 0) - (a.deadLetter?.at ?? 0) || b.seq - a.seq)
      .slice(0, limit)
      .map((message) => ({
        messageId: message.messageId,
        body: message.body,
        id: message.id,
        error: message.deadLetter?.lastError,
        attempts: message.deadLetter?.attempts ?? 0,
        deadLetteredAt: message.deadLetter?.at ?? 0,
      }));
  }

  async deleteQueue(queue: string): Promise<void> {
    for (const name of [queue, `${queue}.dlq`]) {
      const state = this.#queues.get(name);
      this.#queues.delete(name);
      if (state !== undefined) wake(state);
    }
  }

  async close(): Promise<void> {
    for (const state of this.#queues.values()) wake(state);
  }

  #queue(queue: string): MemoryQueue {
    const state = this.#queues.get(queue);
    if (state === undefined) {
      throw new SluiceError({
        status: 404,
        code: "queue_not_found",
        message: `queue ${JSON.stringify(queue)} does not exist`,
      });
    }
    return state;
  }

  /** Moves what time has changed: delays that ended, leases that ran out. */
  #sweep(state: MemoryQueue, now: number): void {
    for (const message of state.messages.values()) {
      // Final records answer lookups for an hour, as sluice's `acked_retention_ms`.
      if (message.finishedAt !== undefined && now - message.finishedAt >= FINISHED_RETENTION_MS) {
        state.messages.delete(message.messageId);
        continue;
      }
      if (message.state === "delayed" && message.visibleAt <= now) message.state = "ready";
      if (message.state === "in_flight" && message.leaseExpiresAt <= now) {
        // A lease that runs out is a failed attempt; the holder may still ack until the message
        // goes out again (sluice's rule), so the receipt stays valid for an ack.
        message.lastError = LEASE_EXPIRED;
        if (
          state.maxAttempts > 0 &&
          message.attempts >= state.maxAttempts &&
          state.deadLetterQueue !== undefined
        ) {
          message.receipt = undefined;
          this.#deadLetter(state, message, message.leaseExpiresAt);
        } else {
          message.state = "ready";
          message.visibleAt = message.leaseExpiresAt;
        }
      }
    }
  }

  /** Leases up to `max` messages: priority first, then enqueue order; one per key lane. */
  #take(state: MemoryQueue, max: number, leaseMs: number, now: number): Delivery[] {
    if (state.paused) return [];
    const busyKeys = new Set<string>();
    const laneHeads = new Map<string, number>();
    if (state.perKey) {
      for (const message of state.messages.values()) {
        if (message.key === undefined || !isLive(message)) continue;
        if (message.state === "in_flight") busyKeys.add(message.key);
        const head = laneHeads.get(message.key);
        if (head === undefined || message.seq < head) laneHeads.set(message.key, message.seq);
      }
    }
    const candidates = [...state.messages.values()]
      .filter((message) => message.state === "ready")
      .filter(
        (message) =>
          !state.perKey ||
          message.key === undefined ||
          (!busyKeys.has(message.key) && laneHeads.get(message.key) === message.seq),
      )
      .sort((a, b) => b.priority - a.priority || a.seq - b.seq)
      .slice(0, max);
    return candidates.map((message) => {
      message.state = "in_flight";
      message.attempts += 1;
      message.leaseExpiresAt = now + leaseMs;
      message.receipt = `${message.messageId}.${++this.#receiptSeq}`;
      return {
        messageId: message.messageId,
        receipt: message.receipt,
        body: copyBody(message.body, 0),
        id: message.id,
        key: message.key,
        attempt: message.attempts,
        enqueuedAt: message.enqueuedAt,
        lastError: message.lastError,
        headers: { ...message.headers },
      };
    });
  }

  /**
   * The message a receipt leases. `lenient` (ack) also takes a lease that ran out, as long as
   * the message was not handed out again or dead-lettered since.
   */
  #leased(state: MemoryQueue, receipt: string, lenient: boolean): Stored {
    const messageId = receipt.slice(0, receipt.lastIndexOf("."));
    const message = state.messages.get(messageId);
    const held =
      message !== undefined &&
      message.receipt === receipt &&
      (message.state === "in_flight" || (lenient && message.state === "ready"));
    if (!held) {
      throw new SluiceError({
        status: 409,
        code: "stale_receipt",
        message: "the receipt is not the message's current lease",
      });
    }
    return message;
  }

  #find(state: MemoryQueue, ref: MessageRef): Stored | undefined {
    if ("messageId" in ref) return state.messages.get(ref.messageId);
    const entry = state.dedup.get(ref.id);
    return entry === undefined ? undefined : state.messages.get(entry.messageId);
  }

  /** Moves a message to its queue's dead-letter queue, keeping its id and metadata. */
  #deadLetter(state: MemoryQueue, message: Stored, at: number): void {
    const dlq = this.#queue(state.deadLetterQueue ?? "");
    message.state = "dead";
    message.finishedAt = at;
    const moved: Stored = {
      ...message,
      headers: { ...message.headers },
      seq: this.#seq++,
      state: "ready",
      visibleAt: at,
      attempts: 0,
      receipt: undefined,
      deadLetter: {
        sourceQueue: state.name,
        lastError: message.lastError,
        attempts: message.attempts,
        at,
      },
    };
    message.body = undefined;
    dlq.messages.set(moved.messageId, moved);
    wake(dlq);
  }

  /** Waits for a change of the queue, the next timed event, the deadline or the signal. */
  async #wait(state: MemoryQueue, deadline: number, signal: AbortSignal | undefined) {
    const now = this.clock.now();
    let next = deadline;
    for (const message of state.messages.values()) {
      if (message.state === "delayed") next = Math.min(next, message.visibleAt);
      if (message.state === "in_flight") next = Math.min(next, message.leaseExpiresAt);
    }
    // One listener on the caller's signal, removed when the wait ends: a worker's signal lives
    // as long as the worker and sees one wait after another (a listener per wait left behind
    // grew without bound). The wait itself listens on `stop`, which is its own.
    if (signal?.aborted) throw signal.reason;
    const stop = new AbortController();
    const abort = () => stop.abort(signal?.reason);
    signal?.addEventListener("abort", abort, { once: true });
    try {
      await new Promise<void>((resolve, reject) => {
        const waiter: Waiter = () => resolve();
        state.waiters.add(waiter);
        stop.signal.addEventListener(
          "abort",
          () => {
            state.waiters.delete(waiter);
            reject(stop.signal.reason);
          },
          { once: true },
        );
        this.clock.sleep(Math.max(0, next - now), stop.signal).then(resolve, () => {});
      });
    } finally {
      signal?.removeEventListener("abort", abort);
      stop.abort();
    }
  }
}

function isLive(message: Stored): boolean {
  return message.state === "ready" || message.state === "delayed" || message.state === "in_flight";
}

function count(state: MemoryQueue) {
  let ready = 0;
  let delayed = 0;
  let inFlight = 0;
  for (const message of state.messages.values()) {
    if (message.state === "ready") ready++;
    else if (message.state === "delayed") delayed++;
    else if (message.state === "in_flight") inFlight++;
  }
  return { ready, delayed, inFlight };
}

function live(state: MemoryQueue): number {
  const counts = count(state);
  return counts.ready + counts.delayed + counts.inFlight;
}

function deadLettersFrom(dlq: MemoryQueue, source: string): Stored[] {
  return [...dlq.messages.values()].filter(
    (message) => isLive(message) && message.deadLetter?.sourceQueue === source,
  );
}

function wake(state: MemoryQueue): void {
  const waiters = [...state.waiters];
  state.waiters.clear();
  for (const waiter of waiters) waiter();
}

/** A private copy, so the caller cannot change a stored body; refuses what is not JSON. */
function copyBody(body: unknown, index: number): unknown {
  if (body instanceof Uint8Array) return new Uint8Array(body);
  if (body === undefined) return undefined;
  try {
    return JSON.parse(JSON.stringify(body));
  } catch (cause) {
    throw new SluiceError({
      status: 422,
      code: "invalid_field",
      message: `messages[${index}].body: not JSON (${String(cause)})`,
    });
  }
}
