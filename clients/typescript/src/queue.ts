/**
 * {@link Queue}: the event queue primitive. One definition holds the queue's name, its backend,
 * its event schema (Standard Schema: zod, valibot, Effect Schema...), its handler and how the
 * handler runs (required `concurrency`, retry, hooks). Producers call `enqueue`; a process that
 * consumes calls `start()` and gets a {@link Worker}. Operators pause, resume, cancel and drain.
 *
 * @module
 */
import type {
  Backend,
  CancelResult,
  DeadLetter,
  MessageInfo,
  MessageRef,
  QueueOptions,
  QueueStats,
} from "./backend.js";
import { SluiceError } from "./errors.js";
import { type RetryOptions, checkRetry } from "./retry.js";
import { SluiceBackend } from "./sluice-backend.js";
import { type StandardSchemaV1, validate } from "./standard-schema.js";
import { Worker, type WorkerOptions } from "./worker.js";

/** What the handler gets with each event. */
export interface ExecuteContext<Event> {
  /** The event, as the schema's output. */
  event: Event;
  /** The message id (what `enqueue` returned as `eventId`). */
  eventId: string;
  /** The idempotency id it was enqueued with. */
  idempotencyId: string | undefined;
  /** The ordering key it was enqueued with. */
  key: string | undefined;
  /** This delivery's number, from 1. */
  attempt: number;
  /** When it was enqueued. */
  enqueuedAt: Date;
  /** When this attempt started. */
  processingStartedAt: Date;
  /** Which of the `concurrency` slots runs it, `0..concurrency-1`. */
  instanceIndex: number;
  /** Events this worker finished (acked) before this one started. */
  processedCount: number;
  /**
   * Other messages this worker holds right now, exactly (waiting for a slot, running in other
   * slots, or being acked or nacked): its share of the work. The Rust SDK's `pending_count`.
   */
  pendingCount: number;
  /** Messages waiting in the queue (ready or delayed), every worker's, as last seen. */
  queuePendingCount: number;
  /** The error of the previous attempt, where the backend keeps it. */
  lastError: string | undefined;
  /** Headers it was enqueued with. */
  headers: Record<string, string>;
  /** Aborted when the shutdown grace period ends and the message is released. */
  signal: AbortSignal;
  /**
   * Adds a next step: `event` goes to the queue named `queue` (on the same server) in the same
   * commit as this event's ack, so it is stored exactly when this event is done: never lost to a
   * crash between the two, never stored twice because the event ran again. Nothing is enqueued
   * when the handler fails. At most 100 per event. Throws `UnsupportedError` on a backend
   * without `capabilities.chaining` (memory, SQS, RabbitMQ), which fails the attempt. (Not
   * named `then`, the API's field: that would make the context a thenable.)
   */
  addNextStep(queue: string, event: unknown, options?: EnqueueOptions): void;
}

/** What `onDeadLetter` gets. */
export interface DeadLetterContext<Event> {
  event: Event;
  /** The last attempt's error (what the handler threw). */
  error: unknown;
  eventId: string;
  /** The attempt that failed last. */
  attempt: number;
  enqueuedAt: Date;
  failedAt: Date;
  instanceIndex: number;
}

/** What `onEmpty` gets. */
export interface EmptyContext {
  /** Events this worker finished so far. */
  processedCount: number;
}

/** Options of one enqueue. */
export interface EnqueueOptions {
  /** Idempotency id: the same id within the dedup window stores nothing new (`created: false`). */
  id?: string;
  /** Ordering key: in a `perKey` queue, one message of a key at a time, in order. */
  key?: string;
  /** Higher first (default 0). */
  priority?: number;
  /** Invisible for this long before the first delivery, in ms. */
  delayMs?: number;
  /** String headers kept with the message. */
  headers?: Record<string, string>;
}

/** The answer to an enqueue. */
export interface EnqueueResult {
  /** The message id (the first one's, for a duplicate id). */
  eventId: string;
  /** Messages the queue held when this one was stored; undefined where the backend cannot say. */
  position: number | undefined;
  /** False when the id was a duplicate: nothing new was stored. */
  created: boolean;
}

/** An event with its options, for {@link Queue.enqueueMany}; made by {@link envelope}. */
export class Envelope<Input> {
  constructor(
    readonly event: Input,
    readonly options: EnqueueOptions = {},
  ) {}
}

/** An event with enqueue options, for {@link Queue.enqueueMany}. */
export function envelope<Input>(event: Input, options: EnqueueOptions = {}): Envelope<Input> {
  return new Envelope(event, options);
}

/** A queue definition. */
export interface QueueConfig<Input, Output> {
  /** The queue's name (1-80 of `[A-Za-z0-9_.-]` on sluice; `[A-Za-z0-9_-]` on SQS). */
  name: string;
  /** Where it lives (default: `new SluiceBackend()`, from `SLUICE_URL` and `SLUICE_TOKEN`). */
  backend?: Backend;
  /** The event's schema, checked on enqueue and on receive. Without one, nothing is checked. */
  schema?: StandardSchemaV1<Input, Output>;
  /** Handlers running at once in one worker. Required: pick what the work and its downstream take. */
  concurrency: number;
  /**
   * Handles one event. Resolving acks it (a value other than undefined is kept as the ack's
   * result where the backend can); throwing fails the attempt and the retry policy decides.
   */
  execute?: (ctx: ExecuteContext<Output>) => unknown;
  /** How failures are retried (default 5 attempts, 1 s doubling to 60 s, every error retryable). */
  retry?: RetryOptions<ExecuteContext<Output>>;
  /** Runs after an event went to the dead-letter queue. */
  onDeadLetter?: (ctx: DeadLetterContext<Output>) => unknown;
  /** Runs when the queue has emptied after this worker processed events. */
  onEmpty?: (ctx: EmptyContext) => unknown;
  /**
   * Create the queue, with the `queue` settings, when it does not exist. Default false: a
   * missing queue is a `queue_not_found` error, so a typo in a name makes no queue. Either way
   * an existing queue's settings are changed only by an explicit {@link Queue.ensure}.
   */
  create?: boolean;
  /**
   * The settings `create` and {@link Queue.ensure} give the queue. `maxAttempts` defaults to the
   * retry policy's when that is given, so the broker gives up no sooner than the policy.
   */
  queue?: QueueOptions;
  /** Worker settings: lease, poll wait, shutdown grace, signals. */
  worker?: WorkerOptions;
}

/**
 * An event queue. `Input` is what producers enqueue, `Output` what handlers get (the schema's
 * output, e.g. with defaults applied).
 *
 * ```ts
 * const orders = new Queue({
 *   name: "orders",
 *   schema: z.object({ id: z.number(), total: z.number() }),
 *   concurrency: 4,
 *   execute: async ({ event, attempt }) => { await charge(event) },
 * });
 * await orders.enqueue({ id: 7, total: 42.5 }, { id: "order-7" });
 * orders.start(); // SIGTERM stops it gracefully
 * ```
 */
export class Queue<Input = unknown, Output = Input> {
  readonly name: string;
  readonly backend: Backend;
  readonly config: Readonly<QueueConfig<Input, Output>>;
  #ready: Promise<void> | undefined;
  #worker: Worker<Input, Output> | undefined;

  constructor(config: QueueConfig<Input, Output>) {
    if (!Number.isInteger(config.concurrency) || config.concurrency < 1) {
      throw new TypeError("concurrency must be an integer of at least 1");
    }
    checkRetry(config.retry);
    this.name = config.name;
    this.backend = config.backend ?? new SluiceBackend();
    this.config = config;
  }

  /**
   * Creates the queue on its backend with the `queue` settings, or updates an existing one's
   * (on sluice): the explicit call that changes a queue. Operations call {@link Queue.open}.
   */
  ensure(): Promise<void> {
    return this.#settle(this.#create());
  }

  /**
   * What every operation does first, once: checks that the queue exists, or with `create`
   * creates it when missing. Rejects with `queue_not_found` for a queue that does not exist.
   */
  open(): Promise<void> {
    if (this.#ready !== undefined) return this.#ready;
    return this.#settle(
      this.backend.queueExists(this.name).then(async (exists) => {
        if (exists) return;
        if (!this.config.create) {
          throw new SluiceError({
            status: 404,
            code: "queue_not_found",
            message: `queue ${JSON.stringify(this.name)} does not exist: create it (sluice queue create ${this.name}, or queue.ensure()), or pass create: true`,
          });
        }
        await this.#create();
      }),
    );
  }

  /** Creates the queue, or updates it (sluice), with the `queue` settings. */
  #create(): Promise<void> {
    // The policy's attempts are set on the queue only when given, so that a queue created
    // with the defaults takes the backend's.
    const maxAttempts = this.config.retry?.maxAttempts;
    return this.backend.ensureQueue(this.name, {
      ...(maxAttempts === undefined ? {} : { maxAttempts }),
      ...this.config.queue,
    });
  }

  /** Remembers `opening` as the queue's readiness; a failure is forgotten, to be tried again. */
  #settle(opening: Promise<void>): Promise<void> {
    this.#ready = opening.catch((error: unknown) => {
      this.#ready = undefined;
      throw error;
    });
    return this.#ready;
  }

  /** Validates and enqueues one event; resolves once it is stored durably. */
  async enqueue(event: Input, options: EnqueueOptions = {}): Promise<EnqueueResult> {
    const [result] = await this.enqueueMany([new Envelope(event, options)]);
    if (result === undefined) throw new Error("the backend gave no result for the enqueue");
    return result;
  }

  /**
   * Validates every event first (nothing is stored if one fails), then enqueues them in order;
   * one result per event. Wrap an event in {@link envelope} to give it options.
   */
  async enqueueMany(events: ReadonlyArray<Input | Envelope<Input>>): Promise<EnqueueResult[]> {
    const envelopes = events.map((event) =>
      event instanceof Envelope ? event : new Envelope(event),
    );
    const schema = this.config.schema;
    if (schema !== undefined) {
      await Promise.all(
        envelopes.map((item, index) =>
          validate(schema, item.event, events.length === 1 ? "the event" : `event ${index}`),
        ),
      );
    }
    await this.open();
    const results = await this.backend.enqueue(
      this.name,
      envelopes.map((item) => ({ body: item.event, ...item.options })),
    );
    return results.map((result) => ({
      eventId: result.messageId,
      position: result.position,
      created: result.created,
    }));
  }

  /**
   * Starts consuming in this process: `concurrency` slots run `execute`. Returns the running
   * {@link Worker} (status, pause/resume of this instance, stop). One worker per Queue object.
   */
  start(): Worker<Input, Output> {
    if (this.config.execute === undefined) throw new TypeError("start() needs an execute handler");
    if (this.#worker !== undefined && !this.#worker.stopped) {
      throw new Error(`a worker of ${this.name} is already running`);
    }
    this.#worker = new Worker(this);
    this.#worker.begin();
    return this.#worker;
  }

  /** The worker `start()` returned, while it runs. */
  get worker(): Worker<Input, Output> | undefined {
    return this.#worker;
  }

  /** The queue's numbers. */
  async stats(): Promise<QueueStats> {
    await this.open();
    return this.backend.stats(this.name);
  }

  /** Stops deliveries of the queue for every consumer; enqueues are still stored. */
  async pause(): Promise<void> {
    await this.open();
    await this.backend.setPaused(this.name, true);
  }

  /** Starts deliveries of the queue again. */
  async resume(): Promise<void> {
    await this.open();
    await this.backend.setPaused(this.name, false);
  }

  /**
   * Cancels an event not yet delivered, by its `eventId` (or `{ id }`, its idempotency id).
   * `reason` is kept as the message's last error (sluice and memory; lookups show it).
   */
  async cancel(
    event: string | MessageRef,
    options: { reason?: string } = {},
  ): Promise<CancelResult & { reason: string | undefined }> {
    await this.open();
    const ref = typeof event === "string" ? { messageId: event } : event;
    const result = await this.backend.cancel(this.name, ref, options.reason);
    return { ...result, reason: options.reason };
  }

  /** Waits until nothing is ready, delayed or in flight, or `timeoutMs` (default 30 s). */
  async drain(options: { timeoutMs?: number } = {}): Promise<{ drained: boolean }> {
    await this.open();
    return { drained: await this.backend.drain(this.name, options.timeoutMs ?? 30_000) };
  }

  /** Where an event is now; undefined when unknown. */
  async get(event: string | MessageRef): Promise<MessageInfo | undefined> {
    await this.open();
    return this.backend.get(this.name, typeof event === "string" ? { messageId: event } : event);
  }

  /** Deletes the queue, its messages and its dead-letter queue. */
  async delete(): Promise<void> {
    await this.backend.deleteQueue(this.name);
    this.#ready = undefined;
  }

  /** The queue's dead letters, newest first. */
  async deadLetters(limit?: number): Promise<DeadLetter[]> {
    await this.open();
    return this.backend.deadLetters(this.name, limit);
  }
}
