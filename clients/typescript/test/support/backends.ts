/**
 * The backends every suite runs on, each made fresh for a test: memory (manual clock), sluice
 * (the server of globalSetup), SQS on that server's SQS-compatible API, SQS on moto_server (a
 * second SQS implementation that knows nothing of sluice, standing in for AWS; its URL comes
 * from `SLUICE_TEST_MOTO_URL`) and RabbitMQ (127.0.0.1:5672). `skip` says why a backend is not
 * there.
 */
import { inject } from "vitest";
import type { Backend } from "../../src/index.js";
import { SluiceBackend } from "../../src/index.js";
import { MemoryBackend } from "../../src/memory/index.js";

export interface BackendCase {
  /** The backend's name in conformance/scenarios.json (`exceptions`, `unchecked`, `refused`). */
  kind: "memory" | "sluice" | "sqs" | "rabbitmq";
  /** What the tests print: the kind, and where it runs when one kind runs in two places. */
  name: string;
  /**
   * Its names in conformance/scenarios.json, the most specific first: SQS on moto is `aws`
   * (SQS without sluice's extensions), and where a scenario says nothing for `aws`, what it
   * says for `sqs` holds.
   */
  scenarioNames: string[];
  /** Why the backend is not available, or undefined when it is. */
  skip: string | undefined;
  make(): Promise<Backend>;
}

export function backendCases(): BackendCase[] {
  const sluiceUrl = inject("sluiceUrl");
  const rabbitmqUrl = inject("rabbitmqUrl");
  const motoUrl = inject("motoUrl");
  const noServer = sluiceUrl === "" ? "no sluice binary (SLUICE_BIN)" : undefined;
  const sqsOn = async (endpoint: string): Promise<Backend> => {
    const { SqsBackend } = await import("../../src/sqs/index.js");
    return new SqsBackend({
      endpoint,
      region: "us-east-1",
      credentials: { accessKeyId: "any", secretAccessKey: "any" },
    });
  };
  return [
    {
      kind: "memory",
      name: "memory",
      scenarioNames: ["memory"],
      skip: undefined,
      make: async () => new MemoryBackend(),
    },
    {
      kind: "sluice",
      name: "sluice",
      scenarioNames: ["sluice"],
      skip: noServer,
      make: async () => new SluiceBackend({ url: sluiceUrl }),
    },
    {
      kind: "sqs",
      name: "sqs",
      scenarioNames: ["sqs"],
      skip: noServer,
      make: () => sqsOn(sluiceUrl),
    },
    {
      kind: "sqs",
      name: "sqs on moto",
      scenarioNames: ["aws", "sqs"],
      skip: motoUrl === "" ? "no moto_server (SLUICE_TEST_MOTO_URL)" : undefined,
      make: () => sqsOn(motoUrl),
    },
    {
      kind: "rabbitmq",
      name: "rabbitmq",
      scenarioNames: ["rabbitmq"],
      skip: rabbitmqUrl === "" ? "RabbitMQ does not answer on 127.0.0.1:5672" : undefined,
      make: async () => {
        const { RabbitMqBackend } = await import("../../src/rabbitmq/index.js");
        return RabbitMqBackend.connect(rabbitmqUrl);
      },
    },
  ];
}
