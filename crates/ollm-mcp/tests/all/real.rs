//! Against the real npm servers (`cargo xtask mcp-servers` installs them).

use std::time::{Duration, Instant};

use ollm_core::ToolRegistry;
use ollm_mcp::{McpError, ServerState, TransportConfig};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn lists_and_calls_with_arguments() {
    let (servers, _logs) = start(vec![everything("everything")]).await;
    let status = &servers.statuses()[0];
    assert!(matches!(status.state, ServerState::Running), "{status:?}");
    assert!(status.tools.contains(&"everything__echo".to_owned()));
    assert!(status.tools.contains(&"everything__get-sum".to_owned()));
    let registry = registry(&servers);

    let echo = call(&registry, "everything__echo", json!({"message": "hi"})).await;
    assert_eq!((echo.content.as_str(), echo.is_error), ("Echo: hi", false));
    let sum = call(&registry, "everything__get-sum", json!({"a": 2, "b": 3})).await;
    assert!(!sum.is_error && sum.content.contains('5'), "{sum:?}");
    // The inputSchema is enforced before the call is sent.
    let bad = call(
        &registry,
        "everything__get-sum",
        json!({"a": "two", "b": 3}),
    )
    .await;
    assert!(bad.is_error, "{bad:?}");
    assert!(
        bad.content
            .starts_with("Error: invalid arguments for everything__get-sum")
    );
    servers.shutdown().await;
}

#[tokio::test]
async fn structured_and_image_results_become_text() {
    let (servers, _logs) = start(vec![everything("ev")]).await;
    let registry = registry(&servers);
    let weather = call(
        &registry,
        "ev__get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await;
    assert!(!weather.is_error, "{weather:?}");
    let last = weather.content.lines().last().unwrap();
    let value: serde_json::Value = serde_json::from_str(last).unwrap();
    assert!(value.get("temperature").is_some(), "{value}");
    let image = call(&registry, "ev__get-tiny-image", json!({})).await;
    assert!(image.content.contains("[image: image/png, "), "{image:?}");
    assert!(
        !image.content.contains("iVBOR"),
        "no base64 for the model: {image:?}"
    );
    servers.shutdown().await;
}

#[tokio::test]
async fn an_error_result_is_an_error_for_the_model() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "port = 8080\n").unwrap();
    let (servers, _logs) = start(vec![filesystem("fs", root.path())]).await;
    let registry = registry(&servers);
    let path = root.path().join("notes.txt").display().to_string();
    let read = call(&registry, "fs__read_text_file", json!({"path": path})).await;
    assert_eq!(
        (read.content.as_str(), read.is_error),
        ("port = 8080\n", false)
    );
    let outside = call(
        &registry,
        "fs__read_text_file",
        json!({"path": "/etc/passwd"}),
    )
    .await;
    assert!(outside.is_error, "{outside:?}");
    assert!(!outside.content.contains("root:"), "{outside:?}");
    servers.shutdown().await;
}

#[tokio::test]
async fn a_slow_call_times_out_and_a_cancelled_one_leaves_the_server_usable() {
    let mut config = everything("ev");
    config.tool_timeout = Duration::from_millis(300);
    let (servers, _logs) = start(vec![config]).await;
    let registry = registry(&servers);
    let slow = json!({"duration": 30, "steps": 30});
    let begun = Instant::now();
    let outcome = call(
        &registry,
        "ev__trigger-long-running-operation",
        slow.clone(),
    )
    .await;
    assert!(
        outcome.is_error && outcome.content.contains("timed out"),
        "{outcome:?}"
    );
    assert!(begun.elapsed() < Duration::from_secs(10));
    // Cancellation: the run drops the call future.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(100),
        call(&registry, "ev__trigger-long-running-operation", slow),
    )
    .await;
    assert!(cancelled.is_err());
    let echo = call(&registry, "ev__echo", json!({"message": "still here"})).await;
    assert_eq!(echo.content, "Echo: still here");
    servers.shutdown().await;
}

#[tokio::test]
async fn a_server_that_exits_mid_run_is_reported_once_and_its_tools_fail() {
    let (servers, _logs) = start(vec![everything("ev")]).await;
    let registry = registry(&servers);
    let pid = servers.statuses()[0].pid.unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let outcome = call(&registry, "ev__echo", json!({"message": "hi"})).await;
    assert!(outcome.is_error, "{outcome:?}");
    assert!(
        outcome.content.contains("MCP server ev is not running"),
        "{outcome:?}"
    );
    let reports = servers.take_reports();
    assert_eq!(reports.len(), 1);
    assert!(matches!(*reports[0].1, McpError::Exited(_)));
    assert!(servers.take_reports().is_empty(), "reported once");
    let again = call(&registry, "ev__echo", json!({"message": "hi"})).await;
    assert!(again.is_error);
    // The built-in tools are unaffected.
    let builtin = call(&registry, "builtin_echo", json!({"message": "ok"})).await;
    assert_eq!(builtin.content, "ok");
    servers.shutdown().await;
}

#[tokio::test]
async fn servers_that_never_start_are_recorded_and_the_others_run() {
    let mut silent = stdio("silent", "sleep", &["60".into()]);
    silent.startup_timeout = Duration::from_millis(500);
    let missing = stdio("missing", "/nonexistent/mcp-server", &[]);
    let (servers, _logs) = start(vec![silent, missing, everything("ev")]).await;
    let states: Vec<_> = servers.statuses().into_iter().map(|s| s.state).collect();
    assert!(
        matches!(&states[0], ServerState::Failed(e) if matches!(**e, McpError::StartTimeout { .. }))
    );
    assert!(matches!(&states[1], ServerState::Failed(e) if matches!(**e, McpError::Spawn { .. })));
    assert!(matches!(states[2], ServerState::Running));
    let reports = servers.take_reports();
    let names: Vec<&str> = reports.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["silent", "missing"]);
    assert!(servers.take_reports().is_empty());
    servers.shutdown().await;
}

#[tokio::test]
async fn stderr_noise_goes_to_the_log_and_the_env_is_scrubbed() {
    let node = format!(
        "echo noise-from-server >&2; exec node {}",
        everything("x").transport_args().join(" ")
    );
    let mut config = stdio("noisy", "sh", &["-c".into(), node]);
    if let TransportConfig::Stdio(s) = &mut config.transport {
        s.env
            .insert("OLLM_TEST_SETTING".into(), "configured".into());
    }
    let (servers, logs) = start(vec![config]).await;
    let registry = registry(&servers);
    let env = call(&registry, "noisy__get-env", json!({})).await;
    assert!(env.content.contains("OLLM_TEST_SETTING"), "{env:?}");
    // cargo sets CARGO_MANIFEST_DIR for the test process: the server must not see it.
    assert!(!env.content.contains("CARGO_MANIFEST_DIR"), "{env:?}");
    servers.shutdown().await;
    let log = std::fs::read_to_string(logs.path().join("noisy.log")).unwrap();
    assert!(log.contains("noise-from-server"), "{log}");
}

#[tokio::test]
async fn names_that_collide_are_refused_at_start() {
    let (servers, _logs) = start(vec![everything("ev")]).await;
    let mut registry = ToolRegistry::new();
    registry
        .register(std::sync::Arc::new(NamedEcho("ev__echo")))
        .unwrap();
    let err = servers.register(&mut registry).unwrap_err();
    assert!(
        matches!(&err, McpError::NameCollision { name, .. } if name == "ev__echo"),
        "{err}"
    );
    assert_eq!(registry.len(), 1, "nothing half-registered");
    servers.shutdown().await;
    let dup = ollm_mcp::McpServers::start(
        vec![everything("a"), everything("a")],
        std::path::Path::new("/tmp"),
    );
    assert!(matches!(dup.await, Err(McpError::DuplicateServer(_))));
}

#[tokio::test]
async fn shutdown_leaves_no_process_behind() {
    let script = format!(
        "sleep 300 & exec node {}",
        everything("x").transport_args().join(" ")
    );
    let (servers, _logs) = start(vec![stdio("ev", "sh", &["-c".into(), script])]).await;
    let pid = servers.statuses()[0].pid.unwrap();
    assert!(!group_members(pid).is_empty());
    servers.shutdown().await;
    let deadline = Instant::now() + BOUND;
    while !group_members(pid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind: {:?}",
            group_members(pid)
        );
        tokio::task::yield_now().await;
    }
    assert!(matches!(servers.statuses()[0].state, ServerState::Stopped));
}

/// Live (non-zombie) processes in process group `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split(' ').collect();
        if fields[0] != "Z" && fields[2] == pgid.to_string() {
            found.push(entry.file_name().to_string_lossy().parse().unwrap_or(0));
        }
    }
    found
}

struct NamedEcho(&'static str);

#[async_trait::async_trait]
impl ollm_core::Tool for NamedEcho {
    fn schema(&self) -> ollm_types::ToolSchema {
        ollm_types::ToolSchema::new(self.0, "echo", json!({"type": "object"}))
    }
    async fn execute(
        &self,
        _: serde_json::Map<String, serde_json::Value>,
    ) -> Result<serde_json::Value, ollm_core::ToolError> {
        Ok(json!("builtin"))
    }
}

trait Args {
    fn transport_args(&self) -> Vec<String>;
}

impl Args for ollm_mcp::ServerConfig {
    fn transport_args(&self) -> Vec<String> {
        match &self.transport {
            TransportConfig::Stdio(s) => s.args.clone(),
            _ => Vec::new(),
        }
    }
}
