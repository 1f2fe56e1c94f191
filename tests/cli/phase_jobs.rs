//! How many items of a phase run at once: `--jobs`, else the plan's `concurrency`, else the
//! policy's `[run] jobs`, else four per CPU — never every item of a large plan at once.

use crate::common::Sandbox;

/// A plan of `n` items, each of which notes how many items were running when it started
/// (itself included) in `seen/ID`, stays a moment, and leaves.
fn counting_plan(n: usize, concurrency: Option<u32>) -> String {
    let mut plan = String::new();
    if let Some(c) = concurrency {
        plan.push_str(&format!("concurrency = {c}\n"));
    }
    for i in 0..n {
        plan.push_str(&format!(
            "[[items]]\nid = \"i{i}\"\ncommand = \"mkdir -p running seen && touch running/i{i} && ls running | wc -l > seen/i{i} && sleep 0.3 && rm running/i{i}\"\n"
        ));
    }
    plan
}

/// The most items any item saw running at its start.
fn most_at_once(s: &Sandbox) -> usize {
    std::fs::read_dir(s.path().join("seen"))
        .unwrap()
        .map(|e| {
            let text = std::fs::read_to_string(e.unwrap().path()).unwrap();
            text.trim().parse::<usize>().unwrap()
        })
        .max()
        .unwrap()
}

fn run(s: &Sandbox, plan: &str, extra: &[&str]) {
    s.write("plan.toml", plan);
    let mut args = vec![
        "phase",
        "run",
        "plan.toml",
        "--workflow",
        "w",
        "--phase",
        "1",
    ];
    args.extend_from_slice(extra);
    s.triage(args).run().status(0);
}

#[test]
fn jobs_bounds_the_items_running_at_once_over_the_plans_concurrency() {
    let s = Sandbox::new();
    run(&s, &counting_plan(6, Some(6)), &["--jobs", "2"]);
    let most = most_at_once(&s);
    assert!((1..=2).contains(&most), "{most} items ran at once");
}

#[test]
fn the_policys_run_jobs_bounds_a_plan_that_names_no_concurrency() {
    let s = Sandbox::new();
    s.write(".triage.toml", "[run]\njobs = 1\n");
    run(&s, &counting_plan(4, None), &[]);
    assert_eq!(most_at_once(&s), 1);
}

#[test]
fn zero_jobs_is_refused_naming_the_flag() {
    let s = Sandbox::new();
    s.write("plan.toml", counting_plan(1, None));
    let out = s
        .triage([
            "phase",
            "run",
            "plan.toml",
            "--workflow",
            "w",
            "--phase",
            "1",
            "--jobs",
            "0",
        ])
        .run()
        .status(64);
    assert!(out.stderr().contains("--jobs"), "{}", out.stderr());
    s.write(".triage.toml", "[run]\njobs = 0\n");
    let out = s.triage(["config", "check"]).run();
    assert_ne!(out.code(), Some(0), "{}", out.stdout());
    assert!(
        (out.stderr() + &out.stdout()).contains("jobs"),
        "{}",
        out.stderr()
    );
}
