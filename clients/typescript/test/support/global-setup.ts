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
    /** moto_server's URL (`SLUICE_TEST_MOTO_URL`); "" when it is not set or does not answer. */
    motoUrl: string;
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
  project.provide("motoUrl", await moto());
  return async () => {
    await server?.stop();
  };
}

/**
 * moto_server, a second SQS implementation, as the SQS backend's stand-in for AWS. The Rust
 * test that runs this suite (crates/sluice-cli/tests/clients.rs) starts one and passes its URL;
 * by hand: `moto_server -H 127.0.0.1 -p 5055 &` and `SLUICE_TEST_MOTO_URL=http://127.0.0.1:5055`.
 */
async function moto(): Promise<string> {
  const url = process.env.SLUICE_TEST_MOTO_URL ?? "";
  let why = "SLUICE_TEST_MOTO_URL is not set";
  if (url !== "") {
    const { hostname, port } = new URL(url);
    if (await reachable(hostname, Number(port || 80))) return url;
    why = `moto_server does not answer at ${url}`;
  }
  if (required()) throw new Error(`CI is set but ${why}`);
  console.warn(`SQS-on-moto tests skipped: ${why}`);
  return "";
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
