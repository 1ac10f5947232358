/**
 * vitest globalSetup: one `sluice serve` for the whole run (stopped at the end), and a check
 * that RabbitMQ answers on 127.0.0.1:5672. Tests read what is there with `inject`; a service
 * that is missing makes its tests skip, or fails the run when `CI` is set.
 */
import { connect } from "node:net";
import type { TestProject } from "vitest/node";
import { type RunningServer, required, sluiceBinary, startSluice } from "./server.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The test server's base URL; "" when there is no binary. */
    sluiceUrl: string;
    /** The RabbitMQ URL; "" when none answers. */
    rabbitmqUrl: string;
  }
}

let server: RunningServer | undefined;

export default async function setup(project: TestProject) {
  const binary = sluiceBinary();
  if (binary === undefined) {
    if (required()) {
      throw new Error(
        "CI is set but no sluice binary: set SLUICE_BIN or build target/debug/sluice",
      );
    }
    console.warn("sluice tests skipped: no SLUICE_BIN and no target/debug/sluice");
    project.provide("sluiceUrl", "");
  } else {
    server = await startSluice(binary);
    project.provide("sluiceUrl", server.url);
  }
  const rabbitmq = process.env.SLUICE_TEST_RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";
  if (await reachable("127.0.0.1", 5672)) {
    project.provide("rabbitmqUrl", rabbitmq);
  } else {
    if (required()) throw new Error("CI is set but RabbitMQ does not answer on 127.0.0.1:5672");
    console.warn("RabbitMQ tests skipped: nothing answers on 127.0.0.1:5672");
    project.provide("rabbitmqUrl", "");
  }
  return async () => {
    await server?.stop();
  };
}

function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(false);
    }, 2000);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.end();
      resolve(true);
    });
    socket.once("error", () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
}
