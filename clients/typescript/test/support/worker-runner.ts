/**
 * Runs one worker scenario (conformance/scenarios.json `worker_scenarios`) on one backend, as
 * conformance/README.md ("Worker scenarios") says: a fresh queue and a worker of the SDK's
 * `Queue` whose handler does what each message's body says (`{"fail": text}` throws
 * `new Error(text)`, `{"hold": name}` waits for the step `finish` naming it, anything else
 * succeeds). Time is real on every backend (memory runs on a system clock here, see
 * `workerBackend`), and every wait is bounded.
 */
import { isDeepStrictEqual } from "node:util";
import { type Backend, Queue, type Worker } from "../../src/index.js";
import { MemoryBackend, SystemClock } from "../../src/memory/index.js";
import type { BackendCase } from "./backends.js";
import { deadLetters, forBackend, queueName } from "./runner.js";
import type { Scenario, Step } from "./scenarios.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `condition` holds, looking every 50 ms, at most `timeoutMs`. */
async function until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await sleep(50)) {
    if (condition()) return true;
  }
  return condition();
}

/** How long an `until` waits, at most (backend time). */
const UNTIL_MS = 20_000;
/** The retry delay of the scenarios' queues (whole seconds, for SQS). */
const RETRY_DELAY_MS = 1000;

interface Run {
  body: unknown;
  attempt: number;
  instance: number;
}

/** The backend a worker scenario runs on: memory on a system clock, the others as they are. */
export function workerBackend(backendCase: BackendCase): Promise<Backend> {
  if (backendCase.kind === "memory") {
    return Promise.resolve(new MemoryBackend({ clock: new SystemClock() }));
  }
  return backendCase.make();
}

export async function runWorkerScenario(
  backend: Backend,
  scenario: Scenario,
  names: string[],
): Promise<void> {
  const runs: Run[] = [];
  const holds = new Map<string, () => void>();
  const running = new Set<string>();
  const name = queueName(scenario);
  const open = (concurrency: number) =>
    new Queue<unknown, unknown>({
      name,
      backend,
      create: true,
      concurrency,
      retry: {
        ...(scenario.queue.max_attempts === undefined
          ? {}
          : { maxAttempts: scenario.queue.max_attempts }),
        delay: RETRY_DELAY_MS,
      },
      worker: { pollWaitMs: 200, handleSignals: false, logger: { warn: () => {} } },
      execute: async (ctx) => {
        const body = ctx.event as { fail?: string; hold?: string };
        runs.push({ body: ctx.event, attempt: ctx.attempt, instance: ctx.instanceIndex });
        if (typeof body.fail === "string") throw new Error(body.fail);
        if (typeof body.hold === "string") {
          const held = body.hold;
          running.add(held);
          await new Promise<void>((resolve) => holds.set(held, resolve));
        }
      },
    });
  let queue: Queue<unknown, unknown> | undefined;
  let worker: Worker<unknown, unknown> | undefined;
  try {
    for (const [index, written] of scenario.steps.entries()) {
      const step: Step = forBackend(written.on, names) ?? written;
      const fail = (what: string, seen: unknown): never => {
        throw new Error(
          `${scenario.name} step ${index} (${step.op}) on ${names[0]}: ${what}; seen ${JSON.stringify(seen)}`,
        );
      };
      const started = (): Worker<unknown, unknown> => worker ?? fail("no worker started", null);
      const opened = (): Queue<unknown, unknown> => queue ?? fail("no worker started", null);
      const expect = (step.expect ?? {}) as Record<string, unknown>;
      const compare = (what: string, seen: Record<string, unknown>) => {
        for (const [field, wanted] of Object.entries(expect)) {
          if (!isDeepStrictEqual(seen[field], wanted)) fail(`${what} ${field} = ${wanted}`, seen);
        }
      };
      switch (step.op) {
        case "start":
          queue = open(step.concurrency ?? 1);
          worker = queue.start();
          break;
        case "enqueue":
          await opened().enqueue(step.body);
          break;
        case "until": {
          const target = step.worker ?? {};
          const held = step.running;
          const came = await until(() => {
            if (held !== undefined) return running.has(held);
            const status = workerFields(started());
            return Object.entries(target).every(([field, n]) => (status[field] ?? 0) >= n);
          }, UNTIL_MS);
          if (!came) fail(`until ${JSON.stringify(held ?? target)}`, workerFields(started()));
          break;
        }
        case "finish": {
          const release = holds.get(step.ref ?? "") ?? fail(`no held run ${step.ref}`, [...holds]);
          release();
          break;
        }
        case "settle":
          await sleep(step.ms ?? 0);
          break;
        case "pause":
          started().pause(step.instance);
          break;
        case "resume":
          started().resume(step.instance);
          break;
        case "drain": {
          let done = false;
          void started()
            .drain(step.instance ?? 0)
            .then(() => {
              done = true;
            });
          const drained = await until(() => done, step.timeout_ms ?? 0);
          if (drained !== step.expect) fail(`drained ${step.expect}`, drained);
          break;
        }
        case "instance": {
          const status = started().instanceStatus(step.instance ?? 0);
          compare(`instance ${step.instance}`, {
            state: status.state,
            processed: status.processedCount,
            failed: status.failedCount,
            pending: status.pendingCount,
          });
          break;
        }
        case "worker":
          compare("worker", workerFields(started()));
          break;
        case "runs": {
          // The fields the list's first run names are the ones compared (each run of a list
          // names the same ones).
          const anyOrder = step.expect_any_order !== undefined;
          const wanted = (step.expect_any_order ?? step.expect ?? []) as Record<string, unknown>[];
          const fields = Object.keys(wanted[0] ?? {}) as (keyof Run)[];
          const seen = runs.map((run) => Object.fromEntries(fields.map((f) => [f, run[f]])));
          const sorted = (list: unknown[]) => list.map((x) => JSON.stringify(x)).sort();
          const same = anyOrder
            ? isDeepStrictEqual(sorted(seen), sorted(wanted))
            : isDeepStrictEqual(seen, wanted);
          if (!same) fail(`runs ${anyOrder ? "in any order " : ""}${JSON.stringify(wanted)}`, runs);
          break;
        }
        case "dead_letters": {
          const seen = await deadLetters(backend, name);
          if (!isDeepStrictEqual(seen, step.expect))
            fail(`dead letters ${JSON.stringify(step.expect)}`, seen);
          break;
        }
        case "stats": {
          const stats = await backend.stats(name);
          const fields: Record<string, unknown> = {
            ready: stats.ready,
            in_flight: stats.inFlight,
            dead_lettered: stats.deadLettered,
          };
          for (const [field, wanted] of Object.entries(expect)) {
            const value = fields[field];
            if (value !== null && value !== wanted) fail(`${field} = ${wanted}`, stats);
          }
          break;
        }
        case "stop": {
          const report = await started().stop();
          compare("report", { ...report, dead_lettered: report.deadLettered });
          break;
        }
        case "none":
          break;
        default:
          fail(`unknown op ${step.op}`, step);
      }
    }
  } finally {
    for (const release of holds.values()) release();
    await worker?.stop();
    await queue?.delete().catch(() => {});
  }
}

function workerFields(worker: Worker<unknown, unknown>): Record<string, number> {
  const status = worker.status();
  return {
    processed: status.processedCount,
    retried: status.retriedCount,
    dead_lettered: status.deadLetteredCount,
    pending: status.pendingCount,
  };
}
