/** The retry policy, alone: delays per attempt, the cap, jitter bounds, when to give up. */
import { describe, expect, it } from "vitest";
import { checkRetry, decide } from "../src/index.js";

describe("retry policy", () => {
  it("backs off exponentially to its cap by default", () => {
    const delays = [1, 2, 3, 4, 5, 6, 7, 8].map(
      (n) => decide(undefined, n, new Error(), {}).delayMs,
    );
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]);
    expect(decide(undefined, 10_000, new Error(), {}).delayMs).toBe(60_000);
  });

  it("gives up on the last attempt, or at once for an error that is not retryable", () => {
    const retry = {
      maxAttempts: 3,
      isRetryable: (error: unknown) => !String(error).includes("fatal"),
    };
    expect(decide(retry, 2, new Error("timeout"), {}).deadLetter).toBe(false);
    expect(decide(retry, 3, new Error("timeout"), {}).deadLetter).toBe(true);
    expect(decide(retry, 1, new Error("fatal: bad input"), {}).deadLetter).toBe(true);
  });

  it("takes a fixed delay or a function of the attempt", () => {
    expect(decide({ delay: 250 }, 4, null, {}).delayMs).toBe(250);
    expect(decide({ delay: (attempt) => attempt * 100 }, 4, null, {}).delayMs).toBe(400);
  });

  it("draws jitter from the upper half of the delay", () => {
    const retry = { backoff: { initialMs: 1000, jitter: true } };
    expect(decide(retry, 1, null, {}, () => 0).delayMs).toBe(500);
    expect(decide(retry, 1, null, {}, () => 0.999).delayMs).toBe(1000);
  });

  it("refuses delay and backoff together, and fewer than one attempt", () => {
    expect(() => checkRetry({ delay: 1, backoff: {} })).toThrow(/not both/);
    expect(() => checkRetry({ maxAttempts: 0 })).toThrow(/at least 1/);
  });
});
