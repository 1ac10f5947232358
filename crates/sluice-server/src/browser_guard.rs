//! What a web page may not make a browser do to the server.
//!
//! In open mode (no tokens, loopback) the API trusts whoever can reach it, and a browser on the
//! same machine can reach it for any web page it shows. So, for every request:
//!
//! - **Cross-site changes are refused** (`403 cross_site_request`): a request with a method
//!   other than GET/HEAD whose browser headers say another site made it (`Sec-Fetch-Site` other
//!   than `same-origin`, or else an `Origin` that is not the server's own). Requests with
//!   neither header (curl, SDKs, other servers) are not from a browser and pass.
//! - **Browsers must send JSON as JSON** (`415 unsupported_media_type`): a body from a browser
//!   (an `Origin` or `Sec-Fetch-*` header) needs `content-type: application/json` (or
//!   `…+json`), so a page cannot slip JSON past the browser as a `text/plain` "simple request"
//!   without a CORS preflight. Other clients may send any content type: `curl -d` sends
//!   `application/x-www-form-urlencoded`, and the server reads the body as JSON all the same.
//! - **In open mode, only known host names** (`421 unknown_host`): the `Host` must name the
//!   listen address (`127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT`, the listen IP, or any IP
//!   literal when listening on all addresses) or a `[server] public_urls` entry, which defeats DNS
//!   rebinding (a page whose own name resolves to 127.0.0.1). With tokens the check is off:
//!   a rebound page carries no token and no session cookie, and servers behind a proxy are
//!   reached under names the server cannot know.
//!
//! Webhooks (`/hooks/…`) are exempt from all three: senders are other servers, some post
//! forms, tunnels rename the host, and a signature (not the caller's origin) guards them;
//! `/healthz` and `/readyz` are exempt from the host check, for probes that use any name.
//! The login and logout forms post form bodies, so they skip the content type check but not the
//! cross-site one.
//!
//! The verdict ([`Provenance`]) rides in the request's extensions: `auth` requires
//! [`Provenance::SameOrigin`] of a change made with the dashboard's session cookie, because a cookie
//! means a browser, and a browser that says nothing cannot be told apart from another site's page.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use reqwest::Url;

use crate::error::{ApiError, ErrorCode};

/// Where a request comes from, as far as its browser headers tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// A browser says this server's own pages made it.
    SameOrigin,
    /// A browser says another site (or an opaque origin) made it.
    CrossSite,
    /// No `Sec-Fetch-Site` and no `Origin`: not a browser (curl, SDKs, servers).
    NotBrowser,
}

/// The checks, with what they need to know about the server.
#[derive(Debug, Clone)]
pub struct BrowserGuard {
    /// No tokens configured: the host check is on.
    open: bool,
    /// The bound address (the real port, also when the config asked for port 0).
    listen: SocketAddr,
    /// Serving HTTPS: a `Host` without a port means 443.
    tls: bool,
    /// `[server] public_urls`: other names the server is reached under, and its origins there.
    public_urls: Vec<Url>,
}

impl BrowserGuard {
    /// The guard of a server bound to `listen`.
    pub fn new(open: bool, listen: SocketAddr, tls: bool, public_urls: Vec<Url>) -> Self {
        Self {
            open,
            listen,
            tls,
            public_urls,
        }
    }

    /// Classifies a request by `Sec-Fetch-Site`, or else `Origin` against the request's own
    /// host and the public URLs.
    pub fn provenance(&self, headers: &HeaderMap) -> Provenance {
        if let Some(site) = headers.get("sec-fetch-site") {
            return if site.as_bytes() == b"same-origin" {
                Provenance::SameOrigin
            } else {
                Provenance::CrossSite
            };
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Provenance::NotBrowser;
        };
        let origin = origin.to_str().unwrap_or_default();
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let own_host = origin
            .split_once("://")
            .is_some_and(|(_, authority)| Some(authority) == host);
        let public = self
            .public_urls
            .iter()
            .any(|url| url.origin().ascii_serialization() == origin);
        if own_host || public {
            Provenance::SameOrigin
        } else {
            Provenance::CrossSite
        }
    }

    /// True when `host` (a `Host` header's value) names this server.
    fn host_allowed(&self, host: &str) -> bool {
        let Some((name, port)) = split_host(host) else {
            return false;
        };
        let name = name.to_ascii_lowercase();
        let public = self.public_urls.iter().any(|url| {
            url.host_str() == Some(name.as_str())
                && port.or(url.port_or_known_default()) == url.port_or_known_default()
        });
        if public {
            return true;
        }
        if port.unwrap_or(if self.tls { 443 } else { 80 }) != self.listen.port() {
            return false;
        }
        if name == "localhost" {
            return true;
        }
        let ip = name
            .strip_prefix('[')
            .and_then(|v6| v6.strip_suffix(']'))
            .unwrap_or(&name);
        // An IP literal cannot be rebound to another address, but only the listen address
        // (or any, when listening on all of them) is this server.
        ip.parse::<IpAddr>().is_ok_and(|ip| {
            ip.is_loopback() || ip == self.listen.ip() || self.listen.ip().is_unspecified()
        })
    }
}

/// `name[:port]` → (name, port); IPv6 names keep their brackets. None when malformed.
fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if host.starts_with('[') {
        let end = host.find(']')?;
        let (name, rest) = host.split_at(end + 1);
        match rest.strip_prefix(':') {
            Some(port) => (name, Some(port)),
            None if rest.is_empty() => (name, None),
            None => return None,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    if name.is_empty() {
        return None;
    }
    let port = match port {
        Some(port) => Some(port.parse().ok()?),
        None => None,
    };
    Some((name, port))
}

/// A `Content-Type` that says JSON: `application/json` or any `…+json`, parameters aside.
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// True unless the request's body is known to be empty (HTTP/1 chunked and HTTP/2 bodies of
/// unknown length count as bodies).
fn has_body(request: &Request) -> bool {
    use axum::body::HttpBody;
    request.body().size_hint().exact() != Some(0)
}

/// A browser made the request: it sent `Origin` or a fetch metadata header.
fn from_browser(headers: &HeaderMap) -> bool {
    headers.contains_key(header::ORIGIN)
        || headers
            .keys()
            .any(|name| name.as_str().starts_with("sec-fetch-"))
}

/// Wraps `app` in the checks.
pub fn layer(app: axum::Router, guard: Arc<BrowserGuard>) -> axum::Router {
    app.layer(axum::middleware::from_fn_with_state(guard, check))
}

async fn check(
    State(guard): State<Arc<BrowserGuard>>,
    mut request: Request,
    next: Next,
) -> Response {
    match judge(&guard, &request) {
        Ok(Some(provenance)) => {
            request.extensions_mut().insert(provenance);
            next.run(request).await
        }
        Ok(None) => next.run(request).await,
        Err(refused) => refused.into_response(),
    }
}

/// The refusal of a change another site's page asked a browser to make.
pub fn cross_site_refusal() -> ApiError {
    ApiError::new(
        ErrorCode::CrossSiteRequest,
        "a request from another site's page was refused (Origin / Sec-Fetch-Site)",
    )
}

/// The checks on one request, for the layer and for the SQS API (which takes its requests
/// before the routes): `Err` is the refusal to answer with; `Ok` carries the request's
/// provenance, `None` for a webhook (whose sender is no browser).
pub fn judge(guard: &BrowserGuard, request: &Request) -> Result<Option<Provenance>, ApiError> {
    let path = request.uri().path();
    if path.starts_with("/hooks/") {
        return Ok(None);
    }
    let headers = request.headers();
    if guard.open && !matches!(path, "/healthz" | "/readyz") {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| request.uri().authority().map(|a| a.as_str()));
        // No host at all is an HTTP/1.0 client, not a browser (browsers always send one).
        if let Some(host) = host
            && !guard.host_allowed(host)
        {
            return Err(ApiError::new(
                ErrorCode::UnknownHost,
                format!(
                    "Host {host:?} does not name this server; without tokens only its listen address is served (add other names to [server] public_urls)"
                ),
            ));
        }
    }
    let provenance = guard.provenance(headers);
    let changes = !matches!(*request.method(), Method::GET | Method::HEAD);
    if changes && provenance == Provenance::CrossSite {
        return Err(cross_site_refusal());
    }
    let is_form_route = matches!(path, "/ui/login" | "/ui/logout");
    if changes && !is_form_route && from_browser(headers) && has_body(request) {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !is_json(content_type) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "a body sent from a browser needs content-type: application/json",
            ));
        }
    }
    Ok(Some(provenance))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(listen: &str, public: &[&str]) -> BrowserGuard {
        BrowserGuard::new(
            true,
            listen.parse().unwrap(),
            false,
            public.iter().map(|u| Url::parse(u).unwrap()).collect(),
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn hosts_must_name_the_listen_address_or_a_public_url() {
        let local = guard("127.0.0.1:7566", &["https://q.example.com"]);
        for host in [
            "127.0.0.1:7566",
            "localhost:7566",
            "LOCALHOST:7566",
            "[::1]:7566",
            "q.example.com",
            "q.example.com:443",
        ] {
            assert!(local.host_allowed(host), "{host}");
        }
        for host in [
            "evil.example:7566",
            "127.0.0.1:80",
            "127.0.0.1",
            "10.0.0.5:7566",
            "localhost.evil.example:7566",
            "q.example.com:7566",
            "[::1",
            ":7566",
            "localhost:x",
        ] {
            assert!(!local.host_allowed(host), "{host}");
        }
        let all = guard("0.0.0.0:80", &[]);
        assert!(all.host_allowed("10.0.0.5"));
        assert!(!all.host_allowed("box.internal"));
    }

    #[test]
    fn browsers_say_where_a_request_comes_from() {
        let local = guard("127.0.0.1:7566", &["https://q.example.com"]);
        for (pairs, provenance) in [
            (vec![], Provenance::NotBrowser),
            (
                vec![("sec-fetch-site", "same-origin")],
                Provenance::SameOrigin,
            ),
            (vec![("sec-fetch-site", "same-site")], Provenance::CrossSite),
            (
                vec![("sec-fetch-site", "cross-site")],
                Provenance::CrossSite,
            ),
            (vec![("sec-fetch-site", "none")], Provenance::CrossSite),
            (
                vec![
                    ("origin", "http://127.0.0.1:7566"),
                    ("host", "127.0.0.1:7566"),
                ],
                Provenance::SameOrigin,
            ),
            (
                vec![
                    ("origin", "https://q.example.com"),
                    ("host", "127.0.0.1:7566"),
                ],
                Provenance::SameOrigin,
            ),
            (
                vec![
                    ("origin", "http://evil.example"),
                    ("host", "127.0.0.1:7566"),
                ],
                Provenance::CrossSite,
            ),
            (
                vec![("origin", "null"), ("host", "127.0.0.1:7566")],
                Provenance::CrossSite,
            ),
        ] {
            assert_eq!(local.provenance(&headers(&pairs)), provenance, "{pairs:?}");
        }
    }

    #[test]
    fn json_content_types() {
        for json in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/merge-patch+json",
        ] {
            assert!(is_json(json), "{json}");
        }
        for other in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
            "text/json+x",
        ] {
            assert!(!is_json(other), "{other}");
        }
    }
}
