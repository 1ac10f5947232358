//! jq expressions for webhook endpoint configs: filters, transforms, idempotency keys, message
//! keys and priorities.
//!
//! An [`Expr`] is a jq program compiled once (when the endpoint config is saved) and run on every
//! request. The server builds one input object, for example
//! `{"body": <payload>, "headers": {...}, "source_ip": "...", "received_at": "..."}`, and runs
//! the expression on it; there are no `$variables` besides those the program binds itself.
//!
//! The language is jq as implemented by [jaq](https://github.com/01mf02/jaq) (jaq-core, jaq-std
//! and jaq-json, pinned to exact versions). jaq's embedding API changes with every major version,
//! so every jaq call of the workspace lives in this file.
//!
//! # What a program can do
//!
//! Everything of the jq core language and most of the standard library: `select`, `map`,
//! `reduce`, `foreach`, object construction, string interpolation, `to_entries`, `tostring`,
//! `tojson`/`fromjson`, `ascii_downcase`, regular expressions (`test`, `match`, `capture`,
//! `sub`, `gsub`, `split/2`), dates in UTC (`todate`, `fromdate`, `strftime`, `strptime`,
//! `mktime`, `gmtime`), `@base64`, `@uri`, `@html`, `@sh`, math functions, and so on. jq's
//! `IN`, `INDEX` and `leaf_paths`, which jaq lacks, are added. Other jq builtins jaq lacks
//! stay undefined: `@csv`, `@tsv`, `@base32`, `tostream`, `ascii`, `getpath/0`, `splits/0`,
//! `trimstr`, `toarray`, `input_line_number`, `$__loc__`. A few behave differently from jq:
//! `ltrimstr`/`rtrimstr` fail on a non-string input instead of returning it.
//!
//! # Outputs
//!
//! - Numbers: integers stay integers (exact up to `u64::MAX` and down to `i64::MIN`); `1.5`
//!   stays `1.5`. Any arithmetic other than `+ - * %` between integers gives a float, so
//!   `4 / 2` outputs `2.0`; `floor`, `round` or `ceil` give an integer back. NaN outputs
//!   `null` and infinities the largest finite `f64`, as in jq.
//! - Object keys come out in `serde_json::Map` order, which is sorted unless serde_json's
//!   `preserve_order` feature is on. The input is a `serde_json::Value` too, so with the default
//!   features a program never sees the sender's key order (`keys_unsorted`, `to_entries` are
//!   sorted as well).
//! - jaq values that JSON cannot hold: an object key that is not a string (`{(1): 2}`) is an
//!   error; byte strings (`tobytes`) and invalid UTF-8 become strings, lossily.
//!
//! # What a program cannot do
//!
//! A program sees its input and nothing else. These are not defined (compiling a program that
//! uses them fails with "undefined filter" or "undefined variable"):
//!
//! - `env` and `$ENV` (the process environment holds database URLs and secrets);
//! - `input`, `inputs`, `input_filename` (there is a single input);
//! - `halt`, `halt_error` (jaq implements `halt` by exiting the process);
//! - `debug`, `stderr` (they would write user data to the server's log or stderr);
//! - `now`, `localtime`, `strflocaltime` (the clock and the server's time zone; use the
//!   `received_at` field of the input instead);
//! - `include`/`import` of modules and data files (nothing is read from disk);
//! - `$__loc__`, `$__prog_args` and other CLI globals, which jaq does not have anyway.
//!
//! # Limits
//!
//! - [`Expr::run`] returns at most [`MAX_OUTPUTS`] values; a program that produces more fails.
//! - An output may nest at most [`MAX_DEPTH`] arrays/objects deep, like what `serde_json` parses.
//! - The source text is at most [`MAX_SOURCE_LEN`] bytes and nests at most
//!   [`MAX_SOURCE_NESTING`] brackets deep.
//! - Error messages are cut to [`MAX_ERROR_LEN`] bytes, since jaq quotes the offending value.
//! - `fromjson` (and `tonumber`, which uses it) parses with `serde_json`, which refuses text
//!   nested deeper than 128 levels; jaq's own parser recursed once per level without a limit.
//!
//! # Running untrusted programs: time, memory and stack
//!
//! jq is Turing complete, and jaq has no fuel counter and no way to interrupt a running
//! program. [`Expr::run`] and [`Expr::first`] are plain blocking calls, and:
//!
//! - `def f: f; f`, `until(false; .)`, `repeat(.) | select(false)` or `last(range(1e18))`
//!   never return. Callers must run expressions on a bounded blocking pool (a dedicated thread
//!   pool or `tokio::task::spawn_blocking`) under a wall-clock timeout, treat a timeout as a
//!   failure of the expression (and consider disabling it), and accept that the timed-out
//!   thread cannot be stopped, only abandoned until the program ends, if ever.
//! - `[range(1e9)]` or `"x" * 1e9` allocate until memory runs out.
//! - jaq evaluates recursively. A long but finite program (a thousand `,` or `|`) needs a deep
//!   native stack: run expressions on threads with a [`RUN_STACK_SIZE`] stack, not on tokio's
//!   2 MiB threads. Programs that recurse without bound (`def f: [f]; f`,
//!   `def f: 1 + f; f`) or build very deep values (`reduce range(1e5) as $i (null; [.])`)
//!   overflow any stack, and **a stack overflow aborts the process**; Rust cannot catch it.
//!   Only a separate process contains that: the server runs every evaluation in a worker
//!   process with memory, CPU and time limits (`sluice_server::expr`), and compiles in
//!   process only (bounded by the source limits above).
//!
//! [`Expr::compile`] protects itself: it runs jaq's parser and compiler on its own thread with
//! a [`COMPILE_STACK_SIZE`] stack. A panic inside jaq (a jaq bug) becomes an `Err` in all three
//! functions.

use std::fmt;
use std::sync::Arc;

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Exn, Vars, compile, data, load};
use jaq_json::{Num, Val};
use serde::Deserialize as _;
use serde_json::Value;

/// The most values [`Expr::run`] returns; a program that outputs more fails.
pub const MAX_OUTPUTS: usize = 1000;

/// How deeply arrays and objects in an output may nest (the same limit `serde_json` applies
/// when it parses), so that every output can be serialised and parsed again.
pub const MAX_DEPTH: usize = 128;

/// The longest source text [`Expr::compile`] accepts, in bytes.
pub const MAX_SOURCE_LEN: usize = 8 * 1024;

/// Stack size of the thread [`Expr::compile`] runs jaq's parser and compiler on. Only touched
/// pages are committed. A pathological 8 KiB program (`- - - … 1`) needed 16 MiB in a release
/// build and 128 MiB in a debug build.
pub const COMPILE_STACK_SIZE: usize = 256 << 20;

/// The stack size that threads calling [`Expr::run`] or [`Expr::first`] should have.
///
/// jaq evaluates recursively, once per nesting level of the program: a list of a thousand
/// ids, `select(.id | IN(1, 2, …))`, nests a thousand levels deep. The default 2 MiB of a
/// spawned or tokio thread overflows at about 800 levels in a release build (200 in a debug
/// build), and a stack overflow aborts the whole process. 64 MiB covers every program of at most
/// [`MAX_SOURCE_LEN`] bytes in release builds (the worst measured needed 16 MiB) and realistic
/// programs in debug builds. Only touched pages are committed. It does not help against
/// programs that recurse without bound (see the module docs).
pub const RUN_STACK_SIZE: usize = 64 << 20;

/// How deeply `(`, `[` and `{` may nest in the source text.
pub const MAX_SOURCE_NESTING: usize = 256;

/// The longest error message, in bytes; longer messages are cut and end with `…`.
pub const MAX_ERROR_LEN: usize = 512;

/// Names of jaq-std/jaq-core definitions and native filters that are not offered, because they
/// read or write outside the program's input, or stop the process.
const REMOVED: &[&str] = &[
    "env",
    "now",
    "localtime",
    "strflocaltime",
    "input",
    "inputs",
    "input_filename",
    "halt",
    "halt_error",
    "debug",
    "debug_empty",
    "stderr",
    "stderr_empty",
];

/// jq builtins that jaq lacks, defined as in jq's `builtin.jq`. `IN` is the usual way to write
/// a webhook filter like `select(.action | IN("opened", "reopened"))`.
const EXTRA_DEFS: &str = r#"
def IN(s): any(s == .; .);
def IN(src; s): any(src == s; .);
def INDEX(stream; idx_expr): reduce stream as $row ({}; .[$row | idx_expr | tostring] |= $row);
def INDEX(idx_expr): INDEX(.[]; idx_expr);
def leaf_paths: paths(scalars);
"#;

type Data = data::JustLut<Val>;
type Filter = jaq_core::Filter<Data>;

/// A compiled jq program. `Send + Sync`, cheap to clone and to share in an `Arc`.
///
/// Two expressions are equal when their source texts are equal. `Debug` and `Display` show the
/// source text.
#[derive(Clone)]
pub struct Expr {
    source: Arc<str>,
    filter: Arc<Filter>,
}

impl Expr {
    /// Compiles a jq program.
    ///
    /// The error is one line fit for a 422 answer: what is wrong and where (line and column in
    /// the source, both from 1), for example ``expected closing brace at line 1, column 4``
    /// (for `{.a`) or ``undefined filter `env/0` at line 1, column 1``.
    ///
    /// Compiling happens on a short-lived thread with a [`COMPILE_STACK_SIZE`] stack, because
    /// jaq's parser and compiler recurse once per nesting level of the program; the calling
    /// thread's stack size does not matter. It takes a few milliseconds (jaq compiles its
    /// standard library each time): compile once per config change, not per request.
    pub fn compile(source: &str) -> Result<Expr, String> {
        if source.len() > MAX_SOURCE_LEN {
            return Err(format!(
                "expression is {} bytes long, the limit is {MAX_SOURCE_LEN}",
                source.len()
            ));
        }
        check_nesting(source)?;
        let filter = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("sluice-jq-compile".into())
                .stack_size(COMPILE_STACK_SIZE)
                .spawn_scoped(scope, || compile_filter(source))
                .map_err(|e| format!("cannot start the jq compiler: {e}"))?
                .join()
                .map_err(|panic| format!("jq compiler failed: {}", panic_message(&*panic)))?
        })?;
        Ok(Expr {
            source: source.into(),
            filter: Arc::new(filter),
        })
    }

    /// [`Expr::compile`] on the calling thread, which must have a stack of at least
    /// [`COMPILE_STACK_SIZE`] (a process that does nothing but run expressions saves a thread
    /// per compile this way).
    pub fn compile_on_this_thread(source: &str) -> Result<Expr, String> {
        if source.len() > MAX_SOURCE_LEN {
            return Err(format!(
                "expression is {} bytes long, the limit is {MAX_SOURCE_LEN}",
                source.len()
            ));
        }
        check_nesting(source)?;
        let filter = std::panic::catch_unwind(|| compile_filter(source))
            .map_err(|panic| format!("jq compiler failed: {}", panic_message(&*panic)))??;
        Ok(Expr {
            source: source.into(),
            filter: Arc::new(filter),
        })
    }

    /// Runs the program on `input` and returns every output, in order.
    ///
    /// Fails with the program's message when the program raises an error (`error("x")`, `.a.b`
    /// on a string, ...), even if it produced outputs before; when it produces more than
    /// [`MAX_OUTPUTS`] values; or when an output cannot be expressed as JSON (see
    /// [`Expr::first`]). Blocks until the program ends: see the module docs about runaway
    /// programs.
    pub fn run(&self, input: &Value) -> Result<Vec<Value>, String> {
        catch_panic(|| {
            let mut outputs = Vec::new();
            for output in self.outputs(input)? {
                if outputs.len() == MAX_OUTPUTS {
                    return Err(format!(
                        "expression produced more than {MAX_OUTPUTS} outputs"
                    ));
                }
                outputs.push(output?);
            }
            Ok(outputs)
        })
    }

    /// Runs the program on `input` and returns its first output, or `None` when it outputs
    /// nothing (for example `select(false)` or `empty`).
    ///
    /// The program stops after its first output, so later outputs and later errors are not
    /// seen. Fails with the program's message when it raises an error before its first output,
    /// or when that output cannot be expressed as JSON: an object key that is not a string,
    /// nesting deeper than [`MAX_DEPTH`]. Blocks until the first output: see the module docs
    /// about runaway programs.
    pub fn first(&self, input: &Value) -> Result<Option<Value>, String> {
        catch_panic(|| self.outputs(input)?.next().transpose())
    }

    /// The source text the expression was compiled from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The lazy sequence of outputs, converted to JSON.
    fn outputs<'a>(
        &'a self,
        input: &Value,
    ) -> Result<impl Iterator<Item = Result<Value, String>> + 'a, String> {
        let input = Val::deserialize(input).map_err(|e| format!("invalid input: {e}"))?;
        let ctx = Ctx::<Data>::new(&self.filter.lut, Vars::new([]));
        Ok(self.filter.id.run((ctx, input)).map(|output| match output {
            Ok(val) => to_json(&val, 0),
            Err(exn) => Err(exn_message(exn)),
        }))
    }
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Expr").field(&&*self.source).finish()
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Expr {}

/// Loads and compiles `source` with the standard library minus [`REMOVED`].
fn compile_filter(source: &str) -> Result<Filter, String> {
    let allowed = |name: &str| !REMOVED.contains(&name);
    let extra = load::parse(EXTRA_DEFS, |p| p.defs())
        .ok_or("internal error: the extra jq definitions do not parse")?;
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .chain(extra)
        .filter(|def| allowed(def.name));
    let funs = jaq_core::funs::<Data>()
        .chain(jaq_std::funs::<Data>())
        .chain(jaq_json::funs::<Data>())
        .filter(|(name, _, _)| allowed(name) && *name != "fromjson")
        .chain(std::iter::once(bounded_fromjson()));

    let arena = Arena::default();
    let file = File {
        code: source,
        path: (),
    };
    // The default loader refuses `include`/`import` of modules: nothing is read from disk.
    let modules = Loader::new(defs)
        .load(&arena, file)
        .map_err(|errs| load_errors(source, errs))?;
    // `import "x" as $x;` would make the program expect a data value at run time.
    load::import(&modules, |_| Err("data imports are not supported".into()))
        .map_err(|errs| load_errors(source, errs))?;
    Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errs| compile_errors(source, errs))
}

/// `fromjson` parsed by serde_json, which refuses to nest deeper than [`MAX_DEPTH`] levels.
/// jaq's own parser recurses once per level without a limit, so `"[[[…" | fromjson` with a few
/// hundred thousand brackets overflowed any stack. Like jaq's, it outputs every value of a
/// string that holds several (`"1 2" | fromjson` gives 1 and 2).
fn bounded_fromjson() -> jaq_core::native::Fun<Data> {
    jaq_core::native::run(("fromjson", jaq_core::native::v(0), |cv| {
        let parsed =
            cv.1.try_as_utf8_bytes_owned()
                .and_then(|text| parse_json_values(&text));
        match parsed {
            Ok(values) => Box::new(values.into_iter().map(Ok)),
            Err(error) => jaq_core::native::bome(Err(error)),
        }
    }))
}

/// Every JSON value in `text`, or why it is not JSON.
fn parse_json_values(text: &[u8]) -> Result<Vec<Val>, jaq_core::Error<Val>> {
    serde_json::Deserializer::from_slice(text)
        .into_iter::<Val>()
        .collect::<Result<Vec<Val>, _>>()
        .map_err(|e| jaq_core::Error::str(format_args!("cannot parse as JSON: {e}")))
}

/// Runs `f`, turning a panic inside jaq into an error. jaq reaches `panic!` only through its
/// own bugs; the program and the filter are immutable, so nothing is left half-updated.
fn catch_panic<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(format!("jq evaluation failed: {}", panic_message(&*panic))))
}

/// The message of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let message = if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.as_str()
    } else {
        "panic"
    };
    truncate(message.replace(['\n', '\r'], " "))
}

/// Rejects sources whose brackets nest deeper than [`MAX_SOURCE_NESTING`]. Counts brackets in
/// string literals too (harmless: it can only reject absurd programs), except that it skips
/// escaped characters so that `"\("` counts like jaq's lexer does.
fn check_nesting(source: &str) -> Result<(), String> {
    let mut depth = 0usize;
    let mut chars = source.char_indices();
    while let Some((offset, c)) = chars.next() {
        match c {
            '\\' => {
                // `\(` opens an interpolation, any other escape opens nothing.
                if let Some((_, '(')) = chars.next() {
                    depth += 1;
                }
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_SOURCE_NESTING {
            let (line, column) = line_column(source, offset);
            return Err(format!(
                "brackets nest deeper than {MAX_SOURCE_NESTING} at line {line}, column {column}"
            ));
        }
    }
    Ok(())
}

/// Line and column (both from 1, column in characters) of a byte offset into `source`.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Where `part`, a slice that jaq took out of the source text, starts: ` at line L, column C`,
/// or nothing when `part` does not point into `source` (e.g. it comes from jaq's prelude).
fn position(source: &str, part: &str) -> String {
    let start = source.as_ptr() as usize;
    let at = part.as_ptr() as usize;
    if at < start || at > start + source.len() {
        return String::new();
    }
    let (line, column) = line_column(source, at - start);
    format!(" at line {line}, column {column}")
}

/// A token as found by the parser, quoted, on one line and short.
fn quote_token(token: &str) -> String {
    if token.is_empty() {
        return "end of input".into();
    }
    let mut shown: String = token.chars().take(24).collect();
    if shown.len() < token.len() {
        shown.push('…');
    }
    format!("{shown:?}")
}

/// One line describing what went wrong while lexing, parsing or loading the source.
fn load_errors<P>(source: &str, errs: load::Errors<&str, P>) -> String {
    let mut messages = Vec::new();
    for (_file, err) in errs {
        match err {
            load::Error::Io(errs) => {
                for (path, e) in errs {
                    messages.push(format!(
                        "cannot import {path:?}: {e}{}",
                        position(source, path)
                    ));
                }
            }
            load::Error::Lex(errs) => {
                for (expected, rest) in errs {
                    messages.push(format!(
                        "expected {}{}",
                        expected.as_str(),
                        position(source, rest)
                    ));
                }
            }
            load::Error::Parse(errs) => {
                for (expected, found) in errs {
                    messages.push(format!(
                        "expected {}, found {}{}",
                        expected.as_str(),
                        quote_token(found),
                        position(source, found)
                    ));
                }
            }
        }
    }
    one_line(messages)
}

/// One line naming the undefined filters and variables of a program.
fn compile_errors<P>(source: &str, errs: compile::Errors<&str, P>) -> String {
    let messages = errs
        .into_iter()
        .flat_map(|(_file, errs)| errs)
        .map(|(name, undefined)| {
            let at = position(source, name);
            match undefined {
                compile::Undefined::Filter(arity) => {
                    format!("undefined filter `{name}/{arity}`{at}")
                }
                other => format!("undefined {} `{name}`{at}", other.as_str()),
            }
        })
        .collect();
    one_line(messages)
}

/// Joins messages with `; `, replaces line breaks and cuts the result to [`MAX_ERROR_LEN`].
fn one_line(messages: Vec<String>) -> String {
    let joined = messages.join("; ");
    let joined = if joined.is_empty() {
        "invalid expression".to_string()
    } else {
        joined
    };
    truncate(joined.replace(['\n', '\r'], " "))
}

/// Cuts a message to at most [`MAX_ERROR_LEN`] bytes (at a character boundary), marking the cut.
fn truncate(mut message: String) -> String {
    if message.len() > MAX_ERROR_LEN {
        let mut end = MAX_ERROR_LEN - '…'.len_utf8();
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// The message of an exception raised by a running program.
fn exn_message(exn: Exn<'_, Val>) -> String {
    match exn.get_err() {
        Ok(err) => match err.into_val() {
            // `error("boom")`: the message is the string itself, not its JSON form.
            Val::TStr(bytes) | Val::BStr(bytes) => truncate(String::from_utf8_lossy(&bytes).into()),
            other => truncate(other.to_string()),
        },
        // Not reachable while `halt` is removed; jaq's own `unwrap_valr` would exit the process.
        Err(exn) => match exn.get_halt() {
            Ok(code) => format!("expression halted with exit code {code}"),
            Err(_) => "expression failed: internal jaq control flow escaped".into(),
        },
    }
}

/// Converts a jaq value to JSON.
///
/// jaq values are a superset of JSON: non-string object keys (an error here), byte strings
/// (converted as lossy UTF-8), and NaN/infinite numbers (NaN becomes `null`, infinities become
/// the largest finite `f64`, as jq prints them).
fn to_json(val: &Val, depth: usize) -> Result<Value, String> {
    Ok(match val {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => num_to_json(n),
        Val::TStr(bytes) | Val::BStr(bytes) => {
            Value::String(String::from_utf8_lossy(bytes).into_owned())
        }
        Val::Arr(items) => {
            check_depth(depth)?;
            let items = items.iter().map(|item| to_json(item, depth + 1));
            Value::Array(items.collect::<Result<_, _>>()?)
        }
        Val::Obj(entries) => {
            check_depth(depth)?;
            let mut map = serde_json::Map::new();
            for (key, value) in entries.iter() {
                let key = match key {
                    Val::TStr(bytes) | Val::BStr(bytes) => {
                        String::from_utf8_lossy(bytes).into_owned()
                    }
                    other => return Err(truncate(format!("object key {other} is not a string"))),
                };
                map.insert(key, to_json(value, depth + 1)?);
            }
            Value::Object(map)
        }
    })
}

fn check_depth(depth: usize) -> Result<(), String> {
    if depth >= MAX_DEPTH {
        Err(format!(
            "output nests deeper than {MAX_DEPTH} arrays or objects"
        ))
    } else {
        Ok(())
    }
}

/// Converts a jaq number: integers stay integers (exact up to `u64`/`i64`), others become
/// `f64`.
fn num_to_json(num: &Num) -> Value {
    match num {
        Num::Int(i) => Value::from(*i),
        Num::BigInt(i) => {
            let text = i.to_string();
            if let Ok(u) = text.parse::<u64>() {
                Value::from(u)
            } else if let Ok(i) = text.parse::<i64>() {
                Value::from(i)
            } else {
                float_to_json(text.parse().unwrap_or(f64::NAN))
            }
        }
        Num::Float(f) => float_to_json(*f),
        Num::Dec(text) => match text.parse::<serde_json::Number>() {
            Ok(n) => Value::Number(n),
            Err(_) => float_to_json(text.parse().unwrap_or(f64::NAN)),
        },
    }
}

fn float_to_json(f: f64) -> Value {
    let f = if f.is_infinite() {
        f64::MAX.copysign(f)
    } else {
        f
    };
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(source: &str) -> Expr {
        Expr::compile(source).unwrap_or_else(|e| panic!("{source:?} does not compile: {e}"))
    }

    fn run(source: &str, input: Value) -> Result<Vec<Value>, String> {
        compile(source).run(&input)
    }

    fn pull_request(action: &str) -> Value {
        json!({
            "action": action,
            "number": 7,
            "pull_request": {
                "number": 1347,
                "title": "Amazing new feature",
                "user": {"login": "octocat", "id": 1},
                "labels": [{"name": "Bug"}, {"name": "UI"}],
            },
            "repository": {"full_name": "octo-org/Hello-World"},
        })
    }

    const OPENED: &str =
        r#"select(.action == "opened") | {n: .pull_request.number, title: .pull_request.title}"#;

    #[test]
    fn select_and_reshape_a_github_payload() {
        let expr = compile(OPENED);
        let expected = json!({"n": 1347, "title": "Amazing new feature"});
        assert_eq!(
            expr.run(&pull_request("opened")),
            Ok(vec![expected.clone()])
        );
        assert_eq!(expr.first(&pull_request("opened")), Ok(Some(expected)));
    }

    #[test]
    fn a_filter_that_does_not_match_outputs_nothing() {
        let expr = compile(OPENED);
        assert_eq!(expr.run(&pull_request("closed")), Ok(vec![]));
        assert_eq!(expr.first(&pull_request("closed")), Ok(None));
        assert_eq!(compile("empty").first(&json!(1)), Ok(None));
        assert_eq!(compile("select(false)").run(&json!(1)), Ok(vec![]));
    }

    #[test]
    fn string_interpolation() {
        let input = json!({"a": "x", "b": 2, "c": {"d": [1, "y"]}});
        assert_eq!(
            run(r#""\(.a)-\(.b)""#, input.clone()),
            Ok(vec![json!("x-2")])
        );
        assert_eq!(
            run(r#""k:\(.c)""#, input),
            Ok(vec![json!(r#"k:{"d":[1,"y"]}"#)])
        );
    }

    #[test]
    fn standard_library() {
        let labels = pull_request("opened");
        assert_eq!(
            run(
                "[.pull_request.labels | map(.name | ascii_downcase)[]]",
                labels.clone()
            ),
            Ok(vec![json!(["bug", "ui"])])
        );
        assert_eq!(
            run("map(. * 2)", json!([1, 2, 3])),
            Ok(vec![json!([2, 4, 6])])
        );
        assert_eq!(
            run("reduce .[] as $x (0; . + $x)", json!([1, 2, 3, 4])),
            Ok(vec![json!(10)])
        );
        assert_eq!(
            run("to_entries", json!({"a": 1})),
            Ok(vec![json!([{"key": "a", "value": 1}])])
        );
        assert_eq!(
            run("with_entries(.value += 1)", json!({"a": 1, "b": 2})),
            Ok(vec![json!({"a": 2, "b": 3})])
        );
        assert_eq!(
            run("map(tostring)", json!([1, "s", null, [true]])),
            Ok(vec![json!(["1", "s", "null", "[true]"])])
        );
        assert_eq!(
            run("ascii_downcase", json!("MiXeD")),
            Ok(vec![json!("mixed")])
        );
        assert_eq!(
            run(
                r#"map(test("^re[a-z]+$"))"#,
                json!(["regex", "Regex", "re1"])
            ),
            Ok(vec![json!([true, false, false])])
        );
        assert_eq!(
            run(
                r#"test("ab"; "i"), sub("(?<x>[0-9]+)"; "<\(.x)>")"#,
                json!("xAB12")
            ),
            Ok(vec![json!(true), json!("xAB<12>")])
        );
        assert_eq!(
            run(".repository.full_name | split(\"/\") | .[1]", labels),
            Ok(vec![json!("Hello-World")])
        );
        assert_eq!(
            run(r#""2024-05-01T12:00:00Z" | fromdate | todate"#, json!(null)),
            Ok(vec![json!("2024-05-01T12:00:00Z")])
        );
    }

    #[test]
    fn jq_builtins_that_jaq_lacks() {
        let expr = compile(r#"select(.action | IN("opened", "reopened")) | .number"#);
        assert_eq!(expr.first(&pull_request("reopened")), Ok(Some(json!(7))));
        assert_eq!(expr.first(&pull_request("closed")), Ok(None));
        assert_eq!(run("IN(.[]; 2, 3)", json!([1, 2])), Ok(vec![json!(true)]));
        assert_eq!(run("IN(.[]; 5)", json!([1, 2])), Ok(vec![json!(false)]));
        assert_eq!(
            run("INDEX(.id)", json!([{"id": 1}, {"id": "b"}])),
            Ok(vec![json!({"1": {"id": 1}, "b": {"id": "b"}})])
        );
        assert_eq!(
            run("[leaf_paths]", json!({"a": [1, {"b": null}]})),
            Ok(vec![json!([["a", 0]])])
        );
    }

    #[test]
    fn several_outputs_in_order() {
        assert_eq!(
            run(".[]", json!([3, 1, 2])),
            Ok(vec![json!(3), json!(1), json!(2)])
        );
        assert_eq!(compile(".[]").first(&json!([3, 1, 2])), Ok(Some(json!(3))));
    }

    #[test]
    fn syntax_errors_are_one_line_and_say_where() {
        for (source, expected) in [
            ("{.a", "line 1"),
            ("foo(", "line 1"),
            (".a |\n  {b: }", "line 2, column 7"),
            ("\"abc", "closing quote"),
            ("if . then 1", "else or end"),
            ("1 +", "end of input"),
            ("", ""),
        ] {
            let err = Expr::compile(source).expect_err(source);
            assert!(!err.is_empty(), "{source:?}");
            assert!(!err.contains('\n'), "{source:?}: {err}");
            assert!(err.contains(expected), "{source:?}: {err}");
        }
    }

    #[test]
    fn undefined_names_are_compile_errors() {
        let err = Expr::compile(".a\n| nosuchfilter(1)").unwrap_err();
        assert_eq!(err, "undefined filter `nosuchfilter/1` at line 2, column 3");
        let err = Expr::compile("$nope").unwrap_err();
        assert_eq!(err, "undefined variable `$nope` at line 1, column 1");
    }

    #[test]
    fn filters_that_read_or_write_outside_the_input_are_not_defined() {
        for source in [
            "env",
            "env.HOME",
            "$ENV",
            "$ENV.PATH",
            "input",
            "inputs",
            "[inputs]",
            "input_filename",
            "halt",
            "halt(1)",
            "halt_error",
            "halt_error(1)",
            "debug",
            "debug(\"x\")",
            "stderr",
            "debug_empty",
            "stderr_empty",
            "now",
            "localtime",
            "strflocaltime(\"%H\")",
            "$__loc__",
            "$__prog_args",
        ] {
            let err = Expr::compile(source).expect_err(source);
            assert!(err.starts_with("undefined "), "{source:?}: {err}");
        }
        // Defining one's own `env` is harmless.
        assert_eq!(run("def env: {}; env", json!(1)), Ok(vec![json!({})]));
    }

    #[test]
    fn modules_and_data_files_cannot_be_loaded() {
        for source in [
            r#"include "foo"; ."#,
            r#"import "foo" as foo; ."#,
            r#"import "/etc/passwd" as $data; $data"#,
        ] {
            let err = Expr::compile(source).expect_err(source);
            assert!(err.starts_with("cannot import"), "{source:?}: {err}");
        }
    }

    /// Runs [`env_child`] in a child process that has a secret in its environment.
    #[test]
    fn env_cannot_leak_an_environment_variable() {
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args(["--exact", "expr::tests::env_child", "--test-threads=1"])
            .env(SECRET_VAR, SECRET)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("1 passed"), "{stdout}");
    }

    const SECRET_VAR: &str = "SLUICE_EXPR_TEST_SECRET";
    const SECRET: &str = "postgres://sluice:hunter2@db/sluice";

    /// The child half of [`env_cannot_leak_an_environment_variable`]; a no-op when run by
    /// the test harness directly.
    #[test]
    fn env_child() {
        let Ok(secret) = std::env::var(SECRET_VAR) else {
            return;
        };
        assert_eq!(secret, SECRET);
        for source in [
            "env",
            "env | tojson",
            "env.SLUICE_EXPR_TEST_SECRET",
            "$ENV.SLUICE_EXPR_TEST_SECRET",
            "[env[]] | join(\",\")",
            "try env catch .",
            "def e: env; e",
        ] {
            match Expr::compile(source) {
                Err(err) => assert!(!err.contains(SECRET), "{err}"),
                Ok(expr) => {
                    let out = expr.run(&json!({}));
                    panic!("{source:?} compiled and gave {out:?}");
                }
            }
        }
        // Nothing reachable from an ordinary program mentions the secret either.
        let out = run("[.. | tojson] | tostring", json!({"a": [1, {"b": "c"}]})).unwrap();
        assert!(!serde_json::to_string(&out).unwrap().contains("hunter2"));
    }

    #[test]
    fn too_many_outputs_is_an_error() {
        let err = run("range(10000)", json!(null)).unwrap_err();
        assert!(err.contains(&MAX_OUTPUTS.to_string()), "{err}");
        // The limit itself is fine, and `first` stops after the first output.
        assert_eq!(
            run("range(1000)", json!(null)).map(|v| v.len()),
            Ok(MAX_OUTPUTS)
        );
        assert_eq!(
            compile("range(10000)").first(&json!(null)),
            Ok(Some(json!(0)))
        );
        assert_eq!(
            compile("range(1e18)").first(&json!(null)),
            Ok(Some(json!(0)))
        );
    }

    #[test]
    fn runtime_errors_carry_the_message() {
        assert_eq!(
            run(r#"error("boom")"#, json!(null)),
            Err("boom".to_string())
        );
        let err = run(".a.b", json!({"a": "x"})).unwrap_err();
        assert!(
            err.contains("cannot index") && err.contains("\"b\""),
            "{err}"
        );
        assert_eq!(
            run(r#"error({"code": 1})"#, json!(null)),
            Err(r#"{"code":1}"#.into())
        );
        // An error after some outputs fails `run`, but `first` never gets there.
        assert_eq!(run(r#"1, error("late")"#, json!(null)), Err("late".into()));
        assert_eq!(
            compile(r#"1, error("late")"#).first(&json!(null)),
            Ok(Some(json!(1)))
        );
        assert_eq!(
            compile(r#"error("early"), 1"#).first(&json!(null)),
            Err("early".into())
        );
        // `try` catches as in jq.
        assert_eq!(
            run(r#"try error("x") catch "caught \(.)""#, json!(null)),
            Ok(vec![json!("caught x")])
        );
        assert_eq!(run(".a.b?", json!({"a": "x"})), Ok(vec![]));
    }

    #[test]
    fn long_error_messages_are_cut() {
        let input = json!({"a": "x".repeat(10_000)});
        let err = run(".a.b", input).unwrap_err();
        assert!(
            err.len() <= MAX_ERROR_LEN && err.ends_with('…'),
            "{}",
            err.len()
        );
    }

    #[test]
    fn numbers_round_trip() {
        let input = json!({
            "int": 42,
            "neg": -7,
            "float": 1.5,
            "small": 0.1,
            "big": 12345678901234_u64,
            "i64_min": i64::MIN,
            "u64_max": u64::MAX,
            "zero": 0,
        });
        let out = run(".", input.clone()).unwrap();
        assert_eq!(out, vec![input.clone()]);
        assert_eq!(
            serde_json::to_string(&out[0]).unwrap(),
            serde_json::to_string(&input).unwrap()
        );
        let out = run("[.int + 1, .big + 1, .float * 2, .u64_max, .float]", input).unwrap();
        let [arr] = &out[..] else { panic!("{out:?}") };
        assert_eq!(arr[0].as_i64(), Some(43));
        assert_eq!(arr[1].as_u64(), Some(12345678901235));
        assert_eq!(arr[2].as_f64(), Some(3.0));
        assert!(arr[2].is_f64(), "a float stays a float: {}", arr[2]);
        assert_eq!(arr[3].as_u64(), Some(u64::MAX));
        assert_eq!(serde_json::to_string(&arr[4]).unwrap(), "1.5");
        // Literals in the program, too.
        assert_eq!(
            run("1, 1.5, 12345678901234", json!(null)),
            Ok(vec![json!(1), json!(1.5), json!(12345678901234_u64)])
        );
        // Integral division gives a float; `floor` gives an integer back.
        let out = run("4 / 2, (4 / 2 | floor)", json!(null)).unwrap();
        assert!(out[0].is_f64() && out[1].is_i64(), "{out:?}");
        // NaN has no JSON form; like jq, it comes out as null, infinities as the largest f64.
        assert_eq!(
            run("nan, infinite", json!(null)),
            Ok(vec![json!(null), json!(f64::MAX)])
        );
    }

    #[test]
    fn outputs_that_are_not_json_are_errors() {
        let err = run("{(1): 2}", json!(null)).unwrap_err();
        assert!(err.contains("not a string"), "{err}");
        let err = run("reduce range(200) as $i (null; [.])", json!(null)).unwrap_err();
        assert!(err.contains(&MAX_DEPTH.to_string()), "{err}");
        assert!(run("reduce range(100) as $i (null; [.])", json!(null)).is_ok());
    }

    /// jaq's own `fromjson` recursed once per bracket without a limit: 200k `[` overflowed the
    /// stack and aborted the process.
    #[test]
    fn fromjson_refuses_deep_nesting_instead_of_overflowing_the_stack() {
        let deep = json!({"s": "[".repeat(200_000)});
        let err = std::thread::Builder::new()
            .stack_size(RUN_STACK_SIZE)
            .spawn(move || run(".s | fromjson", deep))
            .unwrap()
            .join()
            .unwrap()
            .unwrap_err();
        assert!(err.contains("recursion limit"), "{err}");
        assert_eq!(
            run(r#"fromjson"#, json!(r#"{"a": [1, 2.5, "x"]}"#)),
            Ok(vec![json!({"a": [1, 2.5, "x"]})])
        );
        assert_eq!(run("fromjson", json!("1 2")), Ok(vec![json!(1), json!(2)]));
        assert_eq!(run(r#""12" | tonumber"#, json!(null)), Ok(vec![json!(12)]));
        assert!(
            run("fromjson", json!("{"))
                .unwrap_err()
                .contains("cannot parse")
        );
        assert!(run("fromjson", json!(1)).unwrap_err().contains("string"));
    }

    #[test]
    fn oversized_sources_are_rejected() {
        let long = format!(". {}", " ".repeat(MAX_SOURCE_LEN));
        assert!(Expr::compile(&long).unwrap_err().contains("bytes long"));
        let deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
        assert!(Expr::compile(&deep).unwrap_err().contains("nest deeper"));
        let ok = format!("{}1{}", "(".repeat(200), ")".repeat(200));
        assert_eq!(run(&ok, json!(null)), Ok(vec![json!(1)]));
    }

    /// A long program compiles whatever the caller's stack (the compiler has its own thread),
    /// and runs on a thread with [`RUN_STACK_SIZE`].
    #[test]
    fn long_programs_compile_and_run_with_the_documented_stack() {
        let ids: Vec<String> = (0..1500).map(|i| i.to_string()).collect();
        // jaq has no `IN`; `any(generator; condition)` does the same.
        let source = format!(
            ".id as $id | select(any({}; . == $id)) | $id",
            ids.join(", ")
        );
        assert!(source.len() <= MAX_SOURCE_LEN);
        let expr = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || Expr::compile(&source))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        let out = std::thread::Builder::new()
            .stack_size(RUN_STACK_SIZE)
            .spawn(move || {
                (
                    expr.run(&json!({"id": 1499})),
                    expr.run(&json!({"id": 1500})),
                )
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(out, (Ok(vec![json!(1499)]), Ok(vec![])));
    }

    #[test]
    fn expr_is_send_sync_and_shared_across_threads() {
        const fn assert_send_sync<T: Send + Sync + Clone + 'static>() {}
        const _: () = assert_send_sync::<Expr>();

        let expr = Arc::new(compile(r#"{id: .id, key: "k-\(.id % 3)"}"#));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let expr = Arc::clone(&expr);
                std::thread::spawn(move || {
                    for i in 0..200 {
                        let id = t * 1000 + i;
                        let out = expr.first(&json!({"id": id})).unwrap();
                        assert_eq!(out, Some(json!({"id": id, "key": format!("k-{}", id % 3)})));
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().unwrap();
        }
    }

    #[test]
    fn clone_eq_debug_display_source() {
        let a = compile(".a");
        let b = a.clone();
        assert_eq!(a, b);
        assert_eq!(a, compile(".a"));
        assert_ne!(a, compile(".b"));
        assert_eq!(a.source(), ".a");
        assert_eq!(a.to_string(), ".a");
        assert_eq!(format!("{a:?}"), r#"Expr(".a")"#);
    }
}
