/** GroupRuns: a FIFO run is given out one message of a group at a time, in order. */
import { describe, expect, it } from "vitest";
import { GroupRuns } from "../src/sqs/runs.js";

const d = (receipt: string) => ({ receipt });

describe("GroupRuns", () => {
  it("gives out one message per group; the next when the previous is done", () => {
    const runs = new GroupRuns<{ receipt: string }>();
    const out = runs.take([
      { group: "a", delivery: d("a1") },
      { group: "a", delivery: d("a2") },
      { group: "b", delivery: d("b1") },
      { group: undefined, delivery: d("x") },
      { group: "a", delivery: d("a3") },
    ]);
    expect(out.map((m) => m.receipt)).toEqual(["a1", "b1", "x"]);
    expect(runs.ready(10)).toEqual([]);
    runs.done("a1");
    expect(runs.ready(10).map((m) => m.receipt)).toEqual(["a2"]);
    expect(runs.ready(10)).toEqual([]);
    // A later receive of group a waits behind what already waits.
    expect(runs.take([{ group: "a", delivery: d("a4") }])).toEqual([]);
    // a2 comes back: what waits behind it goes back too.
    expect(runs.backOff("a2").map((m) => m.receipt)).toEqual(["a3", "a4"]);
    expect(runs.take([{ group: "a", delivery: d("a2") }]).map((m) => m.receipt)).toEqual(["a2"]);
    expect(runs.takeAll()).toEqual([]);
  });
});
