/**
 * The seam between queue semantics and where the queue lives: {@link Backend}, in queue terms
 * (enqueue, receive under a lease, ack, nack, extend, stats, pause, cancel, drain, dead letters),
 * the same shape as the Rust SDK's `Backend` trait. `SluiceBackend` implements it over HTTP,
 * `MemoryBackend` (`@sluice/client/memory`) inside the process, `SqsBackend`
 * (`@sluice/client/sqs`) on Amazon SQS and `RabbitMqBackend` (`@sluice/client/rabbitmq`) on
 * RabbitMQ. What a backend cannot do is in its {@link Capabilities} and throws
 * {@link UnsupportedError}: never a silent no-op.
 *
 * @module
 */
import type { Clock } from "./clock.js";
import { UnsupportedError, isStaleReceipt } from "./errors.js";

/** What a backend can do beyond enqueue, receive, ack, nack and stats. */
export interface Capabilities {
  /** Extend a lease (`extend`); without it, the worker sends no heartbeats. */
  readonly extend: boolean;
  /** Pause and resume deliveries of a queue. */
  readonly pause: boolean;
  /** Cancel a message before delivery. */
  readonly cancel: boolean;
  /** `perKey` queues: one message of a key at a time, in order. */
  readonly perKey: boolean;
  /** `ordered` queues: messages come out in enqueue order. */
  readonly ordered: boolean;
  /** An enqueue `id` deduplicates within the queue's window. */
  readonly dedup: boolean;
  /** Delayed enqueues (`delayMs` on a message). Retry delays of `nack` work on every backend. */
  readonly delays: boolean;
  /** Know when a queue is empty, in-flight messages included (`drain`). */
  readonly drain: boolean;
  /** Look a message up (`get`). */
  readonly get: boolean;
  /** Stats count in-flight messages (else `inFlight` is `null`). */
  readonly inFlightStats: boolean;
  /** `priority` on a message: higher first. */
  readonly priority: boolean;
  /**
   * `ackThen`: an ack enqueues next steps in its own commit, so they are stored exactly when
   * the message is done. Without it a next step is refused, never enqueued apart from the ack.
   */
  readonly chaining: boolean;
}

/** How a queue is opened; every field is optional. */
export interface QueueOptions {
  /** Deliveries before a failure dead-letters (default 5). */
  maxAttempts?: number;
  /** Messages with the same `key` are delivered one at a time, in order. */
  perKey?: boolean;
  /** Messages come out in enqueue order (the default on sluice, memory and RabbitMQ). */
  ordered?: boolean;
  /** An enqueue `id` deduplicates (always on sluice and memory; a FIFO queue on SQS). */
  dedup?: boolean;
  /** Default lease of a receive, in ms (default 30000). */
  visibilityTimeoutMs?: number;
}

/** A message to enqueue. */
export interface OutgoingMessage {
  /** The body: any JSON value. */
  body: unknown;
  /**
   * Idempotency id: the same id within the queue's dedup window stores nothing new. Where the
   * queue cannot deduplicate (a standard SQS queue, RabbitMQ) an enqueue with an id is refused
   * ({@link UnsupportedError}, operation `dedup`), never silently ignored.
   */
  id?: string;
  /** Ordering key (`perKey` queues). */
  key?: string;
  /** Higher first (default 0). */
  priority?: number;
  /** Invisible for this long before its first delivery, in ms. */
  delayMs?: number;
  /** String headers kept with the message. */
  headers?: Record<string, string>;
}

/** A message an ack enqueues in its own commit ({@link Backend.ackThen}), and its queue. */
export interface NextStep extends OutgoingMessage {
  /** The queue it goes to (on the same server). */
  queue: string;
}

/** The outcome of one enqueue. */
export interface Enqueued {
  /** The message (the first one, for a duplicate id). */
  messageId: string;
  /** False when the id was seen within the dedup window: nothing new was stored. */
  created: boolean;
  /**
   * Messages the queue held when this one was stored (0 for a duplicate); `undefined` where
   * the backend cannot say (SQS, RabbitMQ, sluice batches).
   */
  position: number | undefined;
}

/** How to receive. */
export interface ReceiveOptions {
  /** Most messages (default 1; 1..=100 on sluice, 1..=10 on SQS). */
  max?: number;
  /** Each message's visibility timeout, how long its lease lasts, in ms (default: the queue's). */
  visibilityTimeoutMs?: number;
  /** Wait up to this long for the first message, in ms (default 0). */
  waitMs?: number;
  /**
   * Stops waiting (the promise rejects with the signal's reason) where that loses nothing:
   * memory, RabbitMQ between its polls. Over HTTP (sluice, SQS) a long poll already sent is not
   * cut, since a lease the server granted meanwhile would be stranded until it runs out; the
   * receive ends with its wait.
   */
  signal?: AbortSignal;
}

/** A leased message. */
export interface Delivery {
  /** The message. */
  messageId: string;
  /** The lease handle for ack, nack and extend. */
  receipt: string;
  /** The body (JSON value; a byte body as a `Uint8Array`). */
  body: unknown;
  /** Idempotency id it was enqueued with. */
  id: string | undefined;
  /** Ordering key. */
  key: string | undefined;
  /** This delivery's number, from 1. */
  attempt: number;
  /** When it was enqueued (ms since the epoch). */
  enqueuedAt: number;
  /** Error of the previous failed attempt. */
  lastError: string | undefined;
  /** Headers it was enqueued with. */
  headers: Record<string, string>;
}

/** A failed attempt. */
export interface Nack {
  /** Why it failed (kept as the message's last error). */
  error: string;
  /** Retry after this long, in ms (default: the queue's backoff). */
  delayMs?: number;
  /** Dead-letter at once. */
  permanent?: boolean;
}

/** How a message goes back: {@link Backend.release}. */
export interface ReleaseOptions {
  /** It was never handed to a handler: the delivery is not counted where the backend can. */
  unstarted?: boolean;
}

/** What a nack did. */
export type NackOutcome = "retried" | "dead_lettered";

/** A queue's numbers; `null` where the backend cannot count. */
export interface QueueStats {
  /** Visible, waiting for a consumer. */
  ready: number;
  /** Waiting for a delay or a backoff. */
  delayed: number | null;
  /** Leased. */
  inFlight: number | null;
  /** In the dead-letter queue. */
  deadLettered: number | null;
  /** Deliveries paused. */
  paused: boolean | null;
}

/** How a message is named: by its message id or by its idempotency id. */
export type MessageRef = { messageId: string } | { id: string };

/** What a cancel found. */
export type CancelOutcome = "cancelled" | "not_found" | "already_processing" | "already_completed";

/** The answer to a cancel. */
export interface CancelResult {
  outcome: CancelOutcome;
  /** The message, when it was found. */
  messageId: string | undefined;
  /** Its state when it was already completed (`acked`, `dead`, `cancelled`, ...). */
  state: string | undefined;
}

/** Where a message is. */
export interface MessageInfo {
  messageId: string;
  /** `ready`, `delayed`, `in_flight`, `acked`, `dead`, `cancelled`, `expired`, ... */
  state: string;
  /** Deliveries so far. */
  attempts: number;
  /** Error of the last failed attempt. */
  lastError: string | undefined;
}

/** A message in a queue's dead-letter queue. */
export interface DeadLetter {
  messageId: string;
  body: unknown;
  /** Idempotency id. */
  id: string | undefined;
  /** The last attempt's error. */
  error: string | undefined;
  /** Deliveries it had in its source queue. */
  attempts: number;
  /** When it was dead-lettered (ms since the epoch). */
  deadLetteredAt: number;
}

/** A broker, in queue terms. Every method rejects with `SluiceError` or `UnsupportedError`. */
export interface Backend {
  /** `sluice`, `memory`, `sqs` or `rabbitmq`. */
  readonly kind: string;
  /** What it can do; what it cannot throws `UnsupportedError`. */
  readonly capabilities: Capabilities;
  /** Its clock (a manual one on the memory backend in tests). */
  readonly clock: Clock;
  /** Creates the queue (and its dead-letter queue) if it does not exist. */
  ensureQueue(queue: string, options?: QueueOptions): Promise<void>;
  /** Whether the queue exists; creates nothing. */
  queueExists(queue: string): Promise<boolean>;
  /** Stores messages durably; one result per message, in order. */
  enqueue(queue: string, messages: OutgoingMessage[]): Promise<Enqueued[]>;
  /** Leases up to `max` messages, waiting up to `waitMs` for the first. */
  receive(queue: string, options?: ReceiveOptions): Promise<Delivery[]>;
  /** The message is done. `result` is kept for duplicate enqueues where the backend can. */
  ack(queue: string, receipt: string, result?: unknown): Promise<void>;
  /**
   * Several messages are done, in as few requests as the backend allows; one answer per
   * receipt, in order: false where the lease was lost (a stale receipt). Rejects only when the
   * request itself failed.
   */
  ackMany(queue: string, receipts: string[]): Promise<boolean[]>;
  /**
   * The message is done, and `then` is enqueued in the same commit as the ack: both happen or
   * neither. One result per next step, in order. A backend without
   * {@link Capabilities.chaining} throws `UnsupportedError` for any next step (with none, it
   * acks).
   */
  ackThen(queue: string, receipt: string, then: NextStep[], result?: unknown): Promise<Enqueued[]>;
  /** The attempt failed: retried, or dead-lettered when permanent or out of attempts. */
  nack(queue: string, receipt: string, nack: Nack): Promise<NackOutcome>;
  /** Keeps the lease for `visibilityTimeoutMs` from now. */
  extend(queue: string, receipt: string, visibilityTimeoutMs: number): Promise<void>;
  /**
   * Gives the message back without a failure (the worker does this with what still runs when
   * its shutdown grace ends): ready again at once, with no error and no backoff, and never
   * dead-lettered by the release. The delivery still counts in its attempts (sluice: an extend
   * to 0; SQS: `ChangeMessageVisibility` to 0; RabbitMQ: a requeue), unless `unstarted`: the
   * message was never handed to a handler (the worker paused or stopped before), and the
   * backend does not count such a delivery where it can (sluice, memory, and RabbitMQ, which
   * counts attempts itself; SQS counts every receive).
   */
  release(queue: string, receipt: string, options?: ReleaseOptions): Promise<void>;
  /** The queue's numbers. */
  stats(queue: string): Promise<QueueStats>;
  /** Pauses or resumes deliveries. */
  setPaused(queue: string, paused: boolean): Promise<void>;
  /** Cancels a message that is not being processed. `reason` is recorded where it can be. */
  cancel(queue: string, message: MessageRef, reason?: string): Promise<CancelResult>;
  /** Where a message is; `undefined` when it is not known. */
  get(queue: string, message: MessageRef): Promise<MessageInfo | undefined>;
  /** Waits until nothing is ready, delayed or in flight, or `timeoutMs`; true when it emptied. */
  drain(queue: string, timeoutMs: number): Promise<boolean>;
  /** The queue's dead letters, newest first (at most `limit`, default 100). */
  deadLetters(queue: string, limit?: number): Promise<DeadLetter[]>;
  /** Deletes the queue, its messages and its dead-letter queue (a no-op when it is missing). */
  deleteQueue(queue: string): Promise<void>;
  /** Releases connections. */
  close(): Promise<void>;
}

/**
 * `ackMany` for a backend without a batch ack: one `ack` per receipt, a stale receipt answered
 * false.
 */
export async function ackEach(
  ack: (receipt: string) => Promise<void>,
  receipts: string[],
): Promise<boolean[]> {
  const acked: boolean[] = [];
  for (const receipt of receipts) {
    try {
      await ack(receipt);
      acked.push(true);
    } catch (error) {
      if (!isStaleReceipt(error)) throw error;
      acked.push(false);
    }
  }
  return acked;
}

/**
 * `ackThen` for a backend without {@link Capabilities.chaining}: a plain ack when there is no
 * next step, else `UnsupportedError` before anything is done. Enqueuing the steps apart from
 * the ack could lose them (a crash in between) or store them twice (the message runs again).
 */
export async function ackWithoutChaining(
  backend: Backend,
  queue: string,
  receipt: string,
  then: NextStep[],
  result?: unknown,
): Promise<Enqueued[]> {
  if (then.length > 0) {
    throw new UnsupportedError(
      backend.kind,
      "chaining",
      "next steps need an ack that enqueues them in its own commit",
    );
  }
  await backend.ack(queue, receipt, result);
  return [];
}
