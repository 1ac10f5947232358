/**
 * `@sluice/client/effect`: the SDK for the Effect ecosystem (`effect` is an optional peer
 * dependency, imported only here). Every operation is an `Effect` with typed errors
 * ({@link SluiceFailure}, {@link Unsupported}, {@link SchemaInvalid}); a queue is a service built
 * by a `Layer` ({@link layer}); handlers and hooks are Effects that may need services of their
 * own; the worker runs in a `Scope` ({@link startWorker}, {@link runWorker}, {@link workerLayer}):
 * closing the scope, or interrupting the fiber, stops it gracefully (running handlers get the
 * grace period, the rest is released back to the queue).
 *
 * ```ts
 * class Orders extends Context.Tag("Orders")<Orders, SluiceQueue<Order>>() {}
 * const OrdersLive = SluiceEffect.layer(Orders, {
 *   name: "orders", schema: Order, concurrency: 4,
 *   execute: ({ event }) => Effect.log(`charging ${event.id}`),
 * });
 * const program = Effect.gen(function* () {
 *   const orders = yield* Orders;
 *   yield* orders.enqueue({ id: 7 });
 *   yield* SluiceEffect.runWorker(orders); // until interrupted
 * });
 * ```
 *
 * @module
 */
import { Cause, type Context, Data, Effect, Exit, Layer, Runtime, type Scope } from "effect";
import type { CancelResult, DeadLetter, MessageInfo, MessageRef, QueueStats } from "../backend.js";
import { SluiceError, UnsupportedError } from "../errors.js";
import {
  type DeadLetterContext,
  type EmptyContext,
  type EnqueueOptions,
  type EnqueueResult,
  type Envelope,
  type ExecuteContext,
  Queue,
  type QueueConfig,
} from "../queue.js";
import { type StandardSchemaV1, ValidationError } from "../standard-schema.js";
import type { Worker, WorkerReport } from "../worker.js";

/** The server (or backend) refused or failed: status, stable code, message, details. */
export class SluiceFailure extends Data.TaggedError("SluiceFailure")<{
  readonly status: number;
  readonly code: string;
  readonly message: string;
  readonly details: unknown;
  readonly retryAfter: number | undefined;
}> {}

/** The backend cannot do this operation (e.g. pause on SQS). */
export class Unsupported extends Data.TaggedError("Unsupported")<{
  readonly backend: string;
  readonly operation: string;
  readonly message: string;
}> {}

/** An event failed the queue's schema; nothing was stored. */
export class SchemaInvalid extends Data.TaggedError("SchemaInvalid")<{
  readonly issues: ReadonlyArray<StandardSchemaV1.Issue>;
  readonly message: string;
}> {}

/** Every error a queue operation can fail with. */
export type QueueError = SluiceFailure | Unsupported | SchemaInvalid;

/** The typed error of something the SDK threw (a defect if it is none of the SDK's errors). */
function typed(error: unknown): QueueError {
  if (error instanceof ValidationError) {
    return new SchemaInvalid({ issues: error.issues, message: error.message });
  }
  if (error instanceof UnsupportedError) {
    return new Unsupported({
      backend: error.backend,
      operation: error.operation,
      message: error.message,
    });
  }
  if (error instanceof SluiceError) {
    return new SluiceFailure({
      status: error.status,
      code: error.code,
      message: error.message,
      details: error.details,
      retryAfter: error.retryAfter,
    });
  }
  throw error;
}

function attempt<A>(run: () => Promise<A>): Effect.Effect<A, QueueError> {
  return Effect.tryPromise({ try: run, catch: typed });
}

/** A queue whose operations are Effects. */
export interface SluiceQueue<Input = unknown, Output = Input> {
  /** The Promise-based queue underneath. */
  readonly queue: Queue<Input, Output>;
  enqueue(event: Input, options?: EnqueueOptions): Effect.Effect<EnqueueResult, QueueError>;
  enqueueMany(
    events: ReadonlyArray<Input | Envelope<Input>>,
  ): Effect.Effect<EnqueueResult[], QueueError>;
  stats(): Effect.Effect<QueueStats, QueueError>;
  pause(): Effect.Effect<void, QueueError>;
  resume(): Effect.Effect<void, QueueError>;
  cancel(
    event: string | MessageRef,
    options?: { reason?: string },
  ): Effect.Effect<CancelResult & { reason: string | undefined }, QueueError>;
  drain(options?: { timeoutMs?: number }): Effect.Effect<{ drained: boolean }, QueueError>;
  get(event: string | MessageRef): Effect.Effect<MessageInfo | undefined, QueueError>;
  deadLetters(limit?: number): Effect.Effect<DeadLetter[], QueueError>;
}

/** Wraps a Promise-based {@link Queue}. */
export function fromQueue<Input, Output>(queue: Queue<Input, Output>): SluiceQueue<Input, Output> {
  return {
    queue,
    enqueue: (event, options) => attempt(() => queue.enqueue(event, options)),
    enqueueMany: (events) => attempt(() => queue.enqueueMany(events)),
    stats: () => attempt(() => queue.stats()),
    pause: () => attempt(() => queue.pause()),
    resume: () => attempt(() => queue.resume()),
    cancel: (event, options) => attempt(() => queue.cancel(event, options)),
    drain: (options) => attempt(() => queue.drain(options)),
    get: (event) => attempt(() => queue.get(event)),
    deadLetters: (limit) => attempt(() => queue.deadLetters(limit)),
  };
}

/** A queue definition whose handler and hooks are Effects needing services `R`. */
export interface EffectQueueConfig<Input, Output, E, R>
  extends Omit<QueueConfig<Input, Output>, "execute" | "onDeadLetter" | "onEmpty"> {
  /** Succeeding acks; failing (or dying) fails the attempt and the retry policy decides. */
  execute?: (ctx: ExecuteContext<Output>) => Effect.Effect<unknown, E, R>;
  onDeadLetter?: (ctx: DeadLetterContext<Output>) => Effect.Effect<unknown, never, R>;
  onEmpty?: (ctx: EmptyContext) => Effect.Effect<unknown, never, R>;
}

/**
 * Builds the queue (creating it on its backend if missing). Handlers run on the runtime this
 * Effect runs in, so they see its services; a handler still running at the end of the
 * shutdown grace period is interrupted.
 */
export function make<Input, Output, E = never, R = never>(
  config: EffectQueueConfig<Input, Output, E, R>,
): Effect.Effect<SluiceQueue<Input, Output>, QueueError, R> {
  return Effect.gen(function* () {
    const runtime = yield* Effect.runtime<R>();
    const run = <A, X>(effect: Effect.Effect<A, X, R>, signal?: AbortSignal): Promise<A> =>
      Runtime.runPromiseExit(runtime)(effect, signal === undefined ? undefined : { signal }).then(
        (exit) => {
          if (Exit.isSuccess(exit)) return exit.value;
          // The handler's own error, not a FiberFailure around it: `isRetryable` sees what
          // the handler failed with.
          throw Cause.squash(exit.cause);
        },
      );
    const { execute, onDeadLetter, onEmpty, ...rest } = config;
    const queue = new Queue<Input, Output>({
      ...rest,
      ...(execute === undefined ? {} : { execute: (ctx) => run(execute(ctx), ctx.signal) }),
      ...(onDeadLetter === undefined ? {} : { onDeadLetter: (ctx) => run(onDeadLetter(ctx)) }),
      ...(onEmpty === undefined ? {} : { onEmpty: (ctx) => run(onEmpty(ctx)) }),
    });
    yield* attempt(() => queue.open());
    return fromQueue(queue);
  });
}

/** The queue as a service: a `Layer` that builds it for `tag`. */
export function layer<Self, Input, Output, E = never, R = never>(
  tag: Context.Tag<Self, SluiceQueue<Input, Output>>,
  config: EffectQueueConfig<Input, Output, E, R>,
): Layer.Layer<Self, QueueError, R> {
  return Layer.effect(tag, make(config));
}

/**
 * Starts the queue's worker in the current scope; closing the scope stops it gracefully
 * (waiting the grace period for running handlers, releasing the rest).
 */
export function startWorker<Input, Output>(
  queue: SluiceQueue<Input, Output> | Queue<Input, Output>,
): Effect.Effect<Worker<Input, Output>, never, Scope.Scope> {
  const target = queue instanceof Queue ? queue : queue.queue;
  return Effect.acquireRelease(
    Effect.sync(() => target.start()),
    (worker) => Effect.promise(() => worker.stop()),
  );
}

/**
 * Runs the worker as a fiber until it stops by itself (SIGTERM, `stop()`), with its report;
 * interrupting the fiber stops it gracefully.
 */
export function runWorker<Input, Output>(
  queue: SluiceQueue<Input, Output> | Queue<Input, Output>,
): Effect.Effect<WorkerReport> {
  return Effect.scoped(
    Effect.flatMap(startWorker(queue), (worker) => Effect.promise(() => worker.done)),
  );
}

/** A `Layer` that runs the worker of the queue `tag` names for as long as the layer lives. */
export function workerLayer<Self, Input, Output>(
  tag: Context.Tag<Self, SluiceQueue<Input, Output>>,
): Layer.Layer<never, never, Self> {
  return Layer.scopedDiscard(Effect.flatMap(tag, (queue) => startWorker(queue)));
}
