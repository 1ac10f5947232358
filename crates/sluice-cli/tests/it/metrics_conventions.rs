//! `GET /metrics` of a server with queues, a push destination and a webhook endpoint in use:
//! every family of the exposition follows the Prometheus naming conventions, and the process,
//! HTTP request and database size families show what the test did and what `/proc` says.
//!
//! The exposition is parsed twice: by the strict parser below, and by the reference parser of
//! the Prometheus client library for Python (`prometheus_client`, pinned in
//! .ci/requirements-prometheus.txt, installed into a venv on first use: support/python.rs),
//! which must read the same samples. Without Python's venv or the package index the second parse
//! is skipped, or fails the test when `CI` is set. (The `prometheus-parse` crate cannot
//! be used here: it cuts label values at `}`, and route templates hold braces.)

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::destination::Destination;
use crate::support::hooks::{define, post_hook};
use crate::support::python::venv_python_or_skip;

/// Longest wait for something the server does in the background.
const WAIT: Duration = Duration::from_secs(20);

/// A family as declared by its `# HELP` and `# TYPE` lines.
#[derive(Debug, Default)]
struct Family {
    help: Option<String>,
    kind: Option<String>,
}

/// The families of an exposition, checked line by line as the text format 0.0.4 wants them:
/// one HELP and one TYPE per family, both before its samples, no family declared twice, and
/// every sample (with the `_bucket`/`_sum`/`_count` of histograms) in a declared family.
fn families(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut finished = BTreeSet::new();
    let mut current: Option<String> = None;
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP name text");
            open_family(&mut current, &mut finished, name);
            let family = families.entry(name.to_owned()).or_default();
            assert!(family.help.is_none(), "two HELP lines for {name}");
            family.help = Some(help.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name type");
            open_family(&mut current, &mut finished, name);
            let family = families.entry(name.to_owned()).or_default();
            assert!(family.kind.is_none(), "two TYPE lines for {name}");
            family.kind = Some(kind.to_owned());
        } else if line.starts_with('#') {
            continue;
        } else {
            let name = &line[..line.find(['{', ' ']).expect("sample name")];
            let family = current.as_deref().expect("a sample before any TYPE line");
            let kind = families[family].kind.as_deref();
            let belongs = name == family
                || (kind == Some("histogram")
                    && ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|suffix| name.strip_suffix(suffix) == Some(family)));
            assert!(belongs, "sample {line:?} outside its family {family}");
        }
    }
    families
}

/// Starts `name`'s declaration; a family seen before and left is declared twice.
fn open_family(current: &mut Option<String>, finished: &mut BTreeSet<String>, name: &str) {
    if current.as_deref() == Some(name) {
        return;
    }
    if let Some(previous) = current.take() {
        finished.insert(previous);
    }
    assert!(!finished.contains(name), "{name} is declared twice");
    *current = Some(name.to_owned());
}

/// The Prometheus naming conventions (prometheus.io/docs/practices/naming) for one family.
fn check_conventions(name: &str, family: &Family) {
    let help = family.help.as_deref().unwrap_or_default();
    assert!(!help.trim().is_empty(), "{name} has no HELP text");
    let kind = family
        .kind
        .as_deref()
        .unwrap_or_else(|| panic!("{name} has no TYPE"));
    assert!(
        name.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            && !name.starts_with('_')
            && !name.contains("__"),
        "{name}: not snake_case"
    );
    assert!(
        name.starts_with("sluice_") || name.starts_with("process_"),
        "{name}: not in the sluice_ namespace (or the standard process_ one)"
    );
    let words: Vec<&str> = name.split('_').collect();
    for unit in [
        "ms",
        "us",
        "ns",
        "millis",
        "milliseconds",
        "micros",
        "microseconds",
        "minutes",
        "hours",
        "days",
        "kb",
        "mb",
        "kib",
        "mib",
        "percent",
    ] {
        assert!(!words.contains(&unit), "{name}: {unit} is not a base unit");
    }
    let base = name.strip_suffix("_total").unwrap_or(name);
    if words
        .iter()
        .any(|word| ["latency", "duration", "age", "time", "seconds"].contains(word))
    {
        assert!(base.ends_with("_seconds"), "{name}: a time is in _seconds");
    }
    if words.contains(&"bytes") {
        assert!(base.ends_with("_bytes"), "{name}: a size ends in _bytes");
    }
    match kind {
        "counter" => assert!(name.ends_with("_total"), "{name}: a counter ends in _total"),
        "gauge" | "histogram" | "info" => {
            assert!(
                !name.ends_with("_total"),
                "{name}: only counters end in _total"
            );
            assert!(
                !name.ends_with("_count") && !name.ends_with("_sum") && !name.ends_with("_bucket"),
                "{name}: a reserved suffix"
            );
        }
        other => panic!("{name}: unexpected type {other}"),
    }
    if kind == "info" {
        assert!(
            name.ends_with("_info"),
            "{name}: an info family ends in _info"
        );
    }
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of an exposition, read strictly: `name{label="value",...} value`, label values
/// with the format's escapes (`\\`, `\"`, `\n`).
fn parse_samples(text: &str) -> Vec<Sample> {
    let mut samples = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let name_end = line.find(['{', ' ']).expect("a sample name");
        let name = line[..name_end].to_owned();
        let mut rest = &line[name_end..];
        let mut labels = BTreeMap::new();
        if let Some(inner) = rest.strip_prefix('{') {
            let mut chars = inner.char_indices().peekable();
            loop {
                let (start, first) = chars.next().expect("labels end");
                if first == '}' {
                    rest = &inner[start + 1..];
                    break;
                }
                let key_start = if first == ',' {
                    chars.next().expect("a label after ,").0
                } else {
                    start
                };
                let eq = inner[key_start..].find('=').expect("label =") + key_start;
                let key = inner[key_start..eq].to_owned();
                assert!(
                    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                    "label name {key:?} in {line}"
                );
                while chars.peek().is_some_and(|&(i, _)| i <= eq) {
                    chars.next();
                }
                assert_eq!(chars.next().map(|(_, c)| c), Some('"'), "{line}");
                let mut value = String::new();
                loop {
                    match chars.next().expect("label value end").1 {
                        '"' => break,
                        '\\' => match chars.next().expect("escape").1 {
                            'n' => value.push('\n'),
                            c @ ('\\' | '"') => value.push(c),
                            c => panic!("escape \\{c} in {line}"),
                        },
                        c => value.push(c),
                    }
                }
                assert!(labels.insert(key, value).is_none(), "a label twice: {line}");
            }
        }
        let value = rest.trim();
        let value = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            other => other
                .parse()
                .unwrap_or_else(|_| panic!("value {other:?} in {line}")),
        };
        samples.push(Sample {
            name,
            labels,
            value,
        });
    }
    samples
}

/// The Python client library's parser over `text`: its families as JSON, or `None` when the
/// venv cannot be made (outside CI).
fn python_parse(text: &str) -> Option<Value> {
    let python = venv_python_or_skip(
        "prometheus",
        "requirements-prometheus.txt",
        "the prometheus_client parser",
    )?;
    const SCRIPT: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families = []
for family in text_string_to_metric_families(sys.stdin.read()):
    families.append({
        "name": family.name, "type": family.type, "help": family.documentation,
        "samples": [{"name": s.name, "labels": s.labels, "value": repr(float(s.value))}
                    for s in family.samples],
    })
json.dump(families, sys.stdout)
"#;
    use std::io::Write;
    let mut child = std::process::Command::new(&python)
        .args(["-c", SCRIPT])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run the venv's python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "prometheus_client cannot parse the exposition: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(serde_json::from_slice(&output.stdout).expect("the script's JSON"))
}

/// Both parses agree: the same samples, and every family with its help and type.
fn check_reference_parse(text: &str, samples: &[Sample], families: &BTreeMap<String, Family>) {
    let Some(parsed) = python_parse(text) else {
        return;
    };
    let parsed = parsed.as_array().expect("families");
    assert_eq!(parsed.len(), families.len(), "families: {parsed:#?}");
    let mut theirs = Vec::new();
    for family in parsed {
        assert!(
            !family["help"].as_str().unwrap_or_default().is_empty(),
            "{family}"
        );
        assert!(
            ["counter", "gauge", "histogram", "info"].contains(&family["type"].as_str().unwrap()),
            "{family}"
        );
        for sample in family["samples"].as_array().unwrap() {
            let labels: BTreeMap<String, String> =
                serde_json::from_value(sample["labels"].clone()).unwrap();
            theirs.push(Sample {
                name: sample["name"].as_str().unwrap().to_owned(),
                labels,
                value: sample["value"].as_str().unwrap().parse().unwrap(),
            });
        }
    }
    let key = |s: &Sample| format!("{}{:?}", s.name, s.labels);
    let mut ours = samples.to_vec();
    ours.sort_by_key(key);
    theirs.sort_by_key(key);
    assert_eq!(ours, theirs, "prometheus_client reads other samples");
}

/// `GET /metrics`: the raw text.
async fn scrape(server: &TestServer) -> String {
    let reply = server.get("/metrics").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.text
}

/// The samples of `name` whose labels include these.
fn samples<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

/// The value of the one sample of `name` with exactly these labels.
fn value(all: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<&Sample> = samples(all, name, labels)
        .into_iter()
        .filter(|s| s.labels.len() == labels.len())
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{name}{labels:?}: {found:#?} among {:#?}",
        samples(all, name, &[])
    );
    found[0].value
}

fn unix_now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[tokio::test]
async fn every_family_follows_the_prometheus_conventions_and_counts_known_traffic() {
    // Proves: with every kind of family present (queues, DLQ, push, webhooks, storage, HTTP,
    // process), each has one HELP and one TYPE, none is declared twice, counters end in
    // _total, times are in _seconds and sizes in _bytes; 7 enqueues, 2 lookups of a missing
    // queue and 3 requests to no route show up under their route templates (never the raw
    // path) with their methods and statuses, the latency histogram counted the 7 enqueues;
    // process_* agree with /proc of the server's pid; the database gauge covers its files.
    let started_s = unix_now_s();
    let destination = Destination::start().await;
    let server = TestServer::builder().start().await;
    server
        .put_queue(
            "conv-jobs",
            json!({"dead_letter_queue": "conv-dlq", "push": {"url": destination.url("/in")}}),
        )
        .await;
    for n in 0..7 {
        server.send("conv-jobs", json!({"body": {"n": n}})).await;
    }
    for _ in 0..2 {
        server
            .get("/v1/queues/no-such-queue")
            .await
            .error(404, "queue_not_found");
    }
    for path in ["/nope", "/nope/deeper", "/v1/not-a-route"] {
        assert_eq!(server.get(path).await.status, 404, "{path}");
    }
    server.put_queue("conv-inbox", json!({})).await;
    define(
        &server,
        "conv-hook",
        json!({"queue": "conv-inbox", "verify": {"scheme": "none"}}),
    )
    .await;
    let json_type = [("content-type".to_owned(), "application/json".to_owned())];
    let reply = post_hook(&server, "/hooks/conv-hook", &json_type, r#"{"a": 1}"#).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    destination.wait_for(7, WAIT).await;
    server
        .stats_until("conv-jobs", WAIT, |s| s["counters"]["acked"] == 7)
        .await;

    let text = scrape(&server).await;
    let families = families(&text);
    for (name, family) in &families {
        check_conventions(name, family);
    }
    let scrape = parse_samples(&text);
    check_reference_parse(&text, &scrape, &families);
    for expected in [
        "sluice_http_requests_total",
        "sluice_http_request_duration_seconds",
        "sluice_storage_database_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_max_fds",
        "process_virtual_memory_bytes",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "sluice_push_requests_total",
        "sluice_webhook_requests_total",
    ] {
        assert!(
            families.contains_key(expected),
            "{expected} missing: {:?}",
            families.keys()
        );
    }

    // HTTP requests, by route template.
    let enqueue_route = "/v1/queues/{queue}/messages";
    let enqueues = [
        ("route", enqueue_route),
        ("method", "POST"),
        ("status", "200"),
    ];
    assert_eq!(value(&scrape, "sluice_http_requests_total", &enqueues), 7.0);
    let missing = [
        ("route", "/v1/queues/{queue}"),
        ("method", "GET"),
        ("status", "404"),
    ];
    assert_eq!(value(&scrape, "sluice_http_requests_total", &missing), 2.0);
    let unmatched = [("route", "unmatched"), ("method", "GET"), ("status", "404")];
    assert_eq!(
        value(&scrape, "sluice_http_requests_total", &unmatched),
        3.0
    );
    let hooks = [
        ("route", "/hooks/{name}"),
        ("method", "POST"),
        ("status", "202"),
    ];
    assert_eq!(value(&scrape, "sluice_http_requests_total", &hooks), 1.0);
    for sample in samples(&scrape, "sluice_http_requests_total", &[]) {
        let route = &sample.labels["route"];
        assert!(
            route == "unmatched" || (route.starts_with('/') && !route.contains("conv")),
            "a raw path as a route label: {sample:?}"
        );
    }
    let route_labels = [("route", enqueue_route), ("method", "POST")];
    let buckets: Vec<(f64, f64)> = samples(
        &scrape,
        "sluice_http_request_duration_seconds_bucket",
        &route_labels,
    )
    .iter()
    .map(|s| {
        (
            s.labels["le"].replace("+Inf", "inf").parse().unwrap(),
            s.value,
        )
    })
    .collect();
    assert!(buckets.len() > 5, "{buckets:?}");
    assert_eq!(buckets.last(), Some(&(f64::INFINITY, 7.0)), "{buckets:?}");
    assert!(
        buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
        "cumulative, by bound: {buckets:?}"
    );
    let count = value(
        &scrape,
        "sluice_http_request_duration_seconds_count",
        &route_labels,
    );
    assert_eq!(count, 7.0);

    // The process, as /proc tells it from outside.
    let pid = server.pid().expect("the server runs");
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the server's fds")
        .count() as f64;
    let open_fds = value(&scrape, "process_open_fds", &[]);
    assert!(
        open_fds >= 5.0 && (open_fds - fds).abs() <= 16.0,
        "process_open_fds {open_fds}, /proc says {fds}"
    );
    let max_fds = value(&scrape, "process_max_fds", &[]);
    assert!(max_fds >= open_fds, "{max_fds} < {open_fds}");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    let rss = value(&scrape, "process_resident_memory_bytes", &[]);
    assert!(
        rss > 1e6 && (rss / (rss_kib * 1024.0) - 1.0).abs() < 0.5,
        "process_resident_memory_bytes {rss}, VmRSS {rss_kib} kB"
    );
    assert!(value(&scrape, "process_virtual_memory_bytes", &[]) >= rss);
    let cpu = value(&scrape, "process_cpu_seconds_total", &[]);
    assert!(cpu > 0.0 && cpu < 600.0, "{cpu}");
    let start = value(&scrape, "process_start_time_seconds", &[]);
    assert!(
        start >= started_s - 2.0 && start <= unix_now_s() + 1.0,
        "process_start_time_seconds {start}, test started at {started_s}"
    );

    // The database: its file and WAL.
    let data = server.data_dir();
    let db = std::fs::metadata(data.join("sluice.db")).unwrap().len() as f64;
    let wal = std::fs::metadata(data.join("sluice.db-wal")).map_or(0, |m| m.len()) as f64;
    let database = value(&scrape, "sluice_storage_database_bytes", &[]);
    let wal_gauge = value(&scrape, "sluice_storage_wal_bytes", &[]);
    assert!(
        database >= db && database >= wal_gauge && database <= db + wal + (4 << 20) as f64,
        "sluice_storage_database_bytes {database}: sluice.db {db}, WAL {wal}"
    );
}
