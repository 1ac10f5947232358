/**
 * Refreshes openapi/sluice.openapi.json from a running server (SLUICE_URL, default
 * http://127.0.0.1:7566); `npm run gen:openapi` then regenerates src/generated/openapi.ts.
 *
 *   SLUICE_URL=http://127.0.0.1:7566 npm run update:openapi
 */
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { SluiceClient } from "../src/index.js";

const document = await new SluiceClient().openapi();
const path = join(dirname(fileURLToPath(import.meta.url)), "..", "openapi", "sluice.openapi.json");
writeFileSync(path, `${JSON.stringify(document, null, 4)}\n`);
console.log(`wrote ${path}`);
