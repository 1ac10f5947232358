/**
 * `@sluice/client/sqs`: {@link SqsBackend}, the {@link Backend} on Amazon SQS (or on sluice's
 * SQS-compatible API), through `@aws-sdk/client-sqs` (an optional peer dependency, imported
 * only here).
 *
 * How sluice's rules map onto SQS:
 * - a queue opened with `perKey` or `dedup` is a FIFO queue (`<name>.fifo`): the key is the
 *   `MessageGroupId` (a message without a key gets a group of its own, so it is not held up),
 *   the id the `MessageDeduplicationId`; a standard queue cannot deduplicate, so an enqueue
 *   with an `id` is refused there ({@link UnsupportedError}, operation `dedup`), never ignored;
 * - every queue has a dead-letter queue `<name>-dlq` (`<name>-dlq.fifo`) with a `RedrivePolicy`
 *   of `maxReceiveCount` = `maxAttempts`, so a lease that runs out on the last attempt is
 *   redriven by SQS;
 * - a nack is reported to the server with the visibility change (`x-sluice-failure`): sluice
 *   takes it as a nack, so it retries or dead-letters the message itself, with its error,
 *   counts it and alerts; against a server that does not know the report (AWS), a nack that
 *   dead-letters (permanent, or attempts used up) is done here, because SQS only redrives on
 *   a later receive: the message is sent to the dead-letter queue with its error as a message
 *   attribute, then deleted;
 * - a retry is a visibility change to the delay (whole seconds); the attempt is SQS's
 *   `ApproximateReceiveCount`.
 *
 * SQS cannot pause a queue, cancel or look up a message, keep enqueue order outside a group,
 * or sort by priority: those throw {@link UnsupportedError}. It keeps no error with a message,
 * so `lastError` is always undefined.
 *
 * @module
 */
import { existsSync } from "node:fs";
import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  type Message,
  type MessageAttributeValue,
  ReceiveMessageCommand,
  SQSClient,
  type SQSClientConfig,
  SendMessageBatchCommand,
  SendMessageCommand,
} from "@aws-sdk/client-sqs";
import type {
  Backend,
  CancelResult,
  Capabilities,
  DeadLetter,
  Delivery,
  Enqueued,
  MessageInfo,
  Nack,
  NackOutcome,
  NextStep,
  OutgoingMessage,
  QueueOptions,
  QueueStats,
  ReceiveOptions,
} from "../backend.js";
import { ackWithoutChaining } from "../backend.js";
import { type Clock, SystemClock, realSleep } from "../clock.js";
import { SluiceError, UnsupportedError } from "../errors.js";
import { type BackoffSettings, DEFAULT_BACKOFF, backoffDelay } from "../retry-delay.js";
import { GroupRuns } from "./runs.js";

export type { BackoffSettings } from "../retry-delay.js";

/** Options of {@link SqsBackend}: an `SQSClientConfig` (endpoint, region, credentials). */
export interface SqsBackendOptions extends SQSClientConfig {
  /** Use this client instead of building one. */
  client?: SQSClient;
  /** Backoff of a nack without a delay (default sluice's: 1 s doubling to 60 s). */
  backoff?: BackoffSettings;
}

/** Message attributes this backend writes (SQS allows 10 per message). */
/** The failure a visibility change reports (sluice's extension, docs/sqs.md). */
const FAILURE_HEADER = "x-sluice-failure";
const PERMANENT_HEADER = "x-sluice-failure-permanent";
/** What sluice did with a reported failure: `retried` or `dead-lettered`. */
const OUTCOME_HEADER = "x-sluice-outcome";

/** A failure's error as it is kept: never empty, at most 4 KiB. */
function failureText(error: string): string {
  return error === "" ? "failed" : error.slice(0, 4096);
}

const ATTRIBUTE = {
  id: "sluice-id",
  key: "sluice-key",
  headers: "sluice-headers",
  error: "sluice-error",
  attempts: "sluice-attempts",
  source: "sluice-source-queue",
  /** On a dead letter sluice made: when, ms since the epoch. */
  failedAt: "sluice-failed-at-ms",
} as const;

/** Longest visibility timeout SQS takes, in seconds. */
const VISIBILITY_MAX_S = 43_200;
/** Longest per-message delay SQS takes, in seconds. */
const DELAY_MAX_S = 900;
/** Most entries of one SQS batch request. */
const SQS_BATCH_MAX = 10;

/** Leases this backend remembers (for a nack that must dead-letter) before it forgets the oldest. */
const LEASES_MAX = 10_000;

interface QueueMeta {
  url: string;
  dlqUrl: string | undefined;
  fifo: boolean;
  maxAttempts: number;
}

interface Lease {
  queue: string;
  messageId: string;
  body: string;
  attributes: Record<string, MessageAttributeValue>;
  attempt: number;
  groupId: string | undefined;
  expiresAt: number;
}

/** Amazon SQS, or sluice's SQS-compatible API. */
export class SqsBackend implements Backend {
  readonly kind = "sqs";
  readonly capabilities: Capabilities = {
    extend: true,
    pause: false,
    cancel: false,
    perKey: true,
    ordered: false,
    dedup: true,
    delays: true,
    drain: true,
    get: false,
    inFlightStats: true,
    priority: false,
    chaining: false,
  };
  readonly clock: Clock = new SystemClock();
  /** The AWS SDK client underneath. */
  readonly client: SQSClient;
  readonly #backoff: BackoffSettings;
  readonly #queues = new Map<string, QueueMeta>();
  readonly #leases = new Map<string, Lease>();
  /** Per FIFO queue: runs of a group received together, given out one at a time. */
  readonly #runs = new Map<string, GroupRuns<Delivery>>();

  constructor(options: SqsBackendOptions = {}) {
    const { client, backoff, ...config } = options;
    this.client = client ?? new SQSClient(withSluiceDefaults(config));
    this.#backoff = backoff ?? DEFAULT_BACKOFF;
  }

  async ensureQueue(queue: string, options: QueueOptions = {}): Promise<void> {
    if (options.ordered) {
      throw new UnsupportedError(
        this.kind,
        "ordered",
        "standard SQS queues do not keep order; a FIFO queue does only within a message group (perKey)",
      );
    }
    const fifo = Boolean(options.perKey || options.dedup);
    const maxAttempts = options.maxAttempts ?? 5;
    const suffix = fifo ? ".fifo" : "";
    const fifoAttributes: Record<string, string> = fifo ? { FifoQueue: "true" } : {};
    const dlqUrl = await this.#create(`${queue}-dlq${suffix}`, fifoAttributes);
    const dlqArn = await this.#attribute(dlqUrl, "QueueArn");
    const attributes: Record<string, string> = {
      ...fifoAttributes,
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: maxAttempts }),
    };
    if (options.visibilityTimeoutMs !== undefined) {
      attributes.VisibilityTimeout = String(seconds(options.visibilityTimeoutMs, VISIBILITY_MAX_S));
    }
    const url = await this.#create(`${queue}${suffix}`, attributes);
    this.#queues.set(queue, { url, dlqUrl, fifo, maxAttempts });
  }

  async enqueue(queue: string, messages: OutgoingMessage[]): Promise<Enqueued[]> {
    const meta = await this.#meta(queue);
    const entries = messages.map((message, index) => {
      if ((message.priority ?? 0) !== 0) {
        throw new UnsupportedError(this.kind, "priority", "SQS has no message priority");
      }
      const delayMs = message.delayMs ?? 0;
      if (delayMs > 0 && meta.fifo) {
        throw new UnsupportedError(this.kind, "delays", "FIFO queues take no per-message delay");
      }
      if (message.id !== undefined && !meta.fifo) {
        throw new UnsupportedError(
          this.kind,
          "dedup",
          "a standard SQS queue does not deduplicate, so an idempotency id would be ignored: open the queue with `dedup: true` (a FIFO queue) to enqueue with ids",
        );
      }
      const attributes: Record<string, MessageAttributeValue> = {};
      if (message.id !== undefined) attributes[ATTRIBUTE.id] = text(message.id);
      if (message.key !== undefined) attributes[ATTRIBUTE.key] = text(message.key);
      if (message.headers !== undefined && Object.keys(message.headers).length > 0) {
        attributes[ATTRIBUTE.headers] = text(JSON.stringify(message.headers));
      }
      return {
        Id: String(index),
        MessageBody: JSON.stringify(message.body),
        MessageAttributes: attributes,
        ...(delayMs > 0 ? { DelaySeconds: seconds(delayMs, DELAY_MAX_S, "delayMs") } : {}),
        ...(meta.fifo
          ? {
              // Without a key, a group of its own: FIFO order is promised per key only.
              MessageGroupId: message.key ?? crypto.randomUUID(),
              MessageDeduplicationId: message.id ?? crypto.randomUUID(),
            }
          : {}),
      };
    });
    const results: Enqueued[] = [];
    for (let start = 0; start < entries.length; start += SQS_BATCH_MAX) {
      const batch = entries.slice(start, start + SQS_BATCH_MAX);
      const answer = await this.#guard(
        this.client.send(new SendMessageBatchCommand({ QueueUrl: meta.url, Entries: batch })),
      );
      if (answer.Failed !== undefined && answer.Failed.length > 0) {
        throw new SluiceError({
          status: answer.Failed[0]?.SenderFault ? 422 : 503,
          code: answer.Failed[0]?.SenderFault ? "invalid_field" : "unavailable",
          message: `SQS refused ${answer.Failed.length} of the batch: ${answer.Failed[0]?.Message ?? answer.Failed[0]?.Code}`,
          details: answer.Failed,
        });
      }
      const byId = new Map((answer.Successful ?? []).map((entry) => [entry.Id, entry.MessageId]));
      for (const entry of batch) {
        // SQS answers a duplicate FIFO send like a new one, and says nothing of positions.
        results.push({ messageId: byId.get(entry.Id) ?? "", created: true, position: undefined });
      }
    }
    return results;
  }

  async receive(queue: string, options: ReceiveOptions = {}): Promise<Delivery[]> {
    const meta = await this.#meta(queue);
    const leaseMs = options.visibilityTimeoutMs;
    const max = Math.min(Math.max(options.max ?? 1, 1), 10);
    // The signal is not passed on: cutting a long poll could strand leases SQS already granted.
    options.signal?.throwIfAborted();
    const runs = meta.fifo ? this.#runsOf(queue) : undefined;
    const out: Delivery[] = [];
    for (const waiting of runs?.ready(max) ?? []) {
      // It waited under its lease: the lease starts again now, or it is stale and comes back.
      try {
        await this.#setVisibility(
          queue,
          waiting.receipt,
          seconds(leaseMs ?? 30_000, VISIBILITY_MAX_S),
        );
        out.push(waiting);
      } catch {
        runs?.done(waiting.receipt);
        this.#leases.delete(waiting.receipt);
      }
    }
    if (out.length >= max) return out;
    const answer = await this.#guard(
      this.client.send(
        new ReceiveMessageCommand({
          QueueUrl: meta.url,
          MaxNumberOfMessages: max - out.length,
          WaitTimeSeconds:
            out.length > 0 ? 0 : Math.min(Math.ceil(Math.max(0, options.waitMs ?? 0) / 1000), 20),
          ...(leaseMs === undefined
            ? {}
            : { VisibilityTimeout: seconds(leaseMs, VISIBILITY_MAX_S) }),
          MessageAttributeNames: ["All"],
          MessageSystemAttributeNames: ["All"],
        }),
      ),
    );
    const now = Date.now();
    const received = (answer.Messages ?? []).map((message) => {
      const attempt = Number(message.Attributes?.ApproximateReceiveCount ?? "1");
      const receipt = message.ReceiptHandle ?? "";
      const group = message.Attributes?.MessageGroupId;
      this.#remember(receipt, {
        queue,
        messageId: message.MessageId ?? "",
        body: message.Body ?? "",
        attributes: message.MessageAttributes ?? {},
        attempt,
        groupId: group,
        expiresAt: now + (leaseMs ?? 30_000) + 300_000,
      });
      const delivery: Delivery = {
        messageId: message.MessageId ?? "",
        receipt,
        body: parseBody(message.Body),
        id: message.MessageAttributes?.[ATTRIBUTE.id]?.StringValue,
        key: message.MessageAttributes?.[ATTRIBUTE.key]?.StringValue,
        attempt,
        enqueuedAt: Number(message.Attributes?.SentTimestamp ?? now),
        lastError: undefined,
        headers: headersOf(message),
      };
      return { group, delivery };
    });
    if (runs === undefined) return received.map(({ delivery }) => delivery);
    return [...out, ...runs.take(received)];
  }

  #runsOf(queue: string): GroupRuns<Delivery> {
    let runs = this.#runs.get(queue);
    if (runs === undefined) {
      runs = new GroupRuns();
      this.#runs.set(queue, runs);
    }
    return runs;
  }

  /** `receipt` comes back (a retry, a release): what waited behind it in its run goes back. */
  async #backOff(queue: string, receipt: string): Promise<void> {
    for (const waiting of this.#runs.get(queue)?.backOff(receipt) ?? []) {
      this.#leases.delete(waiting.receipt);
      await this.#setVisibility(queue, waiting.receipt, 0).catch(() => {});
    }
  }

  async ack(queue: string, receipt: string): Promise<void> {
    const meta = await this.#meta(queue);
    await this.#guard(
      this.client.send(new DeleteMessageCommand({ QueueUrl: meta.url, ReceiptHandle: receipt })),
    );
    this.#leases.delete(receipt);
    this.#runs.get(queue)?.done(receipt);
  }

  /** DeleteMessageBatch, ten receipts a request; a failed entry answers false. */
  async ackMany(queue: string, receipts: string[]): Promise<boolean[]> {
    const meta = await this.#meta(queue);
    const acked: boolean[] = [];
    for (let start = 0; start < receipts.length; start += SQS_BATCH_MAX) {
      const batch = receipts.slice(start, start + SQS_BATCH_MAX);
      const answer = await this.#guard(
        this.client.send(
          new DeleteMessageBatchCommand({
            QueueUrl: meta.url,
            Entries: batch.map((receipt, index) => ({ Id: String(index), ReceiptHandle: receipt })),
          }),
        ),
      );
      const failed = new Set((answer.Failed ?? []).map((entry) => entry.Id));
      batch.forEach((receipt, index) => {
        const ok = !failed.has(String(index));
        if (ok) {
          this.#leases.delete(receipt);
          this.#runs.get(queue)?.done(receipt);
        }
        acked.push(ok);
      });
    }
    return acked;
  }

  /** Refuses next steps: see {@link ackWithoutChaining}. */
  ackThen(queue: string, receipt: string, then: NextStep[], result?: unknown): Promise<Enqueued[]> {
    return ackWithoutChaining(this, queue, receipt, then, result);
  }

  async nack(queue: string, receipt: string, nack: Nack): Promise<NackOutcome> {
    const meta = await this.#meta(queue);
    const lease = this.#leases.get(receipt);
    const attempt = lease?.attempt ?? 1;
    const outOfAttempts = meta.maxAttempts > 0 && attempt >= meta.maxAttempts;
    const deadLetter = (nack.permanent || outOfAttempts) && meta.dlqUrl !== undefined;
    if (deadLetter && lease === undefined) {
      throw new SluiceError({
        status: 409,
        code: "stale_receipt",
        message: "this backend did not hand out that receipt (or forgot it): cannot dead-letter it",
      });
    }
    // The failure is reported to the server: sluice takes it as a nack (it retries or
    // dead-letters the message itself, with its error) and says which; another SQS server only
    // changes the visibility (a minute while the message is dead-lettered here, else the delay).
    const visibilityS = deadLetter
      ? 60
      : seconds(nack.delayMs ?? backoffDelay(this.#backoff, attempt), VISIBILITY_MAX_S);
    const outcome = await this.#reportFailure(meta.url, receipt, visibilityS, nack);
    if (outcome !== undefined) {
      this.#leases.delete(receipt);
      if (outcome === "dead-lettered") {
        this.#runs.get(queue)?.done(receipt);
        return "dead_lettered";
      }
      await this.#backOff(queue, receipt);
      return "retried";
    }
    if (deadLetter && lease !== undefined && meta.dlqUrl !== undefined) {
      await this.#guard(
        this.client.send(
          new SendMessageCommand({
            QueueUrl: meta.dlqUrl,
            MessageBody: lease.body,
            MessageAttributes: {
              ...lease.attributes,
              [ATTRIBUTE.error]: text(failureText(nack.error)),
              [ATTRIBUTE.attempts]: { DataType: "Number", StringValue: String(attempt) },
              [ATTRIBUTE.source]: text(queue),
            },
            ...(meta.fifo
              ? {
                  MessageGroupId: lease.groupId ?? lease.messageId,
                  MessageDeduplicationId: lease.messageId,
                }
              : {}),
          }),
        ),
      );
      await this.#guard(
        this.client.send(new DeleteMessageCommand({ QueueUrl: meta.url, ReceiptHandle: receipt })),
      );
      this.#leases.delete(receipt);
      this.#runs.get(queue)?.done(receipt);
      return "dead_lettered";
    }
    this.#leases.delete(receipt);
    await this.#backOff(queue, receipt);
    return "retried";
  }

  /**
   * `ChangeMessageVisibility` carrying the failure (`x-sluice-failure`, added before the request
   * is signed): sluice's answer names what it did (`x-sluice-outcome`); a server that does not
   * know the header answers with none, having only changed the visibility.
   */
  async #reportFailure(
    url: string,
    receipt: string,
    visibilityS: number,
    nack: Nack,
  ): Promise<string | undefined> {
    const command = new ChangeMessageVisibilityCommand({
      QueueUrl: url,
      ReceiptHandle: receipt,
      VisibilityTimeout: visibilityS,
    });
    let outcome: string | undefined;
    command.middlewareStack.add(
      (next) => async (args) => {
        const request = args.request as { headers?: Record<string, string> };
        if (request.headers !== undefined) {
          request.headers[FAILURE_HEADER] = encodeURIComponent(failureText(nack.error));
          if (nack.permanent) request.headers[PERMANENT_HEADER] = "true";
        }
        const result = await next(args);
        const response = result.response as { headers?: Record<string, string> };
        outcome = response.headers?.[OUTCOME_HEADER];
        return result;
      },
      { step: "build", name: "sluiceReportFailure" },
    );
    await this.#guard(this.client.send(command));
    return outcome;
  }

  async release(queue: string, receipt: string): Promise<void> {
    await this.#setVisibility(queue, receipt, 0);
    this.#leases.delete(receipt);
    await this.#backOff(queue, receipt);
  }

  /** `ChangeMessageVisibility`: the lease ends `visibilityS` seconds from now (0: now). */
  async #setVisibility(queue: string, receipt: string, visibilityS: number): Promise<void> {
    const meta = await this.#meta(queue);
    await this.#guard(
      this.client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: meta.url,
          ReceiptHandle: receipt,
          VisibilityTimeout: visibilityS,
        }),
      ),
    );
  }

  async extend(queue: string, receipt: string, leaseMs: number): Promise<void> {
    await this.#setVisibility(queue, receipt, Math.max(1, seconds(leaseMs, VISIBILITY_MAX_S)));
    const lease = this.#leases.get(receipt);
    if (lease !== undefined) lease.expiresAt = Date.now() + leaseMs + 300_000;
  }

  async stats(queue: string): Promise<QueueStats> {
    const meta = await this.#meta(queue);
    const counts = await this.#counts(meta.url);
    const dlq = meta.dlqUrl === undefined ? undefined : await this.#counts(meta.dlqUrl);
    return {
      ready: counts.ready,
      delayed: counts.delayed,
      inFlight: counts.inFlight,
      deadLettered: dlq === undefined ? null : dlq.ready + dlq.delayed + dlq.inFlight,
      paused: null,
    };
  }

  async setPaused(): Promise<void> {
    throw new UnsupportedError(this.kind, "pause", "SQS has no pause");
  }

  async cancel(): Promise<CancelResult> {
    throw new UnsupportedError(this.kind, "cancel", "SQS deletes only by receipt handle");
  }

  async get(): Promise<MessageInfo | undefined> {
    throw new UnsupportedError(this.kind, "get", "SQS cannot look a message up by id");
  }

  /** Polls the approximate counts (exact on sluice's SQS API) every 100 ms until all are 0. */
  async drain(queue: string, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + Math.max(0, timeoutMs);
    for (;;) {
      const stats = await this.stats(queue);
      if (stats.ready + (stats.delayed ?? 0) + (stats.inFlight ?? 0) === 0) return true;
      if (Date.now() >= deadline) return false;
      await realSleep(Math.min(100, Math.max(0, deadline - Date.now())));
    }
  }

  /**
   * Reads the dead-letter queue: receives what is there (bounded by `limit` and 100 rounds),
   * then gives every message back at once (a visibility change to 0), newest first.
   */
  async deadLetters(queue: string, limit = 100): Promise<DeadLetter[]> {
    const meta = await this.#meta(queue);
    if (meta.dlqUrl === undefined) return [];
    const seen: Message[] = [];
    for (let round = 0; round < 100 && seen.length < limit; round++) {
      const answer = await this.#guard(
        this.client.send(
          new ReceiveMessageCommand({
            QueueUrl: meta.dlqUrl,
            MaxNumberOfMessages: Math.min(10, limit - seen.length),
            VisibilityTimeout: 30,
            WaitTimeSeconds: 0,
            MessageAttributeNames: ["All"],
            MessageSystemAttributeNames: ["All"],
          }),
        ),
      );
      const messages = answer.Messages ?? [];
      if (messages.length === 0) break;
      seen.push(...messages);
    }
    for (let start = 0; start < seen.length; start += SQS_BATCH_MAX) {
      await this.#guard(
        this.client.send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: meta.dlqUrl,
            Entries: seen.slice(start, start + SQS_BATCH_MAX).map((message, index) => ({
              Id: String(index),
              ReceiptHandle: message.ReceiptHandle ?? "",
              VisibilityTimeout: 0,
            })),
          }),
        ),
      );
    }
    return seen
      .map((message) => ({
        messageId: message.MessageId ?? "",
        body: parseBody(message.Body),
        id: message.MessageAttributes?.[ATTRIBUTE.id]?.StringValue,
        error: message.MessageAttributes?.[ATTRIBUTE.error]?.StringValue,
        attempts: Number(
          message.MessageAttributes?.[ATTRIBUTE.attempts]?.StringValue ?? meta.maxAttempts,
        ),
        deadLetteredAt: Number(
          message.MessageAttributes?.[ATTRIBUTE.failedAt]?.StringValue ??
            message.Attributes?.SentTimestamp ??
            0,
        ),
      }))
      .sort((a, b) => b.deadLetteredAt - a.deadLetteredAt);
  }

  async deleteQueue(queue: string): Promise<void> {
    let meta: QueueMeta;
    try {
      meta = await this.#meta(queue);
    } catch (error) {
      if (error instanceof SluiceError && error.code === "queue_not_found") return;
      throw error;
    }
    this.#queues.delete(queue);
    // The source first: a dead-letter queue in use cannot be deleted.
    for (const url of [meta.url, meta.dlqUrl]) {
      if (url === undefined) continue;
      await this.#guard(this.client.send(new DeleteQueueCommand({ QueueUrl: url }))).catch(
        (error: unknown) => {
          if (!(error instanceof SluiceError && error.code === "queue_not_found")) throw error;
        },
      );
    }
  }

  async close(): Promise<void> {
    // What waited behind its group goes back now rather than when its lease runs out.
    for (const [queue, runs] of this.#runs) {
      for (const waiting of runs.takeAll()) {
        await this.#setVisibility(queue, waiting.receipt, 0).catch(() => {});
      }
    }
    this.client.destroy();
  }

  async queueExists(queue: string): Promise<boolean> {
    try {
      await this.#meta(queue);
      return true;
    } catch (error) {
      if (error instanceof SluiceError && error.code === "queue_not_found") return false;
      throw error;
    }
  }

  /** The queue's URLs and settings: from `ensureQueue`, else looked up once. */
  async #meta(queue: string): Promise<QueueMeta> {
    const known = this.#queues.get(queue);
    if (known !== undefined) return known;
    for (const fifo of [false, true]) {
      const name = fifo ? `${queue}.fifo` : queue;
      let url: string;
      try {
        url =
          (await this.#guard(this.client.send(new GetQueueUrlCommand({ QueueName: name }))))
            .QueueUrl ?? "";
      } catch (error) {
        if (error instanceof SluiceError && error.code === "queue_not_found") continue;
        throw error;
      }
      const redrive = await this.#attribute(url, "RedrivePolicy");
      let maxAttempts = 0;
      let dlqUrl: string | undefined;
      if (redrive !== "") {
        const policy = JSON.parse(redrive) as {
          deadLetterTargetArn: string;
          maxReceiveCount: number;
        };
        maxAttempts = Number(policy.maxReceiveCount);
        const dlqName = policy.deadLetterTargetArn.split(":").pop() ?? "";
        dlqUrl = (
          await this.#guard(this.client.send(new GetQueueUrlCommand({ QueueName: dlqName })))
        ).QueueUrl;
      }
      const meta = { url, dlqUrl, fifo, maxAttempts };
      this.#queues.set(queue, meta);
      return meta;
    }
    throw new SluiceError({
      status: 404,
      code: "queue_not_found",
      message: `queue ${JSON.stringify(queue)} does not exist`,
    });
  }

  async #create(name: string, attributes: Record<string, string>): Promise<string> {
    try {
      const answer = await this.#guard(
        this.client.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes })),
      );
      return answer.QueueUrl ?? "";
    } catch (error) {
      // It exists with other settings: use it as it is.
      if (error instanceof SluiceError && error.code === "conflict") {
        return (
          (await this.#guard(this.client.send(new GetQueueUrlCommand({ QueueName: name }))))
            .QueueUrl ?? ""
        );
      }
      throw error;
    }
  }

  async #attribute(url: string, name: "QueueArn" | "RedrivePolicy"): Promise<string> {
    const answer = await this.#guard(
      this.client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: [name] })),
    );
    return answer.Attributes?.[name] ?? "";
  }

  async #counts(url: string) {
    const answer = await this.#guard(
      this.client.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
          ],
        }),
      ),
    );
    const attributes = answer.Attributes ?? {};
    return {
      ready: Number(attributes.ApproximateNumberOfMessages ?? 0),
      inFlight: Number(attributes.ApproximateNumberOfMessagesNotVisible ?? 0),
      delayed: Number(attributes.ApproximateNumberOfMessagesDelayed ?? 0),
    };
  }

  #remember(receipt: string, lease: Lease): void {
    const now = Date.now();
    if (this.#leases.size >= LEASES_MAX) {
      for (const [key, old] of this.#leases) {
        if (old.expiresAt < now || this.#leases.size >= LEASES_MAX) this.#leases.delete(key);
        else break;
      }
    }
    this.#leases.set(receipt, lease);
  }

  /** Awaits an SQS call; SQS's errors become SluiceErrors by meaning. */
  async #guard<T>(call: Promise<T>, signal?: AbortSignal): Promise<T> {
    try {
      return await call;
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw sqsError(error);
    }
  }
}

function text(value: string): MessageAttributeValue {
  return { DataType: "String", StringValue: value };
}

/** Whole seconds, rounded up, within SQS's range. */
function seconds(ms: number, maxS: number, field?: string): number {
  const value = Math.ceil(Math.max(0, ms) / 1000);
  if (field !== undefined && value > maxS) {
    throw new SluiceError({
      status: 422,
      code: "invalid_field",
      message: `${field}: SQS takes at most ${maxS} s`,
    });
  }
  return Math.min(value, maxS);
}

function parseBody(body: string | undefined): unknown {
  if (body === undefined) return undefined;
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}

function headersOf(message: Message): Record<string, string> {
  const raw = message.MessageAttributes?.[ATTRIBUTE.headers]?.StringValue;
  if (raw === undefined) return {};
  try {
    return JSON.parse(raw) as Record<string, string>;
  } catch {
    return {};
  }
}

/** The access key and secret used against an endpoint when no AWS credentials are set. */
export const SLUICE_OPEN_CREDENTIALS = {
  accessKeyId: "sluice",
  secretAccessKey: "sluice",
} as const;

/**
 * With an `endpoint` (sluice's SQS API, or another SQS-compatible server), what the AWS SDK
 * would otherwise refuse to start without: a region (`us-east-1` unless the options or
 * `AWS_REGION`/`AWS_DEFAULT_REGION` give one; sluice does not check it) and, when neither the
 * options nor the environment (`AWS_ACCESS_KEY_ID`, `AWS_PROFILE`, a shared credentials file)
 * give credentials, {@link SLUICE_OPEN_CREDENTIALS}, which sluice accepts while its access
 * control is off. With tokens, pass `credentials: { accessKeyId: <token name>,
 * secretAccessKey: <token> }` (docs/sqs.md). Without an endpoint (AWS itself) nothing changes.
 */
function withSluiceDefaults(config: SQSClientConfig): SQSClientConfig {
  if (config.endpoint === undefined) return config;
  const env = process.env;
  const region = config.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? "us-east-1";
  const home = env.HOME ?? "";
  const sharedFile = env.AWS_SHARED_CREDENTIALS_FILE ?? (home ? `${home}/.aws/credentials` : "");
  const environmentHasCredentials =
    env.AWS_ACCESS_KEY_ID !== undefined ||
    env.AWS_PROFILE !== undefined ||
    env.AWS_CONTAINER_CREDENTIALS_FULL_URI !== undefined ||
    env.AWS_WEB_IDENTITY_TOKEN_FILE !== undefined ||
    (sharedFile !== "" && existsSync(sharedFile));
  const credentials =
    config.credentials ?? (environmentHasCredentials ? undefined : SLUICE_OPEN_CREDENTIALS);
  return { ...config, region, ...(credentials === undefined ? {} : { credentials }) };
}

/** An SQS error, by meaning. */
function sqsError(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  // The AWS SDK's own refusals to start: what is missing is the caller's to set, not the network.
  if (error.name === "CredentialsProviderError" || /^Region is missing/.test(error.message)) {
    return new SluiceError({
      status: 0,
      code: "configuration",
      message: `${error.message}: pass region and credentials to SqsBackend, or set AWS_REGION and AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (docs/sqs.md)`,
      cause: error,
    });
  }
  const meta = (error as { $metadata?: { httpStatusCode?: number } }).$metadata;
  const status = meta?.httpStatusCode ?? 0;
  const name = error.name;
  const message = error.message;
  let code: string;
  let mapped = status;
  if (name === "QueueDoesNotExist" || name === "AWS.SimpleQueueService.NonExistentQueue") {
    code = "queue_not_found";
    mapped = 404;
  } else if (
    name === "ReceiptHandleIsInvalid" ||
    /receipt handle has expired|not available for visibility timeout change/i.test(message)
  ) {
    code = "stale_receipt";
    mapped = 409;
  } else if (name === "QueueNameExists" || name === "QueueAlreadyExists") {
    code = "conflict";
    mapped = 409;
  } else if (name === "RequestThrottled" || name === "ThrottlingException") {
    code = "overloaded";
    mapped = 503;
  } else if (status >= 500) {
    code = "unavailable";
  } else if (status === 0) {
    code = "unreachable";
  } else {
    code = "invalid_field";
    mapped = status === 400 ? 422 : status;
  }
  return new SluiceError({ status: mapped, code, message: `${name}: ${message}`, cause: error });
}
