//! Liveness and readiness.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use sluice_wire::HealthOut;

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
    match app.readiness().await {
        Ok(()) => (
            StatusCode::OK,
            Json(HealthOut {
                status: "ok".into(),
            }),
        ),
        Err(status) => (StatusCode::SERVICE_UNAVAILABLE, Json(HealthOut { status })),
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
