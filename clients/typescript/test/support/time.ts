/**
 * Time in tests that run on every backend: on memory the manual clock moves (nothing sleeps),
 * elsewhere real time passes. Every wait is bounded in steps and time.
 */
import type { Backend } from "../../src/index.js";
import type { MemoryBackend } from "../../src/memory/index.js";

export function isMemory(backend: Backend): backend is MemoryBackend {
  return backend.kind === "memory";
}

/** Lets `ms` pass: the memory clock moves, or real time passes. */
export async function pass(backend: Backend, ms: number): Promise<void> {
  if (isMemory(backend)) await backend.advance(ms);
  else await new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Waits until `condition` holds, letting `stepMs` pass between looks, at most `timeoutMs` in
 * all (of the backend's time); throws with `what` when it does not come.
 */
export async function waitFor(
  backend: Backend,
  what: string,
  condition: () => boolean | Promise<boolean>,
  { stepMs = 50, timeoutMs = 15_000 } = {},
): Promise<void> {
  for (let waited = 0; waited <= timeoutMs; waited += stepMs) {
    if (await condition()) return;
    await pass(backend, stepMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}
