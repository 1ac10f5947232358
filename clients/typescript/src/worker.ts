/**
 * {@link Worker}: runs a {@link Queue}'s handler in this process with a fixed concurrency.
 *
 * One fetcher receives for all `concurrency` slots: each long poll asks for as many messages as
 * slots are free (at most 100), so nothing waits in this process under a lease nobody works on,
 * and hands them to the idle slots. A slot validates its message against the queue's schema and
 * runs `execute` while a heartbeat keeps the lease (extend every third of it, where the backend
 * can extend). Success acks: the acks of slots that finish while an ack request is on its way
 * go out together in the next one ({@link AckBatch}); an ack carrying a result or next steps
 * (`ctx.addNextStep`, enqueued in the ack's commit) goes alone.
 * Failure is retried with the queue's retry policy, or dead-lettered when the error is not
 * retryable or the attempts are used up, and then `onDeadLetter` runs. A body that fails the
 * schema is dead-lettered at once with the issues. On stop (SIGTERM, SIGINT or
 * {@link Worker.stop}) the fetcher stops receiving, running handlers get the grace period, and
 * what still runs after it is released back to the queue (without a failure: {@link Backend.release}), its handler's
 * `signal` aborted. The same semantics as the Rust SDK's `Worker`.
 *
 * @module
 */
import { AckBatch } from "./ack-batch.js";
import type { Backend, Delivery, NextStep } from "./backend.js";
import { realSleep } from "./clock.js";
import { SluiceError, UnsupportedError, isStaleReceipt } from "./errors.js";
import type { ExecuteContext, Queue } from "./queue.js";
import { type Decision, decide } from "./retry.js";
import { ValidationError, validate } from "./standard-schema.js";

/** Worker settings; every field has a default. */
export interface WorkerOptions {
  /**
   * The visibility timeout of each message received, how long its lease lasts, in ms (default
   * 30000, at least 30); the heartbeat renews the lease every third of that while the handler
   * runs.
   */
  visibilityTimeoutMs?: number;
  /** @deprecated The earlier name of `visibilityTimeoutMs`. */
  leaseMs?: number;
  /**
   * How long an idle slot waits in one receive, in ms (default 1000). It also bounds how long a
   * stop or a pause waits for idle slots: a long poll over HTTP is not cut.
   */
  pollWaitMs?: number;
  /** How long running handlers may take to finish once stopping starts, in ms (default 30000). */
  shutdownGraceMs?: number;
  /** Stop gracefully on SIGTERM and SIGINT (default true). */
  handleSignals?: boolean;
  /** How often the worker refreshes `queuePendingCount` from the queue's stats, in ms (default 1000). */
  pendingRefreshMs?: number;
  /** Where warnings go (default `console`). */
  logger?: Pick<Console, "warn">;
}

/** What one instance (slot) does now: idle, running an event, or paused. */
export type InstanceState = "idle" | "processing" | "paused";

/** What one slot does now. */
export interface SlotStatus {
  instanceIndex: number;
  /**
   * `processing` while it runs an event (also when paused meanwhile: it finishes that one),
   * `paused` when it takes nothing new ({@link Worker.pause} with its index), else `idle`.
   */
  state: InstanceState;
  /** The event it runs, if any. */
  eventId: string | undefined;
  attempt: number | undefined;
  /** When the running attempt started. */
  startedAt: Date | undefined;
  /** Events this slot finished. */
  processedCount: number;
  /** Attempts of this slot that failed (retried or dead-lettered). */
  failedCount: number;
  /** Events this slot holds: the one it runs, until its ack or nack lands (0 or 1). */
  pendingCount: number;
}

/** One instance's state: {@link Worker.instanceStatus}. */
export type InstanceStatus = SlotStatus;

/** A worker's state. */
export interface WorkerStatus {
  queue: string;
  /** Running (not stopped). */
  running: boolean;
  /** This instance's receiving is paused (the queue itself may be paused too). */
  paused: boolean;
  slots: SlotStatus[];
  /** Events acked. */
  processedCount: number;
  /** Failed attempts sent back for a retry. */
  retriedCount: number;
  /** Events sent to the dead-letter queue. */
  deadLetteredCount: number;
  /**
   * Messages this worker holds, exactly: received and not yet settled (waiting for a slot,
   * running, or being acked or nacked). The same count as the Rust SDK's.
   */
  pendingCount: number;
  /** Messages waiting in the queue (ready or delayed), every worker's, as last seen. */
  queuePendingCount: number;
}

/** What a stopped worker did. */
export interface WorkerReport {
  processed: number;
  retried: number;
  deadLettered: number;
  /** Events still running at the end of the grace period, put back in the queue. */
  released: number;
}

/** How long a stopping worker waits for acks and nacks already on their way. */
const SETTLE_WAIT_MS = 10_000;
/** Most messages one receive asks for (the sluice server's limit). */
const RECEIVE_MAX = 100;
/** Most next steps one ack carries (the sluice server's limit). */
const NEXT_STEPS_MAX = 100;

interface Slot {
  status: Omit<SlotStatus, "state" | "pendingCount">;
  /** It takes nothing new ({@link Worker.pause} with its index). */
  paused: boolean;
  /** It runs a message: from the hand-out until its handler is done. */
  busy: boolean;
  /** Messages it holds: from the hand-out until their ack or nack lands. */
  holding: number;
  /** Called when it holds nothing any more ({@link Worker.drain}). */
  emptied: (() => void)[];
  /** Called when it is resumed. */
  resumed: (() => void) | undefined;
  /** The receipt of the running message, until it is settled or released. */
  receipt: string | undefined;
  /** Aborts the running handler (end of grace). */
  abort: AbortController | undefined;
  /** Settled once the running message's ack or nack has landed. */
  settled: Promise<void> | undefined;
}

/** A queue's consumer in this process; made by `Queue.start()`. */
export class Worker<Input, Output> {
  readonly #queue: Queue<Input, Output>;
  readonly #backend: Backend;
  readonly #options: Required<Omit<WorkerOptions, "logger" | "leaseMs">> & {
    logger: Pick<Console, "warn">;
  };
  readonly #slots: Slot[];
  /** Aborted when stopping starts: idle receives return at once. */
  readonly #stopping = new AbortController();
  #paused = false;
  #resumed: (() => void) | undefined;
  #resumedPromise: Promise<void> | undefined;
  #processed = 0;
  #retried = 0;
  #deadLettered = 0;
  #released = 0;
  #pending = 0;
  /** Messages received and not yet settled. */
  #unsettled = 0;
  /** Messages handed to an idle slot that has not started on them yet (it is about to). */
  #handedOff = 0;
  /** Received messages no slot has taken yet. */
  readonly #ready: Delivery[] = [];
  /** Idle slots waiting for a message (`undefined`: the fetcher stopped). */
  readonly #idle: ((delivery: Delivery | undefined) => void)[] = [];
  /** The fetcher has stopped: idle slots end. */
  #fetching = true;
  /** Wakes a fetcher waiting for a free slot. */
  #slotFreed: (() => void) | undefined;
  readonly #acks: AckBatch;
  /** Acks on their way, so a stopping worker waits for them. */
  readonly #settling = new Set<Promise<void>>();
  /** Set after each finished event: the next empty receive checks whether the queue emptied. */
  #emptyArmed = false;
  #loops: Promise<void>[] = [];
  #done: Promise<WorkerReport> | undefined;
  #finish: (report: WorkerReport) => void = () => {};
  readonly #finished = new Promise<WorkerReport>((resolve) => {
    this.#finish = resolve;
  });
  #stopped = false;
  #pendingTimer: ReturnType<typeof setInterval> | undefined;
  #onSignal: (() => void) | undefined;

  /** @internal Made by `Queue.start()`. */
  constructor(queue: Queue<Input, Output>) {
    this.#queue = queue;
    this.#backend = queue.backend;
    const options = queue.config.worker ?? {};
    this.#options = {
      visibilityTimeoutMs: Math.max(30, options.visibilityTimeoutMs ?? options.leaseMs ?? 30_000),
      pollWaitMs: Math.max(0, options.pollWaitMs ?? 1000),
      shutdownGraceMs: Math.max(0, options.shutdownGraceMs ?? 30_000),
      handleSignals: options.handleSignals ?? true,
      pendingRefreshMs: Math.max(50, options.pendingRefreshMs ?? 1000),
      logger: options.logger ?? console,
    };
    this.#acks = new AckBatch((receipts) => this.#backend.ackMany(queue.name, receipts));
    this.#slots = Array.from({ length: queue.config.concurrency }, (_, instanceIndex) => ({
      status: {
        instanceIndex,
        eventId: undefined,
        attempt: undefined,
        startedAt: undefined,
        processedCount: 0,
        failedCount: 0,
      },
      paused: false,
      busy: false,
      holding: 0,
      emptied: [],
      resumed: undefined,
      receipt: undefined,
      abort: undefined,
      settled: undefined,
    }));
  }

  /** @internal Starts the slots. */
  begin(): void {
    if (this.#options.handleSignals) {
      this.#onSignal = () => {
        void this.stop();
      };
      process.once("SIGTERM", this.#onSignal);
      process.once("SIGINT", this.#onSignal);
    }
    this.#pendingTimer = setInterval(
      () => void this.#refreshPending(),
      this.#options.pendingRefreshMs,
    );
    this.#pendingTimer.unref();
    this.#loops = [this.#fetch(), ...this.#slots.map((slot) => this.#run(slot))];
  }

  /** True once the worker has stopped (its report is ready). */
  get stopped(): boolean {
    return this.#stopped;
  }

  /** Resolves with the report once the worker has stopped. */
  get done(): Promise<WorkerReport> {
    return this.#finished;
  }

  /** Every slot's state and the counts. */
  status(): WorkerStatus {
    return {
      queue: this.#queue.name,
      running: !this.#stopped && !this.#stopping.signal.aborted,
      paused: this.#paused,
      slots: this.#slots.map((slot) => this.#slotStatus(slot)),
      processedCount: this.#processed,
      retriedCount: this.#retried,
      deadLetteredCount: this.#deadLettered,
      pendingCount: this.#unsettled,
      queuePendingCount: this.#pending,
    };
  }

  /** What instance `index` (a slot, `0..concurrency-1`) does now. */
  instanceStatus(index: number): InstanceStatus {
    return this.#slotStatus(this.#slot(index));
  }

  #slotStatus(slot: Slot): SlotStatus {
    const state: InstanceState = slot.busy
      ? "processing"
      : slot.paused || this.#paused
        ? "paused"
        : "idle";
    return { ...slot.status, state, pendingCount: slot.holding };
  }

  #slot(index: number): Slot {
    const slot = this.#slots[index];
    if (!Number.isInteger(index) || slot === undefined) {
      throw new RangeError(
        `no instance ${index}: this worker has instances 0 to ${this.#slots.length - 1}`,
      );
    }
    return slot;
  }

  /**
   * Without an index: stops this worker receiving at once (running handlers finish; a message
   * that a receive under way brings after the pause is released, not run); the queue itself is
   * not paused. With an index: only that instance takes nothing new once its event (if any)
   * is done; the others go on, and the worker receives only for them.
   */
  pause(index?: number): void {
    if (index !== undefined) {
      this.#slot(index).paused = true;
      this.#giveBackExcess();
      return;
    }
    if (this.#paused) return;
    this.#paused = true;
    this.#resumedPromise = new Promise((resolve) => {
      this.#resumed = resolve;
    });
  }

  /** The worker (without an index) or instance `index` receives again. */
  resume(index?: number): void {
    if (index !== undefined) {
      const slot = this.#slot(index);
      if (!slot.paused) return;
      slot.paused = false;
      slot.resumed?.();
      slot.resumed = undefined;
      this.#slotFreed?.();
      return;
    }
    if (!this.#paused) return;
    this.#paused = false;
    this.#resumed?.();
    this.#resumed = undefined;
    this.#resumedPromise = undefined;
  }

  /**
   * Pauses instance `index` and resolves once it holds nothing: its running event, if any, is
   * done and settled. It stays paused until {@link Worker.resume} with its index.
   */
  drain(index: number): Promise<void> {
    const slot = this.#slot(index);
    slot.paused = true;
    this.#giveBackExcess();
    if (slot.holding === 0) return Promise.resolve();
    return new Promise((resolve) => slot.emptied.push(resolve));
  }

  /**
   * Stops gracefully: no new receives; running handlers get `shutdownGraceMs`; what still runs
   * then is released back to the queue. Resolves with the report (the same on every call).
   */
  stop(): Promise<WorkerReport> {
    this.#done ??= this.#shutdown();
    return this.#done;
  }

  async #shutdown(): Promise<WorkerReport> {
    this.#stopping.abort(new Error("the worker is stopping"));
    this.#slotFreed?.();
    this.resume();
    if (this.#onSignal !== undefined) {
      process.off("SIGTERM", this.#onSignal);
      process.off("SIGINT", this.#onSignal);
    }
    clearInterval(this.#pendingTimer);
    const loops = Promise.allSettled(this.#loops);
    const grace = await within(loops, this.#options.shutdownGraceMs);
    if (grace === "timed out") {
      // Release what still runs: visible again at once; the attempt counts, as for any
      // interrupted delivery.
      await Promise.allSettled(this.#slots.map((slot) => this.#release(slot)));
    }
    const settled = await within(
      loops.then(() => Promise.allSettled(this.#settling)),
      SETTLE_WAIT_MS,
    );
    if (settled === "timed out")
      this.#options.logger.warn("sluice worker: some acks or nacks did not finish in time");
    this.#stopped = true;
    const report = {
      processed: this.#processed,
      retried: this.#retried,
      deadLettered: this.#deadLettered,
      released: this.#released,
    };
    this.#finish(report);
    return report;
  }

  async #release(slot: Slot): Promise<void> {
    const receipt = slot.receipt;
    if (receipt === undefined) return;
    slot.receipt = undefined;
    slot.abort?.abort(new Error("released: the worker shut down before the handler finished"));
    this.#released++;
    await this.#giveBack(receipt);
  }

  /** The fetcher: receives as many messages as slots are free and hands them out. */
  async #fetch(): Promise<void> {
    const signal = this.#stopping.signal;
    try {
      await this.#queue.open();
    } catch (error) {
      this.#options.logger.warn(`sluice worker: cannot open ${this.#queue.name}: ${error}`);
    }
    try {
      while (!signal.aborted) {
        if (this.#paused) {
          await this.#resumedPromise;
          continue;
        }
        const free = this.#free();
        if (free <= 0) {
          await new Promise<void>((resolve) => {
            this.#slotFreed = resolve;
          });
          this.#slotFreed = undefined;
          // Slots given a batch together finish together: let the others free up too, so the
          // next receive asks for all of them rather than for the first one.
          await new Promise((resolve) => setImmediate(resolve));
          continue;
        }
        let deliveries: Delivery[];
        try {
          deliveries = await this.#backend.receive(this.#queue.name, {
            max: Math.min(free, RECEIVE_MAX),
            visibilityTimeoutMs: this.#options.visibilityTimeoutMs,
            waitMs: this.#options.pollWaitMs,
            signal,
          });
        } catch (error) {
          if (signal.aborted) break;
          this.#options.logger.warn(`sluice worker: receive failed; retrying in 1 s: ${error}`);
          await realSleep(1000, signal).catch(() => {});
          continue;
        }
        if (deliveries.length === 0) {
          await this.#maybeEmpty();
          continue;
        }
        // Paused while this receive was under way (the worker, or instances): what no
        // instance may take goes back at once, not as a failure (a release), for a consumer
        // that is not paused.
        const room = this.#paused ? 0 : Math.max(0, this.#free());
        if (deliveries.length > room) {
          const back = deliveries.splice(room);
          await Promise.allSettled(back.map((delivery) => this.#giveBack(delivery.receipt, true)));
          if (deliveries.length === 0) continue;
        }
        this.#unsettled += deliveries.length;
        for (const delivery of deliveries) {
          const idle = this.#idle.shift();
          if (idle === undefined) this.#ready.push(delivery);
          else {
            this.#handedOff++;
            idle(delivery);
          }
        }
      }
    } finally {
      // What was received is still processed (a long poll answered after the stop began);
      // slots with nothing left end.
      this.#fetching = false;
      for (const idle of this.#idle.splice(0)) idle(undefined);
      for (const slot of this.#slots) {
        slot.resumed?.();
        slot.resumed = undefined;
      }
    }
  }

  /** Instances that may take a message now and have none coming: unpaused and not busy. */
  #free(): number {
    const open = this.#slots.filter((slot) => !slot.paused && !slot.busy).length;
    return open - this.#ready.length - this.#handedOff;
  }

  /** Received messages no unpaused instance will take (some were paused) go back at once. */
  #giveBackExcess(): void {
    const excess = -this.#free();
    if (excess <= 0) return;
    for (const delivery of this.#ready.splice(this.#ready.length - excess)) {
      this.#unsettled--;
      void this.#giveBack(delivery.receipt, true);
    }
  }

  /** A message for the next idle instance, or the buffer (given back if none will take it). */
  #handOn(delivery: Delivery): void {
    const idle = this.#idle.shift();
    if (idle !== undefined) {
      this.#handedOff++;
      idle(delivery);
      return;
    }
    this.#ready.unshift(delivery);
    this.#giveBackExcess();
  }

  /**
   * Gives a received message back (a release: no failure counted); `unstarted` when no
   * handler ran it (a pause), so its delivery is not counted either where the backend can.
   */
  async #giveBack(receipt: string, unstarted = false): Promise<void> {
    try {
      await this.#backend.release(this.#queue.name, receipt, { unstarted });
    } catch (error) {
      this.#options.logger.warn(`sluice worker: release failed; the lease will run out: ${error}`);
    }
  }

  /** The next received message for a slot; `undefined` once the fetcher stopped. */
  #next(): Promise<Delivery | undefined> | Delivery | undefined {
    const ready = this.#ready.shift();
    if (ready !== undefined || !this.#fetching) return ready;
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** One slot: process what the fetcher hands out, until it stops. */
  async #run(slot: Slot): Promise<void> {
    for (;;) {
      while (slot.paused && this.#fetching) {
        await new Promise<void>((resolve) => {
          slot.resumed = resolve;
        });
      }
      const next = this.#next();
      const delivery = await next;
      if (delivery === undefined) return;
      // Handed over by the fetcher, which counted it until this slot is busy with it.
      if (next instanceof Promise) this.#handedOff--;
      if (slot.paused && this.#fetching) {
        // Paused while it waited: the message is another instance's.
        this.#handOn(delivery);
        continue;
      }
      slot.busy = true;
      slot.holding++;
      try {
        await this.#process(slot, delivery);
      } catch (error) {
        // Nothing in processing should throw; if it does, the slot lives on and the lease
        // runs out, so the message comes back.
        this.#options.logger.warn(`sluice worker: processing failed: ${errorText(error)}`);
      } finally {
        slot.busy = false;
        this.#slotFreed?.();
      }
    }
  }

  async #process(slot: Slot, delivery: Delivery): Promise<void> {
    const config = this.#queue.config;
    slot.receipt = delivery.receipt;
    /** The ack was handed on: it settles the message when it lands. */
    let handedOn = false;
    try {
      let event: Output;
      try {
        event =
          config.schema === undefined
            ? (delivery.body as Output)
            : await validate(config.schema, delivery.body);
      } catch (error) {
        // A body that fails the schema fails the same way every time: dead-letter it now. A
        // schema that throws (a bug, or an async check that failed) is retried as any failure.
        const invalid = error instanceof ValidationError;
        const outcome = await this.#nack(
          slot,
          delivery,
          invalid ? error.message : `schema check failed: ${errorText(error)}`,
          invalid
            ? { deadLetter: true, delayMs: 0 }
            : // Without an event there is no context for `isRetryable`: the attempts decide.
              decide(
                { ...config.retry, isRetryable: undefined },
                delivery.attempt,
                error,
                undefined,
              ),
        );
        if (outcome === "dead_lettered") this.#deadLettered++;
        if (outcome === "retried") this.#retried++;
        return;
      }
      const abort = new AbortController();
      slot.abort = abort;
      const startedAt = new Date(this.#backend.clock.now());
      slot.status.eventId = delivery.messageId;
      slot.status.attempt = delivery.attempt;
      slot.status.startedAt = startedAt;
      const nextSteps: NextStep[] = [];
      let finished = false;
      const ctx: ExecuteContext<Output> = {
        event,
        eventId: delivery.messageId,
        idempotencyId: delivery.id,
        key: delivery.key,
        attempt: delivery.attempt,
        enqueuedAt: new Date(delivery.enqueuedAt),
        processingStartedAt: startedAt,
        instanceIndex: slot.status.instanceIndex,
        processedCount: this.#processed,
        pendingCount: this.#unsettled - 1,
        queuePendingCount: this.#pending,
        lastError: delivery.lastError,
        headers: delivery.headers,
        signal: abort.signal,
        addNextStep: (queue, nextEvent, options = {}) => {
          // Refused when called rather than at the ack: the attempt fails with the reason (the
          // retry policy and onDeadLetter see it) instead of an ack that cannot be sent.
          if (!this.#backend.capabilities.chaining) {
            throw new UnsupportedError(
              this.#backend.kind,
              "chaining",
              "next steps need an ack that enqueues them in its own commit",
            );
          }
          if (finished) throw new Error("addNextStep was called after the handler finished");
          if (nextSteps.length >= NEXT_STEPS_MAX) {
            throw new RangeError(`at most ${NEXT_STEPS_MAX} next steps per event`);
          }
          nextSteps.push({ ...options, queue, body: nextEvent });
        },
      };
      const heartbeat = this.#heartbeat(delivery.receipt, abort.signal);
      let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
      try {
        outcome = { ok: true, value: await config.execute?.(ctx) };
      } catch (error) {
        outcome = { ok: false, error };
      } finally {
        finished = true;
        abort.abort(new Error("the handler finished"));
        await heartbeat;
      }
      if (slot.receipt !== delivery.receipt) return; // released at the end of the grace period
      if (outcome.ok) {
        handedOn = true;
        await this.#ack(slot, delivery.receipt, outcome.value, nextSteps);
      } else {
        await this.#fail(slot, delivery, ctx, outcome.error);
      }
    } finally {
      slot.abort = undefined;
      slot.status.eventId = undefined;
      slot.status.attempt = undefined;
      slot.status.startedAt = undefined;
      if (!handedOn) this.#settled(slot);
    }
  }

  /** A received message's ack or nack has landed (or failed): it is no longer this worker's. */
  #settled(slot: Slot): void {
    this.#unsettled--;
    this.#emptyArmed = true;
    slot.holding = Math.max(0, slot.holding - 1);
    if (slot.holding === 0) for (const emptied of slot.emptied.splice(0)) emptied();
  }

  /**
   * Acks without waiting for the answer, so the slot takes its next message at once: through
   * the ack batch, or alone when it carries a result (the server keeps a result per message) or
   * next steps (enqueued in the ack's own commit). The counts change when the ack lands. A slot
   * waits only while twice the slots' acks are still waiting.
   */
  async #ack(slot: Slot, receipt: string, result: unknown, then: NextStep[]): Promise<void> {
    const settling: Promise<void> = this.#settle(slot, async () => {
      if (then.length > 0) await this.#backend.ackThen(this.#queue.name, receipt, then, result);
      else if (result === undefined) await this.#acks.ack(receipt);
      else await this.#backend.ack(this.#queue.name, receipt, result);
      return true;
    })
      .then((acked) => {
        if (acked) {
          this.#processed++;
          slot.status.processedCount++;
        }
      })
      .finally(() => {
        this.#settled(slot);
        this.#settling.delete(settling);
      });
    this.#settling.add(settling);
    if (this.#acks.backlog >= 2 * this.#slots.length) await this.#acks.idle();
  }

  async #fail(
    slot: Slot,
    delivery: Delivery,
    ctx: ExecuteContext<Output>,
    error: unknown,
  ): Promise<void> {
    const config = this.#queue.config;
    const name = this.#queue.name;
    const event = ctx.event;
    const decision = decide(config.retry, delivery.attempt, error, ctx);
    const outcome = await this.#nack(slot, delivery, errorText(error), decision);
    if (outcome === "retried") this.#retried++;
    if (outcome === "dead_lettered") {
      this.#deadLettered++;
      try {
        await config.onDeadLetter?.({
          event,
          error,
          eventId: delivery.messageId,
          attempt: delivery.attempt,
          enqueuedAt: new Date(delivery.enqueuedAt),
          failedAt: new Date(this.#backend.clock.now()),
          instanceIndex: slot.status.instanceIndex,
        });
      } catch (hookError) {
        this.#options.logger.warn(`sluice worker: onDeadLetter threw: ${hookError}`);
      }
    }
  }

  /**
   * Nacks as decided. A queue without a dead-letter queue refuses a permanent nack: the
   * message is retried instead, since such a queue keeps every message.
   */
  #nack(slot: Slot, delivery: Delivery, error: string, decision: Decision) {
    slot.status.failedCount++;
    const nack = (permanent: boolean) =>
      this.#backend.nack(this.#queue.name, delivery.receipt, {
        error,
        delayMs: decision.delayMs,
        permanent,
      });
    return this.#settle(slot, async () => {
      try {
        return await nack(decision.deadLetter);
      } catch (refused) {
        if (
          decision.deadLetter &&
          refused instanceof SluiceError &&
          refused.code === "invalid_field"
        ) {
          this.#options.logger.warn(
            `sluice worker: cannot dead-letter; retrying: ${refused.message}`,
          );
          return nack(false);
        }
        throw refused;
      }
    });
  }

  /**
   * Runs an ack or nack; from here the message is no longer the slot's to release. A failure
   * is logged: the lease runs out and the message comes back.
   */
  async #settle<T>(slot: Slot, settle: () => Promise<T>): Promise<T | undefined> {
    slot.receipt = undefined;
    try {
      return await settle();
    } catch (error) {
      const why = isStaleReceipt(error) ? "the lease was lost" : String(error);
      this.#options.logger.warn(`sluice worker: settling failed (${why}); the message comes back`);
      return undefined;
    }
  }

  /** Extends the lease every third of it until `signal` aborts (where the backend can extend). */
  async #heartbeat(receipt: string, signal: AbortSignal): Promise<void> {
    if (!this.#backend.capabilities.extend) return;
    const every = Math.max(10, Math.floor(this.#options.visibilityTimeoutMs / 3));
    for (;;) {
      try {
        await this.#backend.clock.sleep(every, signal);
      } catch {
        return;
      }
      try {
        await this.#backend.extend(this.#queue.name, receipt, this.#options.visibilityTimeoutMs);
      } catch (error) {
        if (signal.aborted) return;
        this.#options.logger.warn(`sluice worker: lease extension failed: ${errorText(error)}`);
        if (isStaleReceipt(error)) return;
      }
    }
  }

  /** Calls `onEmpty` once the queue emptied after this worker finished events. */
  async #maybeEmpty(): Promise<void> {
    const onEmpty = this.#queue.config.onEmpty;
    if (onEmpty === undefined || this.#unsettled > 0 || !this.#emptyArmed) return;
    this.#emptyArmed = false;
    try {
      const stats = await this.#backend.stats(this.#queue.name);
      this.#pending = stats.ready + (stats.delayed ?? 0);
      if (
        stats.ready + (stats.delayed ?? 0) + (stats.inFlight ?? 0) === 0 &&
        this.#unsettled === 0
      ) {
        await onEmpty({ processedCount: this.#processed });
      } else {
        // Not empty yet (another slot or consumer is busy): look again at the next empty receive.
        this.#emptyArmed = true;
      }
    } catch (error) {
      this.#emptyArmed = true;
      this.#options.logger.warn(`sluice worker: onEmpty failed: ${errorText(error)}`);
    }
  }

  async #refreshPending(): Promise<void> {
    try {
      const stats = await this.#backend.stats(this.#queue.name);
      this.#pending = stats.ready + (stats.delayed ?? 0);
    } catch {
      // Keep the last value; the next refresh tries again.
    }
  }
}

/**
 * Waits for `promise` at most `ms`; the timer is cleared either way, so a stopped worker does
 * not keep the process alive.
 */
async function within(promise: Promise<unknown>, ms: number): Promise<"done" | "timed out"> {
  const timer = new AbortController();
  try {
    return await Promise.race([
      promise.then(() => "done" as const),
      realSleep(ms, timer.signal).then(
        () => "timed out" as const,
        () => "done" as const,
      ),
    ]);
  } finally {
    timer.abort();
  }
}

/** The text kept as a failed attempt's error. */
function errorText(error: unknown): string {
  if (error instanceof Error) return error.message === "" ? error.name : error.message;
  return typeof error === "string" ? error : (JSON.stringify(error) ?? String(error));
}
