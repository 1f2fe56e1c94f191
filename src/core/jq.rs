//! jq filters, run by the embedded jaq engine: compiled once, run on many values, each run
//! within a [`Budget`].
//!
//! `halt` and `halt_error` are left out of the standard library: they would end the process
//! from inside a filter, and a policy file must never be able to do that to a hook.
//!
//! A filter comes from a policy file or a flag, so it is hostile input: `def f: f; f`,
//! `until(false; .)` and `last(range(1e18))` never yield, `repeat(.)` yields forever, and
//! `reduce range(100000) as $i (.; [.])` builds a value too deep to convert or drop on a
//! normal stack. jaq has no step counter and cannot be interrupted inside one evaluation, so
//! each run happens on a worker thread with a large stack (one thread kept for the process's
//! compiles and runs while each finishes quickly): the caller waits at most the budget's time
//! and then abandons the worker (it stops with the process, which ends soon
//! after: every triage command is short-lived — only `triage run --until-output-ok` lives on
//! with an abandoned worker, which then spins until the run ends). Between outputs the worker checks the
//! deadline, the number of outputs and their size; an output nested deeper than the JSON
//! reader's limit is refused before it is converted, and leaked rather than dropped, so no
//! recursion runs on its depth.

use jaq_core::compile::Lut;
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Cv, Error, Exn, Native, RcIter, ValXs};
use jaq_json::Val;
use serde_json::Value;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A compiled jq filter.
pub struct Filter {
    filter: Arc<jaq_core::Filter<Native<Val>>>,
}

/// What one run of a filter may use before it is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Wall-clock time for the whole run.
    pub time: Duration,
    /// Outputs (a predicate yields one; an update exactly one).
    pub outputs: usize,
    /// Size of all outputs together, in JSON bytes (about).
    pub bytes: usize,
}

impl Default for Budget {
    /// One second, 10 000 outputs, 16 MiB: far above any predicate or update a policy needs,
    /// far below what would stall a hook.
    fn default() -> Self {
        Budget {
            time: Duration::from_secs(1),
            outputs: 10_000,
            bytes: 16 << 20,
        }
    }
}

/// Values nested deeper than this are refused: serde_json reads no deeper, so such a value
/// could not be read back, and converting it would recurse on its depth.
pub const MAX_DEPTH: usize = 128;

/// The longest filter accepted, in bytes: policy predicates and updates are a line or two.
pub const MAX_CODE: usize = 16 * 1024;

/// The worker's stack: deep enough for jaq's own recursion on values built within the time
/// budget. Only the pages touched are ever allocated.
const WORKER_STACK: usize = 1 << 30;

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunError {
    /// The filter raised an error (`error("x")`, `.a + 1` on a string, ...).
    Jq(String),
    /// The filter used up its budget and was stopped.
    OverBudget(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Jq(m) | RunError::OverBudget(m) => f.write_str(m),
        }
    }
}

impl RunError {
    /// True when the filter was stopped by its budget.
    pub fn is_over_budget(&self) -> bool {
        matches!(self, RunError::OverBudget(_))
    }
}

impl Filter {
    /// Compiles `code`, or says where and why it is wrong.
    ///
    /// Most filters (`.n += 1`, `.evidence_count > 0`) call no definition of the standard
    /// library, only native filters: they are compiled without it first, which skips lexing,
    /// parsing and compiling its ~190 definitions (about 0.4 ms of every call). A filter that
    /// needs one (`select`, `map`, `true`) is compiled again with the whole library. No
    /// definition shares a name and arity with a native filter (a test checks it), so a name
    /// resolves to the same filter either way.
    ///
    /// A filter is hostile input: longer than [`MAX_CODE`] is refused, a definition that
    /// calls itself is refused (recursion in a one-line policy filter is a loop or a stack
    /// overflow waiting to happen; the library's `recurse`, `walk`, `until`... remain), and
    /// parsing and compiling run on a thread with a large stack, since jaq recurses on the
    /// nesting of the code.
    pub fn compile(code: &str) -> Result<Filter, String> {
        if code.len() > MAX_CODE {
            return Err(format!(
                "jq filter of {} bytes: longer than the {MAX_CODE} a filter may have",
                code.len()
            ));
        }
        let owned = code.to_string();
        let compiled = on_worker(
            move || {
                refuse_recursion(&owned)?;
                match Filter::compile_with(&owned, false) {
                    Ok(f) => Ok(f),
                    Err(_) => Filter::compile_with(&owned, true),
                }
            },
            None,
        );
        match compiled {
            Ok(r) => r,
            Err(WorkerError::Start(e)) => Err(format!("cannot start the jq compiler: {e}")),
            Err(_) => Err(format!("jq filter `{code}`: the compiler failed")),
        }
    }

    fn compile_with(code: &str, with_defs: bool) -> Result<Filter, String> {
        let arena = Arena::default();
        let loader = if with_defs {
            Loader::new(std_defs().collect::<Vec<_>>())
        } else {
            Loader::new(Vec::new())
        };
        let modules = loader
            .load(&arena, File { code, path: () })
            .map_err(|errs| load_errors(code, &errs))?;
        let filter = Compiler::default()
            .with_funs(natives())
            .compile(modules)
            .map_err(|errs| {
                let names: Vec<String> = errs
                    .iter()
                    .flat_map(|(_, es)| es.iter().map(|(name, _)| format!("`{name}`")))
                    .collect();
                format!("jq filter `{code}`: undefined {}", names.join(", "))
            })?;
        Ok(Filter {
            filter: Arc::new(filter),
        })
    }

    /// Runs the filter on `input` within the default [`Budget`] and collects every output (or
    /// the first error).
    pub fn run(&self, input: &Value) -> Result<Vec<Value>, RunError> {
        self.run_within(input, Budget::default())
    }

    /// Runs the filter on `input` within `budget`, on a worker thread (see the module's
    /// documentation).
    pub fn run_within(&self, input: &Value, budget: Budget) -> Result<Vec<Value>, RunError> {
        let filter = Arc::clone(&self.filter);
        let input = input.clone();
        let deadline = Instant::now() + budget.time;
        match on_worker(
            move || evaluate(&filter, input, budget, deadline),
            Some(budget.time),
        ) {
            Ok(r) => r,
            Err(WorkerError::Start(e)) => {
                Err(RunError::Jq(format!("cannot start the jq worker: {e}")))
            }
            Err(WorkerError::Timeout) => Err(over_time(budget)),
            Err(WorkerError::Died) => {
                Err(RunError::Jq("the jq evaluation ended abnormally".into()))
            }
        }
    }

    /// Runs the filter as a predicate: true only when every output is `true` and there is one.
    pub fn holds(&self, input: &Value) -> Result<bool, RunError> {
        let out = self.run(input)?;
        Ok(!out.is_empty() && out.iter().all(|v| v == &Value::Bool(true)))
    }
}

/// A job for the jq worker thread.
type Job = Box<dyn FnOnce() + Send>;

/// A worker thread with a [`WORKER_STACK`] stack that runs jq jobs one at a time: compiling
/// and running filters there, rather than on a new thread each, saves a process the start
/// and end of a thread per filter (about twenty system calls each: the stack's mapping, a
/// signal stack, the clone, the exit and the unmapping).
struct Worker {
    jobs: mpsc::Sender<Job>,
}

/// The idle worker, if any: a job takes it, and gives it back when done in time. A caller
/// that finds it taken (another thread's job is running) starts a worker of its own, so no
/// job ever waits behind another; a worker whose job overran its budget is abandoned (it
/// still runs that job) and never given back.
static IDLE: Mutex<Option<Worker>> = Mutex::new(None);

/// A job that ran longer than this may have touched much of the worker's stack (deep
/// recursion): its worker is let go, so the memory is returned as the thread ends, instead of
/// being kept by an idle thread in a long-lived process.
const REUSE_WITHIN: Duration = Duration::from_millis(50);

/// Why [`on_worker`] has no result.
enum WorkerError {
    /// No thread could be started.
    Start(std::io::Error),
    /// The job did not finish within the time given (it is abandoned).
    Timeout,
    /// The job ended without a result (it panicked).
    Died,
}

fn start_worker() -> std::io::Result<Worker> {
    let (jobs, queue) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("jq".into())
        .stack_size(WORKER_STACK)
        .spawn(move || {
            while let Ok(job) = queue.recv() {
                job();
            }
        })?;
    Ok(Worker { jobs })
}

/// Runs `job` on the jq worker and waits for its result, at most `wait` when given.
fn on_worker<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
    wait: Option<Duration>,
) -> Result<T, WorkerError> {
    let idle = match IDLE.lock() {
        Ok(mut slot) => slot.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    };
    let worker = match idle {
        Some(w) => w,
        None => start_worker().map_err(WorkerError::Start)?,
    };
    let (tx, rx) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _ = tx.send(job());
    });
    let started = Instant::now();
    // A worker that ended (its earlier job panicked) refuses the job: start a fresh one.
    let worker = match worker.jobs.send(job) {
        Ok(()) => worker,
        Err(mpsc::SendError(job)) => {
            let fresh = start_worker().map_err(WorkerError::Start)?;
            fresh.jobs.send(job).map_err(|_| WorkerError::Died)?;
            fresh
        }
    };
    let got = match wait {
        Some(t) => rx.recv_timeout(t).map_err(|e| match e {
            mpsc::RecvTimeoutError::Timeout => WorkerError::Timeout,
            mpsc::RecvTimeoutError::Disconnected => WorkerError::Died,
        }),
        None => rx.recv().map_err(|_| WorkerError::Died),
    };
    if got.is_ok() && started.elapsed() < REUSE_WITHIN {
        if let Ok(mut slot) = IDLE.lock() {
            if slot.is_none() {
                *slot = Some(worker);
            }
        }
    }
    got
}

fn over_time(budget: Budget) -> RunError {
    RunError::OverBudget(format!(
        "stopped after {} without finishing (the budget of a jq filter); a filter that loops or recurses forever never ends",
        crate::core::duration::Dur(budget.time)
    ))
}

/// One run, on the worker: outputs taken lazily, the budget checked between them.
fn evaluate(
    filter: &jaq_core::Filter<Native<Val>>,
    input: Value,
    budget: Budget,
    deadline: Instant,
) -> Result<Vec<Value>, RunError> {
    let inputs = RcIter::new(core::iter::empty());
    let out = filter.run((Ctx::new([], &inputs), Val::from(input)));
    let mut values = Vec::new();
    let mut bytes = 0usize;
    for v in out {
        if Instant::now() >= deadline {
            return Err(over_time(budget));
        }
        let v = v.map_err(|e| RunError::Jq(format!("jq error: {e}")))?;
        if values.len() >= budget.outputs {
            return Err(RunError::OverBudget(format!(
                "stopped after {} outputs (the budget of a jq filter); a filter that yields forever never ends",
                budget.outputs
            )));
        }
        match measure(&v, budget.bytes.saturating_sub(bytes), budget.bytes) {
            Ok(size) => bytes += size,
            Err(e) => {
                // Leaked, not dropped: dropping a value nested this deep recurses on its depth.
                std::mem::forget(v);
                return Err(e);
            }
        }
        values.push(Value::from(v));
    }
    Ok(values)
}

/// The size of `v` in JSON bytes (about), refused when nested deeper than [`MAX_DEPTH`] or
/// larger than `room`. Iterative: `v` may be arbitrarily deep.
fn measure(v: &Val, room: usize, limit: usize) -> Result<usize, RunError> {
    let mut size = 0usize;
    let mut stack: Vec<(&Val, usize)> = vec![(v, 1)];
    while let Some((v, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(RunError::OverBudget(format!(
                "an output is nested more than {MAX_DEPTH} levels deep, which no JSON reader here accepts"
            )));
        }
        size += match v {
            Val::Null | Val::Bool(_) => 5,
            Val::Int(_) | Val::Float(_) => 8,
            Val::Num(s) | Val::Str(s) => s.len() + 2,
            Val::Arr(a) => {
                stack.extend(a.iter().map(|x| (x, depth + 1)));
                a.len() + 2
            }
            Val::Obj(o) => {
                for (k, x) in o.iter() {
                    size += k.len() + 3;
                    stack.push((x, depth + 1));
                }
                2
            }
        };
        if size > room {
            return Err(RunError::OverBudget(format!(
                "its outputs pass {limit} bytes (the budget of a jq filter)"
            )));
        }
    }
    Ok(size)
}

/// Refuses a filter whose own definitions call themselves, directly or through a definition
/// nested in them (`def f: f; f`, `def f: [f]; f`, `def f: def g: f; g; f`).
fn refuse_recursion(code: &str) -> Result<(), String> {
    use jaq_core::load::parse::Term;
    let Some(term) = jaq_core::load::parse(code, |p| p.term()) else {
        return Ok(()); // Not a term: compiling says what is wrong.
    };
    /// A name in scope: a definition (and whether its body is being read) or a parameter.
    type Scope<'s> = Vec<(&'s str, usize, bool)>;
    fn walk<'s>(t: &Term<&'s str>, scope: &mut Scope<'s>) -> Result<(), String> {
        use jaq_core::load::lex::StrPart;
        use jaq_core::path::Part;
        let each = |ts: &mut dyn Iterator<Item = &Term<&'s str>>, scope: &mut Scope<'s>| {
            for t in ts {
                walk(t, scope)?;
            }
            Ok(())
        };
        match t {
            Term::Call(name, args) => {
                let open = scope
                    .iter()
                    .rev()
                    .find(|(n, a, _)| n == name && *a == args.len())
                    .is_some_and(|(_, _, open)| *open);
                if open {
                    return Err(format!(
                        "`{name}` calls itself: recursive definitions are not allowed in triage filters (use the library's recurse, walk, until or while)"
                    ));
                }
                each(&mut args.iter(), scope)
            }
            Term::Def(defs, body) => {
                let mark = scope.len();
                for d in defs {
                    scope.push((d.name, d.args.len(), true));
                    let own = scope.len();
                    for p in d.args.iter().filter(|p| !p.starts_with('$')) {
                        scope.push((p, 0, false));
                    }
                    walk(&d.body, scope)?;
                    scope.truncate(own);
                    if let Some(last) = scope.last_mut() {
                        last.2 = false;
                    }
                }
                walk(body, scope)?;
                scope.truncate(mark);
                Ok(())
            }
            Term::Str(_, parts) => each(
                &mut parts.iter().filter_map(|p| match p {
                    StrPart::Term(t) => Some(t),
                    _ => None,
                }),
                scope,
            ),
            Term::Arr(t) => each(&mut t.iter().map(|b| &**b), scope),
            Term::Obj(kvs) => each(
                &mut kvs.iter().flat_map(|(k, v)| std::iter::once(k).chain(v)),
                scope,
            ),
            Term::Neg(t) | Term::Label(_, t) => walk(t, scope),
            Term::Pipe(l, _, r) | Term::BinOp(l, _, r) => {
                each(&mut [&**l, &**r].into_iter(), scope)
            }
            Term::Fold(_, x, _, args) => each(&mut std::iter::once(&**x).chain(args), scope),
            Term::TryCatch(t, c) => each(&mut std::iter::once(&**t).chain(c.as_deref()), scope),
            Term::IfThenElse(branches, els) => each(
                &mut branches
                    .iter()
                    .flat_map(|(c, t)| [c, t])
                    .chain(els.as_deref()),
                scope,
            ),
            Term::Path(t, path) => {
                walk(t, scope)?;
                each(
                    &mut path.0.iter().flat_map(|(part, _)| match part {
                        Part::Index(i) => vec![i],
                        Part::Range(a, b) => a.iter().chain(b).collect(),
                    }),
                    scope,
                )
            }
            _ => Ok(()),
        }
    }
    walk(&term, &mut Vec::new()).map_err(|why| format!("jq filter `{code}`: {why}"))
}

/// The definitions of jq's standard library (written in jq).
fn std_defs() -> impl Iterator<Item = jaq_core::load::parse::Def<&'static str>> {
    jaq_std::defs().chain(jaq_json::defs())
}

/// The native filters, `halt` and `halt_error` replaced.
fn natives() -> impl Iterator<Item = jaq_std::Filter<Native<Val>>> {
    jaq_std::funs()
        .map(|(name, args, native)| match name {
            "halt" | "halt_error" => (name, args, Native::new(refuse_halt)),
            _ => (name, args, native),
        })
        .chain(jaq_json::funs())
}

/// Stands in for `halt` and `halt_error`: an error value instead of ending the process.
fn refuse_halt<'a>(_: &'a Lut<Native<Val>>, _: Cv<'a, Val>) -> ValXs<'a, Val> {
    Box::new(core::iter::once(Err(Exn::from(Error::str(
        "halt is not allowed in triage filters",
    )))))
}

fn offset_in(code: &str, part: &str) -> usize {
    let start = code.as_ptr() as usize;
    let at = part.as_ptr() as usize;
    if at >= start && at <= start + code.len() {
        at - start
    } else {
        0
    }
}

fn load_errors(code: &str, errs: &jaq_core::load::Errors<&str, ()>) -> String {
    use jaq_core::load::Error;
    let mut parts = Vec::new();
    for (_, e) in errs {
        match e {
            Error::Io(v) => parts.extend(v.iter().map(|(p, m)| format!("cannot load {p}: {m}"))),
            Error::Lex(v) => parts.extend(v.iter().map(|(expect, at)| {
                format!(
                    "expected {} at position {}",
                    expect.as_str(),
                    offset_in(code, at)
                )
            })),
            Error::Parse(v) => parts.extend(v.iter().map(|(expect, at)| {
                let pos = offset_in(code, at);
                let found = if at.is_empty() {
                    "end of filter".into()
                } else {
                    format!("`{at}`")
                };
                format!(
                    "expected {} at position {pos}, found {found}",
                    expect.as_str()
                )
            })),
        }
    }
    format!("jq filter `{code}`: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn runs_and_updates() {
        let f = Filter::compile(".n += 1").expect("compile");
        assert_eq!(f.run(&json!({"n": 1})).expect("run"), vec![json!({"n": 2})]);
        assert_eq!(f.run(&json!({})).expect("run"), vec![json!({"n": 1})]);
    }

    #[test]
    fn predicates() {
        let f = Filter::compile(".evidence_count > 0").expect("compile");
        assert!(f.holds(&json!({"evidence_count": 3})).expect("run"));
        assert!(!f.holds(&json!({"evidence_count": 0})).expect("run"));
        assert!(!Filter::compile("empty")
            .expect("compile")
            .holds(&json!(1))
            .expect("run"));
    }

    #[test]
    fn errors_say_where() {
        let e = Filter::compile(".a | ").err().expect("error");
        assert!(e.contains("position"), "{e}");
        let e = Filter::compile("nosuchfn(1)").err().expect("error");
        assert!(e.contains("undefined"), "{e}");
        let halt = Filter::compile("halt").expect("compiles to an error");
        assert!(halt.run(&json!(1)).is_err());
        assert!(Filter::compile("\"x\" | halt_error")
            .expect("compile")
            .run(&json!(1))
            .is_err());
    }

    #[test]
    fn no_definition_shadows_a_native_filter() {
        // `compile` tries the native filters alone first: that is only sound when no
        // definition of the library has the name and arity of a native one.
        let natives: Vec<(&str, usize)> = natives().map(|(n, a, _)| (n, a.len())).collect();
        for d in std_defs() {
            assert!(
                !natives.contains(&(d.name, d.args.len())),
                "{}/{}",
                d.name,
                d.args.len()
            );
        }
    }

    #[test]
    fn filters_that_need_the_library_still_compile() {
        let f = Filter::compile("[.[] | select(. > 1)] | map(. * 2) | add").expect("compile");
        assert_eq!(f.run(&json!([1, 2, 3])).expect("run"), vec![json!(10)]);
        let f = Filter::compile(".a == true and (.b | not)").expect("compile");
        assert!(f.holds(&json!({"a": true, "b": false})).expect("run"));
        let f = Filter::compile(".tags | join(\",\") | test(\"a,b\")").expect("compile");
        assert!(f.holds(&json!({"tags": ["a", "b"]})).expect("run"));
        let f = Filter::compile("def twice(f): f | f; .n | twice(. + 1)").expect("compile");
        assert_eq!(f.run(&json!({"n": 1})).expect("run"), vec![json!(3)]);
        let e = Filter::compile("select(.a) | nosuchfn")
            .err()
            .expect("error");
        assert!(e.contains("undefined") && e.contains("nosuchfn"), "{e}");
    }

    fn small() -> Budget {
        Budget {
            time: Duration::from_millis(100),
            outputs: 100,
            bytes: 1 << 16,
        }
    }

    #[test]
    fn filters_that_never_end_are_stopped_by_the_budget() {
        for code in ["until(false; .)", "last(range(1e18))", "[repeat(.)]"] {
            let f = Filter::compile(code).expect(code);
            let e = f.run_within(&json!({}), small()).expect_err(code);
            assert!(e.is_over_budget(), "{code}: {e}");
            assert!(e.to_string().contains("100ms"), "{code}: {e}");
        }
        // The count and size limits, with time to spare however loaded the machine is.
        let roomy = Budget {
            time: Duration::from_secs(600),
            ..small()
        };
        let e = Filter::compile("repeat(.)")
            .expect("compile")
            .run_within(&json!(1), roomy)
            .expect_err("endless outputs");
        assert!(e.to_string().contains("100 outputs"), "{e}");
        let e = Filter::compile("[range(100000)]")
            .expect("compile")
            .run_within(&json!(1), roomy)
            .expect_err("too big");
        assert!(e.to_string().contains("65536 bytes"), "{e}");
    }

    #[test]
    fn recursive_definitions_and_huge_filters_are_refused_at_compile_time() {
        for code in [
            "def f: f; f",
            "def f: [f]; f",
            "def f(n): if n == 0 then 0 else 1 + f(n - 1) end; f(100000)",
            "def f: def g: f; [g]; f",
            "def f: \"\\(f)\"; f",
        ] {
            let e = Filter::compile(code).err().expect(code);
            assert!(e.contains("calls itself"), "{code}: {e}");
        }
        // Not recursion: a nested definition shadows an outer one, a parameter a definition.
        for code in [
            "def f: def f: 1; f; f",
            "def g: 2; def f(g): g; f(3)",
            "def f: 1; def g: f + f; g",
            "[limit(3; repeat(1))] | length",
        ] {
            assert!(Filter::compile(code).is_ok(), "{code}");
        }
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        assert!(Filter::compile(&deep).is_ok());
        assert!(Filter::compile(&".".repeat(MAX_CODE + 1)).is_err());
    }

    #[test]
    fn outputs_deeper_than_the_reader_accepts_are_refused_without_recursion() {
        let roomy = Budget {
            time: Duration::from_secs(600),
            ..Budget::default()
        };
        let f = Filter::compile("reduce range(100000) as $i (.; [.])").expect("compile");
        let e = f.run_within(&json!(0), roomy).expect_err("too deep");
        assert!(
            e.is_over_budget() && e.to_string().contains("128 levels"),
            "{e}"
        );
        // At the limit it is fine.
        let f = Filter::compile("reduce range(127) as $i (.; [.])").expect("compile");
        assert_eq!(f.run(&json!(0)).expect("run").len(), 1);
        // jaq's own recursion over a deep value runs on the worker's large stack.
        let f = Filter::compile("reduce range(100000) as $i (.; [.]) | length").expect("c");
        assert_eq!(f.run_within(&json!(0), roomy).expect("run"), vec![json!(1)]);
    }

    #[test]
    fn runtime_errors_are_values_not_panics() {
        let f = Filter::compile(".a + 1").expect("compile");
        assert!(f.run(&json!({"a": "x"})).is_err());
        let f = Filter::compile("error(\"no\")").expect("compile");
        assert!(f.run(&json!(1)).is_err());
    }
}
