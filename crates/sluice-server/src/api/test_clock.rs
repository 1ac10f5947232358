//! `POST /v1/_test/clock/advance`: moves the manual clock (test-clock mode only).
//!
//! Mounted only when the server runs with `SLUICE_TEST_CLOCK=1`, so integration tests can check
//! visibility, backoff and delays without sleeping.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::{ApiJson, AppState};
use crate::error::ApiError;

/// How far to move.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdvanceIn {
    /// Milliseconds, at least 0.
    pub ms: i64,
}

/// The new time.
#[derive(Debug, Serialize)]
pub struct AdvanceOut {
    /// RFC 3339.
    pub now: String,
}

/// Moves the clock, runs upkeep and the schedules' pass at the new time, and wakes every long
/// poll so it looks again.
pub async fn advance(
    State(app): State<AppState>,
    ApiJson(input): ApiJson<AdvanceIn>,
) -> Result<Json<AdvanceOut>, ApiError> {
    let clock = app
        .manual_clock
        .as_ref()
        .ok_or_else(ApiError::route_not_found)?;
    if input.ms < 0 {
        return Err(ApiError::invalid_field("ms must be at least 0"));
    }
    let now_ms = clock.advance(input.ms);
    app.ops.maintain().await?;
    // Schedules make the runs the move made due before the answer, so a test sees them.
    app.ops.schedules_pass().await?;
    // Alerts too: a test sees the notifications the move made due (a pass decides a
    // dead-letter notification, the next makes it).
    for _ in 0..2 {
        app.ops
            .alerts_pass(&crate::notifications::Notifications {
                dashboard: app.dashboard_url.clone(),
            })
            .await?;
    }
    app.ops.wake_all();
    Ok(Json(AdvanceOut {
        now: sluice_wire::format_rfc3339(now_ms),
    }))
}

/// The clock route (mounted in test-clock mode only).
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use axum::http::Method;

    Routes::new("test_clock").undocumented(
        Need::Admin,
        Method::POST,
        "/v1/_test/clock/advance",
        advance,
    )
}
