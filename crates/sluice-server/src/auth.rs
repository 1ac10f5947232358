//! Access control: API tokens with roles, checked on every request. (Being built.)

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::api::AppState;

/// Lets a request through when its token allows the route.
pub async fn authorize(State(_app): State<AppState>, request: Request, next: Next) -> Response {
    next.run(request).await
}
