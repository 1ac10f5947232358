/**
 * The backends every suite runs on, each made fresh for a test: memory (manual clock), sluice
 * (the server of globalSetup), SQS (that server's SQS-compatible API) and RabbitMQ
 * (127.0.0.1:5672). `skip` says why a backend is not there.
 */
import { inject } from "vitest";
import type { Backend } from "../../src/index.js";
import { SluiceBackend } from "../../src/index.js";
import { MemoryBackend } from "../../src/memory/index.js";

export interface BackendCase {
  kind: "memory" | "sluice" | "sqs" | "rabbitmq";
  /** Why the backend is not available, or undefined when it is. */
  skip: string | undefined;
  make(): Promise<Backend>;
}

export function backendCases(): BackendCase[] {
  const sluiceUrl = inject("sluiceUrl");
  const rabbitmqUrl = inject("rabbitmqUrl");
  const noServer = sluiceUrl === "" ? "no sluice binary (SLUICE_BIN)" : undefined;
  return [
    { kind: "memory", skip: undefined, make: async () => new MemoryBackend() },
    {
      kind: "sluice",
      skip: noServer,
      make: async () => new SluiceBackend({ url: sluiceUrl }),
    },
    {
      kind: "sqs",
      skip: noServer,
      make: async () => {
        const { SqsBackend } = await import("../../src/sqs/index.js");
        return new SqsBackend({
          endpoint: sluiceUrl,
          region: "us-east-1",
          credentials: { accessKeyId: "any", secretAccessKey: "any" },
        });
      },
    },
    {
      kind: "rabbitmq",
      skip: rabbitmqUrl === "" ? "RabbitMQ does not answer on 127.0.0.1:5672" : undefined,
      make: async () => {
        const { RabbitMqBackend } = await import("../../src/rabbitmq/index.js");
        return RabbitMqBackend.connect(rabbitmqUrl);
      },
    },
  ];
}
