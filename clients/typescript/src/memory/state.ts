/**
 * The memory backend's data: one {@link MemoryQueue} per queue with its messages, idempotency
 * ids and waiting receivers. Plain records; every rule lives in `index.ts`.
 *
 * @module
 * @internal
 */
import type { QueueOptions } from "../backend.js";

/** Where a stored message is. */
export type MessageState = "ready" | "delayed" | "in_flight" | "acked" | "dead" | "cancelled";

/** One message. */
export interface Stored {
  messageId: string;
  /** Enqueue order across the backend. */
  seq: number;
  body: unknown;
  id: string | undefined;
  key: string | undefined;
  priority: number;
  headers: Record<string, string>;
  enqueuedAt: number;
  state: MessageState;
  visibleAt: number;
  attempts: number;
  lastError: string | undefined;
  /** The current lease's receipt. */
  receipt: string | undefined;
  leaseExpiresAt: number;
  /** When it reached a final state (acked, dead, cancelled), for retention. */
  finishedAt?: number;
  result?: unknown;
  /** Set on a message in a dead-letter queue. */
  deadLetter:
    | { sourceQueue: string; lastError: string | undefined; attempts: number; at: number }
    | undefined;
}

/** Called when a queue changes (an enqueue, a settle, a resume). */
export type Waiter = () => void;

/** One queue. */
export interface MemoryQueue {
  name: string;
  maxAttempts: number;
  perKey: boolean;
  visibilityTimeoutMs: number;
  deadLetterQueue: string | undefined;
  paused: boolean;
  messages: Map<string, Stored>;
  dedup: Map<string, { messageId: string; at: number }>;
  waiters: Set<Waiter>;
}

export function newQueue(
  name: string,
  options: QueueOptions,
  deadLetterQueue: string | undefined,
): MemoryQueue {
  return {
    name,
    maxAttempts: options.maxAttempts ?? 5,
    perKey: options.perKey ?? false,
    visibilityTimeoutMs: options.visibilityTimeoutMs ?? 30_000,
    deadLetterQueue,
    paused: false,
    messages: new Map(),
    dedup: new Map(),
    waiters: new Set(),
  };
}

export { backoffDelay } from "../retry-delay.js";
