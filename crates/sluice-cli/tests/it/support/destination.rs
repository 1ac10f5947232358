//! `Destination`: an in-process HTTP server for push delivery to call.
//!
//! It records every request (method, path, headers, body, arrival and answer times) and answers
//! from a [`Script`]: the first rule whose path or body substring matches picks the script,
//! otherwise the default one (200 unless set). It can be stopped (connections are then refused)
//! and started again on the same port.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long `stop` waits for open requests to finish.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long `start_again` retries binding the old port.
const REBIND_TIMEOUT: Duration = Duration::from_secs(5);

/// One answer: a status, headers, a body, and an optional wait before answering.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Sleeps a random time in `min..=max` before answering.
    pub delay: (Duration, Duration),
}

impl Answer {
    /// `200` with an empty body.
    pub fn ok() -> Self {
        Self::status(200)
    }

    pub fn status(status: u16) -> Self {
        Answer {
            status,
            headers: Vec::new(),
            body: String::new(),
            delay: (Duration::ZERO, Duration::ZERO),
        }
    }

    pub fn body(mut self, body: &str) -> Self {
        self.body = body.to_owned();
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Answers after `delay`.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = (delay, delay);
        self
    }

    /// Answers after a random time up to `max`.
    pub fn random_delay(mut self, max: Duration) -> Self {
        self.delay = (Duration::ZERO, max);
        self
    }
}

/// Answers given in order, then `then` for every later request.
#[derive(Debug, Clone)]
pub struct Script {
    first: VecDeque<Answer>,
    then: Answer,
}

impl Script {
    /// `answer` to every request.
    pub fn always(answer: Answer) -> Self {
        Script {
            first: VecDeque::new(),
            then: answer,
        }
    }

    /// `answer` to the first `n` requests, then 200 (see [`Script::then`]).
    pub fn fail(n: usize, answer: Answer) -> Self {
        Script {
            first: std::iter::repeat_n(answer, n).collect(),
            then: Answer::ok(),
        }
    }

    /// What comes after the first answers.
    pub fn then(mut self, answer: Answer) -> Self {
        self.then = answer;
        self
    }

    fn next(&mut self) -> Answer {
        self.first.pop_front().unwrap_or_else(|| self.then.clone())
    }
}

/// Which requests a script is for.
#[derive(Debug, Clone)]
enum Match {
    Path(String),
    BodyContains(String),
}

/// A request as it arrived, and when it was answered.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub arrived: Instant,
    /// When the answer was sent (`None` while the request is still open).
    pub answered: Option<Instant>,
    /// The status it was answered with.
    pub status: u16,
}

impl Recorded {
    /// A header as text (panics when it is not text).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(name)
            .map(|value| value.to_str().expect("header is text"))
    }

    /// A header that must be there.
    pub fn expect_header(&self, name: &str) -> &str {
        self.header(name)
            .unwrap_or_else(|| panic!("request without {name}: {self:?}"))
    }

    /// The body as JSON (panics when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("request body is not JSON ({e}): {:?}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `sluice-message-id` header.
    pub fn message_id(&self) -> &str {
        self.expect_header("sluice-message-id")
    }

    /// The `sluice-attempt` header as a number.
    pub fn attempt(&self) -> u32 {
        self.expect_header("sluice-attempt")
            .parse()
            .expect("sluice-attempt is a number")
    }
}

#[derive(Debug, Default)]
struct Inner {
    rules: Mutex<Vec<(Match, Script)>>,
    default: Mutex<Option<Script>>,
    requests: Mutex<Vec<Recorded>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// The recording HTTP server; stopped on drop.
pub struct Destination {
    addr: SocketAddr,
    inner: Arc<Inner>,
    running: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl Destination {
    /// Listens on `127.0.0.1:0`, answering 200 to everything until scripted otherwise.
    pub async fn start() -> Destination {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the destination");
        let mut destination = Destination {
            addr: listener.local_addr().expect("destination address"),
            inner: Arc::default(),
            running: None,
        };
        destination.serve(listener);
        destination
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests to `path` follow `script`.
    pub fn on_path(&self, path: &str, script: Script) {
        let rule = (Match::Path(path.to_owned()), script);
        self.inner.rules.lock().unwrap().push(rule);
    }

    /// Requests whose body contains `text` follow `script`.
    pub fn on_body(&self, text: &str, script: Script) {
        let rule = (Match::BodyContains(text.to_owned()), script);
        self.inner.rules.lock().unwrap().push(rule);
    }

    /// Requests no rule matches follow `script`.
    pub fn on_other(&self, script: Script) {
        *self.inner.default.lock().unwrap() = Some(script);
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.requests.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.inner.requests.lock().unwrap().len()
    }

    /// The most requests that were open at once.
    pub fn max_in_flight(&self) -> usize {
        self.inner.max_in_flight.load(Ordering::SeqCst)
    }

    /// Polls until at least `n` requests have been answered or `timeout` (real time) passed;
    /// returns the requests either way (the caller asserts).
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Recorded> {
        let deadline = Instant::now() + timeout;
        loop {
            let requests = self.requests();
            let answered = requests.iter().filter(|r| r.answered.is_some()).count();
            if answered >= n || Instant::now() >= deadline {
                return requests;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops listening (new connections are refused) after open requests are answered; idle
    /// keep-alive connections are closed.
    pub async fn stop(&mut self) {
        let (shutdown, task) = self.running.take().expect("the destination is not running");
        let _ = shutdown.send(());
        tokio::time::timeout(STOP_TIMEOUT, task)
            .await
            .expect("the destination did not stop")
            .expect("the destination task failed");
    }

    /// Listens again on the same port.
    pub async fn start_again(&mut self) {
        assert!(self.running.is_none(), "the destination is running");
        let deadline = Instant::now() + REBIND_TIMEOUT;
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(listener) => break listener,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("rebinding {}: {e}; retrying", self.addr);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("cannot listen on {} again: {e}", self.addr),
            }
        };
        self.serve(listener);
    }

    fn serve(&mut self, listener: TcpListener) {
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(self.inner.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .expect("destination server");
        });
        self.running = Some((shutdown, task));
    }
}

impl Drop for Destination {
    fn drop(&mut self) {
        if let Some((shutdown, _)) = self.running.take() {
            let _ = shutdown.send(());
        }
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let open = inner.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    inner.max_in_flight.fetch_max(open, Ordering::SeqCst);
    let path = uri.path().to_owned();
    let answer = {
        let mut rules = inner.rules.lock().unwrap();
        let text = String::from_utf8_lossy(&body);
        let rule = rules.iter_mut().find(|(on, _)| match on {
            Match::Path(p) => *p == path,
            Match::BodyContains(t) => text.contains(t.as_str()),
        });
        match rule {
            Some((_, script)) => script.next(),
            None => inner
                .default
                .lock()
                .unwrap()
                .as_mut()
                .map_or_else(Answer::ok, Script::next),
        }
    };
    let index = {
        let mut requests = inner.requests.lock().unwrap();
        requests.push(Recorded {
            method,
            path,
            headers,
            body,
            arrived: Instant::now(),
            answered: None,
            status: answer.status,
        });
        requests.len() - 1
    };

    let (min, max) = answer.delay;
    if max > Duration::ZERO {
        let delay = if max > min {
            rand::random_range(min..=max)
        } else {
            min
        };
        tokio::time::sleep(delay).await;
    }

    let mut response = (
        StatusCode::from_u16(answer.status).expect("valid status"),
        answer.body,
    )
        .into_response();
    for (name, value) in &answer.headers {
        response.headers_mut().insert(
            HeaderName::try_from(name.as_str()).expect("header name"),
            HeaderValue::try_from(value.as_str()).expect("header value"),
        );
    }
    // Counted as answered before the server can see the answer, so waiters never miss it.
    inner.in_flight.fetch_sub(1, Ordering::SeqCst);
    inner.requests.lock().unwrap()[index].answered = Some(Instant::now());
    response
}
