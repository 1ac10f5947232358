//! The expression worker: a child process of the server (`sluice __expr-worker`) that runs jq
//! programs for it, one evaluation at a time, under limits the kernel enforces.
//!
//! At start it limits itself: its address space may grow by `memory_bytes` beyond what it
//! needs when idle (`RLIMIT_AS`: an allocation past that fails, and the process aborts), it dies
//! with its parent (`PR_SET_PDEATHSIG` on Linux), and before each evaluation its CPU time is
//! capped a little above the wall-time limit (`RLIMIT_CPU`, in case the server could not kill
//! it). A program that recurses without end overflows this process's stack and takes only this
//! process down. The environment is empty (the server starts it with none), so nothing secret
//! is in reach even if a removed builtin came back.
//!
//! Nothing here writes to stderr on purpose: what the process prints there when it dies (the
//! runtime's "memory allocation … failed" or "has overflowed its stack") is the server's clue
//! to why.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::process::ExitCode;

use serde_json::Value;
use sluice_webhooks::expr::{COMPILE_STACK_SIZE, Expr, RUN_STACK_SIZE};

use super::protocol::{Outcome, ProgramSpec, READY, Request, Response, read_header};

/// Compiled programs kept by a worker; the cache starts over when it is full.
const COMPILED_MAX: usize = 256;

/// Largest input document a worker reads (the largest request body the server takes, with room).
const INPUT_BYTES_MAX: usize = 64 << 20;

/// Limits of one worker, from its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerLimits {
    /// Bytes the address space may grow by after start.
    pub memory_bytes: u64,
    /// Bytes of serialised outputs per evaluation.
    pub output_bytes: usize,
    /// CPU seconds per evaluation (a backstop: the server stops it by wall time first).
    pub cpu_seconds: u64,
}

impl WorkerLimits {
    /// The command-line arguments that carry these limits.
    pub fn to_args(self) -> Vec<String> {
        vec![
            format!("--memory-bytes={}", self.memory_bytes),
            format!("--output-bytes={}", self.output_bytes),
            format!("--cpu-seconds={}", self.cpu_seconds),
        ]
    }

    fn from_args(args: impl Iterator<Item = OsString>) -> Result<Self, String> {
        let mut limits = WorkerLimits {
            memory_bytes: 0,
            output_bytes: 0,
            cpu_seconds: 0,
        };
        for arg in args {
            let arg = arg.to_string_lossy();
            let (name, value) = arg
                .split_once('=')
                .ok_or_else(|| format!("unexpected argument {arg:?}"))?;
            let number: u64 = value
                .parse()
                .map_err(|_| format!("{name} needs a number, not {value:?}"))?;
            match name {
                "--memory-bytes" => limits.memory_bytes = number,
                "--output-bytes" => limits.output_bytes = number as usize,
                "--cpu-seconds" => limits.cpu_seconds = number,
                _ => return Err(format!("unexpected argument {arg:?}")),
            }
        }
        if limits.memory_bytes == 0 || limits.output_bytes == 0 || limits.cpu_seconds == 0 {
            return Err("--memory-bytes, --output-bytes and --cpu-seconds are required".into());
        }
        Ok(limits)
    }
}

/// `sluice __expr-worker --memory-bytes=N --output-bytes=N --cpu-seconds=N`: serves
/// evaluations on stdin/stdout until stdin closes. `args` are the arguments after the
/// subcommand.
pub fn main(args: impl Iterator<Item = OsString>) -> ExitCode {
    let limits = match WorkerLimits::from_args(args) {
        Ok(limits) => limits,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    // A panic inside jaq is caught and answered as an error; the default hook would print it.
    std::panic::set_hook(Box::new(|_| {}));
    #[cfg(target_os = "linux")]
    if let Err(error) =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
    {
        eprintln!("error: cannot tie the worker to its parent: {error}");
        return ExitCode::FAILURE;
    }
    // One thread with a stack for both jaq's compiler and its evaluator.
    let stack = COMPILE_STACK_SIZE.max(RUN_STACK_SIZE);
    let served = std::thread::Builder::new()
        .name("sluice-expr-worker".into())
        .stack_size(stack)
        .spawn(move || serve(limits))
        .map_err(|e| e.to_string())
        .and_then(|thread| thread.join().unwrap_or_else(|_| Err("panicked".into())));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn serve(limits: WorkerLimits) -> Result<(), String> {
    limit_memory(limits.memory_bytes)?;
    let mut input = BufReader::new(io::stdin().lock());
    let mut output = BufWriter::new(io::stdout().lock());
    writeln!(output, "{READY}")
        .and_then(|()| output.flush())
        .map_err(|e| e.to_string())?;
    let mut compiled: HashMap<String, Expr> = HashMap::new();
    loop {
        let Some(header) = read_header(&mut input).map_err(|e| e.to_string())? else {
            return Ok(());
        };
        let request: Request =
            serde_json::from_slice(&header).map_err(|e| format!("bad request: {e}"))?;
        if request.input_bytes > INPUT_BYTES_MAX {
            return Err(format!("input of {} bytes", request.input_bytes));
        }
        let mut document = vec![0; request.input_bytes];
        input.read_exact(&mut document).map_err(|e| e.to_string())?;
        limit_cpu(limits.cpu_seconds)?;
        let (response, values) = evaluate(&request.programs, &document, &limits, &mut compiled);
        serde_json::to_writer(&mut output, &response).map_err(|e| e.to_string())?;
        output.write_all(b"\n").map_err(|e| e.to_string())?;
        for value in values {
            output.write_all(&value).map_err(|e| e.to_string())?;
        }
        output.flush().map_err(|e| e.to_string())?;
    }
}

/// Runs the programs in order and serialises their first outputs.
fn evaluate(
    programs: &[ProgramSpec],
    document: &[u8],
    limits: &WorkerLimits,
    compiled: &mut HashMap<String, Expr>,
) -> (Response, Vec<Vec<u8>>) {
    let mut outcomes = Vec::with_capacity(programs.len());
    let mut values = Vec::new();
    let input: Value = match serde_json::from_slice(document) {
        Ok(input) => input,
        Err(error) => {
            outcomes.push(Outcome::Error(format!("invalid input: {error}")));
            return (Response { outcomes }, values);
        }
    };
    let mut output_left = limits.output_bytes;
    for program in programs {
        if !compiled.contains_key(&program.source) {
            if compiled.len() >= COMPILED_MAX {
                compiled.clear();
            }
            match Expr::compile_on_this_thread(&program.source) {
                Ok(expr) => {
                    compiled.insert(program.source.clone(), expr);
                }
                Err(error) => {
                    outcomes.push(Outcome::Error(error));
                    break;
                }
            }
        }
        let expr = &compiled[&program.source];
        let outcome = match expr.first(&input) {
            Ok(None) => Outcome::Empty,
            Ok(Some(value)) => match serialise(&value, output_left) {
                Ok(bytes) => {
                    output_left -= bytes.len();
                    let closed = program.gate && matches!(value, Value::Null | Value::Bool(false));
                    outcomes.push(Outcome::Value(bytes.len()));
                    values.push(bytes);
                    if closed {
                        break;
                    }
                    continue;
                }
                Err(()) => Outcome::Error(format!(
                    "the expression's output is larger than the limit of {} bytes",
                    limits.output_bytes
                )),
            },
            Err(error) => Outcome::Error(error),
        };
        let stop = matches!(outcome, Outcome::Error(_)) || program.gate;
        outcomes.push(outcome);
        if stop {
            break;
        }
    }
    (Response { outcomes }, values)
}

/// `value` as JSON, unless it takes more than `max` bytes (found out without writing more).
fn serialise(value: &Value, max: usize) -> Result<Vec<u8>, ()> {
    let mut writer = Bounded {
        bytes: Vec::new(),
        max,
    };
    serde_json::to_writer(&mut writer, value).map_err(|_| ())?;
    Ok(writer.bytes)
}

/// A buffer that refuses to grow past `max` bytes.
struct Bounded {
    bytes: Vec<u8>,
    max: usize,
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.bytes.len() + buf.len() > self.max {
            return Err(io::Error::other("output limit"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Lets the address space grow by `bytes` beyond its size now (binary, libraries, this
/// thread's stack, the allocator's first arena), so the limit means what an evaluation may add.
fn limit_memory(bytes: u64) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = address_space_bytes().unwrap_or(0);
    let wanted = now.saturating_add(bytes);
    let hard = getrlimit(Resource::As).maximum;
    let soft = hard.map_or(wanted, |hard| wanted.min(hard));
    setrlimit(
        Resource::As,
        Rlimit {
            current: Some(soft),
            maximum: hard,
        },
    )
    .map_err(|e| format!("cannot limit the worker's memory: {e}"))
}

/// The size of this process's address space, from `/proc/self/statm` (Linux).
fn address_space_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    Some(pages * rustix::param::page_size() as u64)
}

/// Lets this process use `seconds` more CPU time (then the kernel stops it with SIGXCPU).
fn limit_cpu(seconds: u64) -> Result<(), String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let used = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let wanted = (used.tv_sec.max(0) as u64)
        .saturating_add(seconds)
        .saturating_add(1);
    let hard = getrlimit(Resource::Cpu).maximum;
    let soft = hard.map_or(wanted, |hard| wanted.min(hard));
    setrlimit(
        Resource::Cpu,
        Rlimit {
            current: Some(soft),
            maximum: hard,
        },
    )
    .map_err(|e| format!("cannot limit the worker's CPU time: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        programs: &[(&str, bool)],
        input: &'static str,
        output_bytes: usize,
    ) -> (Vec<Outcome>, String) {
        let programs: Vec<ProgramSpec> = programs
            .iter()
            .map(|(source, gate)| ProgramSpec {
                source: (*source).to_owned(),
                gate: *gate,
            })
            .collect();
        let limits = WorkerLimits {
            memory_bytes: 1 << 30,
            output_bytes,
            cpu_seconds: 5,
        };
        let (response, values) = std::thread::Builder::new()
            .stack_size(COMPILE_STACK_SIZE)
            .spawn(move || evaluate(&programs, input.as_bytes(), &limits, &mut HashMap::new()))
            .unwrap()
            .join()
            .unwrap();
        let values = values
            .iter()
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect::<Vec<_>>()
            .join("|");
        (response.outcomes, values)
    }

    #[test]
    fn programs_run_in_order_and_stop_at_a_closed_gate_or_an_error() {
        let (outcomes, values) = run(
            &[("true", true), (".a", false), ("empty", false)],
            r#"{"a":[1]}"#,
            100,
        );
        assert_eq!(
            outcomes,
            vec![Outcome::Value(4), Outcome::Value(3), Outcome::Empty]
        );
        assert_eq!(values, "true|[1]");
        let (outcomes, _) = run(&[(".b", true), (".a", false)], r#"{"a":1}"#, 100);
        assert_eq!(outcomes, vec![Outcome::Value(4)], "a null gate closes");
        let (outcomes, _) = run(&[("error(\"x\")", false), (".a", false)], "{}", 100);
        assert_eq!(outcomes, vec![Outcome::Error("x".into())]);
        let (outcomes, _) = run(&[("nosuch", false)], "{}", 100);
        assert!(matches!(&outcomes[..], [Outcome::Error(e)] if e.contains("undefined")));
    }

    #[test]
    fn outputs_beyond_the_limit_are_errors() {
        let (outcomes, _) = run(&[(r#""x" * 100"#, false)], "null", 50);
        assert!(matches!(&outcomes[..], [Outcome::Error(e)] if e.contains("50 bytes")));
        let (outcomes, _) = run(
            &[(r#""x" * 20"#, false), (r#""y" * 20"#, false)],
            "null",
            30,
        );
        assert!(
            matches!(&outcomes[..], [Outcome::Value(22), Outcome::Error(_)]),
            "{outcomes:?}"
        );
    }

    #[test]
    fn limits_travel_as_arguments() {
        let limits = WorkerLimits {
            memory_bytes: 1,
            output_bytes: 2,
            cpu_seconds: 3,
        };
        let args = limits.to_args().into_iter().map(OsString::from);
        assert_eq!(WorkerLimits::from_args(args), Ok(limits));
        assert!(WorkerLimits::from_args([OsString::from("--nope=1")].into_iter()).is_err());
    }
}
