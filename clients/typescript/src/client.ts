/**
 * {@link SluiceClient}: the typed HTTP client of the whole native API (docs/http-api.md), one
 * method per route. It speaks the server's JSON shapes ({@link "wire"}) as they are; the
 * queue-level seam ({@link SluiceBackend}) and the worker are built on it.
 *
 * @module
 */
import { SluiceError } from "./errors.js";
import {
  type Answer,
  NoAnswer,
  type Transport,
  fetchTransport,
  nodeTransport,
} from "./transport.js";
import type * as wire from "./wire.js";

/** The server the client talks to when neither `url` nor `SLUICE_URL` says otherwise. */
export const DEFAULT_URL = "http://127.0.0.1:7566";

/** Options of {@link SluiceClient}. */
export interface ClientOptions {
  /** Base URL of the server. Default: env `SLUICE_URL`, else `http://127.0.0.1:7566`. */
  url?: string;
  /**
   * Sent as `Authorization: Bearer <token>` (needed when the server's access control is on).
   * Default: env `SLUICE_TOKEN` when set and not empty. Never shown in errors.
   */
  token?: string;
  /**
   * How long a request may take before it fails with code `timeout`, in ms (default 30000).
   * Long polls (receive, drain) get their own wait on top.
   */
  timeoutMs?: number;
  /**
   * Send requests with this `fetch` (default: `node:http`/`node:https` with keep-alive
   * connections, which cost less per request than the global `fetch`).
   */
  fetch?: typeof fetch;
  /** Headers added to every request. */
  headers?: Record<string, string>;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the request (the promise rejects with the signal's reason). */
  signal?: AbortSignal;
}

/** `POST /v1/queues/{queue}/cancel`: by message id or by idempotency id, exactly one. */
export type CancelTarget =
  | { messageId: string; id?: undefined; reason?: string }
  | { id: string; messageId?: undefined; reason?: string };

/** Filters of a dead-letter listing. */
export interface DeadLetterQuery {
  /** 1..=1000, default 50. */
  limit?: number;
  /** `next_cursor` of the previous page. */
  cursor?: string;
  /** Case-insensitive substring of the last error. */
  error?: string;
  /** RFC 3339, inclusive bound on the dead-letter time. */
  since?: string;
  /** RFC 3339, exclusive bound on the dead-letter time. */
  until?: string;
}

/**
 * What a browse lists. The search fields (`messageId`, `id`, `key`, `since`, `until`) search the
 * acked messages a queue with `keep_acked_ms` keeps: they need `state: "acked"` (the server
 * refuses them with another state, `invalid_field`), and each one given must hold.
 */
export interface BrowseQuery {
  /** `acked`: the kept acked messages, newest ack first. */
  state: "ready" | "waiting" | "delayed" | "in_flight" | "acked";
  /** 1..=1000, default 50. */
  limit?: number;
  /** `next_cursor` of the previous page. */
  cursor?: string;
  /** 0..=1024: a body preview of this many bytes per message. */
  previewBytes?: number;
  /** Acked only: this message (its server id). */
  messageId?: string;
  /** Acked only: messages sent with this idempotency key. */
  id?: string;
  /** Acked only: messages sent with this ordering key. */
  key?: string;
  /** Acked only, RFC 3339: acked at or after this time. */
  since?: string;
  /** Acked only, RFC 3339: acked before this time. */
  until?: string;
}

type Method = "GET" | "PUT" | "POST" | "DELETE";

function env(name: string): string | undefined {
  const value = globalThis.process?.env?.[name];
  return value === undefined || value === "" ? undefined : value;
}

/**
 * A sluice server, over HTTP. Every method resolves with the server's answer or rejects with a
 * {@link SluiceError} (status, stable code, message, details, `retryAfter`).
 *
 * ```ts
 * const client = new SluiceClient(); // SLUICE_URL / SLUICE_TOKEN, else http://127.0.0.1:7566
 * await client.putQueue("orders", { max_attempts: 3 });
 * await client.enqueue("orders", { id: "order-1", body: { total: 42 } });
 * ```
 */
export class SluiceClient {
  /** The base URL, without a trailing slash. */
  readonly url: string;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #transport: Transport;
  readonly #headers: Record<string, string>;

  constructor(options: ClientOptions = {}) {
    this.url = (options.url ?? env("SLUICE_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    this.#token = options.token ?? env("SLUICE_TOKEN");
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#transport = options.fetch ? fetchTransport(options.fetch) : nodeTransport();
    this.#headers = options.headers ?? {};
  }

  // Health and description.

  /** `GET /healthz`: 200 while the process runs. */
  health(options?: CallOptions): Promise<wire.HealthOut> {
    return this.#call("GET", "/healthz", undefined, options);
  }

  /** `GET /readyz`: rejects with status 503 while the store refuses new messages. */
  ready(options?: CallOptions): Promise<wire.HealthOut> {
    return this.#call("GET", "/readyz", undefined, options);
  }

  /** `GET /v1/openapi.json`: the server's OpenAPI 3.1 document. */
  openapi(options?: CallOptions): Promise<Record<string, unknown>> {
    return this.#call("GET", "/v1/openapi.json", undefined, options);
  }

  // Queues.

  /** `GET /v1/queues`. */
  listQueues(options?: CallOptions): Promise<wire.QueueListOut> {
    return this.#call("GET", "/v1/queues", undefined, options);
  }

  /** `GET /v1/queues/{queue}`. */
  getQueue(queue: string, options?: CallOptions): Promise<wire.QueueOut> {
    return this.#call("GET", q(queue), undefined, options);
  }

  /** `PUT /v1/queues/{queue}`: creates the queue (and its DLQ) or updates the fields given. */
  putQueue(queue: string, spec: wire.QueueSpec = {}, options?: CallOptions) {
    return this.#call<wire.QueuePutOut>("PUT", q(queue), spec, options);
  }

  /**
   * `DELETE /v1/queues/{queue}`: the queue, and its dead-letter queue with its dead letters
   * unless `deadLetters` is `"keep"` or another queue dead-letters into it.
   */
  deleteQueue(
    queue: string,
    options?: CallOptions & { deadLetters?: "delete" | "keep" },
  ): Promise<wire.QueueDeleteOut> {
    const query = search({ dead_letters: options?.deadLetters });
    return this.#call("DELETE", `${q(queue)}${query}`, undefined, options);
  }

  /** `GET /v1/queues/{queue}/stats`. */
  stats(queue: string, options?: CallOptions): Promise<wire.QueueStatsOut> {
    return this.#call("GET", `${q(queue)}/stats`, undefined, options);
  }

  /** `POST /v1/queues/{queue}/pause`: enqueues are stored, nothing is delivered. */
  pause(queue: string, options?: CallOptions): Promise<wire.QueueOut> {
    return this.#call("POST", `${q(queue)}/pause`, {}, options);
  }

  /** `POST /v1/queues/{queue}/resume`. */
  resume(queue: string, options?: CallOptions): Promise<wire.QueueOut> {
    return this.#call("POST", `${q(queue)}/resume`, {}, options);
  }

  /** `POST /v1/queues/{queue}/push/pause` (admin): stop calling the push destination. */
  pausePush(queue: string, options?: CallOptions): Promise<wire.QueueOut> {
    return this.#call("POST", `${q(queue)}/push/pause`, {}, options);
  }

  /** `POST /v1/queues/{queue}/push/resume` (admin). */
  resumePush(queue: string, options?: CallOptions): Promise<wire.QueueOut> {
    return this.#call("POST", `${q(queue)}/push/resume`, {}, options);
  }

  /** `POST /v1/queues/{queue}/purge`: removes every ready and delayed message. */
  purge(queue: string, options?: CallOptions): Promise<wire.PurgeOut> {
    return this.#call("POST", `${q(queue)}/purge`, {}, options);
  }

  /**
   * `POST /v1/queues/{queue}/drain`: waits until the queue holds no ready, delayed or in-flight
   * message, or `timeoutMs` (0..=900000, default 30000).
   */
  drain(queue: string, timeoutMs = 30_000, options?: CallOptions): Promise<wire.DrainOut> {
    return this.#call("POST", `${q(queue)}/drain`, { timeout_ms: timeoutMs }, options, timeoutMs);
  }

  /** `POST /v1/queues/{queue}/cancel`: removes a message that is ready or delayed. */
  cancel(queue: string, target: CancelTarget, options?: CallOptions): Promise<wire.CancelOut> {
    const body: wire.CancelIn =
      target.messageId !== undefined ? { message_id: target.messageId } : { id: target.id };
    if (target.reason !== undefined) body.reason = target.reason;
    return this.#call("POST", `${q(queue)}/cancel`, body, options);
  }

  // Messages.

  /** `POST /v1/queues/{queue}/messages` with one message; resolves once it is on disk. */
  enqueue(queue: string, message: wire.MessageIn, options?: CallOptions): Promise<wire.EnqueueOut> {
    return this.#call("POST", `${q(queue)}/messages`, message, options);
  }

  /** `POST /v1/queues/{queue}/messages` with a batch (1..=1000), stored whole or refused whole. */
  enqueueBatch(
    queue: string,
    messages: wire.MessageIn[],
    options?: CallOptions,
  ): Promise<wire.EnqueueBatchOut> {
    return this.#call("POST", `${q(queue)}/messages`, { messages }, options);
  }

  /** `GET /v1/queues/{queue}/messages/{message_id}`. */
  getMessage(queue: string, messageId: string, options?: CallOptions) {
    return this.#call<wire.MessageStatusOut>(
      "GET",
      `${q(queue)}/messages/${enc(messageId)}`,
      undefined,
      options,
    );
  }

  /** `GET /v1/queues/{queue}/messages?id=`: by idempotency id, within the dedup window. */
  getMessageByIdempotencyId(queue: string, id: string, options?: CallOptions) {
    return this.#call<wire.MessageStatusOut>(
      "GET",
      `${q(queue)}/messages?id=${enc(id)}`,
      undefined,
      options,
    );
  }

  /** `GET /v1/queues/{queue}/messages/{message_id}/body`. */
  getMessageBody(queue: string, messageId: string, options?: CallOptions) {
    return this.#call<wire.MessageBodyOut>(
      "GET",
      `${q(queue)}/messages/${enc(messageId)}/body`,
      undefined,
      options,
    );
  }

  /** `GET /v1/queues/{queue}/messages/{message_id}/deliveries`: the push delivery log. */
  getDeliveries(queue: string, messageId: string, options?: CallOptions) {
    return this.#call<wire.DeliveriesOut>(
      "GET",
      `${q(queue)}/messages/${enc(messageId)}/deliveries`,
      undefined,
      options,
    );
  }

  // Delivery.

  /**
   * `POST /v1/queues/{queue}/receive`: leases up to `max` (1..=100) messages, waiting up to
   * `wait_ms` (0..=20000) for the first.
   */
  receive(queue: string, request: wire.ReceiveIn = {}, options?: CallOptions) {
    return this.#call<wire.ReceiveOut>(
      "POST",
      `${q(queue)}/receive`,
      request,
      options,
      request.wait_ms ?? 0,
    );
  }

  /**
   * `POST /v1/queues/{queue}/ack`. A stale receipt rejects with `stale_receipt` (409) and the
   * per-receipt results in `details`; the current ones are acked all the same. `result` (any
   * JSON) is kept for duplicate enqueues of the same idempotency id (single receipt only).
   */
  ack(queue: string, receipts: string | string[], result?: unknown, options?: CallOptions) {
    const body: wire.AckIn = typeof receipts === "string" ? { receipt: receipts } : { receipts };
    if (result !== undefined) body.result = result;
    return this.#call<wire.AckOut>("POST", `${q(queue)}/ack`, body, options);
  }

  /**
   * `POST /v1/queues/{queue}/ack` with next steps (`then`, at most 100): each is enqueued to its
   * queue in the same commit as the ack, so both happen or neither. The answer's `then` holds
   * each step's enqueue result, in order. A stale receipt rejects with `stale_receipt` (409) and
   * enqueues nothing; a step the server refuses (`queue_not_found`, `queue_full`,
   * `invalid_field` naming `then[i]`, `forbidden`) rejects the whole ack.
   */
  ackThen(
    queue: string,
    receipt: string,
    then: wire.NextStepIn[],
    result?: unknown,
    options?: CallOptions,
  ) {
    const body: wire.AckIn = { receipt, then };
    if (result !== undefined) body.result = result;
    return this.#call<wire.AckOut>("POST", `${q(queue)}/ack`, body, options);
  }

  /** `POST /v1/queues/{queue}/nack`: the attempt failed (retried, or dead-lettered). */
  nack(queue: string, request: wire.NackIn, options?: CallOptions): Promise<wire.NackOut> {
    return this.#call("POST", `${q(queue)}/nack`, request, options);
  }

  /**
   * `POST /v1/queues/{queue}/extend`: the lease now ends `visibilityTimeoutMs` from now; 0
   * releases the message, and with `unstarted` its delivery is not counted either.
   */
  extend(
    queue: string,
    receipt: string,
    visibilityTimeoutMs: number,
    options?: CallOptions & { unstarted?: boolean },
  ) {
    const body: wire.ExtendIn = {
      receipt,
      visibility_timeout_ms: visibilityTimeoutMs,
      ...(options?.unstarted ? { unstarted: true } : {}),
    };
    return this.#call<wire.ExtendOut>("POST", `${q(queue)}/extend`, body, options);
  }

  // Dead letters.

  /** `GET /v1/queues/{queue}/dlq`: the queue's dead letters, newest first, one page. */
  listDeadLetters(queue: string, query: DeadLetterQuery = {}, options?: CallOptions) {
    return this.#call<wire.DeadLetterListOut>(
      "GET",
      `${q(queue)}/dlq${search({ ...query })}`,
      undefined,
      options,
    );
  }

  /** `GET /v1/queues/{queue}/dlq/{message_id}`: one dead letter in full. */
  getDeadLetter(queue: string, messageId: string, options?: CallOptions) {
    return this.#call<wire.DeadLetterEntryOut>(
      "GET",
      `${q(queue)}/dlq/${enc(messageId)}`,
      undefined,
      options,
    );
  }

  /** `DELETE /v1/queues/{queue}/dlq/{message_id}`. */
  deleteDeadLetter(queue: string, messageId: string, options?: CallOptions) {
    return this.#call<wire.DeadLetterDeleteOut>(
      "DELETE",
      `${q(queue)}/dlq/${enc(messageId)}`,
      undefined,
      options,
    );
  }

  /** `DELETE /v1/queues/{queue}/dlq`: purges every dead letter of the queue. */
  purgeDeadLetters(queue: string, options?: CallOptions): Promise<wire.DeadLetterDeleteOut> {
    return this.#call("DELETE", `${q(queue)}/dlq`, undefined, options);
  }

  /** `POST /v1/queues/{queue}/dlq/{message_id}/replay`: back as a fresh message. */
  replayDeadLetter(
    queue: string,
    messageId: string,
    request: wire.ReplayOneIn = {},
    options?: CallOptions,
  ): Promise<wire.ReplayOut> {
    return this.#call("POST", `${q(queue)}/dlq/${enc(messageId)}/replay`, request, options);
  }

  /** `POST /v1/queues/{queue}/dlq/replay`: by ids or filters; call again while `more`. */
  replayDeadLetters(queue: string, request: wire.ReplayIn, options?: CallOptions) {
    return this.#call<wire.ReplayOut>("POST", `${q(queue)}/dlq/replay`, request, options);
  }

  // Browsing and history (the dashboard's reads).

  /**
   * `GET /v1/queues/{queue}/browse`: one page of a state's messages in dispatch order, or of the
   * acked messages the queue keeps (`state: "acked"`, newest ack first, searchable).
   */
  browse(queue: string, query: BrowseQuery, options?: CallOptions): Promise<wire.BrowseOut> {
    const params = {
      state: query.state,
      limit: query.limit,
      cursor: query.cursor,
      preview_bytes: query.previewBytes,
      message_id: query.messageId,
      id: query.id,
      key: query.key,
      since: query.since,
      until: query.until,
    };
    return this.#call("GET", `${q(queue)}/browse${search(params)}`, undefined, options);
  }

  /** `GET /v1/history`: every queue's sampled depth and rates. */
  history(sinceMs?: number, options?: CallOptions): Promise<wire.HistoryOut> {
    return this.#call("GET", `/v1/history${search({ since_ms: sinceMs })}`, undefined, options);
  }

  /** `GET /v1/queues/{queue}/history`. */
  queueHistory(queue: string, sinceMs?: number, options?: CallOptions) {
    return this.#call<wire.QueueHistoryOnlyOut>(
      "GET",
      `${q(queue)}/history${search({ since_ms: sinceMs })}`,
      undefined,
      options,
    );
  }

  // Webhook endpoints.

  /** `GET /v1/webhooks`. */
  listWebhooks(options?: CallOptions): Promise<wire.WebhookListOut> {
    return this.#call("GET", "/v1/webhooks", undefined, options);
  }

  /** `GET /v1/webhooks/{name}`. */
  getWebhook(name: string, options?: CallOptions): Promise<wire.WebhookOut> {
    return this.#call("GET", `/v1/webhooks/${enc(name)}`, undefined, options);
  }

  /** `PUT /v1/webhooks/{name}`. */
  putWebhook(name: string, spec: wire.WebhookSpec, options?: CallOptions) {
    return this.#call<wire.WebhookPutOut>("PUT", `/v1/webhooks/${enc(name)}`, spec, options);
  }

  /** `DELETE /v1/webhooks/{name}`. */
  deleteWebhook(name: string, options?: CallOptions): Promise<wire.WebhookDeleteOut> {
    return this.#call("DELETE", `/v1/webhooks/${enc(name)}`, undefined, options);
  }

  // Schedules (admin).

  /** `GET /v1/schedules`: every schedule, by name. */
  listSchedules(options?: CallOptions): Promise<wire.ScheduleListOut> {
    return this.#call("GET", "/v1/schedules", undefined, options);
  }

  /** `GET /v1/schedules/{name}`: the definition, the next run and the last. */
  getSchedule(name: string, options?: CallOptions): Promise<wire.ScheduleOut> {
    return this.#call("GET", schedulePath(name), undefined, options);
  }

  /**
   * `PUT /v1/schedules/{name}`: defines or replaces a schedule. Each run enqueues `spec.message`
   * into `spec.queue` (which must exist), every `every_ms` or by `cron`.
   */
  putSchedule(name: string, spec: wire.ScheduleSpec, options?: CallOptions) {
    return this.#call<wire.SchedulePutOut>("PUT", schedulePath(name), spec, options);
  }

  /** `POST /v1/schedules/{name}/pause`: no runs until resumed (the runs passed are not missed). */
  pauseSchedule(name: string, options?: CallOptions): Promise<wire.ScheduleOut> {
    return this.#call("POST", `${schedulePath(name)}/pause`, {}, options);
  }

  /** `POST /v1/schedules/{name}/resume`. */
  resumeSchedule(name: string, options?: CallOptions): Promise<wire.ScheduleOut> {
    return this.#call("POST", `${schedulePath(name)}/resume`, {}, options);
  }

  /** `DELETE /v1/schedules/{name}`: no run is made after it answers. */
  deleteSchedule(name: string, options?: CallOptions): Promise<wire.ScheduleDeleteOut> {
    return this.#call("DELETE", schedulePath(name), undefined, options);
  }

  // Topics (admin; publishing needs a token that may produce to every subscribed queue).

  /** `GET /v1/topics`: every topic, by name, with its counts. */
  listTopics(options?: CallOptions): Promise<wire.TopicListOut> {
    return this.#call("GET", "/v1/topics", undefined, options);
  }

  /** `GET /v1/topics/{name}`: the definition and its counts since the server started. */
  getTopic(name: string, options?: CallOptions): Promise<wire.TopicOut> {
    return this.#call("GET", topicPath(name), undefined, options);
  }

  /**
   * `PUT /v1/topics/{name}`: defines or replaces a topic (a replaced topic's counts start
   * again). Each subscription's queue must exist; its `filter` is a jq expression over
   * `{body, headers, key, priority}` (without one, the queue takes every message).
   */
  putTopic(name: string, spec: wire.TopicSpec, options?: CallOptions) {
    return this.#call<wire.TopicPutOut>("PUT", topicPath(name), spec, options);
  }

  /** `DELETE /v1/topics/{name}`: the topic goes; its queues and their messages stay. */
  deleteTopic(name: string, options?: CallOptions): Promise<wire.TopicDeleteOut> {
    return this.#call("DELETE", topicPath(name), undefined, options);
  }

  /**
   * `POST /v1/topics/{name}/messages`: one copy of the message in each subscribed queue whose
   * filter takes it, all stored in one commit before it resolves (or none, on any refusal).
   * `copies` lists them in the topic's order (empty when no filter took the message); an `id`
   * (idempotency key) published again answers the first copies with `created: false`.
   */
  publish(topic: string, message: wire.MessageIn, options?: CallOptions) {
    return this.#call<wire.TopicPublishOut>(
      "POST",
      `${topicPath(topic)}/messages`,
      message,
      options,
    );
  }

  // Alerts (admin). Notifications are messages in each alert's queue, `sluice.alerts.<name>`
  // (their bodies are `wire.AlertEventOut`), pushed to its destination when it has one.

  /** `GET /v1/alerts`: every alert, by name, with what it sent and its delivery queue's stats. */
  listAlerts(options?: CallOptions): Promise<wire.AlertListOut> {
    return this.#call("GET", "/v1/alerts", undefined, options);
  }

  /** `GET /v1/alerts/{name}`: the definition, what it sent, and its deliveries. */
  getAlert(name: string, options?: CallOptions): Promise<wire.AlertOut> {
    return this.#call("GET", alertPath(name), undefined, options);
  }

  /**
   * `PUT /v1/alerts/{name}`: defines or replaces an alert and its queue (`sluice.alerts.<name>`,
   * whose push destination is the alert's `destination`: a Slack or webhook URL, or none for a
   * consumer of its own). A `destination.command` is refused (422 `invalid_field`): only the
   * config file may name one.
   */
  putAlert(name: string, spec: wire.AlertSpec, options?: CallOptions) {
    return this.#call<wire.AlertPutOut>("PUT", alertPath(name), spec, options);
  }

  /**
   * `DELETE /v1/alerts/{name}`: the alert, its progress and its queue (notifications not yet
   * delivered go with it).
   */
  deleteAlert(name: string, options?: CallOptions): Promise<wire.AlertDeleteOut> {
    return this.#call("DELETE", alertPath(name), undefined, options);
  }

  /**
   * One request. `longPollMs` is added to the timeout, so a long poll is not cut short by it.
   * Every failure becomes a {@link SluiceError}: an answer by its JSON error body, no answer
   * with status 0 and code `network` or `timeout`.
   */
  async #call<T>(
    method: Method,
    path: string,
    body: unknown,
    options: CallOptions | undefined,
    longPollMs = 0,
  ): Promise<T> {
    const headers: Record<string, string> = { accept: "application/json", ...this.#headers };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.#token !== undefined) headers.authorization = `Bearer ${this.#token}`;
    let answer: Answer;
    try {
      answer = await this.#transport(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: options?.signal,
        timeoutMs: this.#timeoutMs + longPollMs,
      });
    } catch (cause) {
      if (!(cause instanceof NoAnswer)) throw cause;
      throw new SluiceError({
        status: 0,
        code: cause.timedOut ? "timeout" : "unreachable",
        message: cause.timedOut
          ? `${method} ${path}: no answer within ${this.#timeoutMs + longPollMs} ms`
          : `${method} ${path}: ${cause.message}`,
        cause: cause.cause,
      });
    }
    if (answer.status >= 200 && answer.status < 300) {
      return (answer.text === "" ? {} : JSON.parse(answer.text)) as T;
    }
    throw errorFrom(answer);
  }
}

/** The error an answer that is not 2xx means. */
function errorFrom(answer: Answer): SluiceError {
  const { status, text } = answer;
  const retryAfterHeader = answer.header("retry-after");
  const retryAfter =
    retryAfterHeader !== null && /^\d+$/.test(retryAfterHeader.trim())
      ? Number(retryAfterHeader)
      : undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const error =
    typeof parsed === "object" && parsed !== null && "error" in parsed
      ? (parsed as { error: { code?: unknown; message?: unknown; details?: unknown } }).error
      : undefined;
  return new SluiceError({
    status,
    code: typeof error?.code === "string" ? error.code : `http_${status}`,
    message:
      typeof error?.message === "string" ? error.message : `HTTP ${status}: ${text.slice(0, 200)}`,
    details: error?.details,
    retryAfter,
  });
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
}

function q(queue: string): string {
  return `/v1/queues/${enc(queue)}`;
}

function schedulePath(name: string): string {
  return `/v1/schedules/${enc(name)}`;
}

function topicPath(name: string): string {
  return `/v1/topics/${enc(name)}`;
}

function alertPath(name: string): string {
  return `/v1/alerts/${enc(name)}`;
}

function search(params: Record<string, string | number | undefined>): string {
  const entries = Object.entries(params).filter(
    (entry): entry is [string, string | number] => entry[1] !== undefined,
  );
  if (entries.length === 0) return "";
  return `?${new URLSearchParams(entries.map(([k, v]): [string, string] => [k, String(v)])).toString()}`;
}
