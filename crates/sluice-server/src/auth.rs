//! Access control: API tokens with roles, checked on every routed request.
//!
//! With no token configured every route is open (the server then refuses a non-loopback
//! address unless told otherwise, see [`check_exposure`]). With tokens, every route is governed
//! by one [`Rule`], keyed by its path template and written down where the route is registered
//! (`api::route`); a method without a rule is refused. The login form's routes are outside the
//! check: they are how a browser gets its session. A token comes as
//! `Authorization: Bearer <token>`; the dashboard's login form trades one for a session whose
//! random id rides in the `sluice_session` cookie ([`session`]). Tokens are compared as SHA-256
//! digests in constant time and never logged.

mod session;

pub use session::Sessions;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{FromRequestParts, MatchedPath, RawPathParams, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sluice_wire::SecretRef;
use subtle::ConstantTimeEq;

use crate::browser_guard::Provenance;
use crate::error::{ApiError, ErrorCode};
use crate::secrets;
use crate::state::AppState;

/// The session cookie the login form sets.
pub const COOKIE: &str = "sluice_session";

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything.
    Admin,
    /// Enqueue into (and read) the token's queues.
    Producer,
    /// Receive, ack, nack, extend from (and read) the token's queues.
    Consumer,
    /// Everything an admin does, within the token's tenant: its queues, webhooks, schedules,
    /// topics and alerts (those whose names its patterns match), and nothing outside it.
    TenantAdmin,
}

/// `[tenants.<name>]` as written: what a tenant owns.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// Name patterns (`*` matches any run of characters): the tenant owns every queue,
    /// webhook endpoint, schedule, topic and alert whose name one of them matches.
    pub queues: Vec<String>,
    /// The start of the names of the environment variables its tenant admins may name as
    /// secrets (`"TEAM_A_"`); without it they may name none.
    #[serde(default)]
    pub secrets_env_prefix: Option<String>,
    /// The most messages all its queues may hold at once (ready, delayed and in flight,
    /// dead-letter queues included); none by default. Beyond it enqueues get 503 `queue_full`.
    #[serde(default)]
    pub max_messages: Option<u64>,
    /// The most body bytes all its queues may hold at once (the same messages as
    /// `max_messages`); none by default. Beyond it enqueues get 503 `queue_full`.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// The most body bytes of acked messages its queues may keep (their `keep_acked_ms`); none
    /// by default. Beyond it enqueues into its queues that keep acked messages get 503
    /// `queue_full`.
    #[serde(default)]
    pub max_kept_bytes: Option<u64>,
}

/// A tenant's quotas (crate::quotas): `None` is no bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// `max_messages`.
    pub messages: Option<u64>,
    /// `max_bytes`.
    pub bytes: Option<u64>,
    /// `max_kept_bytes`.
    pub kept_bytes: Option<u64>,
}

impl Quota {
    /// True when it bounds anything.
    pub fn is_set(&self) -> bool {
        self.messages.is_some() || self.bytes.is_some() || self.kept_bytes.is_some()
    }
}

/// A tenant, as tokens scoped to it carry it.
#[derive(Debug)]
pub struct Tenant {
    /// Its name.
    pub name: String,
    patterns: Vec<String>,
    secrets_env_prefix: Option<String>,
    /// Its quotas (crate::quotas).
    pub quota: Quota,
}

impl Tenant {
    /// Whether the tenant owns what is called `name`: a name one of its patterns matches, or
    /// the queue (`sluice.alerts.<alert>`) or its dead-letter queue of an alert it owns.
    pub fn owns(&self, name: &str) -> bool {
        if let Some(alert) = name.strip_prefix(sluice_ops::alerts::ALERT_QUEUE_PREFIX) {
            let without_dlq = alert.strip_suffix(sluice_core::queue::DEAD_LETTER_SUFFIX);
            if self.matches(alert) || without_dlq.is_some_and(|alert| self.matches(alert)) {
                return true;
            }
        }
        self.matches(name)
    }

    fn matches(&self, name: &str) -> bool {
        self.patterns.iter().any(|pattern| grants(pattern, name))
    }

    /// Whether every name `pattern` matches is the tenant's: an exact name it owns, or a
    /// pattern whose fixed start (up to its first `*`) is a prefix one of the tenant's own
    /// prefix patterns covers. The queues of the alerts a pattern covers count too
    /// (`sluice.alerts.team-a.*`).
    pub fn owns_pattern(&self, pattern: &str) -> bool {
        pattern
            .strip_prefix(sluice_ops::alerts::ALERT_QUEUE_PREFIX)
            .is_some_and(|alerts| self.covers_pattern(alerts))
            || self.covers_pattern(pattern)
    }

    fn covers_pattern(&self, pattern: &str) -> bool {
        match pattern.split_once('*') {
            None => self.owns(pattern),
            Some((start, _)) => self.patterns.iter().any(|own| {
                own.strip_suffix('*')
                    .is_some_and(|prefix| !prefix.contains('*') && start.starts_with(prefix))
            }),
        }
    }
}

/// `[[auth.tokens]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    /// A name for logs and errors (the token itself is never shown).
    pub name: String,
    /// Where the token comes from.
    pub token: SecretRef,
    /// `admin`, or `producer` and/or `consumer`.
    pub roles: Vec<Role>,
    /// Queue-name patterns for producer/consumer (`*` matches any run of characters):
    /// `["team-a.*"]`. Ignored for admin. With `tenant`, the tenant's patterns by default.
    #[serde(default)]
    pub queues: Vec<String>,
    /// The tenant (`[tenants.<name>]`) the token belongs to: required for `tenant_admin`; a
    /// producer or consumer token of a tenant is kept within its queues.
    #[serde(default)]
    pub tenant: Option<String>,
}

/// `[auth]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthSpec {
    /// The tokens. `SLUICE_ADMIN_TOKEN` in the environment adds an admin token.
    #[serde(default)]
    pub tokens: Vec<TokenSpec>,
    /// Serve `/metrics` without a token (default false: an admin token is needed).
    #[serde(default)]
    pub metrics_public: bool,
}

/// A token ready to compare.
#[derive(Clone)]
struct Token {
    name: String,
    digest: [u8; 32],
    /// The token itself: the SQS API's SigV4 signatures are keyed with it (the token's name is
    /// the access key id), and checking one needs the key, not a digest.
    secret: String,
    roles: Vec<Role>,
    queues: Vec<String>,
    tenant: Option<Arc<Tenant>>,
}

impl Token {
    /// The caller this token makes.
    fn caller(&self) -> Caller {
        Caller {
            name: self.name.clone(),
            roles: self.roles.clone(),
            queues: self.queues.clone(),
            tenant: self.tenant.clone(),
        }
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("name", &self.name)
            .field("roles", &self.roles)
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

/// Who a request is.
#[derive(Debug, Clone)]
pub struct Caller {
    name: String,
    roles: Vec<Role>,
    queues: Vec<String>,
    tenant: Option<Arc<Tenant>>,
}

impl Caller {
    /// True for an admin token.
    pub fn is_admin(&self) -> bool {
        self.roles.contains(&Role::Admin)
    }

    /// The tenant of a `tenant_admin` token.
    pub fn administered_tenant(&self) -> Option<&Tenant> {
        self.tenant
            .as_deref()
            .filter(|_| self.roles.contains(&Role::TenantAdmin))
    }

    /// May this caller define, change and delete what is called `name` (a queue, webhook
    /// endpoint, schedule, topic or alert)? An admin may any; a tenant admin its tenant's.
    pub fn may_manage(&self, name: &str) -> bool {
        self.is_admin()
            || self
                .administered_tenant()
                .is_some_and(|tenant| tenant.owns(name))
    }

    fn covers(&self, queue: &str) -> bool {
        self.queues.iter().any(|pattern| grants(pattern, queue))
    }

    /// May this caller see `queue` (its stats, messages, dead letters)?
    pub fn may_read(&self, queue: &str) -> bool {
        self.may_manage(queue)
            || ((self.roles.contains(&Role::Producer) || self.roles.contains(&Role::Consumer))
                && self.covers(queue))
    }

    /// May this caller produce into or consume from `queue`? A dead-letter queue (some
    /// queue's `dead_letter_queue`, whatever its name, or any `<name>.dlq`) is the team's to
    /// read through its source queue, but taking or adding messages there (which would bypass
    /// the admin-only replay and delete) needs a pattern that grants dead-letter queues.
    fn may(&self, role: Role, queue: &str, is_dead_letter_queue: bool) -> bool {
        if self.may_manage(queue) {
            return true;
        }
        if !self.roles.contains(&role) {
            return false;
        }
        if is_dead_letter_queue || queue.ends_with(sluice_core::queue::DEAD_LETTER_SUFFIX) {
            return self
                .queues
                .iter()
                .any(|pattern| grants_dead_letters(pattern) && grants(pattern, queue));
        }
        self.covers(queue)
    }
}

/// The caller as the operations layer sees it (`sluice_ops::Caller`).
impl sluice_ops::Caller for Caller {
    fn name(&self) -> &str {
        &self.name
    }

    fn is_admin(&self) -> bool {
        Caller::is_admin(self)
    }

    fn may_read(&self, queue: &str) -> bool {
        Caller::may_read(self, queue)
    }

    fn may_manage(&self, queue: &str) -> bool {
        Caller::may_manage(self, queue)
    }
}

/// A pattern that grants dead-letter queues: one that ends in `.dlq` (`team-a.*.dlq`), or a
/// queue's exact name (`team-a.pay-failed`). A wildcard such as `team-a.*` that happens to
/// match a dead-letter queue's name does not.
fn grants_dead_letters(pattern: &str) -> bool {
    pattern.ends_with(sluice_core::queue::DEAD_LETTER_SUFFIX) || !pattern.contains('*')
}

/// Whether some name could match both patterns. Exact for names and for patterns with one `*`
/// (the fixed starts must agree, and so must the fixed ends); for more, it may say yes for two
/// that cannot meet, never no for two that can.
fn patterns_overlap(a: &str, b: &str) -> bool {
    match (a.contains('*'), b.contains('*')) {
        (false, false) => a == b,
        (false, true) => wildcard(b, a),
        (true, false) => wildcard(a, b),
        (true, true) => {
            let start = |p: &str| p.split('*').next().unwrap_or_default().to_owned();
            let end = |p: &str| p.rsplit('*').next().unwrap_or_default().to_owned();
            let (start_a, start_b, end_a, end_b) = (start(a), start(b), end(a), end(b));
            (start_a.starts_with(&start_b) || start_b.starts_with(&start_a))
                && (end_a.ends_with(&end_b) || end_b.ends_with(&end_a))
        }
    }
}

/// Whether `pattern` grants `name`. An alert's queue (`sluice.alerts.<alert>`) belongs to the
/// alert's owner, so only a pattern that names such queues (it starts with `sluice.alerts.`)
/// grants one: a tenant's `s*` does not take another tenant's alert queue, and a producer's
/// `*` cannot forge notifications (issue 30, findings 14 and 19).
fn grants(pattern: &str, name: &str) -> bool {
    let prefix = sluice_ops::alerts::ALERT_QUEUE_PREFIX;
    if name.starts_with(prefix) && !pattern.starts_with(prefix) {
        return false;
    }
    wildcard(pattern, name)
}

/// `*` matches any run of characters; everything else matches itself.
fn wildcard(pattern: &str, text: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('*').collect();
    for (position, part) in parts.iter().enumerate() {
        if position == parts.len() - 1 {
            return remaining.ends_with(part);
        }
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    true
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The configured tokens.
#[derive(Debug, Default)]
pub struct Auth {
    tokens: Vec<Token>,
    metrics_public: bool,
    /// `[tenants]`: who owns which names.
    tenants: Vec<Arc<Tenant>>,
}

impl Auth {
    /// Reads every token's secret. Errors name the token, never its value.
    pub fn load(
        spec: &AuthSpec,
        tenants: &std::collections::BTreeMap<String, TenantSpec>,
    ) -> Result<Self, String> {
        let tenants: std::collections::BTreeMap<&str, Arc<Tenant>> = tenants
            .iter()
            .map(|(name, spec)| {
                if spec.queues.is_empty() {
                    return Err(format!(
                        "[tenants.{name}]: give queues (patterns such as \"team-a.*\")"
                    ));
                }
                if spec.secrets_env_prefix.as_deref() == Some("") {
                    return Err(format!(
                        "[tenants.{name}]: secrets_env_prefix is empty (it would grant every variable)"
                    ));
                }
                Ok((
                    name.as_str(),
                    Arc::new(Tenant {
                        name: name.clone(),
                        patterns: spec.queues.clone(),
                        secrets_env_prefix: spec.secrets_env_prefix.clone(),
                        quota: Quota {
                            messages: spec.max_messages,
                            bytes: spec.max_bytes,
                            kept_bytes: spec.max_kept_bytes,
                        },
                    }),
                ))
            })
            .collect::<Result<_, String>>()?;
        // Two tenants that could own one name would each administer it: refused.
        let all: Vec<&Arc<Tenant>> = tenants.values().collect();
        for (index, first) in all.iter().enumerate() {
            for second in &all[index + 1..] {
                for a in &first.patterns {
                    if let Some(b) = second.patterns.iter().find(|b| patterns_overlap(a, b)) {
                        return Err(format!(
                            "[tenants.{}] and [tenants.{}]: {a:?} and {b:?} can name the same queue; a name belongs to one tenant",
                            first.name, second.name
                        ));
                    }
                }
            }
        }
        let mut tokens = Vec::new();
        for token in &spec.tokens {
            if token.roles.is_empty() {
                return Err(format!("[[auth.tokens]] {:?}: give roles", token.name));
            }
            let tenant = match &token.tenant {
                Some(name) => Some(tenants.get(name.as_str()).cloned().ok_or_else(|| {
                    format!(
                        "[[auth.tokens]] {:?}: tenant {name:?} is not defined in [tenants]",
                        token.name
                    )
                })?),
                None => None,
            };
            if token.roles.contains(&Role::TenantAdmin) && tenant.is_none() {
                return Err(format!(
                    "[[auth.tokens]] {:?}: a tenant_admin token needs tenant = \"<name>\"",
                    token.name
                ));
            }
            if token.roles.contains(&Role::Admin) && tenant.is_some() {
                return Err(format!(
                    "[[auth.tokens]] {:?}: an admin token is not scoped to a tenant (use tenant_admin)",
                    token.name
                ));
            }
            let mut queues = token.queues.clone();
            if let Some(tenant) = &tenant {
                if queues.is_empty() {
                    queues = tenant.patterns.clone();
                }
                if let Some(outside) = queues.iter().find(|q| !tenant.owns_pattern(q)) {
                    return Err(format!(
                        "[[auth.tokens]] {:?}: queues pattern {outside:?} reaches outside tenant {:?}",
                        token.name, tenant.name
                    ));
                }
            }
            if !token.roles.contains(&Role::Admin) && queues.is_empty() {
                return Err(format!(
                    "[[auth.tokens]] {:?}: a producer or consumer token needs queues (patterns such as \"team-a.*\")",
                    token.name
                ));
            }
            let value =
                secrets::resolve(&token.token, &format!("[[auth.tokens]] {:?}", token.name))?;
            if value.len() < 16 {
                return Err(format!(
                    "[[auth.tokens]] {:?}: the token is shorter than 16 characters",
                    token.name
                ));
            }
            tokens.push(Token {
                name: token.name.clone(),
                digest: digest(&value),
                secret: value.clone(),
                roles: token.roles.clone(),
                queues,
                tenant,
            });
        }
        if let Ok(value) = std::env::var("SLUICE_ADMIN_TOKEN")
            && !value.trim().is_empty()
        {
            let value = value.trim();
            if value.len() < 16 {
                return Err("SLUICE_ADMIN_TOKEN is shorter than 16 characters".into());
            }
            tokens.push(Token {
                name: "SLUICE_ADMIN_TOKEN".into(),
                digest: digest(value),
                secret: value.to_owned(),
                roles: vec![Role::Admin],
                queues: Vec::new(),
                tenant: None,
            });
        }
        Ok(Self {
            tokens,
            metrics_public: spec.metrics_public,
            tenants: tenants.into_values().collect(),
        })
    }

    /// The tenants of `[tenants]`.
    pub fn tenants(&self) -> &[Arc<Tenant>] {
        &self.tenants
    }

    /// True when a tenant owns `name` (its destinations are then called as a tenant's).
    pub fn is_tenant_owned(&self, name: &str) -> bool {
        self.tenants.iter().any(|tenant| tenant.owns(name))
    }

    /// True when tokens are configured (access control is on).
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The caller of an `Authorization` value (`Bearer <token>`), for protocols that read the
    /// header themselves (gRPC metadata).
    pub fn identify_bearer(&self, authorization: &str) -> Option<Caller> {
        let token = authorization
            .strip_prefix("Bearer ")
            .or_else(|| authorization.strip_prefix("bearer "))?;
        self.identify(token.trim())
    }

    /// The caller a presented token belongs to. Every configured token is compared, so the
    /// time taken does not say which (or whether one) matched.
    fn identify(&self, presented: &str) -> Option<Caller> {
        self.identify_digest(digest(presented))
    }

    /// The caller behind a live dashboard session.
    async fn identify_session(
        &self,
        sessions: &session::Sessions,
        session_id: &str,
        now_ms: sluice_core::Millis,
    ) -> Result<Option<Caller>, sluice_core::store::StoreError> {
        Ok(sessions
            .token_digest(session_id, now_ms)
            .await?
            .and_then(|token_digest| self.identify_digest(token_digest)))
    }

    /// The secret and caller of the token named `access_key_id` (an SQS client's access key
    /// id is the token's name; its secret access key is the token).
    pub fn by_access_key(&self, access_key_id: &str) -> Option<(String, Caller)> {
        let token = self
            .tokens
            .iter()
            .find(|token| token.name == access_key_id)?;
        Some((token.secret.clone(), token.caller()))
    }

    fn identify_digest(&self, presented: [u8; 32]) -> Option<Caller> {
        let mut found = None;
        for token in &self.tokens {
            if bool::from(token.digest.ct_eq(&presented)) {
                found = Some(token);
            }
        }
        found.map(Token::caller)
    }
}

/// Refuses to serve a non-loopback address without tokens, unless the config allows it.
pub fn check_exposure(
    listen: SocketAddr,
    auth: &Auth,
    allow_unauthenticated: bool,
) -> Result<(), String> {
    if listen.ip().is_loopback() || auth.enabled() || allow_unauthenticated {
        return Ok(());
    }
    Err(format!(
        "refusing to listen on {listen} without access control: configure [[auth.tokens]] (or SLUICE_ADMIN_TOKEN), or set [server] allow_unauthenticated = true to serve it open"
    ))
}

/// What a route needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Anyone (health, webhooks guarded by their signatures, the API description, the
    /// dashboard's pages and assets).
    Public,
    /// Any valid token (lists are then filtered to what the caller may read).
    AnyToken,
    /// Producer or consumer of the route's queue.
    Read,
    /// Producer of the route's queue.
    Produce,
    /// Consumer of the route's queue.
    Consume,
    /// An admin token, or a tenant admin's for the route's queue or name (a route with
    /// neither: an admin's only).
    Admin,
    /// An admin or a tenant admin (the handler shows a tenant admin its tenant's only).
    Administrators,
    /// `/metrics`: admin, or anyone with `metrics_public`.
    Metrics,
}

/// The access rule of one route: what a caller needs to call `method path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The method (a GET rule covers HEAD too).
    pub method: Method,
    /// The route's path template, as the router matched it (`/v1/queues/{queue}`).
    pub path: String,
    /// Who may call it.
    pub need: Need,
}

/// The rules of every guarded route, by method and path template. They are written down with
/// the routes themselves (`api::route`: each module's `routes()` gives each handler its rule),
/// so a route cannot be served without one; a method a route has no rule for is refused.
#[derive(Debug, Default)]
pub struct Rules(Vec<Rule>);

impl Rules {
    /// The rules, as the route table lists them.
    pub fn new(rules: Vec<Rule>) -> Self {
        Self(rules)
    }

    /// The rule of a route.
    pub fn need(&self, method: &Method, template: &str) -> Option<Need> {
        self.0
            .iter()
            .find(|rule| rule.method == method && rule.path == template)
            .map(|rule| rule.need)
    }

    /// Every rule.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.0.iter()
    }
}

/// What the access check holds: the server's state and the rules of the routes it guards.
#[derive(Clone)]
pub struct Guard {
    /// The server's state (its tokens, and the store that says which queues are dead-letter
    /// queues).
    pub app: AppState,
    /// The rules of the guarded routes.
    pub rules: Arc<Rules>,
}

/// How a request carried its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carrier {
    Bearer,
    Cookie,
}

/// The credential a request carries: a bearer token, else the session cookie's id (a
/// non-bearer `Authorization`, such as a proxy's Basic auth, does not hide the cookie).
fn presented(headers: &HeaderMap) -> Option<(String, Carrier)> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|value| {
            value
                .strip_prefix("Bearer ")
                .or_else(|| value.strip_prefix("bearer "))
        });
    if let Some(token) = bearer {
        return Some((token.trim().to_owned(), Carrier::Bearer));
    }
    session_cookie(headers).map(|id| (id, Carrier::Cookie))
}

/// The value of the session cookie.
fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .find_map(|cookie| {
            let (name, value) = cookie.trim().split_once('=')?;
            (name == COOKIE).then(|| value.to_owned())
        })
}

/// A request authenticated by the session cookie that changes something must come from the
/// dashboard's own pages, as its browser says (`browser_guard` tells, in `Sec-Fetch-Site` or
/// `Origin`): a cookie means a browser, so one that says nothing is refused too. This stops
/// another site, even a sibling subdomain, from making a signed-in browser act.
fn same_origin(request: &Request) -> bool {
    request.extensions().get::<Provenance>() == Some(&Provenance::SameOrigin)
}

/// `caller` as the operations layer sees it: with access control off, [`sluice_ops::Anyone`].
pub fn ops_caller(caller: Option<&Caller>) -> &dyn sluice_ops::Caller {
    match caller {
        Some(caller) => caller,
        None => &sluice_ops::Anyone,
    }
}

/// How an HTTP request carries its token.
pub const HTTP_TOKEN: &str = "Authorization: Bearer <token>";
/// How a gRPC call carries its token.
pub const GRPC_TOKEN: &str = "metadata authorization: Bearer <token>";

/// Why a request without a usable token is refused, told apart: none was sent (`sent` false),
/// or the one sent is no token of this server (a typo, an old or another server's token).
/// `how` is how the door carries a token ([`HTTP_TOKEN`], [`GRPC_TOKEN`]). Either way it names
/// `SLUICE_TOKEN`, which the CLI and the SDKs send.
pub fn token_refused(sent: bool, how: &str) -> String {
    if sent {
        format!(
            "the token sent is not one of this server's tokens: check it (the CLI and the SDKs send SLUICE_TOKEN) and send {how}"
        )
    } else {
        format!(
            "no token was sent, and this server needs one: send {how} (the CLI and the SDKs send SLUICE_TOKEN, or the CLI's --token)"
        )
    }
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(ErrorCode::Unauthorized, message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

fn forbidden(message: String) -> Response {
    ApiError::new(ErrorCode::Forbidden, message).into_response()
}

/// Lets a request through when its token allows the route; the caller rides along in the
/// request's extensions for handlers that filter lists.
pub async fn authorize(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let app = &guard.app;
    let auth = &app.auth;
    if !auth.enabled() {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let template = parts
        .extensions
        .get::<MatchedPath>()
        .map_or("", |m| m.as_str())
        .to_owned();
    let params = RawPathParams::from_request_parts(&mut parts, app)
        .await
        .ok();
    let mut request = Request::from_parts(parts, body);
    // HEAD is a GET without the body.
    let method = if request.method() == Method::HEAD {
        Method::GET
    } else {
        request.method().clone()
    };
    let Some(need) = guard.rules.need(&method, &template) else {
        // A known route with a method it does not take (OPTIONS, say): the router's 405.
        tracing::debug!(method = %request.method(), route = %template, "method without an access rule");
        return ApiError::method_not_allowed().into_response();
    };
    if need == Need::Public || (need == Need::Metrics && auth.metrics_public) {
        return next.run(request).await;
    }
    let Some((credential, carrier)) = presented(request.headers()) else {
        return unauthorized(&token_refused(false, HTTP_TOKEN));
    };
    let caller = match carrier {
        Carrier::Bearer => auth.identify(&credential),
        Carrier::Cookie => match auth
            .identify_session(&app.sessions, &credential, app.now_ms())
            .await
        {
            Ok(caller) => caller,
            Err(error) => return ApiError::from(error).into_response(),
        },
    };
    let Some(caller) = caller else {
        return unauthorized(&match carrier {
            Carrier::Bearer => token_refused(true, HTTP_TOKEN),
            Carrier::Cookie => {
                "the dashboard session has ended: sign in again at /ui/login, or send Authorization: Bearer <token>".to_owned()
            }
        });
    };
    if carrier == Carrier::Cookie && method != Method::GET && !same_origin(&request) {
        return forbidden("a cross-site request with the dashboard's cookie was refused".into());
    }
    // What the route is about: its queue, else what it names (a webhook endpoint, schedule,
    // topic or alert, whose tenant is told by its name as a queue's is).
    let param = |wanted: &str| {
        params.as_ref().and_then(|params| {
            params
                .iter()
                .find(|(name, _)| *name == wanted)
                .map(|(_, value)| value.to_owned())
        })
    };
    let (kind, resource) = match param("queue") {
        Some(queue) => ("queue", Some(queue)),
        None => ("", param("name")),
    };
    match allows(app, &caller, need, resource.as_deref()).await {
        Ok(true) => {}
        Ok(false) => {
            let what = resource.map_or_else(
                || "this route".to_owned(),
                |r| {
                    if kind.is_empty() {
                        format!("{r:?}")
                    } else {
                        format!("{kind} {r:?}")
                    }
                },
            );
            return forbidden(format!("token {:?} may not do this on {what}", caller.name));
        }
        Err(error) => return ApiError::from(error).into_response(),
    }
    request.extensions_mut().insert(Arc::new(caller));
    next.run(request).await
}

/// Whether `caller` may do what `need` says on `queue` (`None` for a route without one). The
/// native API's guard and the SQS API both decide here.
pub async fn allows(
    app: &AppState,
    caller: &Caller,
    need: Need,
    queue: Option<&str>,
) -> sluice_ops::OpsResult<bool> {
    // Looked up now, so a queue named as a dead-letter queue a moment ago is one.
    let is_dead_letter_queue = match (need, queue) {
        (Need::Produce | Need::Consume, Some(queue))
            if !caller.is_admin() && !queue.ends_with(sluice_core::queue::DEAD_LETTER_SUFFIX) =>
        {
            app.ops.queue_is_dead_letter_queue(queue).await?
        }
        _ => false,
    };
    Ok(match (need, queue) {
        (Need::Public | Need::AnyToken, _) => true,
        (Need::Admin, Some(resource)) => caller.may_manage(resource),
        (Need::Administrators | Need::Metrics, _) => {
            caller.is_admin() || caller.administered_tenant().is_some()
        }
        (Need::Admin, None) => caller.is_admin(),
        (Need::Read, Some(queue)) => caller.may_read(queue),
        (Need::Produce, Some(queue)) => caller.may(Role::Producer, queue, is_dead_letter_queue),
        (Need::Consume, Some(queue)) => caller.may(Role::Consumer, queue, is_dead_letter_queue),
        _ => caller.is_admin(),
    })
}

/// Each next step of an ack is a produce to its queue: refused (naming the step) unless
/// `caller` may produce there. Every protocol that takes next steps asks here.
pub async fn check_next_steps(
    app: &AppState,
    caller: Option<&Caller>,
    steps: &[sluice_ops::NextStep],
) -> Result<(), sluice_ops::OpsError> {
    let Some(caller) = caller else {
        return Ok(());
    };
    for (index, step) in steps.iter().enumerate() {
        if !allows(app, caller, Need::Produce, Some(&step.queue)).await? {
            return Err(sluice_ops::OpsError::new(
                sluice_wire::ErrorCode::Forbidden,
                format!(
                    "then[{index}]: token {:?} may not produce to queue {:?}",
                    caller.name, step.queue
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses (403, naming the field) a queue definition of a tenant admin's that reaches outside
/// its tenant: its dead-letter queue (the one given, or the default `<name>.dlq` of a queue
/// made without one) must be the tenant's, and its push destination may name neither another
/// secret than the tenant's nor an internal address. Checked before anything is resolved.
/// Every protocol that defines queues asks here.
pub(crate) async fn check_tenant_put(
    app: &AppState,
    caller: Option<&Caller>,
    name: &str,
    spec: &sluice_wire::QueueSpec,
) -> Result<(), sluice_ops::OpsError> {
    let Some(caller) = caller.filter(|caller| !caller.is_admin()) else {
        return Ok(());
    };
    let forbidden =
        |message: String| sluice_ops::OpsError::new(sluice_wire::ErrorCode::Forbidden, message);
    // A tenant's queue dead-letters into a queue of the tenant's, not into another's.
    match spec.dead_letter_queue.as_deref() {
        Some("") => {}
        Some(dead_letter_queue) => {
            if !caller.may_manage(dead_letter_queue) {
                return Err(forbidden(format!(
                    "dead_letter_queue: queue {dead_letter_queue:?} is outside the token's tenant"
                )));
            }
        }
        None => {
            let default = format!("{name}{}", sluice_core::queue::DEAD_LETTER_SUFFIX);
            if !caller.may_manage(&default) {
                let exists = match app.ops.queue_get(name).await {
                    Ok(_) => true,
                    Err(error) if error.code == sluice_wire::ErrorCode::QueueNotFound => false,
                    Err(error) => return Err(error),
                };
                if !exists {
                    return Err(forbidden(format!(
                        "dead_letter_queue: the default dead-letter queue {default:?} is outside \
                         the token's tenant; give dead_letter_queue (a queue of the tenant's), \
                         or \"\" for none"
                    )));
                }
            }
        }
    }
    if let Some(Some(push)) = &spec.push {
        check_push(Some(caller), push)?;
    }
    Ok(())
}

/// With access control on, refuses (403) a caller that may not produce to every one of
/// `queues`: a topic's publish reaches each of its subscribed queues, taken or not by a filter,
/// so what a caller may publish does not depend on the message.
pub async fn check_produce_to(
    app: &AppState,
    caller: Option<&Caller>,
    what: &str,
    queues: &[&str],
) -> Result<(), sluice_ops::OpsError> {
    let Some(caller) = caller else {
        return Ok(());
    };
    for queue in queues {
        if !allows(app, caller, Need::Produce, Some(queue)).await? {
            // A queue the caller may not even see (another tenant's) is not named.
            let which = if caller.may_read(queue) {
                format!("queue {queue:?}")
            } else {
                "a queue it may not see".to_owned()
            };
            return Err(sluice_ops::OpsError::new(
                sluice_wire::ErrorCode::Forbidden,
                format!(
                    "token {:?} may not produce to {which}, which the {what} reaches",
                    caller.name
                ),
            ));
        }
    }
    Ok(())
}

/// The caller a guarded handler is given (`None` with access control off).
pub type CallerExt = Option<axum::Extension<Arc<Caller>>>;

/// Whether the caller (`None`: access control off) may manage what is called `name`: what
/// lists of webhooks, schedules, topics and alerts show.
pub fn manages(caller: &CallerExt, name: &str) -> bool {
    caller.as_ref().is_none_or(|caller| caller.may_manage(name))
}

/// Refuses (403, naming `field`) a definition that refers to a queue its caller may not
/// manage: a tenant admin's webhooks, schedules, topics and queues stay within the tenant.
pub fn check_manages(caller: &CallerExt, field: &str, queue: &str) -> Result<(), ApiError> {
    if manages(caller, queue) {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::Forbidden,
        format!("{field}: queue {queue:?} is outside the token's tenant"),
    ))
}

/// As [`check_manages`], for a name pattern (an alert's `queues`): every name it matches must
/// be the tenant's.
pub fn check_manages_pattern(
    caller: &CallerExt,
    field: &str,
    pattern: &str,
) -> Result<(), ApiError> {
    let Some(caller) = caller.as_ref() else {
        return Ok(());
    };
    if caller.is_admin()
        || caller
            .administered_tenant()
            .is_some_and(|tenant| tenant.owns_pattern(pattern))
    {
        return Ok(());
    }
    Err(ApiError::new(
        ErrorCode::Forbidden,
        format!("{field}: {pattern:?} reaches outside the token's tenant"),
    ))
}

/// The tenant whose limits hold `caller`'s definitions: a tenant admin's (an admin's, and
/// everyone's with access control off, are not held).
fn held_tenant(caller: Option<&Caller>) -> Option<&Tenant> {
    caller
        .filter(|caller| !caller.is_admin())
        .and_then(Caller::administered_tenant)
}

fn refused(message: String) -> sluice_ops::OpsError {
    sluice_ops::OpsError::new(sluice_wire::ErrorCode::Forbidden, message)
}

/// Refuses (403, naming `field`) a secret a tenant admin may not name: one that is not an
/// environment variable starting with its tenant's `secrets_env_prefix` (a file, or any secret
/// when the tenant has no prefix). Checked before the secret is read, so a refusal says
/// nothing about whether the variable exists.
pub fn check_secret(
    caller: Option<&Caller>,
    field: &str,
    secret: &SecretRef,
) -> Result<(), sluice_ops::OpsError> {
    let Some(tenant) = held_tenant(caller) else {
        return Ok(());
    };
    let Some(prefix) = tenant.secrets_env_prefix.as_deref() else {
        return Err(refused(format!(
            "{field}: tenant {:?} has no secrets_env_prefix, so its admins may not name secrets",
            tenant.name
        )));
    };
    match (&secret.env, &secret.file) {
        (Some(env), None) if env.starts_with(prefix) => Ok(()),
        _ => Err(refused(format!(
            "{field}: a tenant admin's secrets are environment variables whose names start \
             with {prefix:?} (secrets_env_prefix of tenant {:?}); files are not allowed",
            tenant.name
        ))),
    }
}

/// Refuses (403, naming `field`) a destination URL of a tenant admin's that names an internal
/// host: `localhost` (and `*.localhost`), or an IP address [`crate::egress::is_internal`] calls
/// internal, in any spelling. A DNS name is judged when it is called: the tenants' client
/// resolves only to public addresses (crate::egress). A URL that does not parse is left to the
/// definition's own validation.
pub fn check_destination_url(
    caller: Option<&Caller>,
    field: &str,
    url: &str,
) -> Result<(), sluice_ops::OpsError> {
    if held_tenant(caller).is_none() {
        return Ok(());
    }
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Ok(());
    };
    let internal = crate::egress::names_internal_host(&parsed);
    if internal {
        return Err(refused(format!(
            "{field}: a tenant admin's destinations may not be internal addresses (localhost, \
             loopback, private, link-local, unspecified or shared IP addresses)"
        )));
    }
    Ok(())
}

/// A tenant admin's push destination: its URL and its signing secret.
pub fn check_push(
    caller: Option<&Caller>,
    push: &sluice_wire::PushSpec,
) -> Result<(), sluice_ops::OpsError> {
    check_destination_url(caller, "push.url", &push.url)?;
    if let Some(secret) = &push.signing_secret {
        check_secret(caller, "push.signing_secret", secret)?;
    }
    Ok(())
}

/// The login routes (public; the form checks the token itself).
pub fn router() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/ui/login", axum::routing::get(login_page).post(login))
        .route("/ui/logout", axum::routing::post(logout))
}

/// The login form's fields.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    token: String,
}

const LOGIN_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>sluice: sign in</title>
<style>body{font-family:system-ui,sans-serif;max-width:24rem;margin:4rem auto;padding:0 1rem}input,button{font:inherit;padding:.5rem;width:100%;box-sizing:border-box;margin:.25rem 0}.error{color:#b00}</style>
</head><body><h1>sluice</h1>
<form method="post" action="/ui/login"><label for="token">API token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit" id="sign-in">Sign in</button></form>{error}</body></html>"#;

/// `GET /ui/login`: the form.
pub async fn login_page() -> Html<String> {
    Html(LOGIN_PAGE.replace("{error}", ""))
}

/// `POST /ui/login`: checks the token, starts a session and sets its cookie.
pub async fn login(
    State(app): State<AppState>,
    axum::Form(form): axum::Form<LoginForm>,
) -> Response {
    let token = form.token.trim();
    if app.auth.identify(token).is_none() {
        let page = LOGIN_PAGE.replace(
            "{error}",
            r#"<p class="error" id="login-error">That token is not valid.</p>"#,
        );
        return (StatusCode::UNAUTHORIZED, Html(page)).into_response();
    }
    let session_id = match app.sessions.start(digest(token), app.now_ms()).await {
        Ok(id) => id,
        Err(refused) => {
            let page = LOGIN_PAGE.replace(
                "{error}",
                &format!(r#"<p class="error" id="login-error">{refused}.</p>"#),
            );
            let retry_after = match &refused {
                session::LoginRefused::Full(_) => "60",
                session::LoginRefused::Store(error) => {
                    tracing::warn!(%error, "a dashboard session could not be stored");
                    "1"
                }
            };
            let mut response = (StatusCode::SERVICE_UNAVAILABLE, Html(page)).into_response();
            response.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from_static(retry_after),
            );
            return response;
        }
    };
    let secure = if app.tls { "; Secure" } else { "" };
    let cookie = format!(
        "{COOKIE}={session_id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
        session::SESSION_TTL.as_secs()
    );
    let mut response = Redirect::to("/ui/").into_response();
    if let Ok(value) = header::HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /ui/logout`: ends the session and clears its cookie.
pub async fn logout(State(app): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(session_id) = session_cookie(&headers)
        && let Err(error) = app.sessions.end(&session_id).await
    {
        // The session stays until it expires; the cookie is cleared all the same.
        tracing::warn!(%error, "a dashboard session could not be ended");
    }
    let mut response = Redirect::to("/ui/login").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        header::HeaderValue::from_static(
            "sluice_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0",
        ),
    );
    response
}

#[cfg(test)]
mod tests {

    #[test]
    fn tenants_whose_patterns_can_meet_are_told_apart() {
        assert!(patterns_overlap("team-*", "team-a.*"));
        assert!(patterns_overlap("payments", "pay*"));
        assert!(patterns_overlap("ab*", "a*c"));
        assert!(!patterns_overlap("team-a.*", "team-b.*"));
        assert!(!patterns_overlap("team-*.orders", "team-*.billing"));
        assert!(!patterns_overlap("payments", "orders"));
        let tenants = std::collections::BTreeMap::from([
            (
                "a".to_owned(),
                TenantSpec {
                    queues: vec!["team-*".into()],
                    ..TenantSpec::default()
                },
            ),
            (
                "b".to_owned(),
                TenantSpec {
                    queues: vec!["team-b.*".into()],
                    ..TenantSpec::default()
                },
            ),
        ]);
        let error = Auth::load(&AuthSpec::default(), &tenants).unwrap_err();
        assert!(error.contains("can name the same queue"), "{error}");
    }

    use super::*;

    #[test]
    fn wildcards_match_runs_of_characters() {
        for (pattern, text, expected) in [
            ("team-a.*", "team-a.orders", true),
            ("team-a.*", "team-a.", true),
            ("team-a.*", "team-b.orders", false),
            ("team-a.*", "team-a", false),
            ("*", "anything", true),
            ("orders", "orders", true),
            ("orders", "orders.dlq", false),
            ("*.dlq", "orders.dlq", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
        ] {
            assert_eq!(wildcard(pattern, text), expected, "{pattern} vs {text}");
        }
    }

    #[test]
    fn a_caller_sees_only_its_queues_and_roles() {
        let producer = Caller {
            name: "a".into(),
            roles: vec![Role::Producer],
            queues: vec!["team-a.*".into()],
            tenant: None,
        };
        assert!(producer.may_read("team-a.orders"));
        assert!(!producer.may_read("team-b.orders"));
        assert!(producer.may(Role::Producer, "team-a.orders", false));
        assert!(!producer.may(Role::Consumer, "team-a.orders", false));
        assert!(
            !producer.may(Role::Producer, "team-a.pay-failed", true),
            "a wildcard does not grant a dead-letter queue, whatever its name"
        );
        let named = Caller {
            name: "b".into(),
            roles: vec![Role::Consumer],
            queues: vec!["team-a.pay-failed".into(), "team-a.*.dlq".into()],
            tenant: None,
        };
        assert!(named.may(Role::Consumer, "team-a.pay-failed", true));
        assert!(named.may(Role::Consumer, "team-a.orders.dlq", true));
        let admin = Caller {
            name: "ops".into(),
            roles: vec![Role::Admin],
            queues: vec![],
            tenant: None,
        };
        assert!(admin.may(Role::Consumer, "anything", true));
    }

    #[test]
    fn tokens_are_identified_by_digest() {
        let auth = Auth {
            tokens: vec![Token {
                name: "t".into(),
                digest: digest("a-long-enough-token"),
                secret: "a-long-enough-token".into(),
                roles: vec![Role::Admin],
                queues: vec![],
                tenant: None,
            }],
            metrics_public: false,
            tenants: Vec::new(),
        };
        assert!(auth.identify("a-long-enough-token").is_some());
        assert!(auth.identify("a-long-enough-tokeN").is_none());
        assert!(auth.identify("").is_none());
        assert!(!format!("{:?}", auth.tokens[0]).contains("digest"));
        assert!(!format!("{:?}", auth.tokens[0]).contains("a-long-enough-token"));
        let (secret, caller) = auth.by_access_key("t").unwrap();
        assert_eq!(
            (secret.as_str(), caller.is_admin()),
            ("a-long-enough-token", true)
        );
        assert!(auth.by_access_key("a-long-enough-token").is_none());
    }

    /// Every route is served with a rule (with access control on, a route without one is
    /// refused): every operation of the OpenAPI document has one, and the routes the document
    /// does not show are exactly these, each with its rule.
    #[test]
    fn every_route_has_an_access_rule() {
        let (_, document, rules) = crate::api::routes(true).split();
        let doc = serde_json::to_value(&document).unwrap();
        let mut documented = std::collections::BTreeSet::new();
        for (path, methods) in doc["paths"].as_object().unwrap() {
            for method in methods.as_object().unwrap().keys() {
                let method: Method = method.to_uppercase().parse().unwrap();
                assert!(
                    rules.need(&method, path).is_some(),
                    "{method} {path} has no access rule"
                );
                documented.insert((method.to_string(), path.clone()));
            }
        }
        let undocumented = [
            ("GET", "/metrics", Need::Metrics),
            ("GET", "/", Need::Public),
            ("GET", "/ui", Need::Public),
            ("GET", "/ui/", Need::Public),
            ("GET", "/ui/app.js", Need::Public),
            ("GET", "/ui/app.css", Need::Public),
            ("GET", "/ui/favicon.svg", Need::Public),
            ("POST", "/v1/_test/clock/advance", Need::Admin),
        ];
        for (method, path, need) in undocumented {
            assert_eq!(
                rules.need(&method.parse().unwrap(), path),
                Some(need),
                "{method} {path}"
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for rule in rules.iter() {
            let route = (rule.method.to_string(), rule.path.clone());
            assert!(seen.insert(route.clone()), "{route:?} has two rules");
            assert!(
                documented.contains(&route)
                    || undocumented
                        .iter()
                        .any(|(m, p, _)| (m.to_string(), p.to_string()) == route),
                "{route:?} is served but neither documented nor listed here"
            );
        }
    }

    #[test]
    fn exposure_needs_tokens_off_loopback() {
        let open = Auth::default();
        assert!(check_exposure("127.0.0.1:7566".parse().unwrap(), &open, false).is_ok());
        assert!(check_exposure("[::1]:7566".parse().unwrap(), &open, false).is_ok());
        assert!(check_exposure("0.0.0.0:7566".parse().unwrap(), &open, false).is_err());
        assert!(check_exposure("0.0.0.0:7566".parse().unwrap(), &open, true).is_ok());
    }

    fn tenant_admin(prefix: Option<&str>) -> Caller {
        Caller {
            name: "team-a-admin".into(),
            roles: vec![Role::TenantAdmin],
            queues: vec!["team-a.*".into()],
            tenant: Some(Arc::new(Tenant {
                name: "team-a".into(),
                patterns: vec!["team-a.*".into()],
                secrets_env_prefix: prefix.map(Into::into),
                quota: Quota::default(),
            })),
        }
    }

    #[test]
    fn a_tenant_owns_its_alerts_queues() {
        let caller = tenant_admin(None);
        let tenant = caller.administered_tenant().unwrap();
        assert!(tenant.owns("sluice.alerts.team-a.ops"));
        assert!(tenant.owns("sluice.alerts.team-a.ops.dlq"));
        assert!(!tenant.owns("sluice.alerts.team-b.ops"));
        assert!(!tenant.owns("sluice.alerts.sluice.alerts.team-a.ops"));
        assert!(tenant.owns_pattern("sluice.alerts.team-a.*"));
        assert!(!tenant.owns_pattern("sluice.alerts.*"));
    }

    /// Issue 30, findings 14 and 19: a tenant with pattern `s*` beside `team-a.*` read,
    /// purged and deleted team-a's alert queue, and any producer whose pattern matched an
    /// alert queue could forge notifications. An alert's queue is its owner's alone now.
    #[test]
    fn alert_queues_are_granted_only_by_their_alert_or_by_name() {
        let wide = Tenant {
            name: "s-team".into(),
            patterns: vec!["s*".into()],
            secrets_env_prefix: None,
            quota: Quota::default(),
        };
        assert!(!wide.owns("sluice.alerts.team-a.oncall"));
        assert!(!wide.owns("sluice.alerts.team-a.oncall.dlq"));
        assert!(
            wide.owns("sluice.alerts.s-alert"),
            "its own alert, by the alert's name"
        );
        assert!(wide.owns("shipping"));
        let producer = |pattern: &str| Caller {
            name: "p".into(),
            roles: vec![Role::Producer],
            queues: vec![pattern.into()],
            tenant: None,
        };
        assert!(!producer("*").may(Role::Producer, "sluice.alerts.oncall", false));
        assert!(producer("*").may(Role::Producer, "orders", false));
        assert!(producer("sluice.alerts.*").may(Role::Producer, "sluice.alerts.oncall", false));
    }

    #[test]
    fn a_tenant_admin_names_its_own_secrets_and_no_internal_address() {
        let secret = |env: Option<&str>, file: Option<&str>| SecretRef {
            env: env.map(Into::into),
            file: file.map(Into::into),
        };
        let with = tenant_admin(Some("TEAM_A_"));
        let without = tenant_admin(None);
        assert!(check_secret(Some(&with), "f", &secret(Some("TEAM_A_X"), None)).is_ok());
        assert!(check_secret(Some(&with), "f", &secret(Some("OTHER"), None)).is_err());
        assert!(check_secret(Some(&with), "f", &secret(None, Some("/etc/passwd"))).is_err());
        assert!(check_secret(Some(&without), "f", &secret(Some("TEAM_A_X"), None)).is_err());
        assert!(check_secret(None, "f", &secret(None, Some("/etc/passwd"))).is_ok());
        for url in [
            "http://localhost:9/",
            "http://api.LOCALHOST./",
            "http://127.0.0.1:9/x",
            "http://0x7f.1/",
            "http://10.0.0.1/",
            "http://172.16.5.5/",
            "http://192.168.1.1/",
            "http://169.254.169.254/",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[::]/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[::ffff:127.0.0.1]/",
        ] {
            assert!(
                check_destination_url(Some(&with), "u", url).is_err(),
                "{url}"
            );
            assert!(check_destination_url(None, "u", url).is_ok(), "{url}");
        }
        for url in [
            "https://example.com/x",
            "http://8.8.8.8/",
            "http://100.128.0.1/",
            "http://[2606:4700::1111]/",
        ] {
            assert!(
                check_destination_url(Some(&with), "u", url).is_ok(),
                "{url}"
            );
        }
    }
}
