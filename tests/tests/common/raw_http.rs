//! A scripted HTTP/1.1 server on a raw socket, for black-box tests that
//! need answers a well-behaved server never gives (a body cut short, a
//! stall mid-body) or must see every request made to them (a redirect's
//! target): each connection reads one request and writes what the script
//! says, byte for byte.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What to do after writing the answer's bytes.
#[derive(Debug, Clone, Copy)]
pub enum After {
    /// Close the connection.
    Close,
    /// Keep it open, sending nothing more, for this long.
    Stall(Duration),
}

/// One request as received.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request line and headers.
    pub head: String,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// A header's value (names compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    }

    /// The body as JSON (`Null` if it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

type Script = Arc<dyn Fn(usize, &Request) -> (Vec<u8>, After) + Send + Sync>;

/// A running server; it stops when the test's runtime ends.
pub struct RawServer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    got: Arc<Mutex<Vec<Request>>>,
}

impl RawServer {
    /// Starts a server answering request `n` (from 1) with `script(n, req)`.
    pub async fn start(
        script: impl Fn(usize, &Request) -> (Vec<u8>, After) + Send + Sync + 'static,
    ) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let got = Arc::new(Mutex::new(Vec::new()));
        let script: Script = Arc::new(script);
        let seen = got.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let script = script.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let Some(req) = read_request(&mut sock).await else {
                        return;
                    };
                    let n = {
                        let mut g = seen.lock().unwrap();
                        g.push(req.clone());
                        g.len()
                    };
                    let (bytes, after) = script(n, &req);
                    let _ = sock.write_all(&bytes).await;
                    let _ = sock.flush().await;
                    match after {
                        After::Close => {
                            let _ = sock.shutdown().await;
                        }
                        After::Stall(d) => tokio::time::sleep(d).await,
                    }
                });
            }
        });
        RawServer { base, got }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.got.lock().unwrap().clone()
    }
}

/// Reads a request's head and its `content-length` body.
async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut req = Request {
        head,
        body: Vec::new(),
    };
    let len: usize = req
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    req.body = body;
    Some(req)
}

/// A whole answer: status line, headers, `content-length` and body.
pub fn answer(status: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ));
    out.into_bytes()
}
