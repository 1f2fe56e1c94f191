use super::*;

fn row(id: &str, state: ItemState, attempt: u32, ms: Option<u64>) -> Row {
    Row {
        id: id.into(),
        state,
        attempt,
        elapsed: ms.map(Duration::from_millis),
        waiting: None,
    }
}

#[test]
fn one_line_per_item_with_state_attempt_and_time() {
    let rows = [
        row("writer", ItemState::Running, 2, Some(1500)),
        row("checker-long-name", ItemState::Complete, 1, Some(61_000)),
        row("later", ItemState::NotStarted, 0, None),
    ];
    let got = lines(&rows, 10, 80, &Term::plain(80));
    assert_eq!(
        got,
        [
            "writer             running      attempt 2   1.5s",
            "checker-long-name  complete     attempt 1   1m01s",
            "later              not_started",
        ]
    );
}

#[test]
fn rows_that_do_not_fit_give_way_to_counts_the_slowest_running_and_the_failed() {
    let mut rows: Vec<Row> = (0..10_000)
        .map(|i| row(&format!("i{i}"), ItemState::NotStarted, 0, None))
        .collect();
    for (i, r) in rows.iter_mut().enumerate().take(500) {
        *r = row(&format!("i{i}"), ItemState::Complete, 1, Some(10));
    }
    for (i, ms) in [
        (600, 100),
        (601, 9_000),
        (602, 2_000),
        (603, 50),
        (604, 4_000),
    ] {
        rows[i] = row(&format!("i{i}"), ItemState::Running, 1, Some(ms));
    }
    for i in [700, 701, 702] {
        rows[i] = row(&format!("i{i}"), ItemState::Failed, 2, Some(30));
    }
    let got = lines(&rows, 6, 80, &Term::plain(80));
    assert_eq!(
        got,
        [
            "10000 items: 500 complete, 5 running, 3 failed, 9492 not_started",
            "i601  running      attempt 1   9.0s",
            "i604  running      attempt 1   4.0s",
            "i700  failed       attempt 2   0.0s",
            "i701  failed       attempt 2   0.0s",
            "… and 3 more running, 1 more failed",
        ]
    );
    // Everything that fits is shown, with no "more" line.
    let got = lines(&rows, 9, 80, &Term::plain(80));
    assert_eq!(got.len(), 9, "{got:?}");
    assert!(
        got[1].starts_with("i601") && got[5].starts_with("i603"),
        "{got:?}"
    );
    assert!(
        got[6].starts_with("i700") && got[8].starts_with("i702"),
        "{got:?}"
    );
    // Every line fits the width, the counts line too.
    for l in lines(&rows, 6, 24, &Term::plain(24)) {
        assert!(l.chars().count() <= 23, "{l:?}");
    }
    let narrow = lines(&rows[..1], 4, 12, &Term::plain(12));
    assert!(narrow[0].chars().count() <= 11, "{narrow:?}");
}

#[test]
fn colour_paints_the_state_word_only() {
    let colour = Term {
        width: 80,
        colour: true,
    };
    let got = lines(&[row("a", ItemState::Failed, 1, None)], 5, 80, &colour);
    assert_eq!(got[0], "a  \x1b[1;31mfailed\x1b[0m       attempt 1");
}

#[test]
fn an_item_waiting_to_retry_reads_as_waiting_not_running() {
    let mut waiting = row("writer", ItemState::Running, 1, Some(1500));
    waiting.waiting = Some((Duration::from_secs(30), 2, Some(3)));
    let got = lines(&[waiting], 10, 80, &Term::plain(80));
    assert_eq!(got, ["writer  waiting 30s, then attempt 2 of 3  1.5s"]);
}
