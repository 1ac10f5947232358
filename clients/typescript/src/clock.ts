/**
 * Time, as the backends and the worker see it. {@link SystemClock} is real time;
 * {@link ManualClock} moves only when told to, so tests of delays, retries and leases on the
 * memory backend take no real time and give the same result on every run.
 *
 * @module
 */

/** Where a backend and the worker get the time from. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Resolves once `ms` have passed on this clock; rejects with the signal's reason if the
   * signal aborts first.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Real time. */
export class SystemClock implements Clock {
  now(): number {
    return Date.now();
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return realSleep(ms, signal);
  }
}

/** Sleeps `ms` of real time (rejects with the signal's reason when it aborts). */
export function realSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(
      () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

interface Sleeper {
  at: number;
  seq: number;
  resolve: () => void;
}

/**
 * A clock that stands still until {@link ManualClock.advance} moves it. Sleepers wake in time
 * order, each at its own instant, with the promises they start given a chance to run before
 * the clock moves on: a heartbeat due at t=10 s extends its lease before a lease check at
 * t=20 s sees the time.
 */
export class ManualClock implements Clock {
  #now: number;
  #seq = 0;
  #sleepers: Sleeper[] = [];

  /** Starts at `startMs` (ms since the epoch; default 2024-01-01T00:00:00Z). */
  constructor(startMs = Date.UTC(2024, 0, 1)) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const sleeper: Sleeper = {
        at: this.#now + Math.max(0, ms),
        seq: this.#seq++,
        resolve: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.#sleepers = this.#sleepers.filter((s) => s !== sleeper);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#sleepers.push(sleeper);
    });
  }

  /** Sleepers waiting now (for tests that wait until a worker is idle). */
  get sleeping(): number {
    return this.#sleepers.length;
  }

  /**
   * Moves the clock `ms` forward, waking every sleeper due on the way at its own instant, and
   * letting what each one starts run (a few turns of the event loop) before moving on.
   */
  async advance(ms: number): Promise<void> {
    const target = this.#now + Math.max(0, ms);
    for (;;) {
      const due = this.#sleepers
        .filter((s) => s.at <= target)
        .sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (due === undefined) break;
      this.#sleepers = this.#sleepers.filter((s) => s !== due);
      this.#now = Math.max(this.#now, due.at);
      due.resolve();
      await settle();
    }
    this.#now = target;
    await settle();
  }
}

/** Lets pending promise chains (and I/O callbacks already due) run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
