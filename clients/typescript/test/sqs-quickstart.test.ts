/**
 * The README's SQS line as written (issue 31): `new SqsBackend({ endpoint })` against sluice's
 * SQS API, with no region and no AWS credentials anywhere in the environment, works; and what
 * the AWS SDK refuses to start without is a `configuration` error, not `network`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { SluiceError } from "../src/errors.js";
import { SqsBackend } from "../src/sqs/index.js";

const sluiceUrl = inject("sluiceUrl");
/** The AWS settings the SDK would read, cleared for these tests. */
const AWS_VARIABLES = [
  "AWS_REGION",
  "AWS_DEFAULT_REGION",
  "AWS_ACCESS_KEY_ID",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AWS_PROFILE",
  "AWS_SHARED_CREDENTIALS_FILE",
  "AWS_CONFIG_FILE",
  "AWS_CONTAINER_CREDENTIALS_FULL_URI",
  "AWS_WEB_IDENTITY_TOKEN_FILE",
];

describe("SqsBackend with only an endpoint", () => {
  const saved = new Map<string, string | undefined>();
  const home = mkdtempSync(join(tmpdir(), "sluice-sqs-home-"));
  beforeAll(() => {
    for (const name of [...AWS_VARIABLES, "HOME", "AWS_EC2_METADATA_DISABLED"]) {
      saved.set(name, process.env[name]);
    }
    for (const name of AWS_VARIABLES) delete process.env[name];
    // An empty home: no ~/.aws/credentials or ~/.aws/config of the machine's user.
    process.env.HOME = home;
    process.env.AWS_CONFIG_FILE = join(home, "no-config");
    process.env.AWS_EC2_METADATA_DISABLED = "true";
  });
  afterAll(() => {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    rmSync(home, { recursive: true, force: true });
  });

  it.skipIf(sluiceUrl === "")("sends and receives through sluice's SQS API", async () => {
    const backend = new SqsBackend({ endpoint: sluiceUrl });
    const queue = `sqs_quick_${Math.random().toString(36).slice(2, 10)}`;
    try {
      await backend.ensureQueue(queue);
      await backend.enqueue(queue, [{ body: { orderId: 7 } }]);
      const [delivery] = await backend.receive(queue, { max: 1, waitMs: 2_000 });
      expect(delivery?.body).toEqual({ orderId: 7 });
      if (delivery) await backend.ack(queue, delivery.receipt);
      await backend.deleteQueue(queue);
    } finally {
      await backend.close();
    }
  });

  it("without an endpoint, a missing region is a configuration error", async () => {
    const backend = new SqsBackend({});
    try {
      const error = await backend.ensureQueue("orders").then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(SluiceError);
      expect((error as SluiceError).code).toBe("configuration");
      expect((error as SluiceError).message).toMatch(/AWS_REGION/);
      expect((error as SluiceError).isTransient).toBe(false);
    } finally {
      await backend.close();
    }
  });
});
