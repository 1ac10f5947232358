/**
 * Issue 31: every package the lock file installs (the SDK has no runtime dependencies; these
 * are its optional peers and its development tools) is under a licence compatible with the
 * SDK's Apache-2.0, read from `package-lock.json` (npm records each package's `license`).
 * A new dependency under another licence fails here until it is reviewed and added.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Permissive licences, compatible with Apache-2.0 (the Apache Software Foundation's category A). */
const ALLOWED = new Set([
  "MIT",
  "Apache-2.0",
  "ISC",
  "BSD-2-Clause",
  "BSD-3-Clause",
  "0BSD",
  "BlueOak-1.0.0",
  "CC0-1.0",
  "Python-2.0",
]);

/** An SPDX expression is allowed when each `OR` leaves at least one allowed licence. */
function allowed(expression: string): boolean {
  const alternatives = expression.replace(/[()]/g, "").split(/\s+OR\s+/);
  return alternatives.some((alternative) =>
    alternative.split(/\s+AND\s+/).every((licence) => ALLOWED.has(licence.trim())),
  );
}

describe("the lock file's licences", () => {
  it("are all compatible with Apache-2.0", () => {
    const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
      packages: Record<string, { license?: string }>;
    };
    const refused = Object.entries(lock.packages)
      .filter(([path]) => path !== "")
      .filter(([, entry]) => entry.license === undefined || !allowed(entry.license))
      .map(([path, entry]) => `${path}: ${entry.license ?? "no licence recorded"}`);
    expect(refused).toEqual([]);
    expect(allowed("MIT OR GPL-3.0")).toBe(true);
    expect(allowed("GPL-3.0")).toBe(false);
    expect(allowed("MIT AND GPL-3.0")).toBe(false);
  });
});
