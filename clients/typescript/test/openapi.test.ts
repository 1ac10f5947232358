/**
 * The client's types come from the server's OpenAPI document as committed here; this checks
 * that it is still the document the server serves, so the types cannot drift from the API.
 * When it fails: `SLUICE_URL=... npm run update:openapi && npm run gen:openapi`, then fix what
 * the new types show.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, inject, it } from "vitest";
import { SluiceClient } from "../src/index.js";

const sluiceUrl = inject("sluiceUrl");
const committed = join(
  dirname(fileURLToPath(import.meta.url)),
  "..",
  "openapi",
  "sluice.openapi.json",
);

describe.skipIf(sluiceUrl === "")("openapi", () => {
  it("the committed document is the one the server serves", async () => {
    const served = await new SluiceClient({ url: sluiceUrl }).openapi();
    expect(served).toEqual(JSON.parse(readFileSync(committed, "utf8")));
  });
});
