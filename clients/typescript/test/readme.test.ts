/**
 * The README as a new user follows it: the package is packed (`npm pack`, which builds it),
 * installed into an empty project from the tarball with zod from the registry, and the README's
 * ten-line producer and worker run there, as written, with plain `node` against the test
 * server; the worker handles the event and stops on SIGTERM with exit 0.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, inject, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const sluiceUrl = inject("sluiceUrl");

/** The first ```ts block of the README: the ten-line producer and worker. */
function readmeWorker(): string {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const block = /```ts\n([\s\S]*?)```/.exec(readme);
  if (!block?.[1]) throw new Error("README.md has no ts block");
  return block[1];
}

/** The zod version the package's own tests use (its lock file), so the install is repeatable. */
function lockedZod(): string {
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string }>;
  };
  const version = lock.packages["node_modules/zod"]?.version;
  if (!version) throw new Error("zod is not in package-lock.json");
  return version;
}

describe.skipIf(sluiceUrl === "")("the README, followed by a new user", () => {
  it("installs from the packed tarball and runs the ten-line worker", async () => {
    const app = mkdtempSync(join(tmpdir(), "sluice-ts-readme-"));
    try {
      const packed = execFileSync("npm", ["pack", "--silent", "--pack-destination", app], {
        cwd: root,
        encoding: "utf8",
        timeout: 120_000,
      })
        .trim()
        .split("\n")
        .pop();
      if (!packed) throw new Error("npm pack printed no file name");
      // Only what a user needs: the licence, the README, types and ESM; no sources or tests.
      const files = execFileSync("tar", ["-tzf", join(app, packed)], { encoding: "utf8" })
        .trim()
        .split("\n");
      for (const needed of [
        "LICENSE",
        "README.md",
        "package.json",
        "dist/index.js",
        "dist/index.d.ts",
      ]) {
        expect(files).toContain(`package/${needed}`);
      }
      expect(
        files.filter(
          (file) => !/^package\/(dist\/|LICENSE$|README\.md$|package\.json$)/.test(file),
        ),
      ).toEqual([]);
      const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
        license: string;
      };
      expect(manifest.license).toBe("Apache-2.0");
      writeFileSync(join(app, "package.json"), JSON.stringify({ type: "module", private: true }));
      execFileSync(
        "npm",
        ["install", "--no-audit", "--no-fund", join(app, packed), `zod@${lockedZod()}`],
        { cwd: app, encoding: "utf8", timeout: 180_000 },
      );
      // A queue of its own, so another run's event cannot satisfy this one.
      const queue = `readme_${Math.random().toString(36).slice(2, 10)}`;
      writeFileSync(join(app, "worker.mjs"), readmeWorker().replace('"orders"', `"${queue}"`));
      const child = spawn(process.execPath, ["worker.mjs"], {
        cwd: app,
        env: { ...process.env, SLUICE_URL: sluiceUrl },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      const handled = new Promise<void>((resolve) => {
        const seen = (chunk: Buffer) => {
          output += chunk.toString();
          if (output.includes("charging 7 (attempt 1)")) resolve();
        };
        child.stdout.on("data", seen);
        child.stderr.on("data", seen);
      });
      const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
      const killer = setTimeout(() => child.kill("SIGKILL"), 60_000);
      await Promise.race([handled, exited]);
      expect(output).toContain("charging 7 (attempt 1)");
      child.kill("SIGTERM");
      const code = await exited;
      clearTimeout(killer);
      expect(code, output).toBe(0);
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  }, 300_000);
});
