/**
 * The backoff the SQS and RabbitMQ backends apply to a nack without a delay, as sluice's
 * queues do by default: `min(maxMs, initialMs · factor^(attempt-1))`, without jitter.
 *
 * @module
 * @internal
 */

/** An exponential backoff, in ms. */
export interface BackoffSettings {
  initialMs: number;
  maxMs: number;
  factor: number;
}

/** sluice's default: 1 s, doubling, at most 60 s. */
export const DEFAULT_BACKOFF: BackoffSettings = { initialMs: 1000, maxMs: 60_000, factor: 2 };

/** The delay after failed attempt `attempt` (1-based). */
export function backoffDelay(backoff: BackoffSettings, attempt: number): number {
  const grown = backoff.initialMs * Math.max(1, backoff.factor) ** Math.max(0, attempt - 1);
  return Math.min(backoff.maxMs, Number.isFinite(grown) ? grown : backoff.maxMs);
}
