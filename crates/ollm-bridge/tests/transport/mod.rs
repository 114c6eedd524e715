//! The shared transport against a raw loopback socket server: retries and `Retry-After`,
//! statuses that are never retried, timeouts, and dropping as cancellation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use ollm_bridge::{
    Attempt, BridgeError, HttpConfig, RequestSpec, RetryPolicy, TimeoutPhase, Transport,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// One scripted reply: raw bytes written after the request is read, then whether to keep
/// the connection open (a stall) instead of closing it.
#[derive(Clone)]
struct Reply {
    bytes: Vec<u8>,
    stall: bool,
}

fn status(code: u16, extra_headers: &str, body: &str) -> Reply {
    Reply {
        bytes: format!(
            "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra_headers}\r\n{body}",
            body.len()
        )
        .into_bytes(),
        stall: false,
    }
}

/// A server answering the n-th connection with `replies[n]` (the last one repeats). It
/// reports each connection's end on the returned channel.
async fn serve(replies: Vec<Reply>) -> (String, Arc<AtomicUsize>, mpsc::UnboundedReceiver<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let (closed_tx, closed_rx) = mpsc::unbounded_channel();
    let counter = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let reply = replies[n.min(replies.len() - 1)].clone();
            let closed_tx = closed_tx.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => seen.extend_from_slice(&buf[..k]),
                    }
                }
                let _ = socket.write_all(&reply.bytes).await;
                if reply.stall {
                    // Wait until the client goes away.
                    let _ = socket.read(&mut buf).await;
                }
                let _ = closed_tx.send(n);
            });
        }
    });
    (format!("http://{addr}"), count, closed_rx)
}

fn fast_retries(max_retries: u32) -> HttpConfig {
    HttpConfig {
        retry: RetryPolicy {
            max_retries,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
            max_retry_after: Duration::from_millis(50),
        },
        ..HttpConfig::default()
    }
}

#[tokio::test]
async fn retries_busy_server_then_succeeds_announcing_each_retry() {
    let (url, count, _) = serve(vec![
        status(
            503,
            "retry-after: 0\r\n",
            r#"{"error":"server busy, please try again"}"#,
        ),
        status(429, "", r#"{"error":"slow down"}"#),
        status(200, "", r#"{"ok":true}"#),
    ])
    .await;
    let transport = Transport::new(&url, fast_retries(3)).unwrap();
    let attempts: Vec<Attempt> = transport
        .send_retrying(RequestSpec::get("/x"))
        .collect()
        .await;
    assert_eq!(attempts.len(), 3);
    assert!(matches!(
        &attempts[0],
        Attempt::Retrying {
            retry: 1,
            error: BridgeError::Http { status: 503, .. },
            ..
        }
    ));
    assert!(matches!(
        &attempts[1],
        Attempt::Retrying {
            retry: 2,
            error: BridgeError::Http { status: 429, .. },
            ..
        }
    ));
    assert!(matches!(&attempts[2], Attempt::Response(_)));
    assert_eq!(count.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn never_retries_client_errors() {
    for code in [400u16, 401, 403, 404, 422] {
        let (url, count, _) =
            serve(vec![status(code, "", r#"{"error":"model 'x' not found"}"#)]).await;
        let transport = Transport::new(&url, fast_retries(3)).unwrap();
        let err = transport.fetch(RequestSpec::get("/x")).await.unwrap_err();
        match err {
            BridgeError::Http {
                status, message, ..
            } => {
                assert_eq!(status, code);
                assert_eq!(message, "model 'x' not found");
            }
            other => panic!("{code}: {other:?}"),
        }
        assert_eq!(count.load(Ordering::SeqCst), 1, "{code} was retried");
    }
}

#[tokio::test]
async fn gives_up_after_the_policy_and_keeps_the_last_error() {
    let (url, count, _) = serve(vec![status(502, "", "bad gateway")]).await;
    let transport = Transport::new(&url, fast_retries(2)).unwrap();
    let err = transport.fetch(RequestSpec::get("/x")).await.unwrap_err();
    assert!(
        matches!(err, BridgeError::Http { status: 502, .. }),
        "{err:?}"
    );
    assert_eq!(count.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn connection_refused_is_a_connect_error() {
    // Bind then drop, so nothing listens on the port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let transport = Transport::new(&format!("http://127.0.0.1:{port}"), fast_retries(1)).unwrap();
    let attempts: Vec<Attempt> = transport
        .send_retrying(RequestSpec::get("/x"))
        .collect()
        .await;
    assert!(matches!(
        &attempts[0],
        Attempt::Retrying {
            error: BridgeError::Connect { .. },
            ..
        }
    ));
    assert!(matches!(
        &attempts[1],
        Attempt::Failed(BridgeError::Connect { .. })
    ));
}

#[tokio::test]
async fn a_stalled_body_hits_the_idle_timeout() {
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec();
    let (url, _, _) = serve(vec![Reply {
        bytes: head,
        stall: true,
    }])
    .await;
    let config = HttpConfig {
        idle_timeout: Duration::from_millis(100),
        ..fast_retries(0)
    };
    let transport = Transport::new(&url, config).unwrap();
    let response = transport.send_once(&RequestSpec::get("/x")).await.unwrap();
    let chunks: Vec<_> = transport.body_chunks(response).collect().await;
    assert_eq!(chunks[0].as_deref().ok(), Some(&b"hello"[..]));
    assert!(matches!(
        chunks[1],
        Err(BridgeError::Timeout {
            phase: TimeoutPhase::Idle,
            ..
        })
    ));
}

#[tokio::test]
async fn dropping_the_body_closes_the_connection() {
    let head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec();
    let (url, _, mut closed) = serve(vec![Reply {
        bytes: head,
        stall: true,
    }])
    .await;
    let transport = Transport::new(&url, fast_retries(0)).unwrap();
    let response = transport.send_once(&RequestSpec::get("/x")).await.unwrap();
    let mut body = transport.body_chunks(response);
    assert!(body.next().await.is_some());
    drop(body);
    // The server's read returns when the client closes; it then reports connection 0.
    assert_eq!(closed.recv().await, Some(0));
}

#[test]
fn bad_addresses_are_typed_errors() {
    for url in ["not a url", "ftp://host:1", "http://"] {
        assert!(
            matches!(
                Transport::new(url, HttpConfig::default()),
                Err(BridgeError::InvalidUrl { .. })
            ),
            "{url}"
        );
    }
}

/// What [`closing_server`] saw: the connections it accepted and the requests it closed
/// unanswered.
#[derive(Clone, Default)]
struct Closes {
    connections: Arc<AtomicUsize>,
    unanswered: Arc<AtomicUsize>,
}

impl Closes {
    fn get(&self) -> (usize, usize) {
        let load = |n: &AtomicUsize| n.load(Ordering::SeqCst);
        (load(&self.connections), load(&self.unanswered))
    }
}

/// A server that keeps connections alive, but closes unanswered a request arriving on a
/// connection idle for `expire` or longer, or on one that has answered `replies`
/// already: what a request crossing llama-server's close of a connection idle for 5 s
/// meets, or one sent on a connection it closed after a streamed reply.
async fn closing_server(expire: Duration, replies: usize) -> (String, Closes) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let closes = Closes::default();
    let seen = closes.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            seen.connections.fetch_add(1, Ordering::SeqCst);
            let unanswered = Arc::clone(&seen.unanswered);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let mut last = tokio::time::Instant::now();
                let mut answered = 0;
                while let Ok(k) = socket.read(&mut buf).await {
                    if k == 0 {
                        return;
                    }
                    if last.elapsed() >= expire || answered == replies {
                        unanswered.fetch_add(1, Ordering::SeqCst);
                        return; // closed unanswered
                    }
                    let reply = "HTTP/1.1 200 OK\r\nkeep-alive: timeout=5, max=100\r\n\
                                 content-length: 2\r\n\r\nok";
                    if socket.write_all(reply.as_bytes()).await.is_err() {
                        return;
                    }
                    answered += 1;
                    last = tokio::time::Instant::now();
                }
            });
        }
    });
    (format!("http://{addr}"), closes)
}

/// Issue 37: a request through `ollm serve` now and then failed at once with "connection
/// closed before message completed": its pooled connection had been idle long enough for
/// llama-server to close it. A connection idle past `pool_idle_timeout` is not reused;
/// with a longer pool timeout the closed connection is met, and the request goes again
/// on a new one.
#[tokio::test]
async fn a_connection_idle_past_the_pool_timeout_is_not_reused() {
    assert!(HttpConfig::default().pool_idle_timeout < Duration::from_secs(5));
    let expire = Duration::from_millis(400);
    let (url, closes) = closing_server(expire, usize::MAX).await;
    for (pool_idle, met_closed) in [(Duration::from_millis(100), 0), (expire * 10, 1)] {
        let config = HttpConfig {
            pool_idle_timeout: pool_idle,
            ..fast_retries(0)
        };
        let transport = Transport::new(&url, config).unwrap();
        let (connections, unanswered) = closes.get();
        assert!(transport.send_once(&RequestSpec::get("/x")).await.is_ok());
        // The idle time is what is tested here, not a wait for something to happen.
        tokio::time::sleep(expire + Duration::from_millis(200)).await;
        let second = transport.send_once(&RequestSpec::get("/x")).await;
        assert!(second.is_ok(), "pool idle {pool_idle:?}: {second:?}");
        let (now_connections, now_unanswered) = closes.get();
        assert_eq!(now_connections - connections, 2, "pool idle {pool_idle:?}");
        assert_eq!(
            now_unanswered - unanswered,
            met_closed,
            "pool idle {pool_idle:?}"
        );
    }
}

/// llama-server closes the connection after every streamed reply, though its headers
/// say keep-alive: the next request on it, sent at once, is closed unanswered. It goes
/// again on a connection of its own and succeeds, every time; a connection refused is
/// still the request's error.
#[tokio::test]
async fn a_request_on_a_connection_the_server_closed_goes_again_on_a_new_one() {
    let (url, closes) = closing_server(Duration::from_secs(60), 1).await;
    let transport = Transport::new(&url, fast_retries(0)).unwrap();
    for round in 0..4 {
        let sent = transport.send_once(&RequestSpec::get("/x")).await;
        assert!(sent.is_ok(), "round {round}: {sent:?}");
    }
    // A new pooled connection, the same met closed and a new one of its own, twice.
    assert_eq!(closes.get(), (4, 2), "(connections, closed unanswered)");
    let refused = Transport::new("http://127.0.0.1:9", fast_retries(0)).unwrap();
    let err = refused
        .send_once(&RequestSpec::get("/x"))
        .await
        .unwrap_err();
    assert!(matches!(err, BridgeError::Connect { .. }), "{err:?}");
}
