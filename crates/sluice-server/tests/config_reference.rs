//! `config.default.toml` names every key the config parser accepts.
//!
//! The accepted keys are not listed by hand: they are asked of the parser itself. Every config
//! struct refuses unknown fields, and serde's refusal lists the fields the struct does accept
//! ("unknown field `__probe`, expected one of `a`, `b`"). So a probe key is put at each place
//! of the document, starting at the top, and every table the answer names is probed in turn
//! (through maps such as `[queues.<name>]` and arrays such as `[[auth.tokens]]`). A key added to
//! a config struct without a line in config.default.toml fails this test.
//!
//! In the reference file a key with a default is written as `key = default` (or `# key = default`
//! inside a commented example table); a key without one as `## key = example`.

use std::collections::BTreeSet;

use sluice_server::config::RawConfig;
use toml::{Table, Value};

const REFERENCE: &str = include_str!("../../../config.default.toml");
const PROBE: &str = "__probe";
/// Deeper than any config nesting; stops a recursive type from probing forever.
const MAX_DEPTH: usize = 8;

/// One step of a path in the document.
#[derive(Clone, Debug)]
enum Step {
    /// A struct's field.
    Field(String),
    /// Any key of a map (`[queues.<name>]`).
    AnyKey,
    /// An element of an array (`[[auth.tokens]]`).
    Element,
}

/// What the parser says about a table put at a path.
enum Shape {
    /// A struct: the fields it accepts.
    Struct(Vec<String>),
    /// A map from names to values.
    Map,
    /// An array.
    Sequence,
    /// A value that is not a table of named keys (a number, string, JSON value, enum...).
    Leaf,
}

/// The document with `value` at `path`.
fn document(path: &[Step], value: Value) -> Value {
    let Some((step, rest)) = path.split_first() else {
        return value;
    };
    let inner = document(rest, value);
    let key = match step {
        Step::Field(name) => name.clone(),
        Step::AnyKey => PROBE.to_owned(),
        Step::Element => return Value::Array(vec![inner]),
    };
    Value::Table(Table::from_iter([(key, inner)]))
}

fn name_of(step: &Step) -> &str {
    match step {
        Step::Field(name) => name,
        Step::AnyKey => "*",
        Step::Element => "[]",
    }
}

/// Asks the parser what is accepted at `path`.
fn shape_at(path: &[Step]) -> Shape {
    let mut probe = Table::new();
    probe.insert(PROBE.to_owned(), Value::Integer(1));
    let text = toml::to_string(&document(path, Value::Table(probe))).unwrap();
    let error = match toml::from_str::<RawConfig>(&text) {
        Ok(_) => return Shape::Leaf,
        Err(error) => error.message().to_owned(),
    };
    if let Some(rest) = error.split_once(&format!("unknown field `{PROBE}`")) {
        let fields = rest
            .1
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        Shape::Struct(fields)
    } else if error.contains("invalid type: integer `1`") {
        // The probe key was taken as a map key; its value 1 is not the map's value type.
        Shape::Map
    } else if error.contains("expected a sequence") {
        Shape::Sequence
    } else {
        Shape::Leaf
    }
}

/// Every key path the parser accepts below `path`, as `a.*.b` (`*` any name, `[]` an element).
fn accepted_below(path: &mut Vec<Step>, keys: &mut BTreeSet<String>) {
    if path.len() >= MAX_DEPTH {
        return;
    }
    let next = match shape_at(path) {
        Shape::Struct(fields) => fields.into_iter().map(Step::Field).collect(),
        Shape::Map => vec![Step::AnyKey],
        Shape::Sequence => vec![Step::Element],
        Shape::Leaf => Vec::new(),
    };
    for step in next {
        let is_field = matches!(step, Step::Field(_));
        path.push(step);
        if is_field {
            keys.insert(dotted(path));
        }
        accepted_below(path, keys);
        path.pop();
    }
}

fn dotted(path: &[Step]) -> String {
    path.iter()
        .filter(|step| !matches!(step, Step::Element))
        .map(name_of)
        .collect::<Vec<_>>()
        .join(".")
}

/// Every key written in the reference file, commented or not, as `section.key`.
fn documented_keys() -> BTreeSet<Vec<String>> {
    let mut section: Vec<String> = Vec::new();
    let mut keys = BTreeSet::new();
    for line in REFERENCE.lines() {
        let line = line.trim_start_matches('#').trim();
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_start_matches('[');
            if let Some(end) = header.find(']') {
                section = header[..end].split('.').map(str::to_owned).collect();
                for depth in 1..=section.len() {
                    keys.insert(section[..depth].to_vec());
                }
            }
        } else if let Some((key, _)) = line.split_once('=') {
            let key = key.trim();
            if !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                let mut path = section.clone();
                path.push(key.to_owned());
                // An inline table documents its keys too: `token = { env = "NAME" }`.
                if let Ok(table) = line.parse::<Table>()
                    && let Some(value) = table.get(key)
                {
                    inner_keys(value, &mut path, &mut keys);
                }
                keys.insert(path);
            }
        }
    }
    keys
}

/// The keys inside an inline value, each as a path below `path`.
fn inner_keys(value: &Value, path: &mut Vec<String>, keys: &mut BTreeSet<Vec<String>>) {
    match value {
        Value::Table(table) => {
            for (key, value) in table {
                path.push(key.clone());
                keys.insert(path.clone());
                inner_keys(value, path, keys);
                path.pop();
            }
        }
        Value::Array(items) => items.iter().for_each(|item| inner_keys(item, path, keys)),
        _ => {}
    }
}

/// `a.*.b` matches `a.orders.b`.
fn is_documented(accepted: &str, documented: &BTreeSet<Vec<String>>) -> bool {
    let pattern: Vec<&str> = accepted.split('.').collect();
    documented.iter().any(|path| {
        path.len() == pattern.len()
            && path
                .iter()
                .zip(&pattern)
                .all(|(written, wanted)| *wanted == "*" || written == wanted)
    })
}

#[test]
fn every_accepted_key_is_in_the_reference_file() {
    let mut accepted = BTreeSet::new();
    accepted_below(&mut Vec::new(), &mut accepted);
    // The probe must see the parser's structure, not fail at the top: a few keys known to exist.
    for known in [
        "server.listen",
        "limits.max_sessions",
        "queues.*.rate_limit.per_second",
        "auth.tokens.name",
    ] {
        assert!(
            accepted.contains(known),
            "the probe did not find {known}: {accepted:#?}"
        );
    }
    let documented = documented_keys();
    let missing: Vec<&String> = accepted
        .iter()
        .filter(|key| !is_documented(key, &documented))
        .collect();
    assert!(
        missing.is_empty(),
        "config.default.toml does not name these keys the parser accepts (write `key = default`, \
         or `## key = example` when there is no default): {missing:#?}"
    );
}
