//! A fake model API on 127.0.0.1 for both wires the clients speak: OpenAI's Responses API
//! (`POST /v1/responses`, an SSE stream of `response.*` events; Codex CLI) and the Gemini API
//! (`POST /v1beta/models/MODEL:streamGenerateContent?alt=sse` or `:generateContent`; Gemini
//! CLI). Each request of the main conversation is answered from a script; every request is
//! kept so a scenario can assert on what reached the model.
//!
//! Gemini CLI also sends requests of its own (a routing classifier, token counts) that carry
//! no tools: those get a neutral answer and are not given to the script.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the fake model does in one turn.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A final text (empty for an empty answer).
    Text(String),
    /// A call of the client's shell tool with this command line.
    Shell(String),
}

impl Reply {
    pub fn text(t: &str) -> Reply {
        Reply::Text(t.to_string())
    }

    pub fn shell(command: &str) -> Reply {
        Reply::Shell(command.to_string())
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

impl Request {
    /// True for a request of the main conversation (it offers tools), which the script answers.
    pub fn is_turn(&self) -> bool {
        let api = self.path.starts_with("/v1/responses")
            || self.path.contains(":streamGenerateContent")
            || self.path.contains(":generateContent");
        api && self.body.get("tools").is_some()
    }

    /// How many tool calls the model has made so far in this conversation.
    pub fn tool_calls(&self) -> usize {
        if let Some(input) = self.body["input"].as_array() {
            return input
                .iter()
                .filter(|i| i["type"] == "function_call")
                .count();
        }
        self.body["contents"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter(|c| c["role"] == "model")
                    .filter_map(|c| c["parts"].as_array())
                    .flatten()
                    .filter(|p| p.get("functionCall").is_some())
                    .count()
            })
            .unwrap_or(0)
    }

    /// True when the raw body contains `needle`, as JSON escapes it or not.
    pub fn says(&self, needle: &str) -> bool {
        let escaped = serde_json::to_string(needle).unwrap_or_default();
        let escaped = escaped.trim_matches('"');
        self.raw.contains(needle) || self.raw.contains(escaped)
    }

    /// What the conversation holds after the last model turn: the tool results and messages
    /// the client added since (where a hook's words land), as JSON text.
    pub fn since_last_call(&self) -> String {
        let items: Vec<Value> = if let Some(input) = self.body["input"].as_array() {
            let last = input
                .iter()
                .rposition(|i| i["type"] == "function_call" || i["role"] == "assistant")
                .map_or(0, |n| n + 1);
            input[last..].to_vec()
        } else if let Some(cs) = self.body["contents"].as_array() {
            let last = cs
                .iter()
                .rposition(|c| c["role"] == "model")
                .map_or(0, |n| n + 1);
            cs[last..].to_vec()
        } else {
            Vec::new()
        };
        Value::from(items).to_string()
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

    /// The requests of the main conversation so far, in arrival order.
    pub fn turns(&self) -> Vec<Request> {
        self.log
            .lock()
            .map(|l| l.iter().filter(|r| r.is_turn()).cloned().collect())
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
        let id = ids.fetch_add(1, Ordering::SeqCst);
        let written = if path.starts_with("/v1/responses") {
            let reply = script(&req);
            respond(
                &mut out,
                200,
                "text/event-stream",
                &responses_sse(&reply, id),
            )
        } else if path.contains(":countTokens") {
            respond(&mut out, 200, "application/json", br#"{"totalTokens": 12}"#)
        } else if path.contains("GenerateContent") || path.contains("generateContent") {
            let candidate = if req.is_turn() {
                gemini_candidate(&script(&req))
            } else {
                gemini_candidate(&Reply::Text(utility_answer(&req.body)))
            };
            if path.contains("alt=sse") {
                let sse = format!("data: {candidate}\r\n\r\n");
                respond(&mut out, 200, "text/event-stream", sse.as_bytes())
            } else {
                respond(
                    &mut out,
                    200,
                    "application/json",
                    candidate.to_string().as_bytes(),
                )
            }
        } else {
            respond(
                &mut out,
                404,
                "application/json",
                br#"{"error":{"code":404,"message":"not here"}}"#,
            )
        };
        if written.is_err() {
            return;
        }
    }
}

/// The answer to a request of the client's own (no tools): its JSON schema's shape when it
/// asks for JSON (Gemini CLI's routing classifier), else a word.
fn utility_answer(body: &Value) -> String {
    if body["generationConfig"]["responseMimeType"] == "application/json" {
        json!({"complexity_reasoning": "a simple request", "complexity_score": 10}).to_string()
    } else {
        "ok".to_string()
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
        404 => "Not Found",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(body)?;
    out.flush()
}

/// One model turn as the Responses API streams it: the output item, added then done, between
/// `response.created` and `response.completed`.
fn responses_sse(reply: &Reply, id: u64) -> Vec<u8> {
    let item = match reply {
        Reply::Text(t) => json!({"type": "message", "id": format!("msg_e2e_{id}"),
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}]}),
        Reply::Shell(cmd) => json!({"type": "function_call", "id": format!("fc_e2e_{id}"),
            "call_id": format!("call_e2e_{id}"), "name": "exec_command", "status": "completed",
            "arguments": json!({"cmd": cmd}).to_string()}),
    };
    let rid = format!("resp_e2e_{id}");
    let events = [
        json!({"type": "response.created", "response": {"id": rid}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": rid, "usage": {
            "input_tokens": 12, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 8, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 20}}}),
    ];
    let mut out = String::new();
    for e in events {
        out.push_str(&format!(
            "event: {}\ndata: {e}\n\n",
            e["type"].as_str().unwrap_or("")
        ));
    }
    out.into_bytes()
}

/// One model turn as the Gemini API answers it (one chunk of the stream, or the whole).
fn gemini_candidate(reply: &Reply) -> Value {
    let part = match reply {
        Reply::Text(t) => json!({"text": t}),
        Reply::Shell(cmd) => json!({"functionCall": {"name": "run_shell_command",
            "args": {"command": cmd, "description": "run it"}}}),
    };
    json!({"candidates": [{"content": {"role": "model", "parts": [part]},
            "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 8,
            "totalTokenCount": 20}})
}
