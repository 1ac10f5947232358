//! Scenario 11 of `sluice bench`: scenarios 1-3 again, through the Amazon SQS-compatible API
//! (AWS JSON 1.0, `POST /` of the same listener), so one run shows both APIs side by side.
//!
//! - single: `SendMessage`, one message per request, with the sizes of scenario 1;
//! - batch: `SendMessageBatch`, with the sizes of scenario 2 but at most 10 messages per
//!   request (SQS's limit);
//! - end to end: producers send `SendMessageBatch` while consumers `ReceiveMessage` (at most 10,
//!   long polling for whole seconds) and delete each batch with one `DeleteMessageBatch`, with
//!   the sizes of scenario 3; every message id is counted once, as in scenario 3.
//!
//! The loops are those of [`super::load`]; what this module adds is [`SqsClient`], a small
//! client of the JSON protocol over reqwest (not the AWS SDK: the bench should measure the
//! server, not an SDK, and needs four operations), and the queues. Each load gets a standard
//! queue of its own from `CreateQueue` (`bench-sqs-single`, `bench-sqs-batch`, `bench-sqs-e2e`),
//! deleted with `DeleteQueue` before (a leftover of an interrupted run) and after. Requests are
//! unsigned, so the server must run with access control off. Bodies are the native scenarios'
//! stamped text as a plain string (`MessageBody`), so the server stores as many bytes.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::load::{
    self, Api, Bodies, EndToEndLoad, EndToEndReport, EnqueueLoad, EnqueueReport, Outcome, Received,
};
use super::server::{CpuSample, ServerProcess};
use super::{Measured, progress};

/// Most entries of one SQS batch request, and most messages of one receive.
pub const BATCH_MAX: usize = 10;

/// The longest `WaitTimeSeconds` SQS accepts.
pub const WAIT_SECONDS_MAX: i64 = 20;

/// Timeout of every request but a receive, from sending to the whole answer read.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Added to a receive's `WaitTimeSeconds` to get its timeout, so a long poll is never cut short.
const RECEIVE_TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

/// How long an idle pooled connection is kept: under the server's default idle limit (30 s),
/// as `sluice_client` does, so a request never goes out on a connection being closed.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(20);

/// The SQS error code of a queue that does not exist (the `__type` shape name).
const QUEUE_DOES_NOT_EXIST: &str = "QueueDoesNotExist";

/// The three loads, sized by the caller from the flags of scenarios 1-3.
#[derive(Debug, Clone, Copy)]
pub struct SqsLoads {
    pub single: EnqueueLoad,
    pub batch: EnqueueLoad,
    pub end_to_end: EndToEndLoad,
}

/// Scenario 11.
#[derive(Debug, Serialize)]
pub struct SqsReport {
    /// The wire protocol used.
    pub protocol: &'static str,
    pub single: Option<Measured<EnqueueReport>>,
    pub batch: Option<Measured<EnqueueReport>>,
    pub end_to_end: Option<Measured<EndToEndReport>>,
    /// Why the scenario stopped early (a queue could not be created, say); `None` when every
    /// load ran.
    pub failure: Option<String>,
}

/// Runs the three loads against the server at `url`, one after the other, stopping at the
/// first one whose queue cannot be set up.
pub async fn run(
    url: &str,
    server: Option<&ServerProcess>,
    bodies: &Bodies,
    loads: SqsLoads,
) -> SqsReport {
    let mut report = SqsReport {
        protocol: "AWS JSON 1.0",
        single: None,
        batch: None,
        end_to_end: None,
        failure: None,
    };
    let sqs = match SqsClient::new(url) {
        Ok(sqs) => sqs,
        Err(error) => {
            report.failure = Some(format!("cannot make an HTTP client: {error}"));
            return report;
        }
    };
    let steps = async {
        progress("11. SQS: SendMessage, one message per request");
        report.single = Some(
            measured(&sqs, server, "single", async |queue| {
                load::enqueue_load(&sqs, queue, bodies, loads.single).await
            })
            .await?,
        );
        progress("11. SQS: SendMessageBatch");
        report.batch = Some(
            measured(&sqs, server, "batch", async |queue| {
                load::enqueue_load(&sqs, queue, bodies, loads.batch).await
            })
            .await?,
        );
        progress("11. SQS: SendMessageBatch, ReceiveMessage and DeleteMessageBatch at once");
        report.end_to_end = Some(
            measured(&sqs, server, "e2e", async |queue| {
                load::end_to_end(&sqs, queue, bodies, loads.end_to_end).await
            })
            .await?,
        );
        Ok::<_, String>(())
    };
    if let Err(failure) = steps.await {
        report.failure = Some(failure);
    }
    report
}

/// Runs `load` against a fresh standard queue `bench-sqs-{name}` (given its queue URL), with the
/// CPU used meanwhile; deletes the queue before and after.
async fn measured<T>(
    sqs: &SqsClient,
    server: Option<&ServerProcess>,
    name: &str,
    load: impl AsyncFnOnce(&str) -> T,
) -> Result<Measured<T>, String> {
    let queue = format!("bench-sqs-{name}");
    // A bare name is accepted as QueueUrl; the queue may well not be there.
    match sqs.delete_queue(&queue).await {
        Ok(()) => {}
        Err(SqsError::Refused { code, .. }) if code == QUEUE_DOES_NOT_EXIST => {}
        Err(error) => return Err(format!("cannot delete the leftover queue {queue}: {error}")),
    }
    let url = sqs
        .create_queue(&queue)
        .await
        .map_err(|error| format!("cannot create queue {queue}: {error}"))?;
    let cpu_before = CpuSample::take(server);
    let started = Instant::now();
    let result = load(&url).await;
    let wall = started.elapsed();
    let cpu = CpuSample::take(server).since(&cpu_before);
    if let Err(error) = sqs.delete_queue(&url).await {
        progress(&format!("cannot delete queue {queue}: {error}"));
    }
    Ok(Measured {
        result,
        queue,
        wall_s: wall.as_secs_f64(),
        cpu,
        // The SQS scenarios compare the two APIs on one server; the database's share is in
        // scenarios 1-3.
        database: None,
    })
}

/// A client of the SQS JSON protocol: `POST /` with the operation in `X-Amz-Target`, unsigned.
#[derive(Debug, Clone)]
pub struct SqsClient {
    http: reqwest::Client,
    /// `POST` goes here: the server's URL with a trailing `/` (a path prefix is kept).
    endpoint: Arc<str>,
}

impl SqsClient {
    /// A client for the server at `base_url`, with a connection pool of its own.
    pub fn new(base_url: &str) -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(sluice_client::CONNECT_TIMEOUT)
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build()?;
        Ok(Self {
            http,
            endpoint: format!("{}/", base_url.trim_end_matches('/')).into(),
        })
    }

    /// `CreateQueue` of a standard queue with the default attributes; returns its queue URL.
    pub async fn create_queue(&self, name: &str) -> Result<String, SqsError> {
        #[derive(Serialize)]
        #[serde(rename_all = "PascalCase")]
        struct In<'a> {
            queue_name: &'a str,
        }
        let out: QueueUrlOut = self
            .call("CreateQueue", &In { queue_name: name }, REQUEST_TIMEOUT)
            .await?;
        Ok(out.queue_url)
    }

    /// `DeleteQueue`.
    pub async fn delete_queue(&self, queue_url: &str) -> Result<(), SqsError> {
        let _: IgnoredAny = self
            .call("DeleteQueue", &QueueOnly { queue_url }, REQUEST_TIMEOUT)
            .await?;
        Ok(())
    }

    /// `SendMessage`; returns the message id.
    pub async fn send_message(&self, queue_url: &str, body: &str) -> Result<String, SqsError> {
        #[derive(Serialize)]
        #[serde(rename_all = "PascalCase")]
        struct In<'a> {
            queue_url: &'a str,
            message_body: &'a str,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Out {
            message_id: String,
        }
        let request = In {
            queue_url,
            message_body: body,
        };
        let out: Out = self.call("SendMessage", &request, REQUEST_TIMEOUT).await?;
        Ok(out.message_id)
    }

    /// `SendMessageBatch` of `bodies` (at most [`BATCH_MAX`]), entry ids `0`, `1`, ...
    pub async fn send_message_batch(
        &self,
        queue_url: &str,
        bodies: impl IntoIterator<Item = String>,
    ) -> Result<BatchOut, SqsError> {
        #[derive(Serialize)]
        #[serde(rename_all = "PascalCase")]
        struct Entry {
            id: String,
            message_body: String,
        }
        let entries: Vec<Entry> = bodies
            .into_iter()
            .enumerate()
            .map(|(index, message_body)| Entry {
                id: index.to_string(),
                message_body,
            })
            .collect();
        self.call(
            "SendMessageBatch",
            &Batch { queue_url, entries },
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// `ReceiveMessage` of up to `max` messages, long polling for `wait_seconds`.
    pub async fn receive_message(
        &self,
        queue_url: &str,
        max: i64,
        wait_seconds: i64,
    ) -> Result<Vec<SqsMessage>, SqsError> {
        #[derive(Serialize)]
        #[serde(rename_all = "PascalCase")]
        struct In<'a> {
            queue_url: &'a str,
            max_number_of_messages: i64,
            wait_time_seconds: i64,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "PascalCase")]
        struct Out {
            // SQS leaves the list out when nothing came.
            #[serde(default)]
            messages: Vec<SqsMessage>,
        }
        let request = In {
            queue_url,
            max_number_of_messages: max,
            wait_time_seconds: wait_seconds,
        };
        let timeout = Duration::from_secs(wait_seconds.max(0) as u64) + RECEIVE_TIMEOUT_MARGIN;
        let out: Out = self.call("ReceiveMessage", &request, timeout).await?;
        Ok(out.messages)
    }

    /// `DeleteMessageBatch` of `receipts` (at most [`BATCH_MAX`]), entry ids `0`, `1`, ...
    pub async fn delete_message_batch(
        &self,
        queue_url: &str,
        receipts: Vec<String>,
    ) -> Result<BatchOut, SqsError> {
        #[derive(Serialize)]
        #[serde(rename_all = "PascalCase")]
        struct Entry {
            id: String,
            receipt_handle: String,
        }
        let entries: Vec<Entry> = receipts
            .into_iter()
            .enumerate()
            .map(|(index, receipt_handle)| Entry {
                id: index.to_string(),
                receipt_handle,
            })
            .collect();
        self.call(
            "DeleteMessageBatch",
            &Batch { queue_url, entries },
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// One operation: its JSON request, its JSON answer or the SQS error it answered.
    async fn call<T: DeserializeOwned>(
        &self,
        action: &str,
        request: &impl Serialize,
        timeout: Duration,
    ) -> Result<T, SqsError> {
        let body = serde_json::to_vec(request).expect("the requests serialize");
        let answer = self
            .http
            .post(&*self.endpoint)
            .header("content-type", "application/x-amz-json-1.0")
            .header("x-amz-target", format!("AmazonSQS.{action}"))
            .body(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(SqsError::Transport)?;
        let status = answer.status();
        let bytes = answer.bytes().await.map_err(SqsError::Transport)?;
        if !status.is_success() {
            return Err(SqsError::refused(status.as_u16(), &bytes));
        }
        // Operations without output may answer with an empty body instead of `{}`.
        let bytes: &[u8] = if bytes.is_empty() { b"{}" } else { &bytes };
        serde_json::from_slice(bytes).map_err(|error| {
            SqsError::BadAnswer(format!(
                "{action}: {error}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ))
        })
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct QueueOnly<'a> {
    queue_url: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct Batch<'a, E> {
    queue_url: &'a str,
    entries: Vec<E>,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct QueueUrlOut {
    queue_url: String,
}

/// The answer to a batch request: the entries that went through and those refused.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchOut {
    pub successful: Vec<IgnoredAny>,
    pub failed: Vec<BatchFailure>,
}

/// A refused entry of a batch.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchFailure {
    pub id: String,
    pub code: String,
    #[serde(default)]
    pub message: Option<String>,
}

impl BatchOut {
    /// The entries that went through, and the refused ones as one error.
    fn outcome(self) -> Outcome<SqsError> {
        let of = self.successful.len() + self.failed.len();
        Outcome {
            done: self.successful.len() as u64,
            refused: self.failed.first().map(|first| SqsError::EntriesRefused {
                refused: self.failed.len(),
                of,
                id: first.id.clone(),
                code: first.code.clone(),
                message: first.message.clone().unwrap_or_default(),
            }),
        }
    }
}

/// A received message.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SqsMessage {
    pub message_id: String,
    pub receipt_handle: String,
    pub body: String,
}

/// Why an SQS request failed.
#[derive(Debug)]
pub enum SqsError {
    /// No answer: connection, timeout, a body cut short.
    Transport(reqwest::Error),
    /// An error answer; `code` is the shape name of its `__type` (`QueueDoesNotExist`, ...).
    Refused {
        status: u16,
        code: String,
        message: String,
    },
    /// A batch answered, refusing `refused` of its `of` entries; the first refused one.
    EntriesRefused {
        refused: usize,
        of: usize,
        id: String,
        code: String,
        message: String,
    },
    /// An answer of the wrong shape.
    BadAnswer(String),
}

impl SqsError {
    /// The error in an answer of status `status`: `{"__type": "...#Code", "message": "..."}`.
    fn refused(status: u16, body: &[u8]) -> Self {
        #[derive(Deserialize)]
        struct Body {
            #[serde(rename = "__type", default)]
            kind: String,
            #[serde(alias = "Message", default)]
            message: String,
        }
        match serde_json::from_slice::<Body>(body) {
            Ok(body) => Self::Refused {
                status,
                code: body.kind.rsplit('#').next().unwrap_or_default().to_owned(),
                message: body.message,
            },
            Err(_) => Self::Refused {
                status,
                code: String::new(),
                message: String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned(),
            },
        }
    }
}

impl fmt::Display for SqsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Transport(_) => write!(f, "no answer"),
            Self::Refused {
                status,
                code,
                message,
            } => write!(f, "HTTP {status} {code}: {message}"),
            Self::EntriesRefused {
                refused,
                of,
                id,
                code,
                message,
            } => write!(
                f,
                "{refused} of {of} entries refused, the first (Id {id}): {code}: {message}"
            ),
            Self::BadAnswer(what) => write!(f, "an answer of the wrong shape: {what}"),
        }
    }
}

impl std::error::Error for SqsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Transport(error) => Some(error),
            _ => None,
        }
    }
}

/// The loads' requests as SQS operations; `queue` is a queue URL.
impl Api for SqsClient {
    type Error = SqsError;

    fn own_pool(&self) -> Self {
        Self::new(&self.endpoint).unwrap_or_else(|_| self.clone())
    }

    async fn send(
        &self,
        queue: &str,
        bodies: &Bodies,
        seqs: Range<u64>,
        single: bool,
    ) -> Result<Outcome<SqsError>, SqsError> {
        if single {
            self.send_message(queue, &bodies.text(seqs.start)).await?;
            return Ok(Outcome::all(1));
        }
        let batch = seqs.map(|seq| bodies.text(seq));
        Ok(self.send_message_batch(queue, batch).await?.outcome())
    }

    async fn receive(
        &self,
        queue: &str,
        max: i64,
        wait_ms: i64,
    ) -> Result<Vec<Received>, SqsError> {
        let messages = self
            .receive_message(queue, max, wait_seconds(wait_ms))
            .await?;
        messages
            .into_iter()
            .map(|message| {
                // sluice's message ids are UUIDs, as AWS's are; the loads count ids as such.
                let id = Uuid::parse_str(&message.message_id).map_err(|_| {
                    SqsError::BadAnswer(format!("MessageId {:?} is not a UUID", message.message_id))
                })?;
                Ok(Received {
                    id,
                    sent_us: Bodies::sent_us_of_text(&message.body),
                    receipt: message.receipt_handle,
                })
            })
            .collect()
    }

    async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<Outcome<SqsError>, SqsError> {
        Ok(self.delete_message_batch(queue, receipts).await?.outcome())
    }
}

/// `WaitTimeSeconds` for a wait of `wait_ms`: whole seconds, rounded up, at most 20.
pub fn wait_seconds(wait_ms: i64) -> i64 {
    (wait_ms.max(0) + 999)
        .div_euclid(1000)
        .min(WAIT_SECONDS_MAX)
}

/// The lines of scenario 11 in the text report, each load beside the native figure of the
/// same run when its scenario ran too.
pub fn text_lines(out: &mut Vec<String>, report: &SqsReport, native: Native<'_>) {
    out.push(format!(
        "11. the SQS API ({}), the loads of scenarios 1-3",
        report.protocol
    ));
    if let Some(single) = &report.single {
        out.push(format!(
            "   SendMessage, one message per request, {} clients",
            single.result.clients
        ));
        super::enqueue_lines(out, single);
        compare_line(out, single.result.msgs_per_s, native.single, "scenario 1");
    }
    if let Some(batch) = &report.batch {
        out.push(format!(
            "   SendMessageBatch of {}, {} clients",
            batch.result.batch_size, batch.result.clients
        ));
        super::enqueue_lines(out, batch);
        let native_batch = native.batch.map(|native| {
            (
                native.result.msgs_per_s,
                format!("scenario 2, batches of {}", native.result.batch_size),
            )
        });
        if let Some((native_msgs_per_s, what)) = native_batch {
            compare_line(out, batch.result.msgs_per_s, Some(native_msgs_per_s), &what);
        }
    }
    if let Some(e2e) = &report.end_to_end {
        let r = &e2e.result;
        out.push(format!(
            "   end to end: {} producers (SendMessageBatch of {}, {} in flight each), {} consumers (ReceiveMessage of up to {}, WaitTimeSeconds {}, one DeleteMessageBatch per batch, up to {} in flight each)",
            r.producers,
            r.batch_size,
            r.inflight_per_producer,
            r.consumers,
            r.receive_max,
            r.wait_ms / 1000,
            r.acks_in_flight
        ));
        super::end_to_end_lines(out, e2e);
        compare_line(out, r.msgs_per_s, native.end_to_end, "scenario 3");
    }
    if let Some(failure) = &report.failure {
        out.push(format!("   FAILED: {failure}"));
    }
}

/// The native figures of the same run, msgs/s.
#[derive(Debug, Clone, Copy, Default)]
pub struct Native<'a> {
    pub single: Option<f64>,
    pub batch: Option<&'a Measured<EnqueueReport>>,
    pub end_to_end: Option<f64>,
}

fn compare_line(out: &mut Vec<String>, sqs_msgs_per_s: f64, native: Option<f64>, what: &str) {
    if let Some(native) = native.filter(|native| *native > 0.0) {
        out.push(format!(
            "   native API in this run ({what}): {} msgs/s; SQS at {:.0} % of it",
            super::thousands(native as u64),
            100.0 * sqs_msgs_per_s / native
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_whole_seconds_rounded_up_within_sqs_bounds() {
        for (wait_ms, seconds) in [(0, 0), (1, 1), (1_000, 1), (1_001, 2), (60_000, 20)] {
            assert_eq!(wait_seconds(wait_ms), seconds, "{wait_ms} ms");
        }
    }

    #[test]
    fn error_answers_give_their_shape_name() {
        let error = SqsError::refused(
            400,
            br#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}"#,
        );
        match error {
            SqsError::Refused { status, code, .. } => {
                assert_eq!((status, code.as_str()), (400, QUEUE_DOES_NOT_EXIST));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_batch_with_refused_entries_counts_the_others() {
        let out: BatchOut = serde_json::from_str(
            r#"{"Successful":[{"Id":"0","MessageId":"m"}],"Failed":[{"Id":"1","SenderFault":true,"Code":"InvalidMessageContents","Message":"bad"}]}"#,
        )
        .unwrap();
        let outcome = out.outcome();
        assert_eq!(outcome.done, 1);
        let refused = outcome.refused.expect("a refusal").to_string();
        assert!(
            refused.contains("1 of 2") && refused.contains("InvalidMessageContents"),
            "{refused}"
        );
    }
}
