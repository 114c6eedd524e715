//! The transient status line of the interactive chat (issue 17): a spinner, what we wait
//! for and the seconds so far ("⠙ waiting for qwen3… 3s", "⠙ running list_dir… 1s"),
//! drawn on stderr and erased before anything else prints.
//!
//! Decisions:
//! - Terminal only: [`enable`] is called by the interactive chat when stderr is a
//!   terminal; otherwise [`set`] does nothing, so pipes and logs never see it.
//! - One process-wide line behind one lock: the ticker thread draws only while holding
//!   it, and [`clear`] erases under the same lock, so a cleared line can never be redrawn
//!   over text printed after the clear.
//! - The line is one screen row, cut to fit, redrawn in place with `\r` and erase-line.
//! - A question on the terminal [`hold`]s the line: nothing is drawn until it is
//!   answered. The renderer runs apart from the tool that asks, so a "running write_file"
//!   set just after the question was printed would otherwise be drawn over it.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(120);

struct Line {
    what: String,
    since: Instant,
    drawn: bool,
}

static LINE: Mutex<Option<Line>> = Mutex::new(None);
static ENABLED: AtomicBool = AtomicBool::new(false);
/// Set while a question waits for the user; read and written under `LINE`'s lock.
static HELD: AtomicBool = AtomicBool::new(false);

/// Keeps the line from being drawn while it lives (see [`hold`]).
#[must_use = "the line is held only while the guard lives"]
pub(crate) struct Hold(());

impl Drop for Hold {
    fn drop(&mut self) {
        let _lock = LINE.lock();
        HELD.store(false, Ordering::SeqCst);
    }
}

/// Clears the line and keeps any line from being drawn until the guard is dropped (a
/// question is on the screen). What is `set` meanwhile is drawn after.
pub(crate) fn hold() -> Hold {
    if let Ok(mut line) = LINE.lock() {
        HELD.store(true, Ordering::SeqCst);
        if line.take().is_some_and(|l| l.drawn) {
            erase();
        }
    }
    Hold(())
}

/// Turns the status line on (stderr is a terminal) and starts its ticker once.
pub(crate) fn enable() {
    if ENABLED.swap(true, Ordering::SeqCst) {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("ollm-status".into())
        .spawn(|| {
            let mut frame = 0usize;
            loop {
                std::thread::sleep(TICK);
                frame = frame.wrapping_add(1);
                draw(frame);
            }
        });
}

/// Shows `what` (e.g. "waiting for qwen3…") until the next [`clear`] or [`set`].
pub(crate) fn set(what: impl Into<String>) {
    if !ENABLED.load(Ordering::SeqCst) {
        return;
    }
    if let Ok(mut line) = LINE.lock() {
        if line.as_ref().is_some_and(|l| l.drawn) {
            erase();
        }
        *line = Some(Line {
            what: what.into(),
            since: Instant::now(),
            drawn: false,
        });
    }
}

/// Erases the line, if shown; call before printing anything.
pub(crate) fn clear() {
    if let Ok(mut line) = LINE.lock() {
        if line.take().is_some_and(|l| l.drawn) {
            erase();
        }
    }
}

fn erase() {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K");
    let _ = err.flush();
}

fn draw(frame: usize) {
    let Ok(mut guard) = LINE.lock() else {
        return;
    };
    if HELD.load(Ordering::SeqCst) {
        return;
    }
    let Some(line) = guard.as_mut() else {
        return;
    };
    let text = render(&line.what, line.since.elapsed(), frame);
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "\r\x1b[2K{text}");
    let _ = err.flush();
    line.drawn = true;
}

/// The line's text: spinner, what, whole seconds.
pub(crate) fn render(what: &str, elapsed: Duration, frame: usize) -> String {
    let spinner = FRAMES[frame % FRAMES.len()];
    super::wrap::shorten(&format!("{spinner} {what} {}s", elapsed.as_secs()), 70)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_what_and_how_long() {
        assert_eq!(
            render("waiting for qwen3…", Duration::from_millis(3400), 1),
            "⠙ waiting for qwen3… 3s"
        );
        assert!(render(&"x".repeat(200), Duration::ZERO, 0).chars().count() <= 71);
    }

    /// The flake of `terminal::the_approval_order_is_always_the_same`: the renderer set
    /// "running write_file…" just after the question was printed, and the ticker drew it
    /// over the question.
    #[test]
    fn nothing_is_drawn_while_a_question_holds_the_line() {
        ENABLED.store(true, Ordering::SeqCst);
        let drawn = || LINE.lock().unwrap().as_ref().is_some_and(|l| l.drawn);
        let held = hold();
        set("running write_file…");
        draw(1);
        assert!(!drawn(), "drawn over the question");
        drop(held);
        draw(2);
        assert!(drawn(), "drawn once the question was answered");
        clear();
    }
}
