/**
 * The two examples run as a user runs them (`tsx examples/NAME.ts` with SLUICE_URL) against the
 * test server, and must exit 0.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, inject, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const sluiceUrl = inject("sluiceUrl");

function run(example: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ["--import", "tsx", join(root, "examples", example)], {
      cwd: root,
      env: { ...process.env, SLUICE_URL: sluiceUrl },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), 90_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe.skipIf(sluiceUrl === "")("examples", () => {
  it("webhook-processor handles every event at the queue's pace", async () => {
    const { code, output } = await run("webhook-processor.ts");
    expect(output).toMatch(/handled 30 events/);
    expect(code, output).toBe(0);
  }, 100_000);

  it("order-pipeline charges, retries and dead-letters the declined cards", async () => {
    const { code, output } = await run("order-pipeline.ts");
    expect(output).toMatch(/charged 18, retried \d+, dead-lettered 2/);
    expect(code, output).toBe(0);
  }, 100_000);
});
