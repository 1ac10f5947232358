import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/global-setup.ts"],
    // Every test is bounded: a hung broker fails the test instead of the run.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // The suites share one server and one RabbitMQ; files run one at a time on 2 cores.
    fileParallelism: false,
  },
});
