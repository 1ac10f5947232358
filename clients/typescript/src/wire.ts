/**
 * The server's JSON shapes, by the names its OpenAPI document gives them. Generated from
 * `GET /v1/openapi.json` into `generated/openapi.ts` (`npm run gen:openapi`); this module only
 * names them, so the rest of the SDK never spells `components["schemas"]`.
 *
 * @module
 */
import type { components } from "./generated/openapi.js";

type Schemas = components["schemas"];

export type QueueSpec = Schemas["QueueSpec"];
export type QueueOut = Schemas["QueueOut"];
export type QueuePutOut = Schemas["QueuePutOut"];
export type QueueListOut = Schemas["QueueListOut"];
export type QueueDeleteOut = Schemas["QueueDeleteOut"];
export type QueueStatsOut = Schemas["QueueStatsOut"];
export type QueueConfigOut = Schemas["QueueConfigOut"];
export type BackoffSpec = Schemas["BackoffSpec"];
export type RateLimitSpec = Schemas["RateLimitSpec"];
export type PushSpec = Schemas["PushSpec"];
export type MessageIn = Schemas["MessageIn"];
export type EnqueueOut = Schemas["EnqueueOut"];
export type EnqueueBatchOut = Schemas["EnqueueBatchOut"];
export type ReceiveIn = Schemas["ReceiveIn"];
export type ReceiveOut = Schemas["ReceiveOut"];
export type ReceivedMessage = Schemas["ReceivedMessage"];
export type AckIn = Schemas["AckIn"];
export type AckOut = Schemas["AckOut"];
export type NextStepIn = Schemas["NextStepIn"];
export type NackIn = Schemas["NackIn"];
export type NackOut = Schemas["NackOut"];
export type ExtendIn = Schemas["ExtendIn"];
export type ExtendOut = Schemas["ExtendOut"];
export type CancelIn = Schemas["CancelIn"];
export type CancelOut = Schemas["CancelOut"];
export type DrainOut = Schemas["DrainOut"];
export type PurgeOut = Schemas["PurgeOut"];
export type MessageStatusOut = Schemas["MessageStatusOut"];
export type MessageBodyOut = Schemas["MessageBodyOut"];
export type DeliveriesOut = Schemas["DeliveriesOut"];
export type DeadLetterListOut = Schemas["DeadLetterListOut"];
export type DeadLetterEntryOut = Schemas["DeadLetterEntryOut"];
export type DeadLetterDeleteOut = Schemas["DeadLetterDeleteOut"];
export type ReplayIn = Schemas["ReplayIn"];
export type ReplayOneIn = Schemas["ReplayOneIn"];
export type ReplayOut = Schemas["ReplayOut"];
export type ReplayedOut = Schemas["ReplayedOut"];
export type BrowseOut = Schemas["BrowseOut"];
export type HistoryOut = Schemas["HistoryOut"];
export type QueueHistoryOnlyOut = Schemas["QueueHistoryOnlyOut"];
export type WebhookSpec = Schemas["WebhookSpec"];
export type WebhookOut = Schemas["WebhookOut"];
export type WebhookPutOut = Schemas["WebhookPutOut"];
export type WebhookListOut = Schemas["WebhookListOut"];
export type WebhookDeleteOut = Schemas["WebhookDeleteOut"];
export type ScheduleSpec = Schemas["ScheduleSpec"];
export type ScheduleMessage = Schemas["ScheduleMessage"];
export type MissedRuns = Schemas["MissedRuns"];
export type ScheduleOut = Schemas["ScheduleOut"];
export type SchedulePutOut = Schemas["SchedulePutOut"];
export type ScheduleListOut = Schemas["ScheduleListOut"];
export type ScheduleDeleteOut = Schemas["ScheduleDeleteOut"];
export type TopicSpec = Schemas["TopicSpec"];
export type SubscriptionSpec = Schemas["SubscriptionSpec"];
export type TopicOut = Schemas["TopicOut"];
export type TopicStatsOut = Schemas["TopicStatsOut"];
export type TopicPutOut = Schemas["TopicPutOut"];
export type TopicListOut = Schemas["TopicListOut"];
export type TopicDeleteOut = Schemas["TopicDeleteOut"];
export type TopicPublishOut = Schemas["TopicPublishOut"];
export type TopicCopyOut = Schemas["TopicCopyOut"];
export type AlertSpec = Schemas["AlertSpec"];
export type AlertDestinationSpec = Schemas["AlertDestinationSpec"];
export type AlertOut = Schemas["AlertOut"];
export type AlertSentOut = Schemas["AlertSentOut"];
export type AlertPutOut = Schemas["AlertPutOut"];
export type AlertListOut = Schemas["AlertListOut"];
export type AlertDeleteOut = Schemas["AlertDeleteOut"];
export type HealthOut = Schemas["HealthOut"];
export type ErrorBody = Schemas["ErrorBody"];

/** One dead letter quoted in an alert's notification ({@link AlertEventOut.sample}). */
export interface AlertSampleOut {
  /** The dead letter's id. */
  message_id: string;
  /** The error of its last attempt. */
  error?: string;
  /** Attempts it had. */
  attempts: number;
  /** When it was dead-lettered (RFC 3339). */
  dead_lettered_at: string;
}

/**
 * One notification of an alert: the JSON body of each message in the alert's queue
 * (`sluice.alerts.<name>`, {@link AlertOut.queue}), as a webhook or a command destination
 * receives it (a Slack destination gets its `text`). The OpenAPI document has no route that
 * answers it, so it is written here, after `AlertEventOut` of the server's wire types.
 *
 * A consumer of an alert queue reads it from a received message's body:
 * `const event = message.body as wire.AlertEventOut`.
 */
export interface AlertEventOut {
  /** What it is about: dead letters, a queue's depth, or its oldest ready message's age. */
  type: "dead_letters" | "depth" | "oldest_ready_age";
  /** `firing`, or `resolved` once a threshold is no longer passed (dead letters always fire). */
  status: "firing" | "resolved";
  /** The alert's name. */
  alert: string;
  /** The queue it is about. */
  queue: string;
  /** When the notification was made (RFC 3339). */
  timestamp: string;
  /** A one-paragraph summary for people. */
  text: string;
  /**
   * Dead letters: how many were dead-lettered in `[since, until)` and are still in the
   * dead-letter queue.
   */
  count?: number;
  /** Dead letters: true when there were more than could be counted (`count` is a floor). */
  count_capped?: boolean;
  /** Dead letters: the start of the span counted (RFC 3339). */
  since?: string;
  /** Dead letters: the end of the span counted (RFC 3339). */
  until?: string;
  /** Dead letters: the queue they are in. */
  dead_letter_queue?: string;
  /** Dead letters: the newest ones' errors. */
  sample?: AlertSampleOut[];
  /** Thresholds: the value now (messages, or ms). */
  value?: number;
  /** Thresholds: the threshold. */
  threshold?: number;
  /** The dashboard page to look at, when the server knows its address. */
  dashboard_url?: string;
}
