/**
 * The PostgreSQL store's examples (`examples/postgres/*.ts`) run as a user runs them, against a
 * `sluice serve` on a fresh schema of the test database (127.0.0.1:5432, user postgres, database
 * test, or SLUICE_TEST_DATABASE_URL). A missing database or binary skips these tests, or fails
 * them when `CI` is set.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, required, sluiceBinary, startSluice } from "./support/server.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const databaseUrl =
  process.env.SLUICE_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test";
const examples = readdirSync(join(root, "examples", "postgres")).filter((name) =>
  name.endsWith(".ts"),
);
// The store tests' prefix: schemas a killed run leaves are dropped by them after an hour.
const schema = `sluice_test_${randomUUID().replaceAll("-", "")}`;

async function databaseAnswers(): Promise<boolean> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

const binary = sluiceBinary();
const available = binary !== undefined && (await databaseAnswers());
if (!available && required()) {
  throw new Error(`CI is set but there is no sluice binary or no PostgreSQL at ${databaseUrl}`);
}

function run(example: string, url: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(root, "examples", "postgres", example)],
      {
        cwd: root,
        env: {
          ...process.env,
          SLUICE_URL: url,
          SLUICE_DATABASE_URL: databaseUrl,
          SLUICE_SCHEMA: schema,
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
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

describe.skipIf(!available)("the PostgreSQL store's examples", () => {
  let server: RunningServer | undefined;

  beforeAll(async () => {
    server = await startSluice(
      binary as string,
      `[store]\nkind = "postgres"\nurl = "${databaseUrl}"\nschema = "${schema}"\n`,
    );
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`);
    await client.end();
  });

  it("there is one", () => {
    expect(examples.length).toBeGreaterThan(0);
  });

  it.each(examples)(
    "%s exits 0",
    async (example) => {
      const { code, output } = await run(example, server?.url ?? "");
      expect(code, output).toBe(0);
    },
    100_000,
  );
});
