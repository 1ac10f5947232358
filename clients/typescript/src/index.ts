/**
 * `@sluice/client`: the TypeScript SDK of sluice.
 *
 * - {@link SluiceClient}: the typed HTTP client of the whole native API.
 * - {@link Queue}: an event queue with a schema, and its worker runtime ({@link Worker}).
 * - {@link Backend}: one queue interface over sluice ({@link SluiceBackend}), memory
 *   (`@sluice/client/memory`), Amazon SQS (`@sluice/client/sqs`) and RabbitMQ
 *   (`@sluice/client/rabbitmq`), with {@link Capabilities} for what a backend cannot do.
 *
 * @module
 */
export * from "./backend.js";
export * from "./client.js";
export * from "./clock.js";
export * from "./errors.js";
export * from "./sluice-backend.js";
export type * as wire from "./wire.js";
export * from "./queue.js";
export * from "./retry.js";
export * from "./standard-schema.js";
export * from "./worker.js";
