/**
 * An idempotency id is never silently ignored (issue 33): on a queue that deduplicates (every
 * sluice and memory queue, an SQS queue opened with `dedup`) a repeated id stores nothing new;
 * where the queue cannot deduplicate (a standard SQS queue, RabbitMQ) an enqueue with an id is
 * refused with UnsupportedError (operation `dedup`) and nothing is stored.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type Backend, UnsupportedError } from "../src/index.js";
import { backendCases } from "./support/backends.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
});

function name(): string {
  return `tsid_${Math.random().toString(36).slice(2, 10)}`;
}

/** Where an id on a queue opened without options cannot deduplicate. */
const REFUSES_ON_A_PLAIN_QUEUE = new Set(["sqs", "rabbitmq"]);

for (const backendCase of backendCases()) {
  describe.skipIf(backendCase.skip !== undefined)(`ids on ${backendCase.name}`, () => {
    async function queueOn(options: { dedup?: boolean }): Promise<[Backend, string]> {
      const backend = await backendCase.make();
      const queue = name();
      cleanups.push(async () => {
        await backend.deleteQueue(queue).catch(() => {});
        await backend.close();
      });
      await backend.ensureQueue(queue, options);
      return [backend, queue];
    }

    it("an id on a plain queue deduplicates or is refused, never ignored", async () => {
      const [backend, queue] = await queueOn({});
      if (REFUSES_ON_A_PLAIN_QUEUE.has(backendCase.kind)) {
        const refused = backend.enqueue(queue, [
          { body: { n: 1 } },
          { body: { n: 2 }, id: "order-1" },
        ]);
        await expect(refused).rejects.toBeInstanceOf(UnsupportedError);
        await expect(refused).rejects.toMatchObject({ operation: "dedup" });
        // The whole call is refused: not even the message without an id was stored.
        const stats = await backend.stats(queue);
        expect(stats.ready).toBe(0);
        // Without an id the queue works as before.
        const [plain] = await backend.enqueue(queue, [{ body: { n: 3 } }]);
        expect(plain?.created).toBe(true);
        return;
      }
      const [first] = await backend.enqueue(queue, [{ body: { n: 1 }, id: "order-1" }]);
      const [again] = await backend.enqueue(queue, [{ body: { n: 1 }, id: "order-1" }]);
      expect(first?.created).toBe(true);
      expect(again).toMatchObject({ created: false, messageId: first?.messageId });
    });

    // RabbitMQ refuses a queue opened with dedup (the conformance scenarios check that).
    it.skipIf(backendCase.kind === "rabbitmq")(
      "an id on a queue opened with dedup is kept",
      async () => {
        const [backend, queue] = await queueOn({ dedup: true });
        const [first] = await backend.enqueue(queue, [{ body: { n: 1 }, id: "order-1" }]);
        expect(first?.created).toBe(true);
        const [delivery] = await backend.receive(queue, { max: 1, waitMs: 2000 });
        expect(delivery?.id).toBe("order-1");
      },
    );
  });
}
