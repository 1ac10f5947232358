//! The gRPC API (`proto/sluice/v1/sluice.proto`, docs/grpc.md): a second renderer of the same
//! operations as the HTTP API. Every call authorizes as the matching HTTP route does
//! ([`Need`]), calls [`sluice_ops::Ops`], and renders its answer or its [`OpsError`] (as a
//! gRPC status with the sluice code in a trailer and an `ErrorInfo`).
//!
//! It is served on the main listener: `listen` hands every HTTP/2 request whose content type
//! is `application/grpc` to [`service`], and the rest to the HTTP router.

mod convert;
mod gate;
mod publish;
mod pull;
mod unary;

use std::sync::Arc;

use sluice_grpc::v1::queues_server::QueuesServer;
use sluice_ops::OpsError;
use tonic::{Code, Request, Status};

use crate::auth::{Caller, Need};
use crate::state::AppState;

/// The gRPC services, ready to serve requests (`listen` routes `application/grpc` to them):
/// `sluice.v1.Queues`, `grpc.health.v1.Health` (what Kubernetes' gRPC probes call) and server
/// reflection (`grpcurl` without `-proto`). Must be called within the runtime: it starts the
/// task that keeps the health status as `/readyz` says.
pub fn service(app: AppState) -> Entry {
    let queues = QueuesServer::new(Queues { app: app.clone() })
        .max_decoding_message_size(crate::body_budget::REQUEST_BYTES_MAX)
        .max_encoding_message_size(usize::MAX);
    let (reporter, health) = tonic_health::server::health_reporter();
    tokio::spawn(report_health(app.clone(), reporter));
    let mut routes = tonic::service::Routes::new(queues).add_service(health);
    match tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(sluice_grpc::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
    {
        Ok(reflection) => routes = routes.add_service(reflection),
        Err(error) => {
            tracing::error!(%error, "gRPC reflection is off: its descriptors do not load")
        }
    }
    Entry {
        service: routes.prepare(),
        app,
    }
}

/// Keeps `grpc.health.v1`'s status (for the server, `""`, and for `sluice.v1.Queues`) what
/// `/readyz` says, checked every [`HEALTH_EVERY`], until shutdown (then `NOT_SERVING`).
async fn report_health(app: AppState, reporter: tonic_health::server::HealthReporter) {
    use tonic_health::ServingStatus;
    let queues = <QueuesServer<Queues> as tonic::server::NamedService>::NAME;
    let mut last = None;
    loop {
        let status = match app.readiness().await {
            Ok(()) => ServingStatus::Serving,
            Err(_) => ServingStatus::NotServing,
        };
        if last != Some(status) {
            reporter.set_service_status("", status).await;
            reporter.set_service_status(queues, status).await;
            last = Some(status);
        }
        if app.is_shutting_down() {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(HEALTH_EVERY) => {}
            () = app.shutdown.cancelled() => {}
        }
    }
}

/// How often the gRPC health status is checked.
const HEALTH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The service every caller may call without a token: probes carry none.
const HEALTH_PATH: &str = "/grpc.health.v1.Health/";

/// The way in for gRPC calls: [`gate`] (the token, then a body held to the budget and the
/// pace), then the services.
#[derive(Clone)]
pub struct Entry {
    service: tonic::service::Routes,
    app: AppState,
}

impl Entry {
    /// Serves one call.
    pub async fn call(
        self,
        request: hyper::Request<hyper::body::Incoming>,
    ) -> axum::http::Response<axum::body::Body> {
        let probe = request.uri().path().starts_with(HEALTH_PATH);
        if !probe && let Some(status) = gate::unauthenticated(&self.app, request.headers()) {
            return status.into_http();
        }
        let peer = crate::body_budget::peer_of(request.extensions());
        let budget = self.app.body_budget.clone();
        let request = request.map(|body| gate::Gated::new(body, budget, peer));
        let Ok(response) = tower::ServiceExt::oneshot(self.service, request).await;
        response.map(axum::body::Body::new)
    }
}

/// The implementation of `sluice.v1.Queues`.
#[derive(Clone)]
pub struct Queues {
    app: AppState,
}

/// Who called, once authorized: `None` when access control is off.
type Who = Option<Arc<Caller>>;

impl Queues {
    /// Authorizes a call as the HTTP route with the same rule would be: the token from the
    /// `authorization` metadata, then `need` on `queue`.
    async fn authorize<T>(
        &self,
        request: &Request<T>,
        need: Need,
        queue: Option<&str>,
    ) -> Result<Who, Status> {
        let Some(caller) = self.caller(request)? else {
            return Ok(None);
        };
        permit(&self.app, &caller, need, queue).await?;
        Ok(Some(caller))
    }

    /// The caller of a call, or UNAUTHENTICATED; `None` when access control is off.
    fn caller<T>(&self, request: &Request<T>) -> Result<Who, Status> {
        let auth = &self.app.auth;
        if !auth.enabled() {
            return Ok(None);
        }
        let sent = request.metadata().get("authorization");
        sent.and_then(|value| value.to_str().ok())
            .and_then(|value| auth.identify_bearer(value))
            .map(|caller| Some(Arc::new(caller)))
            .ok_or_else(|| {
                status(OpsError::new(
                    sluice_wire::ErrorCode::Unauthorized,
                    crate::auth::token_refused(sent.is_some(), crate::auth::GRPC_TOKEN),
                ))
            })
    }
}

/// PERMISSION_DENIED unless `caller` may do what `need` says on `queue`.
async fn permit(
    app: &AppState,
    caller: &Caller,
    need: Need,
    queue: Option<&str>,
) -> Result<(), Status> {
    match crate::auth::allows(app, caller, need, queue).await {
        Ok(true) => Ok(()),
        Ok(false) => {
            let what = queue.map_or_else(|| "this call".to_owned(), |q| format!("queue {q:?}"));
            Err(status(OpsError::new(
                sluice_wire::ErrorCode::Forbidden,
                format!(
                    "token {:?} may not do this on {what}",
                    sluice_ops::Caller::name(caller)
                ),
            )))
        }
        Err(error) => Err(status(error)),
    }
}

/// The gRPC status of a refusal: the code that fits the sluice code's HTTP status, the sluice
/// code in the `sluice-error-code` trailer and as an `ErrorInfo` reason, a wait in `RetryInfo`,
/// and details (per-receipt results, violations) as JSON in the `ErrorInfo` metadata.
pub(crate) fn status(error: OpsError) -> Status {
    use tonic_types::{ErrorDetails, StatusExt};
    let mut metadata = std::collections::HashMap::new();
    if let Some(details) = error.details.clone() {
        metadata.insert(
            "details".to_owned(),
            crate::views::details_json(details).to_string(),
        );
    }
    let mut details =
        ErrorDetails::with_error_info(error.code.as_str(), sluice_grpc::ERROR_DOMAIN, metadata);
    if let Some(seconds) = error.retry_after_s {
        details.set_retry_info(Some(std::time::Duration::from_secs(seconds)));
    }
    let mut status = Status::with_error_details(grpc_code(error.code), error.message, details);
    status.metadata_mut().insert(
        sluice_grpc::ERROR_CODE_TRAILER,
        tonic::metadata::MetadataValue::from_static(error.code.as_str()),
    );
    status
}

/// The gRPC code for a sluice code, by the HTTP status the code has.
fn grpc_code(code: sluice_wire::ErrorCode) -> Code {
    use sluice_wire::ErrorCode as E;
    match code {
        E::StaleReceipt | E::Conflict | E::NoPushDestination => Code::FailedPrecondition,
        E::QueueFull | E::Overloaded | E::DiskFull | E::TooLarge => Code::ResourceExhausted,
        E::StorageFailed | E::Unavailable => Code::Unavailable,
        _ => match code.status() {
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            404 => Code::NotFound,
            405 => Code::Unimplemented,
            408 => Code::DeadlineExceeded,
            400..=499 => Code::InvalidArgument,
            _ => Code::Internal,
        },
    }
}

/// The sluice code and message of a refusal, for an `Error` inside a stream.
pub(crate) fn stream_error(error: OpsError) -> sluice_grpc::v1::Error {
    sluice_grpc::v1::Error {
        code: error.code.as_str().to_owned(),
        message: error.message,
        details_json: error
            .details
            .map(|details| crate::views::details_json(details).to_string()),
        retry_after_s: error.retry_after_s,
    }
}
