//! The loopback mock server: answers every request on a connection with one reply whose
//! bytes were encoded in memory before the run, so the server does no work per request
//! but copying them to the socket.
//!
//! The reply is HTTP/1.1 with chunked transfer encoding, as Ollama and llama-server send
//! it. [`Writes::Large`] puts the whole body in 64 KiB frames written in one go (the
//! client reads as much as the socket holds); [`Writes::PerChunk`] gives every event its
//! own frame and its own write, with Nagle off, as a server flushing each token does.
//!
//! It runs on one thread of the benchmark's parent process, so its CPU time is never
//! counted in a measured child's.

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::mpsc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// How the body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writes {
    /// 64 KiB frames, all written at once.
    Large,
    /// One frame and one write per event.
    PerChunk,
}

const FRAME: usize = 64 * 1024;

/// The reply as the writes the server makes: headers, frames, the terminating frame.
pub(crate) fn encode(events: &[Vec<u8>], writes: Writes, content_type: &str) -> Vec<Vec<u8>> {
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    let frame = |data: &[u8], out: &mut Vec<u8>| {
        let _ = write!(out, "{:x}\r\n", data.len());
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    };
    match writes {
        Writes::Large => {
            let body = events.concat();
            let mut out = head.into_bytes();
            for piece in body.chunks(FRAME) {
                frame(piece, &mut out);
            }
            out.extend_from_slice(b"0\r\n\r\n");
            vec![out]
        }
        Writes::PerChunk => {
            let mut out = vec![head.into_bytes()];
            for event in events {
                let mut one = Vec::with_capacity(event.len() + 12);
                frame(event, &mut one);
                out.push(one);
            }
            out.push(b"0\r\n\r\n".to_vec());
            out
        }
    }
}

/// Starts the server on an ephemeral loopback port; it serves `reply` until the process
/// ends.
pub(crate) fn start(reply: Vec<Vec<u8>>) -> std::io::Result<SocketAddr> {
    let reply = Arc::new(reply);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
        {
            Ok(runtime) => runtime,
            Err(e) => return drop(tx.send(Err(e))),
        };
        runtime.block_on(async move {
            let listener = match listen() {
                Ok(listener) => listener,
                Err(e) => return drop(tx.send(Err(e))),
            };
            let _ = tx.send(listener.local_addr());
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&reply)));
            }
        });
    });
    rx.recv()
        .map_err(|_| std::io::Error::other("the server thread died"))?
}

fn listen() -> std::io::Result<tokio::net::TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0)))?;
    // A thousand clients connect at once: the default backlog would drop their SYNs.
    socket.listen(4096)
}

/// Answers each request on the connection until the client closes it.
async fn serve(mut stream: TcpStream, reply: Arc<Vec<Vec<u8>>>) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    while let Some((show, close)) = read_request(&mut stream, &mut buf).await {
        if show {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                SHOW.len()
            );
            if stream.write_all(head.as_bytes()).await.is_err()
                || stream.write_all(SHOW.as_bytes()).await.is_err()
            {
                return;
            }
            continue;
        }
        for write in reply.iter() {
            if stream.write_all(write).await.is_err() {
                return;
            }
        }
        if close {
            return;
        }
    }
}

/// Ollama's `/api/show` reply for the model (the adapter asks once per model, for the
/// window), trimmed to the fields a real one has without `verbose`.
const SHOW: &str = r#"{"license":"Apache License 2.0","modelfile":"FROM /models/blobs/sha256-a3de86cd1c13
TEMPLATE {{ .Prompt }}
PARAMETER temperature 0.6
","parameters":"temperature 0.6
top_k 20
top_p 0.95","template":"{{- if .Messages }}{{- range $i, $_ := .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}{{ end }}<|im_start|>assistant
","details":{"parent_model":"","format":"gguf","family":"qwen3","families":["qwen3"],"parameter_size":"8.2B","quantization_level":"Q4_K_M"},"model_info":{"general.architecture":"qwen3","general.parameter_count":8190735360,"qwen3.context_length":40960,"qwen3.embedding_length":4096},"capabilities":["completion","tools","thinking"],"modified_at":"2025-05-01T12:00:00Z"}"#;

/// Reads one request (head and `content-length` body): whether it asks for
/// `/api/show` and whether it says `connection: close`, `None` at the end of the
/// connection.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(bool, bool)> {
    buf.clear();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    Some((
        head.contains(" /api/show "),
        head.contains("\r\nconnection: close\r\n"),
    ))
}
