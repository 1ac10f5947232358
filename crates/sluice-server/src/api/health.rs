//! Liveness and readiness.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use sluice_core::store::WriteState;
use sluice_core::wire::HealthOut;

use super::AppState;

/// `GET /healthz`: the process is alive.
#[utoipa::path(get, operation_id = "healthz", path = "/healthz", responses((status = 200, body = HealthOut)))]
pub async fn healthz() -> Json<HealthOut> {
    Json(HealthOut {
        status: "ok".into(),
    })
}

/// `GET /readyz`: the store accepts new messages (the disk is not full, writes have not
/// stopped) and the server is not shutting down.
#[utoipa::path(get, operation_id = "readyz", path = "/readyz", responses((status = 200, body = HealthOut), (status = 503, body = HealthOut)))]
pub async fn readyz(State(app): State<AppState>) -> (StatusCode, Json<HealthOut>) {
    match readiness(&app).await {
        Ok(()) => (
            StatusCode::OK,
            Json(HealthOut {
                status: "ok".into(),
            }),
        ),
        Err(status) => (StatusCode::SERVICE_UNAVAILABLE, Json(HealthOut { status })),
    }
}

/// Whether this node is ready (`/readyz`, and gRPC's `grpc.health.v1`): `Err` says why not.
pub async fn readiness(app: &AppState) -> Result<(), String> {
    if app.is_shutting_down() {
        return Err("shutting down".into());
    }
    // A node that refuses new messages is not ready, so a load balancer sends producers
    // elsewhere; it still serves receives and acks.
    if let Some(status) = not_ready(&app.ops.write_state()) {
        return Err(status);
    }
    match app.ops.queue_list(&sluice_ops::Anyone).await {
        Ok(_) => Ok(()),
        Err(error) => Err(error.to_string()),
    }
}

/// The health routes: public, for load balancers and orchestrators.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("health")
        .documented(Need::Public, routes!(healthz))
        .documented(Need::Public, routes!(readyz))
}

/// Why a node in this write state is not ready, if it is not.
fn not_ready(state: &WriteState) -> Option<String> {
    match state {
        WriteState::Accepting => None,
        WriteState::DiskFull => {
            Some("disk full: new messages are refused until space is freed".into())
        }
        WriteState::Stopped(reason) => Some(format!("writes stopped until a restart: {reason}")),
        WriteState::Unavailable(reason) => Some(format!(
            "the store cannot reach its database (it reconnects by itself): {reason}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_store_that_takes_writes_is_ready() {
        assert_eq!(not_ready(&WriteState::Accepting), None);
        for state in [
            WriteState::DiskFull,
            WriteState::Stopped("sync failed".into()),
            WriteState::Unavailable("connection refused".into()),
        ] {
            let status = not_ready(&state).expect("not ready");
            assert!(!status.is_empty());
        }
        assert!(
            not_ready(&WriteState::Unavailable("connection refused".into()))
                .unwrap()
                .contains("connection refused"),
            "says why"
        );
    }
}
