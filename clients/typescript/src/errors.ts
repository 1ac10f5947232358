/**
 * Errors by meaning, whatever the backend: the server's JSON errors become {@link SluiceError}
 * with the server's stable `code`; an operation a backend cannot do throws
 * {@link UnsupportedError} instead of silently doing nothing.
 *
 * @module
 */

/**
 * Every stable error code the sluice server sends (docs/http-api.md, "Errors"). A newer server
 * may send a code this list does not have: {@link SluiceError.code} is then the text as sent,
 * and callers should decide by {@link SluiceError.status}.
 */
export type ErrorCode =
  | "malformed_json"
  | "malformed_receipt"
  | "malformed_query"
  | "malformed_path"
  | "unauthorized"
  | "missing_header"
  | "malformed_signature"
  | "signature_mismatch"
  | "timestamp_out_of_tolerance"
  | "body_hash_mismatch"
  | "forbidden"
  | "cross_site_request"
  | "queue_not_found"
  | "message_not_found"
  | "not_found"
  | "webhook_not_found"
  | "schedule_not_found"
  | "topic_not_found"
  | "alert_not_found"
  | "method_not_allowed"
  | "request_timeout"
  | "stale_receipt"
  | "conflict"
  | "no_push_destination"
  | "too_large"
  | "unsupported_media_type"
  | "unknown_host"
  | "invalid_field"
  | "schema_violation"
  | "internal"
  | "unavailable"
  | "overloaded"
  | "queue_full"
  | "storage_failed"
  | "disk_full"
  // What the SDK itself reports when no answer came, with status 0 (the same codes as the
  // Python SDK; docs/http-api.md, "Errors the clients add"): no connection, or it broke
  // (`unreachable`), or no answer within the timeout (`timeout`).
  | "unreachable"
  | "timeout"
  // A backend that cannot start as configured (SQS without a region or credentials): status 0.
  | "configuration";

/** What {@link SluiceError} is built from. */
export interface SluiceErrorInit {
  status: number;
  code: ErrorCode | (string & {});
  message: string;
  details?: unknown;
  retryAfter?: number | undefined;
  cause?: unknown;
}

/**
 * An error the server answered (or, with `status` 0, a request that got no answer). The memory,
 * SQS and RabbitMQ backends report the same meanings with the same codes (`queue_not_found`,
 * `stale_receipt`, `invalid_field`, ...), so code that handles errors works on every backend.
 */
export class SluiceError extends Error {
  override readonly name = "SluiceError";
  /** HTTP status (0 when no answer came). */
  readonly status: number;
  /** The server's stable code, e.g. `queue_full` or `stale_receipt`. */
  readonly code: ErrorCode | (string & {});
  /** What the server added: a refused batch's counts, schema violations, per-receipt results. */
  readonly details: unknown;
  /** Seconds to wait before trying again (from `Retry-After`), when the server said. */
  readonly retryAfter: number | undefined;

  constructor(init: SluiceErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.retryAfter = init.retryAfter;
  }

  /**
   * True for a failure that may pass when tried again: 5xx, 408, 429 and no answer at all (but
   * not a backend that cannot start as configured: trying again changes nothing).
   */
  get isTransient(): boolean {
    if (this.code === "configuration") return false;
    return this.status === 0 || this.status === 408 || this.status === 429 || this.status >= 500;
  }
}

/** The operations a backend may be unable to do; see {@link Capabilities}. */
export type Operation =
  | "extend"
  | "pause"
  | "cancel"
  | "perKey"
  | "ordered"
  | "dedup"
  | "delays"
  | "drain"
  | "get"
  | "inFlightStats"
  | "priority"
  | "chaining";

/**
 * A backend cannot do what was asked (e.g. `extend` on RabbitMQ, `pause` on SQS). Thrown
 * instead of a silent no-op; the backend's `capabilities` say the same in advance.
 */
export class UnsupportedError extends Error {
  override readonly name = "UnsupportedError";
  /** The backend's name: `sluice`, `memory`, `sqs` or `rabbitmq`. */
  readonly backend: string;
  /** What it cannot do. */
  readonly operation: Operation;

  constructor(backend: string, operation: Operation, why: string) {
    super(`${backend} cannot ${operation}: ${why}`);
    this.backend = backend;
    this.operation = operation;
  }
}

/** The lease behind a receipt is gone (expired and handed out again, or already settled). */
export function isStaleReceipt(error: unknown): boolean {
  return error instanceof SluiceError && error.code === "stale_receipt";
}
