//! A fake Anthropic Messages API on 127.0.0.1: enough HTTP/1.1 for the real client (keep-alive,
//! Content-Length or chunked bodies), `POST /v1/messages` answered from a scripted conversation
//! as an SSE stream (or an HTTP error), `/v1/messages/count_tokens`, and a log of every request
//! body so a test can assert on what reached the model.
//!
//! Written in Rust inside the test (std only) rather than as a Python or Node script: nothing
//! to install or keep in step, it lives and dies with the test process, and the test reads its
//! request log directly instead of parsing a file.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One content block of a scripted assistant turn.
#[derive(Clone, Debug)]
pub enum Block {
    Text(String),
    Tool(&'static str, Value),
}

/// What the server answers to one `POST /v1/messages`.
#[derive(Clone, Debug)]
pub enum Reply {
    /// An assistant turn, streamed; `stop_reason` is `tool_use` when it calls a tool.
    Turn(Vec<Block>),
    /// An HTTP error with the API's error body.
    Error(u16, &'static str, String),
}

impl Reply {
    pub fn text(t: &str) -> Reply {
        Reply::Turn(vec![Block::Text(t.to_string())])
    }

    pub fn empty() -> Reply {
        Reply::Turn(Vec::new())
    }

    pub fn tool(name: &'static str, input: Value) -> Reply {
        Reply::Turn(vec![Block::Tool(name, input)])
    }
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    pub body: Value,
    /// The body as sent, to search for what hooks injected.
    pub raw: String,
}

fn texts(content: &Value, out: &mut String) {
    match content {
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            for item in items {
                if let Some(t) = item.get("text").and_then(Value::as_str) {
                    out.push_str(t);
                    out.push('\n');
                }
            }
        }
        _ => {}
    }
}

impl Request {
    /// The text of the first message: the prompt (with the client's reminders).
    pub fn first_text(&self) -> String {
        let mut out = String::new();
        if let Some(m) = self.body["messages"].get(0) {
            texts(&m["content"], &mut out);
        }
        out
    }

    /// True when this request belongs to the conversation whose prompt contains `marker`.
    pub fn is(&self, marker: &str) -> bool {
        self.first_text().contains(marker)
    }

    /// How many tool calls the assistant has made so far in this conversation.
    pub fn tool_calls(&self) -> usize {
        self.body["messages"]
            .as_array()
            .map(|ms| {
                ms.iter()
                    .filter(|m| m["role"] == "assistant")
                    .filter_map(|m| m["content"].as_array())
                    .flatten()
                    .filter(|b| b["type"] == "tool_use")
                    .count()
            })
            .unwrap_or(0)
    }

    /// How many assistant turns the conversation has had.
    pub fn turns(&self) -> usize {
        self.body["messages"]
            .as_array()
            .map(|ms| ms.iter().filter(|m| m["role"] == "assistant").count())
            .unwrap_or(0)
    }

    /// True when the raw body contains `needle`, as JSON escapes it or not.
    pub fn says(&self, needle: &str) -> bool {
        let escaped = serde_json::to_string(needle).unwrap_or_default();
        let escaped = escaped.trim_matches('"');
        self.raw.contains(needle) || self.raw.contains(escaped)
    }
}

type Script = dyn Fn(&Request) -> Reply + Send + Sync;

/// The running server; stopped when dropped.
pub struct FakeApi {
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
}

impl FakeApi {
    pub fn start(script: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let log: Arc<Mutex<Vec<Request>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let ids = Arc::new(AtomicU64::new(1));
        let (log2, stop2) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (log, script, ids) = (log2.clone(), script.clone(), ids.clone());
                std::thread::spawn(move || serve(conn, &log, &*script, &ids));
            }
        });
        FakeApi { addr, log, stop }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every `POST /v1/messages` so far, in arrival order.
    pub fn messages(&self) -> Vec<Request> {
        self.log
            .lock()
            .map(|l| {
                l.iter()
                    .filter(|r| {
                        r.path.starts_with("/v1/messages") && !r.path.contains("count_tokens")
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// One connection: requests until the client closes it.
fn serve(conn: TcpStream, log: &Mutex<Vec<Request>>, script: &Script, ids: &AtomicU64) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(300)));
    let Ok(mut out) = conn.try_clone() else {
        return;
    };
    let mut input = BufReader::new(conn);
    loop {
        let Some((path, body)) = read_request(&mut input) else {
            return;
        };
        let raw = String::from_utf8_lossy(&body).into_owned();
        let req = Request {
            path: path.clone(),
            body: serde_json::from_str(&raw).unwrap_or(Value::Null),
            raw,
        };
        if let Ok(mut l) = log.lock() {
            l.push(req.clone());
        }
        let written = if path.contains("count_tokens") {
            respond(
                &mut out,
                200,
                "application/json",
                br#"{"input_tokens": 12}"#,
            )
        } else if path.starts_with("/v1/messages") {
            match script(&req) {
                Reply::Turn(blocks) => {
                    let sse = stream(&blocks, ids);
                    respond(&mut out, 200, "text/event-stream", sse.as_bytes())
                }
                Reply::Error(status, kind, message) => {
                    let body =
                        json!({"type": "error", "error": {"type": kind, "message": message}});
                    respond(
                        &mut out,
                        status,
                        "application/json",
                        body.to_string().as_bytes(),
                    )
                }
            }
        } else {
            respond(
                &mut out,
                404,
                "application/json",
                br#"{"type":"error","error":{"type":"not_found_error","message":"not here"}}"#,
            )
        };
        if written.is_err() {
            return;
        }
    }
}

fn read_request(input: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    if input.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        let mut h = String::new();
        if input.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':')?;
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim();
        if name == "content-length" {
            length = value.parse().ok()?;
        } else if name == "transfer-encoding" && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            input.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; n + 2];
            input.read_exact(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        body.resize(length, 0);
        input.read_exact(&mut body).ok()?;
    }
    Some((path, body))
}

fn respond(out: &mut TcpStream, status: u16, kind: &str, body: &[u8]) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        529 => "Overloaded",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nrequest-id: req_e2e\r\nconnection: keep-alive\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(body)?;
    out.flush()
}

/// The SSE events of one assistant turn.
fn stream(blocks: &[Block], ids: &AtomicU64) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    let id = ids.fetch_add(1, Ordering::SeqCst);
    event(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_e2e_{id}"),
            "type": "message", "role": "assistant", "model": "claude-e2e", "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 1}}}),
    );
    let mut tool = false;
    for (i, b) in blocks.iter().enumerate() {
        match b {
            Block::Text(t) => {
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i,
                        "content_block": {"type": "text", "text": ""}}),
                );
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": t}}),
                );
            }
            Block::Tool(name, input) => {
                tool = true;
                let tid = ids.fetch_add(1, Ordering::SeqCst);
                event(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i,
                        "content_block": {"type": "tool_use", "id": format!("toolu_e2e_{tid}"),
                            "name": name, "input": {}}}),
                );
                event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
                );
            }
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    let stop = if tool { "tool_use" } else { "end_turn" };
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {"output_tokens": 8}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}
