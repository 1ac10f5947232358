//! The dashboard: a browser UI served by the server itself, its assets built into the binary.
//! (Being built: see the dashboard issue.)

use axum::Router;

use crate::api::AppState;

/// The dashboard's routes (`/`, `/ui/...`).
pub fn router() -> Router<AppState> {
    Router::new()
}
