/**
 * Runs one conformance scenario on one backend, as conformance/README.md says: a fresh queue,
 * the steps in order, `unchecked` steps run but not compared, stats a backend reports as null
 * not compared, `advance` moves the memory backend's clock and sleeps elsewhere. A failed step
 * throws with the scenario's name, the step's index and what was seen.
 */
import { isDeepStrictEqual } from "node:util";
import type { Backend, Delivery, Operation } from "../../src/index.js";
import { UnsupportedError } from "../../src/index.js";
import type { MemoryBackend } from "../../src/memory/index.js";
import type { Scenario, Step } from "./scenarios.js";

/** The operation that makes each scenario what it is: what a backend listed under its
 * `exceptions` must refuse. */
export const DISTINCTIVE: Record<string, Operation> = {
  receive_in_enqueue_order: "ordered",
  visibility_expiry_redelivers: "extend",
  idempotent_enqueue: "dedup",
  per_key_order: "perKey",
  pause_and_resume: "pause",
  drain: "drain",
  cancel: "cancel",
  delayed_enqueue: "delays",
};

/**
 * What `map` (a scenario's or a step's per-backend field) says for a backend known by `names`,
 * the most specific first (conformance/README.md: `aws` falls back to `sqs`).
 */
export function forBackend<T>(map: Record<string, T> | undefined, names: string[]): T | undefined {
  for (const name of names) {
    const value = map?.[name];
    if (value !== undefined) return value;
  }
  return undefined;
}

export function queueName(scenario: { name: string }): string {
  // SQS allows [A-Za-z0-9_-] up to 80 characters (with `-dlq.fifo` added).
  return `ts_${scenario.name.slice(0, 40)}_${Math.random().toString(36).slice(2, 10)}`;
}

function isMemory(backend: Backend): backend is MemoryBackend {
  return backend.kind === "memory";
}

async function advance(backend: Backend, ms: number): Promise<void> {
  if (isMemory(backend)) await backend.advance(ms);
  else await new Promise((resolve) => setTimeout(resolve, ms));
}

class StepFailure extends Error {}

export async function runScenario(
  backend: Backend,
  scenario: Scenario,
  names: string[],
): Promise<void> {
  const queue = queueName(scenario);
  try {
    await runSteps(backend, scenario, queue, names);
  } finally {
    await backend.deleteQueue(queue).catch(() => {});
  }
}

async function runSteps(
  backend: Backend,
  scenario: Scenario,
  queue: string,
  names: string[],
): Promise<void> {
  await backend.ensureQueue(queue, {
    maxAttempts: scenario.queue.max_attempts,
    perKey: scenario.queue.per_key,
    ordered: scenario.queue.ordered,
    dedup: scenario.queue.dedup,
  });
  const messages = new Map<string, string>();
  const deliveries = new Map<string, Delivery>();
  for (const [index, written] of scenario.steps.entries()) {
    // Where the backend does this step its own way (rule 6), its own step runs instead.
    const step = forBackend(written.on, names) ?? written;
    const checked = forBackend(step.unchecked, names) === undefined;
    const fail = (what: string, seen: unknown): never => {
      throw new StepFailure(
        `${scenario.name} step ${index} (${step.op}) on ${names[0]}: ${what}; seen ${JSON.stringify(seen)}`,
      );
    };
    const expect = (step.expect ?? {}) as Record<string, unknown>;
    const refusedAs = forBackend(step.refused, names);
    if (refusedAs !== undefined) {
      // Refused as unsupported; the rest of the scenario depended on this step.
      if (step.op !== "enqueue") fail("only an enqueue step can be refused", step.op);
      const refusal = await backend
        .enqueue(queue, [{ body: step.body, ...(step.id === undefined ? {} : { id: step.id }) }])
        .then(
          () => "it succeeded",
          (error: unknown) => error,
        );
      if (!(refusal instanceof UnsupportedError) || refusal.operation !== refusedAs) {
        fail(`not refused as unsupported (${refusedAs})`, String(refusal));
      }
      return;
    }
    switch (step.op) {
      case "enqueue": {
        const [result] = await backend.enqueue(queue, [
          {
            body: step.body,
            ...(step.id === undefined ? {} : { id: step.id }),
            ...(step.key === undefined ? {} : { key: step.key }),
            ...(step.delay_ms === undefined ? {} : { delayMs: step.delay_ms }),
          },
        ]);
        if (result === undefined) fail("no result", result);
        const enqueued = result!;
        if (typeof step.as === "string") messages.set(step.as, enqueued.messageId);
        if (!checked) break;
        if ("created" in expect && enqueued.created !== expect.created) fail("created", enqueued);
        if ("position" in expect && enqueued.position !== expect.position)
          fail("position", enqueued);
        if ("same_message_as" in expect) {
          const first = messages.get(String(expect.same_message_as));
          if (enqueued.messageId !== first) fail(`same message as ${first}`, enqueued);
        }
        break;
      }
      case "enqueue_many":
        await backend.enqueue(
          queue,
          (step.bodies ?? []).map((body) => ({ body })),
        );
        break;
      case "receive": {
        const got = await receiveStep(backend, queue, step);
        const names = Array.isArray(step.as) ? step.as : [];
        for (const [i, name] of names.entries()) {
          const delivery = got[i];
          if (delivery !== undefined) deliveries.set(name, delivery);
        }
        if (!checked) break;
        const seen = got.map((d) => ({ body: d.body, attempt: d.attempt, id: d.id, key: d.key }));
        if (
          "bodies" in expect &&
          !isDeepStrictEqual(
            got.map((d) => d.body),
            expect.bodies,
          )
        ) {
          fail(`bodies ${JSON.stringify(expect.bodies)}`, seen);
        }
        if ("bodies_any_order" in expect) {
          const sorted = (list: unknown[]) => list.map((b) => JSON.stringify(b)).sort();
          if (
            !isDeepStrictEqual(
              sorted(got.map((d) => d.body)),
              sorted(expect.bodies_any_order as unknown[]),
            )
          ) {
            fail(`bodies in any order ${JSON.stringify(expect.bodies_any_order)}`, seen);
          }
        }
        if (
          "attempts" in expect &&
          !isDeepStrictEqual(
            got.map((d) => d.attempt),
            expect.attempts,
          )
        ) {
          fail(`attempts ${JSON.stringify(expect.attempts)}`, seen);
        }
        if (
          "last_errors" in expect &&
          !isDeepStrictEqual(
            got.map((d) => d.lastError ?? null),
            expect.last_errors,
          )
        ) {
          fail(
            `last errors ${JSON.stringify(expect.last_errors)}`,
            got.map((d) => d.lastError),
          );
        }
        if (
          "ids" in expect &&
          !isDeepStrictEqual(
            got.map((d) => d.id),
            expect.ids,
          )
        ) {
          fail(`ids ${JSON.stringify(expect.ids)}`, seen);
        }
        if ("keys_any_order" in expect) {
          const keys = got.map((d) => d.key ?? "").sort();
          if (!isDeepStrictEqual(keys, [...(expect.keys_any_order as string[])].sort())) {
            fail(`keys ${JSON.stringify(expect.keys_any_order)}`, seen);
          }
        }
        break;
      }
      case "ack":
        await backend.ack(queue, delivery(deliveries, step, fail).receipt);
        break;
      case "nack": {
        const outcome = await backend.nack(queue, delivery(deliveries, step, fail).receipt, {
          error: step.error ?? "failed",
          ...(step.delay_ms === undefined ? {} : { delayMs: step.delay_ms }),
          ...(step.permanent === undefined ? {} : { permanent: step.permanent }),
        });
        if (checked && "outcome" in expect && outcome !== expect.outcome) fail("outcome", outcome);
        break;
      }
      case "release":
        await backend.release(queue, delivery(deliveries, step, fail).receipt);
        break;
      case "extend":
        await backend.extend(
          queue,
          delivery(deliveries, step, fail).receipt,
          step.lease_ms ?? 30_000,
        );
        break;
      case "advance":
        await advance(backend, step.ms ?? 0);
        break;
      case "none":
        break;
      case "stats": {
        const stats = await backend.stats(queue);
        if (!checked) break;
        const fields: Record<string, unknown> = {
          ready: stats.ready,
          delayed: stats.delayed,
          in_flight: stats.inFlight,
          dead_lettered: stats.deadLettered,
          paused: stats.paused,
        };
        for (const [field, wanted] of Object.entries(expect)) {
          const value = fields[field];
          // A count the backend cannot report (null) is not checked.
          if (value !== null && value !== wanted)
            fail(`${field} = ${JSON.stringify(wanted)}`, stats);
        }
        break;
      }
      case "pause":
        await backend.setPaused(queue, true);
        break;
      case "resume":
        await backend.setPaused(queue, false);
        break;
      case "drain": {
        const timeoutMs = step.timeout_ms ?? 0;
        const drained = await drainStep(backend, queue, timeoutMs);
        if (checked && drained !== step.expect)
          fail(`drained ${JSON.stringify(step.expect)}`, drained);
        break;
      }
      case "cancel": {
        const ref =
          step.message !== undefined
            ? {
                messageId:
                  messages.get(step.message) ??
                  fail(`no message named ${step.message}`, [...messages.keys()]),
              }
            : { id: step.id ?? "" };
        const result = await backend.cancel(queue, ref);
        if (checked && result.outcome !== step.expect)
          fail(`outcome ${JSON.stringify(step.expect)}`, result);
        break;
      }
      case "dead_letters": {
        const seen = await deadLetters(backend, queue);
        if (!checked) break;
        if (!isDeepStrictEqual(seen, step.expect))
          fail(`dead letters ${JSON.stringify(step.expect)}`, seen);
        break;
      }
      default:
        fail(`unknown op ${step.op}`, step);
    }
  }
}

/** A queue's dead letters as a scenario's `dead_letters` step states them. */
export async function deadLetters(backend: Backend, queue: string) {
  const letters = await backend.deadLetters(queue);
  return letters.map((l) => ({ body: l.body, error: l.error ?? null, attempts: l.attempts }));
}

function delivery(
  deliveries: Map<string, Delivery>,
  step: Step,
  fail: (what: string, seen: unknown) => never,
): Delivery {
  return (
    deliveries.get(step.ref ?? "") ?? fail(`no delivery named ${step.ref}`, [...deliveries.keys()])
  );
}

/**
 * A receive that waits gets what arrives within `wait_ms`, up to the expected count: the
 * backend may answer as soon as one message is there. On memory nothing arrives while the
 * clock stands still, so one receive without a wait says it all.
 */
async function receiveStep(backend: Backend, queue: string, step: Step): Promise<Delivery[]> {
  const max = step.max ?? 1;
  const leaseMs = step.lease_ms ?? 30_000;
  const expect = (step.expect ?? {}) as { bodies?: unknown[]; bodies_any_order?: unknown[] };
  const wanted = Math.min(
    max,
    expect.bodies?.length ??
      expect.bodies_any_order?.length ??
      (Array.isArray(step.as) ? step.as.length : max),
  );
  const waitMs = isMemory(backend) ? 0 : (step.wait_ms ?? 0);
  const deadline = Date.now() + waitMs;
  const got: Delivery[] = [];
  for (;;) {
    const remaining = Math.max(0, deadline - Date.now());
    got.push(
      ...(await backend.receive(queue, {
        max: max - got.length,
        visibilityTimeoutMs: leaseMs,
        waitMs: remaining,
      })),
    );
    if (got.length >= wanted || got.length >= max || remaining === 0) return got;
  }
}

/** A drain on memory waits on its clock: the runner lets the timeout pass on it. */
async function drainStep(backend: Backend, queue: string, timeoutMs: number): Promise<boolean> {
  if (!isMemory(backend)) return backend.drain(queue, timeoutMs);
  const pending = backend.drain(queue, timeoutMs);
  let settled: boolean | undefined;
  pending.then((value) => {
    settled = value;
  });
  await new Promise((resolve) => setImmediate(resolve));
  if (settled !== undefined) return settled;
  await backend.advance(timeoutMs);
  return pending;
}

/**
 * For a scenario the backend lists under `exceptions`: its capability says no, and doing the
 * scenario's distinctive operation throws UnsupportedError.
 */
export async function checkRefusal(
  backend: Backend,
  scenario: Scenario,
): Promise<"refused" | string> {
  const operation = DISTINCTIVE[scenario.name];
  if (operation === undefined) return `no distinctive operation known for ${scenario.name}`;
  if (backend.capabilities[operation]) {
    throw new Error(
      `${backend.kind} lists ${scenario.name} as an exception but claims ${operation}`,
    );
  }
  const queue = queueName(scenario);
  const attempt = async () => {
    switch (operation) {
      case "ordered":
        return backend.ensureQueue(queue, { ordered: true });
      case "perKey":
        return backend.ensureQueue(queue, { perKey: true });
      case "dedup":
        return backend.ensureQueue(queue, { dedup: true });
      default:
        break;
    }
    await backend.ensureQueue(queue, {});
    switch (operation) {
      case "delays":
        return backend.enqueue(queue, [{ body: { n: 1 }, delayMs: 1000 }]);
      case "pause":
        return backend.setPaused(queue, true);
      case "drain":
        return backend.drain(queue, 0);
      case "cancel":
        return backend.cancel(queue, { id: "two" });
      case "extend": {
        await backend.enqueue(queue, [{ body: { n: 1 } }]);
        const [leased] = await backend.receive(queue, {
          max: 1,
          visibilityTimeoutMs: 30_000,
          waitMs: 2000,
        });
        if (leased === undefined) throw new Error("nothing to extend");
        try {
          return await backend.extend(queue, leased.receipt, 5000);
        } finally {
          await backend.ack(queue, leased.receipt);
        }
      }
      default:
        throw new Error(`no refusal check for ${operation}`);
    }
  };
  try {
    await attempt();
  } catch (error) {
    if (error instanceof UnsupportedError && error.operation === operation) return "refused";
    throw error;
  } finally {
    await backend.deleteQueue(queue).catch(() => {});
  }
  throw new Error(`${backend.kind} did ${operation} for ${scenario.name} instead of refusing it`);
}
