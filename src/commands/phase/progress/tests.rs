use super::*;

fn row(id: &str, state: ItemState, attempt: u32, ms: Option<u64>) -> Row {
    Row {
        id: id.into(),
        state,
        attempt,
        elapsed: ms.map(Duration::from_millis),
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
fn rows_that_do_not_fit_give_way_to_a_summary_and_lines_fit_the_width() {
    let mut rows: Vec<Row> = (0..10)
        .map(|i| row(&format!("i{i}"), ItemState::Complete, 1, Some(10)))
        .collect();
    rows[3].state = ItemState::Running;
    rows[9].state = ItemState::NotStarted;
    rows[8].state = ItemState::Failed;
    let got = lines(&rows, 4, 60, &Term::plain(60));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].starts_with("i3  running"), "{got:?}");
    assert_eq!(got[1], "… 9 more: 7 complete, 1 failed, 1 waiting");
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
