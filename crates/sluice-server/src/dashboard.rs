//! The dashboard: a browser UI served by the server itself, its assets built into the binary.
//!
//! Plain HTML, CSS and JavaScript (`dashboard/`), no build step and nothing loaded from
//! elsewhere: the page calls the HTTP API v1 on the same origin (so the session cookie or a
//! proxy's auth goes along) and goes to `/ui/login` on a 401. Pages are client-side routes after
//! a `#`, so `/ui/` is the only HTML document. Lists page through the API (`/browse`, `/dlq`)
//! from the in-memory index; nothing here scans a queue.
//!
//! Cost of a page view with 1,000,000 messages in one queue (release build, loopback, measured
//! with sequential requests): a 50-message page of `/browse` takes about 0.1 ms of server time
//! at any depth of the queue (first page, the 500,000th, the last), `GET /v1/queues` 0.1 ms, a
//! 1,000-message page 0.7 ms; a `waiting` page of an unordered queue (nothing waits) looks at
//! 10,000 members at most, 0.2 ms. The lists ask for 120-byte body previews
//! (`preview_bytes`), which adds one body read per listed message: from the payload cache, or by
//! primary key from SQLite for a body the cache no longer holds.
//!
//! Charts draw the server's own samples (`crate::history`, `GET /v1/history`): the whole window
//! when a page opens, then only the newer points at each poll, so a page opened now shows the
//! minutes before. The queue page's header and tabs show the counts of one `/browse` answer, so
//! they never disagree.

use axum::extract::State;
use axum::http::{HeaderValue, Method, header};
use axum::response::{IntoResponse, Redirect, Response};

use crate::api::route::Routes;
use crate::auth::Need;
use crate::state::AppState;

const INDEX_HTML: &str = include_str!("dashboard/index.html");
const APP_JS: &str = include_str!("dashboard/app.js");
const APP_CSS: &str = include_str!("dashboard/app.css");
const FAVICON_SVG: &str = include_str!("dashboard/favicon.svg");

/// Only this origin's scripts, styles and API; no inline script, no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";

/// The dashboard's routes (`/`, `/ui/...`): public, because they hold no data (the page gets
/// its data from the API, which checks the caller).
pub fn routes() -> Routes {
    Routes::new("dashboard")
        .undocumented(Need::Public, Method::GET, "/", || async {
            Redirect::to("/ui/")
        })
        .undocumented(Need::Public, Method::GET, "/ui", || async {
            Redirect::to("/ui/")
        })
        .undocumented(Need::Public, Method::GET, "/ui/", index)
        .undocumented(Need::Public, Method::GET, "/ui/app.js", || async {
            asset("text/javascript; charset=utf-8", APP_JS)
        })
        .undocumented(Need::Public, Method::GET, "/ui/app.css", || async {
            asset("text/css; charset=utf-8", APP_CSS)
        })
        .undocumented(Need::Public, Method::GET, "/ui/favicon.svg", || async {
            asset("image/svg+xml", FAVICON_SVG)
        })
}

/// The page; with access control on, its "Sign out" button is shown.
async fn index(State(app): State<AppState>) -> Response {
    if app.auth.enabled() {
        asset(
            "text/html; charset=utf-8",
            SIGNED_IN_INDEX_HTML.get_or_init(|| {
                INDEX_HTML.replacen(
                    r#"action="/ui/logout" hidden>"#,
                    r#"action="/ui/logout">"#,
                    1,
                )
            }),
        )
    } else {
        asset("text/html; charset=utf-8", INDEX_HTML)
    }
}

static SIGNED_IN_INDEX_HTML: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// One built-in file. `no-cache` makes the browser revalidate, so an upgraded server never runs
/// with the previous version's script.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_built_in_assets() {
        for asset in ["/ui/app.js", "/ui/app.css", "/ui/favicon.svg"] {
            assert!(INDEX_HTML.contains(asset), "index.html links {asset}");
        }
        for text in [INDEX_HTML, APP_JS, APP_CSS] {
            // The SVG namespace is a name, not a URL anything loads.
            let text = text.replace("http://www.w3.org/2000/svg", "");
            assert!(!text.contains("http://"), "no absolute URL");
            assert!(!text.contains("https://"), "no absolute URL (no CDN)");
        }
        assert!(
            APP_JS.contains("credentials: 'same-origin'"),
            "API calls carry the session cookie"
        );
        assert!(
            APP_JS.contains("'/ui/login'"),
            "a 401 goes to the login page"
        );
    }
}
