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
export type HealthOut = Schemas["HealthOut"];
export type ErrorBody = Schemas["ErrorBody"];
