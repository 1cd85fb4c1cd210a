//! What the proxy reads from a stdio upstream server passes a screen first.
//! rmcp's stdio transport drops a line it cannot take (longer than its
//! limit, nested deeper than serde's, not JSON, not a JSON-RPC message)
//! without a word, so the call it answered would never be answered. Here
//! each line is read within [`Limits`] and scanned as it streams, without
//! recursion and without keeping more than the limit, for its top-level
//! `id`: a line that fails becomes a JSON-RPC error for that id, which the
//! proxy turns into an error result for the agent's call.

use std::process::Stdio;

use rmcp::RoleClient;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::process::{Child, ChildStdin, Command};

/// What an upstream message may be.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest message (one line) in bytes.
    pub max_bytes: usize,
    /// Deepest nesting of arrays and objects (the message itself is 1).
    pub max_depth: usize,
}

/// The top-level `id` of a JSON text, found as the text streams by, and
/// how deep it nests; any byte sequence is taken (what is not JSON just
/// yields no id).
#[derive(Default)]
struct Scan {
    depth: usize,
    deepest: usize,
    in_string: bool,
    escaped: bool,
    /// The top-level key being read, or the one whose value follows.
    key: Vec<u8>,
    reading_key: bool,
    after_colon: bool,
    /// Whether the text has a top-level `method` (a request or a
    /// notification of the upstream, not an answer).
    has_method: bool,
    /// The raw JSON of the top-level `id` (a string or a number).
    id: Option<Vec<u8>>,
    reading_id: Option<Vec<u8>>,
}

/// Longest `id` kept (a longer one is no id).
const MAX_ID: usize = 256;

impl Scan {
    fn feed(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            // Inside a string that is neither a key nor the id, only a
            // quote or a backslash matters: skip to the next one.
            if self.in_string && !self.escaped && !self.reading_key && self.reading_id.is_none() {
                match bytes[i..].iter().position(|&b| b == b'"' || b == b'\\') {
                    Some(p) => i += p,
                    None => return,
                }
            }
            self.byte(bytes[i]);
            i += 1;
        }
    }

    fn byte(&mut self, b: u8) {
        if let Some(id) = &mut self.reading_id {
            let ends_number =
                !self.in_string && matches!(b, b',' | b'}' | b' ' | b'\t' | b'\r' | b'\n');
            if ends_number {
                let id = std::mem::take(id);
                self.reading_id = None;
                self.id = Some(id);
            } else {
                if id.len() < MAX_ID {
                    id.push(b);
                }
                if self.in_string {
                    if self.escaped {
                        self.escaped = false;
                    } else if b == b'\\' {
                        self.escaped = true;
                    } else if b == b'"' {
                        self.in_string = false;
                        let id = std::mem::take(id);
                        self.reading_id = None;
                        if id.len() < MAX_ID {
                            self.id = Some(id);
                        }
                    }
                }
                return;
            }
        }
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                    self.has_method |= self.key == b"method";
                }
                return;
            }
            if self.reading_key && self.key.len() <= 6 {
                self.key.push(b);
            }
            return;
        }
        match b {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.after_colon && self.key == b"id" {
                    self.reading_id = Some(vec![b]);
                    self.after_colon = false;
                } else if self.depth == 1 && !self.after_colon {
                    self.reading_key = true;
                    self.key.clear();
                }
            }
            b'{' | b'[' => {
                self.depth += 1;
                self.deepest = self.deepest.max(self.depth);
                self.after_colon = false;
            }
            b'}' | b']' => {
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => self.after_colon = true,
            b',' if self.depth == 1 => self.after_colon = false,
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => {
                if self.depth == 1 && self.after_colon {
                    self.after_colon = false;
                    if self.key == b"id" && (b == b'-' || b.is_ascii_digit()) {
                        self.reading_id = Some(vec![b]);
                    }
                }
            }
        }
    }

    /// The id, once the line is over.
    fn finish(mut self) -> Option<Vec<u8>> {
        if let Some(id) = self.reading_id.take()
            && !self.in_string
        {
            self.id = Some(id);
        }
        self.id
    }
}

/// One line's verdict: passed on as it is, or the reason it failed.
fn judge(line: &[u8], scan: &Scan, limits: Limits) -> Result<(), String> {
    if scan.deepest > limits.max_depth {
        return Err(format!(
            "the upstream server's answer is nested deeper than the proxy's limit of {} \
             (--max-message-depth)",
            limits.max_depth
        ));
    }
    match serde_json::from_slice::<ServerJsonRpcMessage>(line) {
        Ok(_) => Ok(()),
        Err(e) if serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok() => Err(format!(
            "the upstream server's answer is not a valid JSON-RPC message: {e}"
        )),
        Err(e) => Err(format!("the upstream server's answer is not JSON: {e}")),
    }
}

/// A JSON-RPC error line answering `id` with `message`.
fn error_line(id: &[u8], message: &str) -> Option<Vec<u8>> {
    let id: serde_json::Value = serde_json::from_slice(id).ok()?;
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return None;
    }
    let line = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message},
    });
    let mut bytes = serde_json::to_vec(&line).ok()?;
    bytes.push(b'\n');
    Some(bytes)
}

/// Copies `from` to `to` line by line through the screen, until `from`
/// ends or `to` is closed.
pub async fn screen(from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin, limits: Limits) {
    let mut from = BufReader::new(from);
    let mut line: Vec<u8> = Vec::new();
    let mut scan = Scan::default();
    let mut too_long = false;
    loop {
        let (used, ended) = {
            let Ok(available) = from.fill_buf().await else {
                return;
            };
            if available.is_empty() {
                return;
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            let chunk = &available[..take];
            scan.feed(chunk);
            if !too_long && line.len() + chunk.len() > limits.max_bytes.saturating_add(1) {
                too_long = true;
                line = Vec::new();
            }
            if !too_long {
                line.extend_from_slice(chunk);
            }
            (take, newline.is_some())
        };
        from.consume(used);
        if !ended {
            continue;
        }
        let done = std::mem::take(&mut scan);
        let done_method = done.has_method;
        let deepest = done.deepest;
        let verdict = if too_long {
            Err(format!(
                "the upstream server's answer is larger than the proxy's limit of {} bytes \
                 (--max-message-bytes)",
                limits.max_bytes
            ))
        } else {
            judge(&line, &done, limits)
        };
        let out = match verdict {
            Ok(()) => Some(std::mem::take(&mut line)),
            Err(reason) => {
                let id = done.finish();
                eprintln!("actiongate mcp proxy: {reason}");
                let within = !too_long && deepest <= limits.max_depth;
                if done_method {
                    // The upstream's own request or notification: rmcp
                    // answers or drops it as before (an error line here
                    // could answer one of the proxy's requests by mistake).
                    within.then(|| std::mem::take(&mut line))
                } else {
                    id.and_then(|id| error_line(&id, &reason))
                }
            }
        };
        line.clear();
        too_long = false;
        if let Some(out) = out
            && (to.write_all(&out).await.is_err() || to.flush().await.is_err())
        {
            return;
        }
    }
}

/// A stdio upstream server whose output is screened (see the module).
pub struct ScreenedChild {
    child: Child,
    inner: AsyncRwTransport<RoleClient, DuplexStream, ChildStdin>,
}

impl ScreenedChild {
    /// Starts `command` with piped stdin and stdout (stderr is the
    /// proxy's).
    pub fn spawn(mut command: Command, limits: Limits) -> std::io::Result<ScreenedChild> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let (stdin, stdout) = match (child.stdin.take(), child.stdout.take()) {
            (Some(i), Some(o)) => (i, o),
            _ => return Err(std::io::Error::other("the child's stdio is not piped")),
        };
        // The screened lines are at most the limit (or a short error line).
        let (screened, reader) = tokio::io::duplex(64 * 1024);
        tokio::spawn(screen(stdout, screened, limits));
        let inner = AsyncRwTransport::new_client(reader, stdin)
            .with_max_line_length(limits.max_bytes.saturating_add(2));
        Ok(ScreenedChild { child, inner })
    }
}

impl Transport<RoleClient> for ScreenedChild {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.inner.receive()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Closing stdin asks the server to end; it gets a moment, then is
        // killed.
        let closed = self.inner.close().await;
        let waited =
            tokio::time::timeout(std::time::Duration::from_secs(3), self.child.wait()).await;
        if waited.is_err() {
            let _ = self.child.kill().await;
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn id_of(text: &str) -> Option<String> {
        let mut s = Scan::default();
        s.feed(text.as_bytes());
        s.finish().map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#).unwrap(),
            "7"
        );
        assert_eq!(
            id_of(r#"{"result":{"id":1},"id":"a\"b"}"#).unwrap(),
            r#""a\"b""#
        );
        assert_eq!(id_of(r#"{"x":"id","id" : 12 }"#).unwrap(), "12");
        assert_eq!(id_of(r#"{"result":{"id":3}}"#), None);
        assert_eq!(id_of(r#"{"method":"x"}"#), None);
        assert_eq!(id_of("not json"), None);
    }

    #[test]
    fn depth_is_counted_without_recursion() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let mut s = Scan::default();
        s.feed(deep.as_bytes());
        assert_eq!(s.deepest, 100_000);
    }
}
