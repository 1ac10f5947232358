//! Prometheus metrics at `GET /metrics`. (Being built: see the observability issue.)

use axum::Router;

use crate::api::AppState;

/// The metrics route.
pub fn router() -> Router<AppState> {
    Router::new()
}
