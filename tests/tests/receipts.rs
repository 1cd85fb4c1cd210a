//! Black-box tests of signed decision receipts: a settled decision's
//! receipt verifies offline with the key from the well-known URL
//! (`actiongate receipt verify`) and fails when one byte changes; the key
//! survives a restart; the reference executor set to require a human
//! receipt runs what a human approved and refuses what only the policy
//! allowed, or a delivery forged with the leaked webhook secret.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::common;
use common::daemon::{Daemon, agent_key, role_key, set_profile};
use common::executor::start_executor_with;
use common::{binary, call, client};

async fn get(http: &reqwest::Client, url: String, key: &str) -> (u16, Value) {
    call(http, reqwest::Method::GET, url, key, None).await
}

/// `actiongate receipt verify FILE --jwk KEY [extra]`: its exit code and stdout.
fn verify(file: &Path, key: &Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(binary("actiongate"))
        .args(["receipt", "verify"])
        .arg(file)
        .arg("--jwk")
        .arg(key)
        .args(extra)
        .env_remove("ACTIONGATE_KEY")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receipt_verifies_offline_and_fails_when_one_byte_changes() {
    let dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let bot = agent_key(&http, &d.base, &admin, "bot").await;
    let other = agent_key(&http, &d.base, &admin, "other").await;
    set_profile(
        &http,
        &d.base,
        &admin,
        "bot",
        json!({"allow": ["tool:bash:ls"], "ask": ["tool:bash:.*"]}),
    )
    .await;

    // Allowed by the policy.
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &bot,
        Some(json!({"tool": "bash", "detail": "ls"})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    let id = a["id"].as_str().unwrap().to_owned();
    let (s, r) = get(&http, format!("{}/v1/actions/{id}/receipt", d.base), &bot).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["claims"]["action_id"], id.as_str());
    assert_eq!(r["claims"]["agent"], "bot");
    assert_eq!(r["claims"]["action_string"], "tool:bash:ls");
    assert_eq!(r["claims"]["outcome"], "allowed");
    assert_eq!(r["claims"]["decided_by"], "policy");
    assert_eq!(r["claims"]["deciders"], json!([]));
    // The same receipt each time it is asked for.
    let (_, again) = get(&http, format!("{}/v1/actions/{id}/receipt", d.base), &admin).await;
    assert_eq!(again["receipt"], r["receipt"]);
    // Another agent does not see it.
    let (s, _) = get(&http, format!("{}/v1/actions/{id}/receipt", d.base), &other).await;
    assert_eq!(s, 404);

    // The key needs no API key.
    let resp = http
        .get(format!("{}/.well-known/actiongate-receipt-key", d.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let jwk: Value = resp.json().await.unwrap();
    assert_eq!(jwk["kty"], "OKP");
    assert_eq!(jwk["crv"], "Ed25519");
    let key_file = files.path().join("key.json");
    std::fs::write(&key_file, jwk.to_string()).unwrap();

    let receipt = r["receipt"].as_str().unwrap().to_owned();
    let file = files.path().join("receipt.jws");
    std::fs::write(&file, &receipt).unwrap();
    let (code, out) = verify(&file, &key_file, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&id), "{out}");
    // The whole JSON answer is accepted too.
    let whole = files.path().join("receipt.json");
    std::fs::write(&whole, r.to_string()).unwrap();
    assert_eq!(verify(&whole, &key_file, &[]).0, 0);
    // A human did not allow it: refused, and nothing on stdout reads as
    // "valid" to a script.
    let (code, out) = verify(&file, &key_file, &["--require-human"]);
    assert_eq!((code, out.as_str()), (1, ""));

    // Allowed as asked by a standing grant: the receipt names the grant a
    // human made, not the profile.
    let (s, g) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/grants", d.base),
        &operator,
        Some(json!({"tool": "bash", "pattern": "^cat notes$", "expires": "1h", "agent": "bot"})),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &bot,
        Some(json!({"tool": "bash", "detail": "cat notes"})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    let grant = format!("grant:{}", g["id"].as_str().unwrap());
    assert_eq!(a["decided_by"], grant.as_str(), "{a}");
    let granted = a["id"].as_str().unwrap();
    let (s, r) = get(
        &http,
        format!("{}/v1/actions/{granted}/receipt", d.base),
        &bot,
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["claims"]["decided_by"], grant.as_str());
    assert_eq!(r["claims"]["deciders"], json!([]));

    // One byte changed anywhere (header, claims, signature): refused.
    let bytes = receipt.as_bytes();
    for i in [0, bytes.len() / 3, bytes.len() / 2, bytes.len() - 2] {
        let mut changed = bytes.to_vec();
        if changed[i] == b'.' {
            continue;
        }
        changed[i] = if changed[i] == b'A' { b'B' } else { b'A' };
        let bad = files.path().join(format!("bad{i}.jws"));
        std::fs::write(&bad, &changed).unwrap();
        assert_eq!(verify(&bad, &key_file, &[]).0, 1, "byte {i} changed");
    }
    // Claims edited to say a human approved: refused.
    let parts: Vec<&str> = receipt.split('.').collect();
    let claims = r["claims"].clone();
    let mut forged = claims.clone();
    forged["deciders"] = json!([{"id": "key:x", "via": "api"}]);
    let b64 = |v: &Value| {
        use std::fmt::Write;
        // base64url without padding, by hand (no extra dependency here).
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let data = v.to_string().into_bytes();
        let mut out = String::new();
        for c in data.chunks(3) {
            let n = (c[0] as u32) << 16
                | (*c.get(1).unwrap_or(&0) as u32) << 8
                | *c.get(2).unwrap_or(&0) as u32;
            for k in 0..=c.len() {
                write!(out, "{}", A[(n >> (18 - 6 * k) & 63) as usize] as char).unwrap();
            }
        }
        out
    };
    let forged_file = files.path().join("forged.jws");
    std::fs::write(
        &forged_file,
        format!("{}.{}.{}", parts[0], b64(&forged), parts[2]),
    )
    .unwrap();
    assert_eq!(verify(&forged_file, &key_file, &[]).0, 1);

    // Pending: no receipt yet; approved by a human: the human is named.
    let (s, p) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &bot,
        Some(json!({"tool": "bash", "detail": "make deploy"})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    assert_eq!(p["status"], "pending");
    let pid = p["id"].as_str().unwrap().to_owned();
    let (s, _) = get(&http, format!("{}/v1/actions/{pid}/receipt", d.base), &bot).await;
    assert_eq!(s, 409);
    let (s, b) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions/{pid}/approve", d.base),
        &operator,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let (s, hr) = get(&http, format!("{}/v1/actions/{pid}/receipt", d.base), &bot).await;
    assert_eq!(s, 200, "{hr}");
    assert_eq!(hr["claims"]["outcome"], "allowed");
    assert_eq!(hr["claims"]["deciders"][0]["via"], "api");
    assert!(
        hr["claims"]["deciders"][0]["id"]
            .as_str()
            .unwrap()
            .starts_with("key:")
    );
    // A denial through the page: its receipt names the page, the channel
    // the decision came through, not one guessed from the key.
    let (s, p) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &bot,
        Some(json!({"tool": "bash", "detail": "make clean"})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let denied = p["id"].as_str().unwrap().to_owned();
    let resp = http
        .post(format!("{}/v1/actions/{denied}/deny", d.base))
        .bearer_auth(&operator)
        .header("x-actiongate-channel", "page")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (s, dr) = get(
        &http,
        format!("{}/v1/actions/{denied}/receipt", d.base),
        &bot,
    )
    .await;
    assert_eq!(s, 200, "{dr}");
    assert_eq!(dr["claims"]["outcome"], "denied");
    assert_eq!(dr["claims"]["deciders"][0]["via"], "page", "{dr}");
    // An agent withdrawing its own request is no human deciding; an
    // operator cancelling one is.
    let mut cancelled = Vec::new();
    for (detail, by) in [("make a", &bot), ("make b", &operator)] {
        let (s, p) = call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/actions", d.base),
            &bot,
            Some(json!({"tool": "bash", "detail": detail})),
        )
        .await;
        assert_eq!(s, 201, "{p}");
        let id = p["id"].as_str().unwrap().to_owned();
        let (s, c) = call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/actions/{id}/cancel", d.base),
            by,
            None,
        )
        .await;
        assert_eq!(s, 200, "{c}");
        let (s, r) = get(&http, format!("{}/v1/actions/{id}/receipt", d.base), &bot).await;
        assert_eq!(s, 200, "{r}");
        assert_eq!(r["claims"]["outcome"], "cancelled", "{r}");
        cancelled.push(r["claims"]["deciders"].as_array().unwrap().len());
    }
    assert_eq!(cancelled, [0, 1]);
    let human_file = files.path().join("human.jws");
    std::fs::write(&human_file, hr["receipt"].as_str().unwrap()).unwrap();
    assert_eq!(verify(&human_file, &key_file, &["--require-human"]).0, 0);

    // `actiongate receipt key` prints the same key; a restart keeps it.
    let out = Command::new(binary("actiongate"))
        .args(["receipt", "key", "--url", &d.base])
        .env_remove("ACTIONGATE_KEY")
        .output()
        .unwrap();
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed, jwk);
    d.stop();
    let d = Daemon::start(dir.path(), &[]);
    let (_, after) = get(
        &http,
        format!("{}/.well-known/actiongate-receipt-key", d.base),
        &admin,
    )
    .await;
    assert_eq!(after, jwk, "the key survives a restart");
    assert_eq!(verify(&file, &key_file, &[]).0, 0);
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_requiring_a_human_receipt_runs_only_what_a_human_approved() {
    let dir = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "hello\n").unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let auto = agent_key(&http, &d.base, &admin, "auto").await;
    let asks = agent_key(&http, &d.base, &admin, "asks").await;
    set_profile(&http, &d.base, &admin, "auto", json!("open")).await;
    let (_, jwk) = get(
        &http,
        format!("{}/.well-known/actiongate-receipt-key", d.base),
        &admin,
    )
    .await;
    let key_file = files.path().join("key.json");
    std::fs::write(&key_file, jwk.to_string()).unwrap();
    let flag = std::ffi::OsString::from("--require-human-receipt");
    let _executor = start_executor_with(
        root.path(),
        state.path(),
        &d.base,
        &admin,
        false,
        &[flag.as_os_str(), key_file.as_os_str()],
    );
    let read = json!({"handler": "fs", "action": "read_file", "params": {"filepath": "a.txt", "reason": "r"}});

    // Allowed by the policy alone: the executor refuses it.
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions?wait=30", d.base),
        &auto,
        Some(read.clone()),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "failed", "{a}");
    assert_eq!(a["outcome"]["result"]["kind"], "no_human_receipt", "{a}");

    // Approved by a human: it runs.
    let (s, p) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &asks,
        Some(read.clone()),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    assert_eq!(p["status"], "pending", "{p}");
    let id = p["id"].as_str().unwrap().to_owned();
    let (s, b) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions/{id}/approve", d.base),
        &operator,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let (_, done) = get(
        &http,
        format!("{}/v1/actions/{id}?wait=30", d.base),
        &operator,
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    let (_, receipt) = get(
        &http,
        format!("{}/v1/actions/{id}/receipt", d.base),
        &operator,
    )
    .await;

    // Whoever holds the leaked webhook secret signs a delivery: with no
    // receipt, or with the human's receipt but other params, it runs nothing.
    let secret = std::fs::read_to_string(state.path().join("secret")).unwrap();
    let wh = standardwebhooks::Webhook::new(secret.trim()).unwrap();
    let url = format!("http://{}/", {
        let (_, h) = get(&http, format!("{}/v1/handlers/fs", d.base), &admin).await;
        h["url"]
            .as_str()
            .unwrap()
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned()
    });
    let forged_ids = ["01900000-0000-7000-8000-000000000001", id.as_str()];
    for (n, (fid, rec)) in forged_ids
        .iter()
        .zip([Value::Null, receipt["receipt"].clone()])
        .enumerate()
    {
        let body = json!({"type": "action.execute", "action_id": fid, "handler": "fs",
            "action": "write_file", "params": {"filepath": "pwned.txt", "content": "x", "reason": "r"},
            "agent": "asks", "attempt": 9, "receipt": rec,
            "params_key": receipt["params_key"]}).to_string();
        let ts = chrono_now();
        let sig = wh.sign(fid, ts, body.as_bytes()).unwrap();
        let resp = http
            .post(&url)
            .header("webhook-id", *fid)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", sig)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        assert_eq!(status, 422, "forged delivery {n}: {text}");
        assert!(text.contains("no_human_receipt"), "{text}");
    }
    assert!(!root.path().join("pwned.txt").exists());

    // The human's own delivery, replayed by the secret's holder to a
    // replica with no record of running it: refused once the receipt is
    // older than the replica's --receipt-max-age.
    let fresh = tempfile::tempdir().unwrap();
    let mut replica = std::process::Command::new(binary("actiongate-executor"))
        .arg("--root")
        .arg(root.path())
        .arg("--state-dir")
        .arg(fresh.path())
        .args(["--listen", "127.0.0.1:0", "--secret", secret.trim()])
        .arg("--require-human-receipt")
        .arg(&key_file)
        .args(["--receipt-max-age", "1s"])
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(replica.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let _replica = common::executor::Proc(replica);
    let replica_url = line
        .trim()
        .strip_prefix("actiongate-executor listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();
    std::thread::sleep(std::time::Duration::from_secs(2));
    let body = json!({"type": "action.execute", "action_id": id, "handler": "fs",
        "action": "read_file", "params": {"filepath": "a.txt", "reason": "r"},
        "agent": "asks", "attempt": 1, "receipt": receipt["receipt"],
        "params_key": receipt["params_key"]})
    .to_string();
    let ts = chrono_now();
    let sig = wh.sign(&id, ts, body.as_bytes()).unwrap();
    let resp = http
        .post(&replica_url)
        .header("webhook-id", id.as_str())
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", sig)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    assert_eq!(status, 422, "a replayed receipt: {text}");
    assert!(
        text.contains("no_human_receipt") && text.contains("--receipt-max-age"),
        "{text}"
    );
    d.stop();
}

fn chrono_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}
