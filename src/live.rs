//! The live area at the bottom of stderr (the progress of `phase run`), redrawn in place by
//! moving the cursor up over it. A line written to stderr while it is shown ([`say`], which
//! `say!` calls) goes above it: the area is cleared, the line written, the area drawn again.
//! Written into the area instead, the line would be counted by no redraw and stale lines
//! would pile up on the screen.
//!
//! One lock orders both: the area's text and every write to stderr made through it.

use std::io::Write;
use std::sync::Mutex;

/// The area as drawn (lines each ending in `\n`), while one is shown.
static AREA: Mutex<Option<String>> = Mutex::new(None);

fn area() -> std::sync::MutexGuard<'static, Option<String>> {
    match AREA.lock() {
        Ok(a) => a,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Writes `line` and a newline to stderr, above the live area when one is shown.
pub fn say(line: std::fmt::Arguments) {
    let shown = area();
    let mut e = std::io::stderr().lock();
    let _ = match shown.as_deref().filter(|a| !a.is_empty()) {
        Some(drawn) => {
            let up = drawn.matches('\n').count();
            write!(e, "\x1b[{up}A\r\x1b[J{line}\n{drawn}")
        }
        None => writeln!(e, "{line}"),
    };
    let _ = e.flush();
}

/// Writes `out` to stderr (the redraw: back over the old area, then the new one) and keeps
/// `now` as the area shown; `None` when no area stays (the live view ended, or it does not
/// redraw).
pub fn draw(out: &str, now: Option<String>) {
    let mut shown = area();
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(out.as_bytes()).and_then(|()| e.flush());
    *shown = now;
}
