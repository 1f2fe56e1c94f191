use super::*;

/// A session like seed 000's: phase 2's consultants fail, one recovers on retry.
const LOG: &[&str] = &[
    r#"{"error_id":"e1","timestamp":"2026-02-04T14:10:00Z","session_id":"s1","workflow_id":"w1","phase":1,"agent":"research-architect","kind":"crash","detail":"Task tool failed","retry_count":0}"#,
    r#"{"resolves":"e1","timestamp":"2026-02-04T14:12:00Z","session_id":"s1","workflow_id":"w1","phase":1,"agent":"research-architect","resolution":{"action_taken":"retry","successful":true}}"#,
    r#"{"error_id":"e2","timestamp":"2026-02-04T14:25:00Z","session_id":"s1","workflow_id":"w1","phase":2,"agent":"mathematician-consultant","kind":"timeout","detail":"Agent exceeded 5 minute timeout","duration_ms":300000,"preserved_outputs":["plans/ch3_partial.md"]}"#,
    r#"{"error_id":"e3","timestamp":"2026-02-04T14:28:00Z","session_id":"s1","workflow_id":"w1","phase":2,"agent":"programmer-consultant","kind":"rate_limited","detail":"429 Too Many Requests"}"#,
    r#"{"error_id":"e4","timestamp":"2026-02-04T14:29:00Z","session_id":"s1","workflow_id":"w1","phase":2,"agent":"statistician-consultant","kind":"timeout","detail":"Agent exceeded 5 minute timeout","retry_count":0,"duration_ms":300000}"#,
    r#"{"error_id":"e5","timestamp":"2026-02-04T14:30:22Z","session_id":"s1","workflow_id":"w1","phase":2,"agent":"statistician-consultant","kind":"timeout","detail":"Agent exceeded 5 minute timeout","retry_count":1,"duration_ms":300000,"context":{"last_progress":"Reviewing section 2 of 4"}}"#,
];

const POLICY: &str = r#"
[phases.2]
name = "Subsection planning"
timeout = "20m"
size = 3

[agents."*-consultant"]
timeout = "5m"

[agents.mathematician-consultant]
criticality = "optional"

[agents.programmer-consultant]
criticality = "optional"
"#;

fn render(name: TemplateName, tweak: impl FnOnce(&mut TemplateInput)) -> Rendered {
    let policy = crate::core::policy::load(POLICY).expect("policy");
    let records = LOG
        .iter()
        .map(|l| Rec::from_line(&LogLine::parse(l.as_bytes()).expect("line")))
        .collect();
    let mut input = TemplateInput {
        records,
        policy: &policy,
        now: "2026-02-04T14:35:00Z".parse().expect("now"),
        state_root: ".triage".into(),
        session: Some("s1".into()),
        workflow: None,
        agent: None,
        phase: None,
        completed: Vec::new(),
        pipeline: Vec::new(),
        runs: None,
        items: None,
        breakers: vec![BreakerFacts {
            key: "statistician-consultant".into(),
            state: State::Open,
            consecutive_failures: 2,
            last_error: Some("timeout - Agent exceeded 5 minute timeout".into()),
            since_last_success_s: None,
            half_open_in_s: Some(37),
            opened: 1,
        }],
    };
    tweak(&mut input);
    let r = build(name, &input).expect("renders");
    assert_eq!(r.fields["template"], json!(name));
    assert!(r.fields.is_object());
    r
}

fn render_err(name: TemplateName, tweak: impl FnOnce(&mut TemplateInput)) -> String {
    let policy = crate::core::policy::load(POLICY).expect("policy");
    let records = LOG
        .iter()
        .map(|l| Rec::from_line(&LogLine::parse(l.as_bytes()).expect("line")))
        .collect();
    let mut input = TemplateInput {
        records,
        policy: &policy,
        now: "2026-02-04T14:35:00Z".parse().expect("now"),
        state_root: ".triage".into(),
        session: Some("s1".into()),
        workflow: None,
        agent: None,
        phase: None,
        completed: Vec::new(),
        pipeline: Vec::new(),
        runs: None,
        items: None,
        breakers: vec![BreakerFacts {
            key: "statistician-consultant".into(),
            state: State::Open,
            ..BreakerFacts::default()
        }],
    };
    tweak(&mut input);
    build(name, &input).expect_err("refused")
}

#[test]
fn agent_failure() {
    insta::assert_snapshot!(render(TemplateName::AgentFailure, |_| {}).text);
}

#[test]
fn multiple_failures() {
    let r = render(TemplateName::MultipleFailures, |i| {
        i.completed = vec!["analysis-planner".into()];
    });
    assert_eq!(r.fields["count"], 3);
    insta::assert_snapshot!(r.text);
}

#[test]
fn phase_timeout() {
    let r = render(TemplateName::PhaseTimeout, |i| {
        i.completed = vec!["analysis-planner".into()];
        i.pipeline = vec![
            "analysis-planner".into(),
            "statistician-consultant".into(),
            "mathematician-consultant".into(),
            "notebook-reviewer".into(),
        ];
    });
    assert_eq!(r.fields["timeout"], 20);
    insta::assert_snapshot!(r.text);
}

#[test]
fn breaker_open() {
    let r = render(TemplateName::BreakerOpen, |_| {});
    assert_eq!(r.fields["failure_count"], 2);
    assert_eq!(r.fields["state"], "open");
    insta::assert_snapshot!(r.text);
    // No breaker file, or a closed one: Template 4 would say what is not so.
    let e = render_err(TemplateName::BreakerOpen, |i| i.breakers.clear());
    assert!(
        e.contains("there is no breaker `statistician-consultant`"),
        "{e}"
    );
    let e = render_err(TemplateName::BreakerOpen, |i| {
        i.breakers[0].state = State::Closed;
    });
    assert!(e.contains("is closed, not open"), "{e}");
}

#[test]
fn the_prompt_line_is_built_from_the_options_for_a_terminal() {
    let r = render(TemplateName::StabilityWarning, |i| i.runs = Some(12));
    assert!(!r.text.contains("Enter choice"), "{}", r.text);
    assert_eq!(prompt(&r.fields).as_deref(), Some("Enter choice [A/B/C]:"));
    assert_eq!(prompt(&json!({"options": []})), None);
}

#[test]
fn stability_warning() {
    let r = render(TemplateName::StabilityWarning, |i| i.runs = Some(12));
    assert_eq!(r.fields["failure_rate"], 42);
    insta::assert_snapshot!(r.text);
}

#[test]
fn degradation() {
    insta::assert_snapshot!(render(TemplateName::Degradation, |_| {}).text);
}

#[test]
fn session_summary() {
    insta::assert_snapshot!(render(TemplateName::SessionSummary, |_| {}).text);
}

#[test]
fn pipeline_status() {
    let r = render(TemplateName::PipelineStatus, |i| {
        i.pipeline = vec![
            "research-architect".into(),
            "statistician-consultant".into(),
            "notebook-generator".into(),
        ];
    });
    assert_eq!(r.fields["failed_index"], 2);
    insta::assert_snapshot!(r.text);
}

#[test]
fn parallel_status() {
    let r = render(TemplateName::ParallelStatus, |i| {
        i.pipeline = vec![
            "statistician-consultant".into(),
            "mathematician-consultant".into(),
            "programmer-consultant".into(),
            "research-architect".into(),
            "analysis-planner".into(),
        ];
        i.completed = vec!["analysis-planner".into()];
    });
    assert_eq!(r.fields["status"], "PARTIAL SUCCESS");
    assert_eq!(r.fields["completed_count"], 2);
    insta::assert_snapshot!(r.text);
}

#[test]
fn cascade() {
    let r = render(TemplateName::Cascade, |i| i.session = None);
    assert_eq!(r.fields["count"], 3);
    insta::assert_snapshot!(r.text);
    // Two failing agents are not a cascade (seed 001: more than 2).
    let e = render_err(TemplateName::Cascade, |i| {
        i.records
            .retain(|r| r.agent.as_deref() != Some("programmer-consultant"));
    });
    assert!(
        e.contains("2 agents are failing, the rule needs more than 2"),
        "{e}"
    );
}

#[test]
fn stage_failed() {
    let r = render(TemplateName::StageFailed, |_| {});
    assert_eq!(r.fields["failures"], 4);
    insta::assert_snapshot!(r.text);
}

#[test]
fn missing_inputs_say_what_to_give() {
    let policy = Policy::default();
    let input = TemplateInput {
        records: Vec::new(),
        policy: &policy,
        now: "2026-02-04T14:35:00Z".parse().expect("now"),
        state_root: ".triage".into(),
        session: None,
        workflow: None,
        agent: None,
        phase: None,
        completed: Vec::new(),
        pipeline: Vec::new(),
        runs: None,
        items: None,
        breakers: Vec::new(),
    };
    let e = build(TemplateName::AgentFailure, &input).expect_err("no records");
    assert!(e.contains("widen the filter"), "{e}");
    let e = build(TemplateName::PipelineStatus, &input).expect_err("no pipeline");
    assert!(e.contains("--pipeline"), "{e}");
}
