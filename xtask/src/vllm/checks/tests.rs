//! The CI step's size check and the reading of an `ollm run`'s events.

use super::*;

#[test]
fn a_machine_is_too_small_for_each_reason_it_lacks() {
    let check = |disk: u64, memory: u64, want: &[&str]| {
        let got = too_small(disk, memory);
        match got {
            None => assert!(want.is_empty(), "{disk} {memory}: nothing said"),
            Some(text) => {
                assert!(!want.is_empty(), "{disk} {memory}: {text}");
                for part in want {
                    assert!(text.contains(part), "{disk} {memory}: {text}");
                }
            }
        }
    };
    let gb = 1_000_000_000;
    check(75 * gb, 20 * gb, &[]);
    check(10 * gb, 8 * gb, &[]);
    check(9 * gb, 20 * gb, &["10 GB of free disk", "has 9.0 GB"]);
    check(75 * gb, 7 * gb, &["8 GB of available memory", "has 7.0 GB"]);
    check(gb / 2, gb / 2, &["free disk", "available memory"]);
}

#[test]
fn df_and_meminfo_are_read() {
    let df = "Filesystem     1024-blocks      Used Available Capacity Mounted on\n\
              /dev/vda        263174212  17826000  78600000      19% /\n";
    assert_eq!(df_available(df), Some(78_600_000 * 1024));
    assert_eq!(df_available("Filesystem\n"), None);
    assert_eq!(df_available(""), None);
    let meminfo = "MemTotal:       24000000 kB\nMemFree:         2000000 kB\n\
                   MemAvailable:   17000000 kB\n";
    assert_eq!(meminfo_available(meminfo), Some(17_000_000 * 1024));
    assert_eq!(meminfo_available("MemTotal: 1 kB\n"), None);
}

fn lines(events: &[serde_json::Value]) -> String {
    events.iter().map(|e| format!("{e}\n")).collect()
}

#[test]
fn a_run_passes_when_it_read_the_file_and_ended_and_the_port_is_judged_apart() {
    use serde_json::json;
    let call = json!({"type": "tool_call_started", "id": "c1", "name": "read_file",
                      "arguments": {"path": "config.toml"}});
    let result = json!({"type": "tool_result", "id": "c1", "name": "read_file",
                        "content": "[server]\nport = 8123\n", "is_error": false});
    let answer = json!({"type": "text_delta", "text": "The port is 8123."});
    let finish = json!({"type": "finish", "finish_reason": "stop"});
    let good = judge_run(&lines(&[
        call.clone(),
        result.clone(),
        answer.clone(),
        finish.clone(),
    ]));
    assert!(good.answered && good.check().is_ok(), "{good:?}");
    // The port guessed without reading the file.
    let guessed = judge_run(&lines(&[answer.clone(), finish.clone()]));
    assert!(!guessed.read_the_file && guessed.check().is_err());
    // The port said before the read, not after it: the read passes, the answer does not.
    let early = judge_run(&lines(&[
        answer.clone(),
        call.clone(),
        result.clone(),
        finish.clone(),
    ]));
    assert!(early.read_the_file && !early.answered, "{early:?}");
    assert!(early.check().is_ok(), "{early:?}");
    // A failed read.
    let mut failed = result.clone();
    failed["is_error"] = json!(true);
    let failed = judge_run(&lines(&[call, failed, answer.clone(), finish]));
    assert!(!failed.read_the_file, "{failed:?}");
    // Cut at the token limit.
    let length = json!({"type": "finish", "finish_reason": "length"});
    let cut = judge_run(&lines(&[result, answer, length]));
    assert!(cut.answered && cut.check().is_err(), "{cut:?}");
}
