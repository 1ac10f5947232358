//! The unary calls: each authorizes as its HTTP route, calls the same operation and renders.

use std::pin::Pin;

use futures::Stream;
use sluice_grpc::v1;
use sluice_grpc::v1::queues_server::Queues as QueuesApi;
use sluice_ops::{
    AckRequest, CancelRequest, DeadLetterListRequest, DeadLetterMatch, NackRequest, OpsError,
    QueuePutRequest, ReceiveRequest, ReplayRequest,
};
use tonic::{Request, Response, Status, Streaming};

use super::{Queues, convert, status};
use crate::auth::Need;

type Answer<T> = Result<Response<T>, Status>;

/// A stream of answers, as tonic sends it.
pub type Answers<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl QueuesApi for Queues {
    type PublishStream = Answers<v1::PublishResponse>;
    type PullStream = Answers<v1::PullResponse>;

    async fn publish(
        &self,
        request: Request<Streaming<v1::PublishRequest>>,
    ) -> Answer<Self::PublishStream> {
        let caller = self.caller(&request)?;
        Ok(Response::new(super::publish::start(
            self.app.clone(),
            caller,
            request.into_inner(),
        )))
    }

    async fn pull(&self, request: Request<Streaming<v1::PullRequest>>) -> Answer<Self::PullStream> {
        let caller = self.caller(&request)?;
        let stream = super::pull::start(self.app.clone(), caller, request.into_inner()).await?;
        Ok(Response::new(stream))
    }

    async fn enqueue(&self, request: Request<v1::EnqueueRequest>) -> Answer<v1::EnqueueResponse> {
        self.authorize(&request, Need::Produce, Some(&request.get_ref().queue))
            .await?;
        let v1::EnqueueRequest { queue, messages } = request.into_inner();
        let ops = &self.app.ops;
        let mut enqueue = ops.enqueue_to(queue).await.map_err(status)?;
        sluice_ops::check_batch_len(messages.len()).map_err(status)?;
        for (position, message) in messages.into_iter().enumerate() {
            let prefix = format!("messages[{position}].");
            let message = convert::message_request(message, &prefix).map_err(status)?;
            enqueue.add(message, &prefix).map_err(status)?;
        }
        let results = ops.enqueue(enqueue).await.map_err(status)?;
        Ok(Response::new(v1::EnqueueResponse {
            results: results.into_iter().map(convert::enqueued).collect(),
        }))
    }

    async fn receive(&self, request: Request<v1::ReceiveRequest>) -> Answer<v1::ReceiveResponse> {
        self.authorize(&request, Need::Consume, Some(&request.get_ref().queue))
            .await?;
        let input = request.into_inner();
        let messages = self
            .app
            .ops
            .receive(ReceiveRequest {
                lane_runs: false,
                queue: input.queue,
                max: input.max,
                wait_ms: input.wait_ms,
                visibility_timeout_ms: input.visibility_timeout_ms,
            })
            .await
            .map_err(status)?;
        Ok(Response::new(v1::ReceiveResponse {
            messages: messages.into_iter().map(convert::delivery).collect(),
        }))
    }

    async fn ack(&self, request: Request<v1::AckRequest>) -> Answer<v1::AckResponse> {
        let caller = self
            .authorize(&request, Need::Consume, Some(&request.get_ref().queue))
            .await?;
        let input = request.into_inner();
        let then = convert::next_steps(input.then).map_err(status)?;
        crate::auth::check_next_steps(&self.app, caller.as_deref(), &then)
            .await
            .map_err(status)?;
        let out = self
            .app
            .ops
            .ack(AckRequest {
                queue: input.queue,
                receipts: input.receipts,
                result: input.result_json,
                then,
            })
            .await
            .map_err(status)?;
        Ok(Response::new(convert::ack_response(out)))
    }

    async fn nack(&self, request: Request<v1::NackRequest>) -> Answer<v1::NackResponse> {
        self.authorize(&request, Need::Consume, Some(&request.get_ref().queue))
            .await?;
        let input = request.into_inner();
        let out = self
            .app
            .ops
            .nack(NackRequest {
                queue: input.queue,
                receipt: input.receipt,
                error: input.error,
                delay_ms: input.delay_ms,
                permanent: input.permanent,
            })
            .await
            .map_err(status)?;
        Ok(Response::new(convert::nack_response(out)))
    }

    async fn extend(&self, request: Request<v1::ExtendRequest>) -> Answer<v1::ExtendResponse> {
        self.authorize(&request, Need::Consume, Some(&request.get_ref().queue))
            .await?;
        let input = request.into_inner();
        if input.unstarted {
            if input.visibility_timeout_ms != 0 {
                return Err(status(sluice_ops::OpsError::invalid_field(
                    "unstarted: only with visibility_timeout_ms 0 (a release)",
                )));
            }
            self.app
                .ops
                .release(input.queue, &input.receipt, true)
                .await
                .map_err(status)?;
            return Ok(Response::new(v1::ExtendResponse {
                lease_expires_at_ms: self.app.now_ms(),
            }));
        }
        let lease_expires_at_ms = self
            .app
            .ops
            .extend(input.queue, &input.receipt, input.visibility_timeout_ms)
            .await
            .map_err(status)?;
        Ok(Response::new(v1::ExtendResponse {
            lease_expires_at_ms,
        }))
    }

    async fn get_message(
        &self,
        request: Request<v1::GetMessageRequest>,
    ) -> Answer<v1::MessageStatus> {
        self.authorize(&request, Need::Read, Some(&request.get_ref().queue))
            .await?;
        let input = request.into_inner();
        let ops = &self.app.ops;
        let found = match input.by {
            Some(v1::get_message_request::By::MessageId(id)) => {
                ops.message_by_id(input.queue, &id).await
            }
            Some(v1::get_message_request::By::Id(key)) => {
                ops.message_by_key(input.queue, Some(key)).await
            }
            None => Err(OpsError::invalid_field("give message_id or id")),
        }
        .map_err(status)?;
        let out = crate::views::status_out(found);
        Ok(Response::new(v1::MessageStatus {
            message_id: out.message_id.to_string(),
            queue: out.queue.clone(),
            state: out.state.clone(),
            attempts: out.attempts,
            last_error: out.last_error.clone(),
            result_json: out.result.as_ref().map(ToString::to_string),
            status_json: serde_json::to_string(&out).unwrap_or_default(),
        }))
    }

    async fn cancel(&self, request: Request<v1::CancelRequest>) -> Answer<v1::CancelResponse> {
        self.authorize(&request, Need::Produce, Some(&request.get_ref().queue))
            .await?;
        let input = request.into_inner();
        let (message_id, id) = match input.by {
            Some(v1::cancel_request::By::MessageId(message_id)) => (Some(message_id), None),
            Some(v1::cancel_request::By::Id(id)) => (None, Some(id)),
            None => (None, None),
        };
        let outcome = self
            .app
            .ops
            .cancel(CancelRequest {
                queue: input.queue,
                message_id,
                id,
                reason: input.reason,
            })
            .await
            .map_err(status)?;
        let out = crate::views::cancel_out(outcome);
        Ok(Response::new(v1::CancelResponse {
            outcome: out.outcome,
            message_id: out.message_id.map(|id| id.to_string()),
            state: out.state,
        }))
    }

    async fn put_queue(
        &self,
        request: Request<v1::PutQueueRequest>,
    ) -> Answer<v1::PutQueueResponse> {
        let who = self
            .authorize(&request, Need::Admin, Some(&request.get_ref().name))
            .await?;
        let input = request.into_inner();
        let spec = if input.settings_json.trim().is_empty() {
            sluice_wire::QueueSpec::default()
        } else {
            serde_json::from_str(&input.settings_json).map_err(|error| {
                status(OpsError::new(
                    sluice_wire::ErrorCode::MalformedJson,
                    format!("settings_json: {error}"),
                ))
            })?
        };
        // A tenant's queue stays within the tenant (the HTTP API's rules).
        crate::auth::check_tenant_put(&self.app, who.as_deref(), &input.name, &spec)
            .await
            .map_err(status)?;
        let put = self
            .app
            .ops
            .queue_put(
                QueuePutRequest {
                    name: input.name,
                    spec,
                },
                crate::push::validate,
            )
            .await
            .map_err(status)?;
        self.app.push.refresh();
        Ok(Response::new(v1::PutQueueResponse {
            created: put.created,
            queue: Some(convert::queue(&self.app, &who, &put.queue)),
        }))
    }

    async fn get_queue(&self, request: Request<v1::GetQueueRequest>) -> Answer<v1::Queue> {
        let who = self
            .authorize(&request, Need::Read, Some(&request.get_ref().name))
            .await?;
        let info = self
            .app
            .ops
            .queue_get(&request.get_ref().name)
            .await
            .map_err(status)?;
        Ok(Response::new(convert::queue(&self.app, &who, &info)))
    }

    async fn list_queues(
        &self,
        request: Request<v1::ListQueuesRequest>,
    ) -> Answer<v1::ListQueuesResponse> {
        let who = self.authorize(&request, Need::AnyToken, None).await?;
        let caller = crate::auth::ops_caller(who.as_deref());
        let queues = self.app.ops.queue_list(caller).await.map_err(status)?;
        Ok(Response::new(v1::ListQueuesResponse {
            queues: queues
                .iter()
                .map(|info| convert::queue(&self.app, &who, info))
                .collect(),
        }))
    }

    async fn delete_queue(
        &self,
        request: Request<v1::DeleteQueueRequest>,
    ) -> Answer<v1::DeleteQueueResponse> {
        let caller = self
            .authorize(&request, Need::Admin, Some(&request.get_ref().name))
            .await?;
        let input = request.into_inner();
        let on_delete = if input.keep_dead_letters {
            sluice_ops::OnDelete::KeepDeadLetters
        } else {
            sluice_ops::OnDelete::DeleteDeadLetters
        };
        let deleted = self
            .app
            .delete_queue(caller.as_deref(), &input.name, on_delete)
            .await
            .map_err(status)?;
        Ok(Response::new(v1::DeleteQueueResponse {
            deleted_messages: deleted.messages_removed,
            dead_letter_queue: deleted.dead_letter_queue.unwrap_or_default(),
            deleted_dead_letters: deleted.dead_letters_removed,
        }))
    }

    async fn set_paused(&self, request: Request<v1::SetPausedRequest>) -> Answer<v1::Queue> {
        let who = self
            .authorize(&request, Need::Admin, Some(&request.get_ref().name))
            .await?;
        let input = request.into_inner();
        let info = self
            .app
            .ops
            .queue_set_paused(&input.name, input.paused)
            .await
            .map_err(status)?;
        Ok(Response::new(convert::queue(&self.app, &who, &info)))
    }

    async fn purge_queue(
        &self,
        request: Request<v1::PurgeQueueRequest>,
    ) -> Answer<v1::PurgeQueueResponse> {
        self.authorize(&request, Need::Admin, Some(&request.get_ref().name))
            .await?;
        let purged = self
            .app
            .ops
            .queue_purge(
                &request.get_ref().name,
                sluice_core::store::PurgeScope::Waiting,
            )
            .await
            .map_err(status)?;
        Ok(Response::new(v1::PurgeQueueResponse {
            purged: purged.purged,
            in_flight: purged.in_flight,
        }))
    }

    async fn list_dead_letters(
        &self,
        request: Request<v1::ListDeadLettersRequest>,
    ) -> Answer<v1::ListDeadLettersResponse> {
        self.authorize(&request, Need::Read, Some(&request.get_ref().queue))
            .await?;
        let input = request.into_inner();
        let queue = input.queue.clone();
        let page = self
            .app
            .ops
            .dead_letter_list(DeadLetterListRequest {
                queue: input.queue,
                limit: input.limit.map(|limit| limit as usize),
                cursor: input.cursor,
                matching: DeadLetterMatch {
                    error: input.error,
                    since: None,
                    until: None,
                },
            })
            .await
            .map_err(status)?;
        // A page lists entries without their bodies; a gRPC client has no other call for them,
        // so each entry is read in full (a page is at most 1,000 entries, 50 by default).
        let mut entries = Vec::with_capacity(page.entries.len());
        for entry in page.entries {
            let entry = if entry.payload.is_some() {
                entry
            } else {
                let message_id = entry.status.message_id.to_string();
                match self.app.ops.dead_letter_get(&queue, &message_id).await {
                    Ok(full) => full,
                    // Replayed or deleted since the page was read: listed as it was.
                    Err(_) => entry,
                }
            };
            entries.push(convert::dead_letter(entry));
        }
        Ok(Response::new(v1::ListDeadLettersResponse {
            dead_letter_queue: page.dead_letter_queue,
            entries,
            next_cursor: page.next_cursor,
        }))
    }

    async fn replay_dead_letters(
        &self,
        request: Request<v1::ReplayDeadLettersRequest>,
    ) -> Answer<v1::ReplayDeadLettersResponse> {
        let who = self
            .authorize(&request, Need::Admin, Some(&request.get_ref().queue))
            .await?;
        let input = request.into_inner();
        // A tenant admin replays within its tenant.
        if let (Some(caller), Some(target)) = (&who, &input.target_queue) {
            super::permit(&self.app, caller, Need::Admin, Some(target)).await?;
        }
        if input.message_ids.len() > sluice_ops::REPLAY_LIMIT_MAX {
            return Err(status(OpsError::invalid_field(format!(
                "message_ids: {} ids; give 1 to {} ids",
                input.message_ids.len(),
                sluice_ops::REPLAY_LIMIT_MAX
            ))));
        }
        let out = self
            .app
            .ops
            .dead_letter_replay(ReplayRequest {
                queue: input.queue,
                ids: (!input.message_ids.is_empty()).then_some(input.message_ids),
                matching: DeadLetterMatch {
                    error: input.error,
                    since: None,
                    until: None,
                },
                limit: input.limit.map(|limit| limit as usize),
                dry_run: input.dry_run,
                target_queue: input.target_queue,
            })
            .await
            .map_err(status)?;
        Ok(Response::new(v1::ReplayDeadLettersResponse {
            replayed: out.replayed,
            replay_json: serde_json::to_string(&crate::views::replay_out(out)).unwrap_or_default(),
        }))
    }
}
