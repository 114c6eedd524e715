//! Readiness and crash reports, against fake server binaries: one that dies of SIGILL
//! while loading, one that exits at once, one that never answers, one that is healthy but
//! dies of SIGILL at its first completion (the AMX case), and one that works.

use std::os::unix::fs::PermissionsExt;

use super::*;

/// Writes an executable script into `dir` and wraps it as a server binary.
fn fake(dir: &Path, name: &str, script: &str) -> Binary {
    let path = dir.join(name);
    fs::write(&path, script).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    Binary {
        path,
        lib_dir: None,
        cpu_report: Vec::new(),
    }
}

/// Starts `binary` with `timeout`, returning the typed reason it did not become ready.
fn start(dir: &Path, binary: &Binary, timeout: Duration) -> Result<Server, StartError> {
    let launch = Launch {
        binary,
        args: vec!["-m".into(), "model.gguf".into()],
        logs: &dir.join("logs"),
        timeout,
        wrapper: Vec::new(),
    };
    Server::launch(&launch).map_err(|err| {
        err.downcast::<StartError>()
            .unwrap_or_else(|other| panic!("not a StartError: {other:#}"))
    })
}

/// A Python HTTP server that answers `/health`; `on_post` is the body of `do_POST`.
fn python_server(on_post: &str) -> String {
    format!(
        "#!/usr/bin/env python3\n\
         import http.server, json, os, signal, sys\n\
         port = int(sys.argv[sys.argv.index('--port') + 1])\n\
         class H(http.server.BaseHTTPRequestHandler):\n\
         \x20   def log_message(self, *args): pass\n\
         \x20   def reply(self, body):\n\
         \x20       data = json.dumps(body).encode()\n\
         \x20       self.send_response(200)\n\
         \x20       self.send_header('Content-Length', str(len(data)))\n\
         \x20       self.end_headers()\n\
         \x20       self.wfile.write(data)\n\
         \x20   def do_GET(self):\n\
         \x20       self.reply({{'status': 'ok'}})\n\
         \x20   def do_POST(self):\n\
         \x20       {on_post}\n\
         print('main: model loaded', flush=True)\n\
         http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()\n"
    )
}

#[test]
fn a_server_that_dies_of_sigill_says_so_with_the_remedy_and_its_log() {
    let tmp = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\nulimit -c 0\necho 'load_model: loading model'\nkill -ILL $$\n";
    let binary = fake(tmp.path(), "sigill", script);
    let err = start(tmp.path(), &binary, Duration::from_secs(30))
        .err()
        .unwrap();
    assert!(err.is_illegal_instruction(), "{err:?}");
    assert!(
        matches!(err, StartError::Died { signal: Some(4), phase: Phase::Loading, ref log_tail, .. }
            if log_tail.contains("load_model: loading model")),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("SIGILL (signal 4)"), "{text}");
    assert!(!text.contains("SIGSEGV"), "{text}");
    assert!(
        text.contains("OLLM_LLAMA_BUILD=baseline") && text.contains("OLLM_LLAMA_BUILD=source"),
        "the remedy: {text}"
    );
}

#[test]
fn a_server_that_exits_at_once_reports_its_code_and_log() {
    let tmp = tempfile::tempdir().unwrap();
    let script = "#!/bin/sh\necho 'error: invalid argument: --jinja' >&2\nexit 3\n";
    let binary = fake(tmp.path(), "exits", script);
    let err = start(tmp.path(), &binary, Duration::from_secs(30))
        .err()
        .unwrap();
    assert!(!err.is_illegal_instruction());
    assert!(
        matches!(err, StartError::Died { signal: None, code: Some(3), ref log_tail, .. }
            if log_tail.contains("invalid argument: --jinja")),
        "{err:?}"
    );
}

#[test]
fn a_server_that_never_answers_is_stopped_at_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("pid");
    let script = format!(
        "#!/bin/sh\necho $$ > '{}'\necho 'loading'\nexec sleep 600\n",
        pid_file.display()
    );
    let binary = fake(tmp.path(), "silent", &script);
    let err = start(tmp.path(), &binary, Duration::from_millis(500))
        .err()
        .unwrap();
    assert!(
        matches!(
            err,
            StartError::NotReady {
                phase: Phase::Loading,
                ..
            }
        ),
        "{err:?}"
    );
    // The guard was dropped inside `launch`: the process is gone, not orphaned.
    let pid = fs::read_to_string(&pid_file).unwrap();
    let proc_dir = PathBuf::from(format!("/proc/{}", pid.trim()));
    assert!(!proc_dir.exists(), "pid {} still exists", pid.trim());
}

#[test]
fn a_healthy_server_that_dies_at_its_first_completion_is_not_ready() {
    let tmp = tempfile::tempdir().unwrap();
    let script = python_server(
        "print('tinygemm_kernel_amx', flush=True); os.kill(os.getpid(), signal.SIGILL)",
    );
    let binary = fake(tmp.path(), "amx", &script);
    let err = start(tmp.path(), &binary, Duration::from_secs(30))
        .err()
        .unwrap();
    assert!(
        matches!(err, StartError::Died { signal: Some(4), phase: Phase::FirstCompletion, ref log_tail, .. }
            if log_tail.contains("tinygemm_kernel_amx")),
        "{err:?}"
    );
}

#[test]
fn a_server_that_completes_is_ready() {
    let tmp = tempfile::tempdir().unwrap();
    let script = python_server("self.reply({'choices': [{'message': {'content': 'OK'}}]})");
    let binary = fake(tmp.path(), "works", &script);
    let server = start(tmp.path(), &binary, Duration::from_secs(30)).unwrap();
    assert!(server.base_url().starts_with("http://127.0.0.1:"));
    assert!(!server.amx_refused());
}

#[test]
fn a_completion_without_choices_is_not_ready() {
    let tmp = tempfile::tempdir().unwrap();
    let script = python_server("self.reply({'error': {'message': 'no slot'}})");
    let binary = fake(tmp.path(), "no-slot", &script);
    let err = start(tmp.path(), &binary, Duration::from_secs(30))
        .err()
        .unwrap();
    assert!(
        matches!(err, StartError::BadCompletion { ref reply, .. } if reply.contains("no slot")),
        "{err:?}"
    );
}

#[test]
fn every_signal_has_a_name_and_sigill_is_never_called_sigsegv() {
    for signal in 1..32 {
        let (name, meaning) = signal_meaning(signal);
        assert!(name.contains(&format!("signal {signal}")), "{name}");
        assert!(!meaning.is_empty());
    }
    assert!(signal_meaning(4).0.starts_with("SIGILL"));
    assert!(signal_meaning(11).0.starts_with("SIGSEGV"));
    assert!(signal_meaning(4).1.contains("CPU feature"));
}

#[test]
fn status_lines() {
    let cases: [(&[u8], Option<u16>); 5] = [
        (b"HTTP/1.1 200 OK\r\n", Some(200)),
        (b"HTTP/1.1 503 Service Unavailable\r\n", Some(503)),
        (b"HTTP/1.0 404", Some(404)),
        (b"SSH-2.0-OpenSSH", None),
        (b"", None),
    ];
    for (bytes, expected) in cases {
        assert_eq!(parse_status_line(bytes), expected, "{bytes:?}");
    }
}
