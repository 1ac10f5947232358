/**
 * {@link GroupRuns}: a FIFO receive hands several messages of one group at once (AWS does, and
 * sluice's SQS API as AWS), but the backend contract gives out one message of a key at a time
 * (the conformance scenario `per_key_order`): the next waits until the previous is acked. So
 * the later messages of a run wait here, still leased, and go out one by one as their group
 * frees up. A message that comes back (a retry, a release) sends the rest of its run back
 * too, behind it.
 */
export class GroupRuns<D extends { receipt: string }> {
  /** Per group given out: the receipt of its message out now. */
  readonly #out = new Map<string, string>();
  /** Per receipt out: its group. */
  readonly #groupOf = new Map<string, string>();
  /** Per group: the later messages of its run, in order. */
  readonly #waiting = new Map<string, D[]>();

  /** Of `received` (in SQS's order), those to give out now; the rest wait behind their group. */
  take(received: Array<{ group: string | undefined; delivery: D }>): D[] {
    const out: D[] = [];
    for (const { group, delivery } of received) {
      if (group === undefined) {
        out.push(delivery);
      } else if (this.#out.has(group) || this.#waiting.has(group)) {
        const run = this.#waiting.get(group) ?? [];
        run.push(delivery);
        this.#waiting.set(group, run);
      } else {
        this.#giveOut(group, delivery);
        out.push(delivery);
      }
    }
    return out;
  }

  /** Up to `max` waiting messages whose group is free, given out now. */
  ready(max: number): D[] {
    const out: D[] = [];
    for (const [group, run] of this.#waiting) {
      if (out.length >= max) break;
      if (this.#out.has(group)) continue;
      const next = run.shift();
      if (run.length === 0) this.#waiting.delete(group);
      if (next === undefined) continue;
      this.#giveOut(group, next);
      out.push(next);
    }
    return out;
  }

  /** The message out under `receipt` is done (acked, dead-lettered): its group is free. */
  done(receipt: string): void {
    const group = this.#groupOf.get(receipt);
    if (group === undefined) return;
    this.#groupOf.delete(receipt);
    if (this.#out.get(group) === receipt) this.#out.delete(group);
  }

  /**
   * The message out under `receipt` comes back (a retry, a release): it goes first again, so
   * the rest of its run must go back too. Returns them, for the caller to give back.
   */
  backOff(receipt: string): D[] {
    const group = this.#groupOf.get(receipt);
    this.done(receipt);
    if (group === undefined) return [];
    const run = this.#waiting.get(group) ?? [];
    this.#waiting.delete(group);
    return run;
  }

  /** Every waiting message (the backend closes). */
  takeAll(): D[] {
    const all = [...this.#waiting.values()].flat();
    this.#waiting.clear();
    return all;
  }

  #giveOut(group: string, delivery: D): void {
    this.#out.set(group, delivery.receipt);
    this.#groupOf.set(delivery.receipt, group);
  }
}
