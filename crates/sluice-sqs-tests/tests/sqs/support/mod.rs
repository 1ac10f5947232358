//! The target of a test: a sluice server started in this process on a temp data dir (the
//! default), or an external SQS endpoint named by `SLUICE_SQS_ENDPOINT` (e.g. a `moto_server`),
//! and an `aws-sdk-sqs` client configured by hand for it (no aws-config, no environment).
//!
//! Tests that an external emulator cannot pass because it differs from AWS (the spec's §5:
//! moto ignores pagination, accepts stale receipt handles, has no move tasks, …) start with
//! [`Sqs::sluice_only`], which reports them skipped against an external endpoint.
//! Queue names carry a per-run tag, so runs against a long-lived emulator do not collide.
#![allow(dead_code)]

pub mod binary;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::retry::RetryConfig;
use aws_sdk_sqs::config::timeout::TimeoutConfig;
use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName, QueueAttributeName};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use sluice_server::config::RawConfig;
use sluice_server::{Config, ServeOptions};
use sluice_testkit::server::{InProcess, in_process};

/// The environment variable naming an external endpoint (`http://127.0.0.1:PORT`).
pub const ENDPOINT_VARIABLE: &str = "SLUICE_SQS_ENDPOINT";
/// Longest single call: above the 20 s maximum long poll.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// An SDK client and the endpoint it talks to; a server started for it stops on drop.
pub struct Sqs {
    pub client: Client,
    endpoint: String,
    server: Option<InProcessServer>,
}

impl Sqs {
    /// The target of this run: `SLUICE_SQS_ENDPOINT` when set, else a fresh in-process sluice.
    pub async fn start() -> Sqs {
        match std::env::var(ENDPOINT_VARIABLE) {
            Ok(endpoint) if !endpoint.is_empty() => Sqs {
                client: client(&endpoint),
                endpoint,
                server: None,
            },
            _ => {
                let server = InProcessServer::start().await;
                let endpoint = server.url.clone();
                Sqs {
                    client: client(&endpoint),
                    endpoint,
                    server: Some(server),
                }
            }
        }
    }

    /// [`Sqs::start`] against sluice only: `None` (after saying why the test is skipped) when the
    /// run targets an external endpoint, which differs from AWS in the way `why` says.
    pub async fn sluice_only(why: &str) -> Option<Sqs> {
        if std::env::var(ENDPOINT_VARIABLE).is_ok_and(|endpoint| !endpoint.is_empty()) {
            eprintln!("skipped against {ENDPOINT_VARIABLE}: {why}");
            return None;
        }
        Some(Sqs::start().await)
    }

    /// A fresh in-process sluice with access control on: each `(name, token, toml)` is an
    /// `[[auth.tokens]]` entry whose token is written to a file (`toml` gives its roles and
    /// queues). The client signs as the first token. `None` against an external endpoint.
    pub async fn with_tokens(tokens: &[(&str, &str, &str)]) -> Option<Sqs> {
        if std::env::var(ENDPOINT_VARIABLE).is_ok_and(|endpoint| !endpoint.is_empty()) {
            eprintln!("skipped against {ENDPOINT_VARIABLE}: access control is sluice's");
            return None;
        }
        let entries: Vec<(String, String, String)> = tokens
            .iter()
            .map(|(name, token, toml)| {
                ((*name).to_owned(), (*token).to_owned(), (*toml).to_owned())
            })
            .collect();
        let server = InProcessServer::start_with(move |dir| {
            let mut text = String::new();
            for (name, token, rest) in &entries {
                let file = dir.join(format!("{name}.token"));
                std::fs::write(&file, token).expect("token file");
                text.push_str(&format!(
                    "[[auth.tokens]]\nname = {name:?}\ntoken = {{ file = {:?} }}\n{rest}\n",
                    file.display().to_string()
                ));
            }
            toml::from_str(&text).expect("auth config")
        })
        .await;
        let endpoint = server.url.clone();
        Some(Sqs {
            client: signed_client(&endpoint, tokens[0].0, tokens[0].1),
            endpoint,
            server: Some(server),
        })
    }

    /// A client of this endpoint signing with another access key and secret.
    pub fn signed_as(&self, access_key_id: &str, secret: &str) -> Client {
        signed_client(&self.endpoint, access_key_id, secret)
    }

    /// Whether this run targets sluice (the in-process server), not an external endpoint.
    pub fn is_sluice(&self) -> bool {
        self.server.is_some()
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// A queue name unique to this run: `<prefix>-<run tag>-<n>` (at most 80 characters with a
    /// prefix of up to 60).
    pub fn name(&self, prefix: &str) -> String {
        unique_name(prefix)
    }

    /// Creates a standard queue with `attributes`; returns its URL.
    pub async fn queue(&self, prefix: &str, attributes: &[(QueueAttributeName, &str)]) -> String {
        self.create(&self.name(prefix), attributes).await
    }

    /// Creates a FIFO queue (`FifoQueue=true`, name ending in `.fifo`) with `attributes`.
    pub async fn fifo_queue(
        &self,
        prefix: &str,
        attributes: &[(QueueAttributeName, &str)],
    ) -> String {
        let mut all = vec![(QueueAttributeName::FifoQueue, "true")];
        all.extend_from_slice(attributes);
        self.create(&format!("{}.fifo", self.name(prefix)), &all)
            .await
    }

    /// CreateQueue `name` with `attributes`, asserting success; returns the URL.
    pub async fn create(&self, name: &str, attributes: &[(QueueAttributeName, &str)]) -> String {
        let mut request = self.client.create_queue().queue_name(name);
        for (attribute, value) in attributes {
            request = request.attributes(attribute.clone(), *value);
        }
        let output = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("CreateQueue {name}: {e:?}"));
        output.queue_url.expect("CreateQueue answered no QueueUrl")
    }

    /// One queue attribute, if the queue has it.
    pub async fn attribute(&self, url: &str, name: QueueAttributeName) -> Option<String> {
        let output = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(name.clone())
            .send()
            .await
            .unwrap_or_else(|e| panic!("GetQueueAttributes {name} of {url}: {e:?}"));
        output.attributes.unwrap_or_default().remove(&name)
    }

    /// The queue's ARN (`QueueArn`).
    pub async fn arn(&self, url: &str) -> String {
        self.attribute(url, QueueAttributeName::QueueArn)
            .await
            .unwrap_or_else(|| panic!("{url} has no QueueArn"))
    }

    /// `ApproximateNumberOfMessages` as a number.
    pub async fn visible_count(&self, url: &str) -> u64 {
        let count = self
            .attribute(url, QueueAttributeName::ApproximateNumberOfMessages)
            .await
            .unwrap_or_else(|| panic!("{url} has no ApproximateNumberOfMessages"));
        count
            .parse()
            .unwrap_or_else(|e| panic!("ApproximateNumberOfMessages {count:?}: {e}"))
    }

    /// SendMessage `body`, asserting success; returns the MessageId.
    pub async fn send(&self, url: &str, body: &str) -> String {
        let output = self
            .client
            .send_message()
            .queue_url(url)
            .message_body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("SendMessage to {url}: {e:?}"));
        output
            .message_id
            .expect("SendMessage answered no MessageId")
    }

    /// One ReceiveMessage of up to `max` messages, waiting at most `wait_seconds`, with every
    /// system attribute and every message attribute.
    pub async fn receive(&self, url: &str, max: i32, wait_seconds: i32) -> Vec<Message> {
        self.client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(max)
            .wait_time_seconds(wait_seconds)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .unwrap_or_else(|e| panic!("ReceiveMessage from {url}: {e:?}"))
            .messages
            .unwrap_or_default()
    }

    /// Receives until `count` messages arrived (each kept invisible for the queue's timeout) or
    /// `within` passed; returns what arrived.
    pub async fn receive_count(&self, url: &str, count: usize, within: Duration) -> Vec<Message> {
        let deadline = tokio::time::Instant::now() + within;
        let mut received = Vec::new();
        while received.len() < count && tokio::time::Instant::now() < deadline {
            let wanted = (count - received.len()).min(10) as i32;
            received.extend(self.receive(url, wanted, 1).await);
        }
        received
    }

    /// DeleteMessage, asserting success.
    pub async fn delete(&self, url: &str, message: &Message) {
        self.client
            .delete_message()
            .queue_url(url)
            .receipt_handle(receipt(message))
            .send()
            .await
            .unwrap_or_else(|e| panic!("DeleteMessage on {url}: {e:?}"));
    }
}

/// The SDK client for `endpoint`: any key works (sluice and moto accept signatures unverified),
/// no retries (a test sees the server's first answer), HTTPS over rustls on ring when the
/// endpoint is `https`.
pub fn client(endpoint: &str) -> Client {
    signed_client(endpoint, "AKIDSLUICE", "secret")
}

/// [`client`] signing with `access_key_id` and `secret`.
pub fn signed_client(endpoint: &str, access_key_id: &str, secret: &str) -> Client {
    let http_client = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new(
            access_key_id.to_owned(),
            secret.to_owned(),
            None,
            None,
            "static",
        ))
        .http_client(http_client)
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(3))
                .operation_timeout(OPERATION_TIMEOUT)
                .build(),
        )
        .build();
    Client::from_conf(config)
}

/// A queue name unique to this process run (see [`Sqs::name`]).
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    static RUN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or(0);
        format!("{:x}", (std::process::id() << 12) ^ nanos)
    });
    assert!(prefix.len() <= 60, "queue name prefix too long: {prefix}");
    format!("{prefix}-{run}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// The receipt handle of a received message.
pub fn receipt(message: &Message) -> &str {
    message
        .receipt_handle
        .as_deref()
        .unwrap_or_else(|| panic!("message without a ReceiptHandle: {message:?}"))
}

/// The body of a received message.
pub fn body(message: &Message) -> &str {
    message
        .body
        .as_deref()
        .unwrap_or_else(|| panic!("message without a Body: {message:?}"))
}

/// A system attribute of a received message.
pub fn system_attribute<'a>(message: &'a Message, name: &MessageSystemAttributeName) -> &'a str {
    message
        .attributes
        .as_ref()
        .and_then(|attributes| attributes.get(name))
        .unwrap_or_else(|| panic!("message without the {name} attribute: {message:?}"))
}

/// A system attribute as a number.
pub fn system_number(message: &Message, name: &MessageSystemAttributeName) -> u64 {
    let value = system_attribute(message, name);
    value
        .parse()
        .unwrap_or_else(|e| panic!("{name} {value:?} is not a number: {e}"))
}

/// The bodies of `messages`, in order.
pub fn bodies(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| body(m).to_owned()).collect()
}

/// Attribute map for `SetQueueAttributes` / `CreateQueue`.
pub fn attributes(pairs: &[(QueueAttributeName, &str)]) -> HashMap<QueueAttributeName, String> {
    pairs
        .iter()
        .map(|(name, value)| (name.clone(), (*value).to_owned()))
        .collect()
}

/// `{"deadLetterTargetArn": …, "maxReceiveCount": n}`.
pub fn redrive_policy(dead_letter_arn: &str, max_receive_count: u32) -> String {
    format!(
        r#"{{"deadLetterTargetArn":"{dead_letter_arn}","maxReceiveCount":{max_receive_count}}}"#
    )
}

/// Epoch ms now, for checking timestamps the server reports.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// A sluice server running in this process on a temp data dir (the test kit's
/// [`in_process`]); stops when dropped.
struct InProcessServer {
    url: String,
    _server: InProcess,
    _data: tempfile::TempDir,
}

impl InProcessServer {
    /// `sluice_server::run` on 127.0.0.1:0 with default config (no auth, `durability = os`:
    /// a test's data need not survive a power cut, and fsyncs would slow every send).
    async fn start() -> InProcessServer {
        Self::start_with(|_| RawConfig::default()).await
    }

    /// [`InProcessServer::start`] with the config `make` returns given the data directory
    /// (where a test can put files the config names, such as token files).
    async fn start_with(make: impl FnOnce(&std::path::Path) -> RawConfig) -> InProcessServer {
        let data = tempfile::Builder::new()
            .prefix("sluice-sqs-")
            .tempdir()
            .expect("temp dir");
        let config = Config::from_raw(
            make(data.path()),
            &ServeOptions {
                data_dir: Some(data.path().to_owned()),
                durability: Some("os".into()),
                ..Default::default()
            },
        )
        .expect("server config");
        let server = in_process(|listener, shutdown, ready| {
            sluice_server::run(config, listener, shutdown, ready)
        })
        .await;
        InProcessServer {
            url: server.url().to_owned(),
            _server: server,
            _data: data,
        }
    }
}
