//! The processes a server left behind: its descendants, read from `/proc`, and signals to
//! them by process id.
//!
//! # Decisions
//! - vLLM's API server starts three processes of its own (the engine core, which starts a
//!   worker, and Python's multiprocessing resource tracker). Measured here: SIGKILL to the
//!   API server leaves all three running, reparented to init, with the model's ~6 GB still
//!   in memory; SIGTERM to them then stops them within about 10 s. So a server remembers
//!   its descendants once it is ready, and stopping it signals each one still alive.
//! - A process is named by its id *and* its start time (field 22 of `/proc/PID/stat`), so
//!   a recycled id is never signalled. A zombie (state `Z`) counts as gone: it holds no
//!   memory, and only its parent (init, for an orphan) can reap it.

use std::fs;
use std::process::{Command, Stdio};

/// One process, by id and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proc {
    pub(crate) pid: u32,
    start: u64,
}

/// What `/proc/PID/stat` says about one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    state: char,
    ppid: u32,
    start: u64,
}

/// Parses `/proc/PID/stat`: `pid (comm) state ppid ...`, where `comm` may hold spaces and
/// parentheses, so the fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After `)`: state is field 3 of the whole line, ppid 4, starttime 22.
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

impl Proc {
    /// The process `pid`, if it exists.
    #[cfg(test)]
    fn of(pid: u32) -> Option<Self> {
        stat(pid).map(|s| Proc {
            pid,
            start: s.start,
        })
    }

    /// Whether it still runs: the same process (by start time), not a zombie.
    pub(crate) fn alive(&self) -> bool {
        stat(self.pid).is_some_and(|s| s.start == self.start && s.state != 'Z')
    }

    /// Sends `signal` (`TERM`, `KILL`) if it still runs.
    pub(crate) fn signal(&self, signal: &str) {
        if self.alive() {
            let _ = Command::new("kill")
                .args([&format!("-{signal}"), &self.pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Every descendant of `root` running now (children, their children, ...).
pub(crate) fn descendants(root: u32) -> Vec<Proc> {
    let mut table = Vec::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let pid = entry.file_name().to_str().and_then(|n| n.parse().ok());
            if let Some((pid, stat)) = pid.and_then(|p| stat(p).map(|s| (p, s))) {
                table.push((pid, stat));
            }
        }
    }
    descendants_in(root, &table)
}

/// The descendants of `root` in a process table of `(pid, stat)`.
fn descendants_in(root: u32, table: &[(u32, Stat)]) -> Vec<Proc> {
    let mut found: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for (pid, stat) in table.iter().filter(|(_, s)| s.ppid == parent) {
            if !found.iter().any(|p| p.pid == *pid) {
                found.push(Proc {
                    pid: *pid,
                    start: stat.start,
                });
                frontier.push(*pid);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_names() {
        let check = |line: &str, want: Option<(char, u32, u64)>| {
            let got = parse_stat(line).map(|s| (s.state, s.ppid, s.start));
            assert_eq!(got, want, "{line}");
        };
        let tail = "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0";
        check(
            &format!("8438 (VLLM::EngineCore) S 7547 {tail} 9123 0"),
            Some(('S', 7547, 9123)),
        );
        check(&format!("12 (a (b) c) Z 1 {tail} 77 0"), Some(('Z', 1, 77)));
        check("12 (short) S 1 2 3", None);
        check("", None);
    }

    #[test]
    fn descendants_are_the_whole_subtree_and_nothing_else() {
        let st = |ppid: u32, start: u64| Stat {
            state: 'S',
            ppid,
            start,
        };
        // 10 -> 11 -> 13, 10 -> 12; 20 is another tree.
        let table = [
            (10, st(1, 100)),
            (11, st(10, 101)),
            (12, st(10, 102)),
            (13, st(11, 103)),
            (20, st(1, 200)),
            (21, st(20, 201)),
        ];
        let mut pids: Vec<u32> = descendants_in(10, &table).iter().map(|p| p.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, [11, 12, 13]);
        assert!(descendants_in(13, &table).is_empty());
    }

    #[test]
    fn this_process_is_alive_and_a_recycled_id_is_not_it() {
        let me = Proc::of(std::process::id()).unwrap();
        assert!(me.alive());
        let recycled = Proc {
            start: me.start + 1,
            ..me
        };
        assert!(!recycled.alive());
    }
}
