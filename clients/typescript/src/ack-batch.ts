/**
 * {@link AckBatch}: the worker's acks, coalesced the way a database groups commits. An ack is
 * sent at once when no ack request is on its way; while one is, the acks that come meanwhile
 * wait and the next request carries them all. No timer: a lone ack costs no latency, and under
 * load one request settles many messages.
 *
 * @module
 */

import { SluiceError } from "./errors.js";

/** One receipt waiting for its request. */
interface Waiting {
  receipt: string;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Most receipts one request carries (the sluice server's limit). */
const RECEIPTS_MAX = 1000;

export class AckBatch {
  readonly #ackMany: (receipts: string[]) => Promise<boolean[]>;
  #waiting: Waiting[] = [];
  #sending = 0;
  #flushing: Promise<void> | undefined;

  /** `ackMany` sends one request and answers per receipt (false: the lease was lost). */
  constructor(ackMany: (receipts: string[]) => Promise<boolean[]>) {
    this.#ackMany = ackMany;
  }

  /** Receipts waiting or on their way. */
  get backlog(): number {
    return this.#waiting.length + this.#sending;
  }

  /**
   * Acks `receipt` with the next request, answering as a single ack would: resolves once
   * acked, rejects with `stale_receipt` when its lease was lost and with the request's error
   * when the request failed.
   */
  ack(receipt: string): Promise<void> {
    const acked = new Promise<void>((resolve, reject) => {
      this.#waiting.push({ receipt, resolve, reject });
    });
    this.#flushing ??= this.#flush();
    return acked;
  }

  /** Resolves once nothing waits and no request is on its way. */
  async idle(): Promise<void> {
    while (this.#flushing !== undefined) await this.#flushing;
  }

  async #flush(): Promise<void> {
    // One turn of the event loop's microtasks first: the acks of handlers that finished
    // together (a batch received at once) go out in one request.
    await Promise.resolve();
    try {
      while (this.#waiting.length > 0) {
        const batch = this.#waiting.splice(0, RECEIPTS_MAX);
        this.#sending = batch.length;
        try {
          const acked = await this.#ackMany(batch.map((waiting) => waiting.receipt));
          batch.forEach((waiting, index) => {
            if (acked[index] === true) waiting.resolve();
            else waiting.reject(leaseLost());
          });
        } catch (error) {
          for (const waiting of batch) waiting.reject(error);
        } finally {
          this.#sending = 0;
        }
      }
    } finally {
      this.#flushing = undefined;
    }
  }
}

/** What a single ack answers for a receipt whose lease is gone. */
function leaseLost(): SluiceError {
  return new SluiceError({
    status: 409,
    code: "stale_receipt",
    message: "the lease was lost: the message is no longer leased with this receipt",
  });
}
