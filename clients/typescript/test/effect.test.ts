/**
 * The Effect entry point on the memory backend: operations as Effects with typed errors, the
 * queue as a Layer, handlers as Effects using services, and the worker as a scoped fiber that
 * stops gracefully when its scope closes or its fiber is interrupted.
 */
import { Context, Effect, Either, Fiber, Layer, Schema } from "effect";
import { describe, expect, inject, it } from "vitest";
import * as SluiceEffect from "../src/effect/index.js";
import { SluiceBackend } from "../src/index.js";
import { MemoryBackend } from "../src/memory/index.js";
import { SqsBackend } from "../src/sqs/index.js";
import { waitFor } from "./support/time.js";

interface Order {
  readonly id: number;
}

class Orders extends Context.Tag("Orders")<Orders, SluiceEffect.SluiceQueue<Order>>() {}

/** A service the handler uses: where charged orders are written down. */
class Ledger extends Context.Tag("Ledger")<Ledger, { readonly charged: number[] }>() {}

const quiet = { warn: () => {} };

describe("effect", () => {
  it("enqueues through a Layer and processes with an Effect handler that uses a service", async () => {
    const backend = new MemoryBackend();
    const ledger = { charged: [] as number[] };
    const OrdersLive = SluiceEffect.layer(Orders, {
      name: "orders",
      create: true,
      backend,
      concurrency: 2,
      worker: { handleSignals: false, logger: quiet, pollWaitMs: 100 },
      execute: ({ event }) =>
        Effect.flatMap(Ledger, (l) => Effect.sync(() => l.charged.push(event.id))),
    });
    const program = Effect.gen(function* () {
      const orders = yield* Orders;
      const first = yield* orders.enqueue({ id: 1 }, { id: "order-1" });
      const again = yield* orders.enqueue({ id: 1 }, { id: "order-1" });
      expect(again).toEqual({ eventId: first.eventId, position: 0, created: false });
      yield* orders.enqueueMany([{ id: 2 }, { id: 3 }]);
      const worker = yield* SluiceEffect.startWorker(orders);
      yield* Effect.promise(() =>
        waitFor(backend, "three charged", () => worker.status().processedCount === 3),
      );
      return worker;
    });
    const worker = await Effect.runPromise(
      Effect.scoped(program).pipe(
        Effect.provide(OrdersLive.pipe(Layer.provide(Layer.succeed(Ledger, ledger)))),
      ),
    );
    // The scope closed: the worker stopped gracefully.
    expect(worker.stopped).toBe(true);
    expect(ledger.charged.sort()).toEqual([1, 2, 3]);
  });

  it("fails with typed errors", async () => {
    const Strict = Schema.standardSchemaV1(Schema.Struct({ id: Schema.Number }));
    const backend = new MemoryBackend();
    const invalid = await Effect.runPromise(
      Effect.gen(function* () {
        const orders = yield* SluiceEffect.make({
          name: "strict",
          create: true,
          backend,
          schema: Strict,
          concurrency: 1,
        });
        return yield* Effect.either(orders.enqueue({ id: "x" } as never));
      }),
    );
    expect(Either.isLeft(invalid) && invalid.left._tag).toBe("SchemaInvalid");

    const missing = await Effect.runPromise(
      Effect.either(
        SluiceEffect.fromQueue(
          (
            await Effect.runPromise(
              SluiceEffect.make({ name: "there", backend, create: true, concurrency: 1 }),
            )
          ).queue,
        ).cancel("no-such-id"),
      ),
    );
    expect(Either.isRight(missing) && missing.right.outcome).toBe("not_found");

    // Nothing listens on port 9: the failure is typed, with the SDK's code for no answer.
    const unreachable = await Effect.runPromise(
      Effect.either(
        SluiceEffect.make({
          name: "nowhere",
          create: true,
          backend: new SluiceBackend({ url: "http://127.0.0.1:9", timeoutMs: 2000 }),
          concurrency: 1,
        }),
      ),
    );
    expect(Either.isLeft(unreachable) && unreachable.left).toMatchObject({
      _tag: "SluiceFailure",
      status: 0,
      code: "unreachable",
    });
  });

  it("interrupting the worker's fiber stops it gracefully and releases nothing that finished", async () => {
    const backend = new MemoryBackend();
    let handled = 0;
    const report = await Effect.runPromise(
      Effect.gen(function* () {
        const orders = yield* SluiceEffect.make<Order, Order>({
          name: "fiber",
          create: true,
          backend,
          concurrency: 1,
          worker: { handleSignals: false, logger: quiet, pollWaitMs: 100 },
          execute: () => Effect.sync(() => handled++),
        });
        yield* orders.enqueueMany([{ id: 1 }, { id: 2 }]);
        const fiber = yield* Effect.fork(SluiceEffect.runWorker(orders));
        yield* Effect.promise(() => waitFor(backend, "two handled", () => handled === 2));
        yield* Fiber.interrupt(fiber);
        const stats = yield* orders.stats();
        expect(stats).toMatchObject({ ready: 0, inFlight: 0 });
        return orders.queue.worker?.stopped;
      }),
    );
    expect(report).toBe(true);
  });

  it("a failing Effect handler is retried with its own error, then dead-lettered", async () => {
    const backend = new MemoryBackend();
    const seen: unknown[] = [];
    class CardDeclined extends Error {}
    const dead = await Effect.runPromise(
      Effect.gen(function* () {
        const orders = yield* SluiceEffect.make<Order, Order, CardDeclined>({
          name: "declines",
          create: true,
          backend,
          concurrency: 1,
          retry: {
            maxAttempts: 3,
            delay: 100,
            isRetryable: (error) => {
              seen.push(error);
              return true;
            },
          },
          worker: { handleSignals: false, logger: quiet, pollWaitMs: 100 },
          execute: () => Effect.fail(new CardDeclined("declined")),
        });
        yield* orders.enqueue({ id: 9 });
        const worker = yield* SluiceEffect.startWorker(orders);
        yield* Effect.promise(() =>
          waitFor(backend, "dead-lettered", () => worker.status().deadLetteredCount === 1),
        );
        return yield* orders.deadLetters();
      }).pipe(Effect.scoped),
    );
    expect(seen.every((error) => error instanceof CardDeclined)).toBe(true);
    expect(dead.map((d) => ({ error: d.error, attempts: d.attempts }))).toEqual([
      { error: "declined", attempts: 3 },
    ]);
  });

  it.skipIf(inject("sluiceUrl") === "")(
    "an operation the backend cannot do fails with Unsupported",
    async () => {
      // sluice's SQS API: the queue is created, then pause is refused as SQS has none.
      const sqs = new SqsBackend({
        endpoint: inject("sluiceUrl"),
        region: "us-east-1",
        credentials: { accessKeyId: "any", secretAccessKey: "any" },
      });
      const paused = await Effect.runPromise(
        Effect.gen(function* () {
          const queue = yield* SluiceEffect.make({
            name: `tse_${Math.random().toString(36).slice(2, 10)}`,
            create: true,
            backend: sqs,
            concurrency: 1,
          });
          return yield* Effect.either(queue.pause());
        }),
      );
      await sqs.close();
      expect(Either.isLeft(paused) && paused.left).toMatchObject({
        _tag: "Unsupported",
        backend: "sqs",
        operation: "pause",
      });
    },
  );
});
