//! A local fake of Discord's Gateway (a websocket server) that follows the
//! documented cycle: Hello with a heartbeat interval; Identify answered
//! by READY (with a session id and a `resume_gateway_url`); Heartbeat
//! answered by Heartbeat ACK; Resume of the known session answered by the
//! events it missed and RESUMED, of another by Invalid Session. The test
//! pushes dispatches (`INTERACTION_CREATE`, `MESSAGE_CREATE`), drops the
//! connection, stops acknowledging heartbeats, sends Reconnect, or
//! refuses the message content intent, and reads what the client sent.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

pub const SESSION: &str = "session-1";
/// Discord's epoch, in ms since 1970.
const DISCORD_EPOCH_MS: i64 = 1_420_070_400_000;

/// A snowflake id made now (unique within the test process).
pub fn snowflake() -> String {
    snowflake_at(chrono::Utc::now().timestamp_millis())
}

/// A snowflake id made at `ms` (since 1970).
pub fn snowflake_at(ms: i64) -> String {
    static N: AtomicI64 = AtomicI64::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst) & 0x3f_ffff;
    (((ms - DISCORD_EPOCH_MS) << 22) | n).to_string()
}

enum Cmd {
    Send(Value),
    Drop,
}

/// What the client sent on one connection.
#[derive(Debug, Clone)]
pub struct Got {
    /// 1 for the first connection, then 2, …
    pub conn: usize,
    /// The path and query the connection was opened at.
    pub path: String,
    pub payload: Value,
}

#[derive(Default)]
struct Inner {
    got: Mutex<Vec<Got>>,
    conns: AtomicUsize,
    seq: AtomicI64,
    /// The open connection's number and command channel.
    current: Mutex<Option<(usize, mpsc::UnboundedSender<Cmd>)>>,
    /// Dispatches not delivered yet (sent when a session is resumed).
    missed: Mutex<Vec<Value>>,
    no_ack: AtomicBool,
    refuse_next_resume: AtomicBool,
    refuse_message_content: AtomicBool,
    heartbeat_ms: AtomicI64,
}

#[derive(Clone)]
pub struct FakeGateway {
    /// The URL to connect to (`ws://127.0.0.1:<port>`).
    pub url: String,
    inner: Arc<Inner>,
}

impl FakeGateway {
    pub async fn start() -> FakeGateway {
        let inner = Arc::new(Inner::default());
        inner.heartbeat_ms.store(400, Ordering::SeqCst);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let gw = FakeGateway {
            url: url.clone(),
            inner: inner.clone(),
        };
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let inner = inner.clone();
                let url = url.clone();
                tokio::spawn(async move { serve(inner, url, tcp).await });
            }
        });
        gw
    }

    /// Sends dispatch `t` with data `d` now, or on the next resume when no
    /// connection is open.
    pub fn dispatch(&self, t: &str, d: Value) {
        let seq = self.inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let payload = json!({"op": 0, "t": t, "s": seq, "d": d});
        let sent = match &*self.inner.current.lock().unwrap() {
            Some((_, tx)) => tx.send(Cmd::Send(payload.clone())).is_ok(),
            None => false,
        };
        if !sent {
            self.inner.missed.lock().unwrap().push(payload);
        }
    }

    /// Sends a non-dispatch payload (op 7, op 9, …) on the open connection.
    pub fn send_op(&self, payload: Value) {
        if let Some((_, tx)) = &*self.inner.current.lock().unwrap() {
            let _ = tx.send(Cmd::Send(payload));
        }
    }

    /// Cuts the open connection without a close frame.
    pub fn drop_connection(&self) {
        if let Some((_, tx)) = self.inner.current.lock().unwrap().take() {
            let _ = tx.send(Cmd::Drop);
        }
    }

    /// Heartbeats are (not) acknowledged from now on.
    pub fn ack(&self, on: bool) {
        self.inner.no_ack.store(!on, Ordering::SeqCst);
    }

    /// The next Resume is answered with Invalid Session (not resumable).
    pub fn refuse_next_resume(&self) {
        self.inner.refuse_next_resume.store(true, Ordering::SeqCst);
    }

    /// An Identify asking for the message content intent is closed with
    /// 4014 (the intent is off in the developer portal).
    pub fn refuse_message_content(&self) {
        self.inner
            .refuse_message_content
            .store(true, Ordering::SeqCst);
    }

    pub fn got(&self) -> Vec<Got> {
        self.inner.got.lock().unwrap().clone()
    }

    /// The number of connections opened so far.
    pub fn connections(&self) -> usize {
        self.inner.conns.load(Ordering::SeqCst)
    }

    /// Waits until `pred` holds over what the client sent.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        for _ in 0..600 {
            let got = self.got();
            if pred(&got) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("timed out waiting for {what}; got: {:#?}", self.got());
    }
}

/// Payloads of op `op` among `got`.
pub fn ops(got: &[Got], op: u64) -> Vec<&Got> {
    got.iter()
        .filter(|g| g.payload["op"].as_u64() == Some(op))
        .collect()
}

// The handshake callback's error type is tungstenite's, large by design.
#[allow(clippy::result_large_err)]
async fn serve(inner: Arc<Inner>, url: String, tcp: tokio::net::TcpStream) {
    let path = Arc::new(Mutex::new(String::new()));
    let seen = path.clone();
    let callback = move |req: &Request, resp: Response| {
        *seen.lock().unwrap() = req.uri().to_string();
        Ok(resp)
    };
    let Ok(ws) = tokio_tungstenite::accept_hdr_async(tcp, callback).await else {
        return;
    };
    let path = path.lock().unwrap().clone();
    let conn = inner.conns.fetch_add(1, Ordering::SeqCst) + 1;
    let (mut tx, mut rx) = ws.split();
    let (cmd_tx, mut cmds) = mpsc::unbounded_channel();
    *inner.current.lock().unwrap() = Some((conn, cmd_tx));
    let gone = || {
        let mut current = inner.current.lock().unwrap();
        if current.as_ref().is_some_and(|(n, _)| *n == conn) {
            current.take();
        }
    };
    let hello =
        json!({"op": 10, "d": {"heartbeat_interval": inner.heartbeat_ms.load(Ordering::SeqCst)}});
    if tx.send(Message::text(hello.to_string())).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            cmd = cmds.recv() => match cmd {
                Some(Cmd::Send(v)) => {
                    if tx.send(Message::text(v.to_string())).await.is_err() {
                        return;
                    }
                }
                Some(Cmd::Drop) | None => {
                    gone();
                    return;
                }
            },
            msg = rx.next() => {
                let payload: Value = match msg {
                    Some(Ok(Message::Text(t))) => serde_json::from_str(t.as_str()).unwrap(),
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                        gone();
                        return;
                    }
                    Some(Ok(_)) => continue,
                };
                inner.got.lock().unwrap().push(Got { conn, path: path.clone(), payload: payload.clone() });
                let answer = match payload["op"].as_u64() {
                    Some(1) if !inner.no_ack.load(Ordering::SeqCst) => Some(json!({"op": 11})),
                    Some(2) => {
                        let intents = payload["d"]["intents"].as_u64().unwrap_or(0);
                        if inner.refuse_message_content.swap(false, Ordering::SeqCst) && intents & (1 << 15) != 0 {
                            let frame = CloseFrame { code: CloseCode::from(4014), reason: "Disallowed intent(s).".into() };
                            let _ = tx.send(Message::Close(Some(frame))).await;
                            gone();
                            return;
                        }
                        let seq = inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
                        Some(json!({"op": 0, "t": "READY", "s": seq, "d": {
                            "v": 10,
                            "user": {"id": "1000", "username": "actiongate", "bot": true},
                            "guilds": [],
                            "session_id": SESSION,
                            "resume_gateway_url": format!("{url}/resume"),
                            "application": {"id": "1001", "flags": 0},
                        }}))
                    }
                    Some(6) => {
                        let ok = payload["d"]["session_id"] == SESSION
                            && !inner.refuse_next_resume.swap(false, Ordering::SeqCst);
                        if ok {
                            let missed: Vec<Value> = std::mem::take(&mut *inner.missed.lock().unwrap());
                            for m in missed {
                                if tx.send(Message::text(m.to_string())).await.is_err() {
                                    return;
                                }
                            }
                            let seq = inner.seq.fetch_add(1, Ordering::SeqCst) + 1;
                            Some(json!({"op": 0, "t": "RESUMED", "s": seq, "d": null}))
                        } else {
                            Some(json!({"op": 9, "d": false}))
                        }
                    }
                    _ => None,
                };
                if let Some(a) = answer
                    && tx.send(Message::text(a.to_string())).await.is_err()
                {
                    return;
                }
            }
        }
    }
}
