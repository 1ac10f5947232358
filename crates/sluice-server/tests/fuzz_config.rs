//! Property-based fuzzing of the config file parser: documents made of the sections and keys of
//! `config.default.toml` (its commented examples included, so new keys are fuzzed once they are
//! documented there) with arbitrary TOML values, and arbitrary text.
//!
//! Property: loading never panics; it is a config or a one-line-or-more error message.
//! `SLUICE_FUZZ_CASES` cases (default 256); the long run:
//! `SLUICE_FUZZ_CASES=100000 cargo test --release -p sluice-server --test fuzz_config`.

use proptest::prelude::*;
use sluice_server::ServeOptions;
use sluice_server::config::{Config, RawConfig};
use toml::{Table, Value};

const DEFAULT_CONFIG: &str = include_str!("../../../config.default.toml");

fn config() -> ProptestConfig {
    let cases = std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    ProptestConfig::with_cases(cases.unwrap_or(256))
}

/// `(section path, key)` of every key written in the reference file, commented or not.
fn documented_keys() -> Vec<(Vec<String>, String)> {
    let mut section: Vec<String> = Vec::new();
    let mut keys = Vec::new();
    for line in DEFAULT_CONFIG.lines() {
        let line = line.trim_start_matches('#').trim();
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_start_matches('[');
            if let Some(end) = header.find(']') {
                section = header[..end].split('.').map(str::to_owned).collect();
            }
        } else if let Some((key, _)) = line.split_once('=') {
            let key = key.trim();
            if !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                keys.push((section.clone(), key.to_owned()));
            }
        }
    }
    keys
}

fn toml_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::Integer),
        (0_i64..100_000).prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Float),
        any::<bool>().prop_map(Value::Boolean),
        "[ -~]{0,30}".prop_map(Value::String),
        proptest::sample::select(vec![
            "127.0.0.1:0",
            "0.0.0.0:7566",
            "fsync",
            "os",
            "sqlite",
            "fifo",
            "per_key",
            "dead_letter",
            "github",
            "hmac",
            ".body",
            "select(.)",
            "def f: [f]; f",
            "http://127.0.0.1:9/x",
            "",
        ])
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(
                proptest::sample::select(vec![
                    "env",
                    "file",
                    "scheme",
                    "secrets",
                    "name",
                    "role",
                    "queues",
                    "per_second"
                ]),
                inner,
                0..3
            )
            .prop_map(|m| Value::Table(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

/// Sets `value` at `path` + `key`, making tables on the way (and keeping what is there).
fn set(table: &mut Table, path: &[String], key: &str, value: Value) {
    let mut here = table;
    for part in path {
        let entry = here
            .entry(part.clone())
            .or_insert_with(|| Value::Table(Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(Table::new());
        }
        here = entry.as_table_mut().expect("table");
    }
    here.insert(key.to_owned(), value);
}

fn load(text: &str) {
    let options = ServeOptions::default();
    if let Ok(raw) = toml::from_str::<RawConfig>(text) {
        match Config::from_raw(raw, &options) {
            Ok(_) => {}
            Err(message) => assert!(!message.is_empty()),
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_config_documents_of_documented_keys_load_without_panic(
        picks in proptest::collection::vec(
            (proptest::sample::select(documented_keys()), toml_value()),
            1..10,
        ),
    ) {
        let mut table = Table::new();
        for ((path, key), value) in picks {
            // `[[auth.tokens]]` is an array of tables.
            if path == ["auth", "tokens"] {
                let mut token = Table::new();
                token.insert(key, value);
                table
                    .entry("auth")
                    .or_insert_with(|| Value::Table(Table::new()))
                    .as_table_mut()
                    .map(|auth| auth.insert("tokens".into(), Value::Array(vec![Value::Table(token)])));
                continue;
            }
            set(&mut table, &path, &key, value);
        }
        load(&toml::to_string(&table).expect("a table serializes"));
    }

    #[test]
    fn fuzz_config_text_loads_without_panic(text in prop_oneof![
        any::<String>(),
        "(\\[[a-z.]{0,20}\\]\n)?([a-z_]{1,12} = [-0-9a-z\"'{}\\[\\],. ]{0,20}\n){0,6}",
    ]) {
        load(&text);
    }
}
