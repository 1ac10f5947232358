/**
 * The retry policy of a worker: how long to wait after a failed attempt, how many attempts to
 * make, and which errors deserve another one. Pure: the worker asks {@link decide} and acts.
 * The same rules as the Rust SDK's `RetryPolicy`.
 *
 * @module
 */

/** Exponential backoff: `min(maxMs, initialMs · factor^(attempt-1))`, with optional jitter. */
export interface BackoffOptions {
  /** After the first failure, in ms (default 1000). */
  initialMs?: number;
  /** The cap, in ms (default 60000). */
  maxMs?: number;
  /** Growth per failure (default 2). */
  factor?: number;
  /** Draw the delay uniformly from `[d/2, d]` (default false: the same delays every run). */
  jitter?: boolean;
}

/** How failures are retried. Give `delay` or `backoff`, not both. */
export interface RetryOptions<Context = unknown> {
  /** Deliveries at most, the first included (default 5, at least 1). */
  maxAttempts?: number;
  /** A fixed delay in ms, or one computed from the failed attempt (1-based) and its error. */
  delay?: number | ((attempt: number, error: unknown) => number);
  /** Exponential backoff (the default: 1 s doubling to 60 s). */
  backoff?: BackoffOptions;
  /** False dead-letters at once, whatever attempts are left (default: every error retries). */
  isRetryable?: (error: unknown, ctx: Context) => boolean;
}

/** What to do after a failed attempt. */
export interface Decision {
  /** Wait this long before the next attempt, in ms. */
  delayMs: number;
  /** Give up: not retryable, or the attempts are used up. */
  deadLetter: boolean;
}

/** The default number of deliveries. */
export const DEFAULT_MAX_ATTEMPTS = 5;

/** Checks a policy once, when the queue is defined. */
export function checkRetry(retry: RetryOptions<never> | undefined): void {
  if (retry?.delay !== undefined && retry.backoff !== undefined) {
    throw new TypeError("retry: give delay or backoff, not both");
  }
  if (retry?.maxAttempts !== undefined && !(retry.maxAttempts >= 1)) {
    throw new TypeError("retry.maxAttempts must be at least 1");
  }
}

/** The decision after failed attempt `attempt` (1-based) ended with `error`. */
export function decide<Context>(
  retry: RetryOptions<Context> | undefined,
  attempt: number,
  error: unknown,
  ctx: Context,
  random: () => number = Math.random,
): Decision {
  const maxAttempts = Math.max(1, retry?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS);
  const retryable = retry?.isRetryable === undefined ? true : retry.isRetryable(error, ctx);
  return {
    delayMs: Math.max(0, Math.round(delayAfter(retry, attempt, error, random))),
    deadLetter: !retryable || attempt >= maxAttempts,
  };
}

function delayAfter(
  retry: RetryOptions<never> | RetryOptions<unknown> | undefined,
  attempt: number,
  error: unknown,
  random: () => number,
): number {
  const delay = retry?.delay;
  if (typeof delay === "number") return delay;
  if (typeof delay === "function") return delay(attempt, error);
  const initial = retry?.backoff?.initialMs ?? 1000;
  const max = retry?.backoff?.maxMs ?? 60_000;
  const factor = Math.max(1, retry?.backoff?.factor ?? 2);
  const grown = initial * factor ** Math.max(0, Math.min(attempt - 1, 64));
  const capped = Math.min(max, Number.isFinite(grown) ? grown : max);
  return retry?.backoff?.jitter ? capped / 2 + (random() * capped) / 2 : capped;
}
