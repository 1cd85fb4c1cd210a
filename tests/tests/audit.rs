//! Black-box tests: `actiongate audit verify` is strict. An export of the
//! real daemon verifies (with its key too); each way of tampering with it
//! is refused: an empty file, cut first or last lines, a gap, duplicate
//! keys, a non-canonical line, a fully re-hashed edit (with the key), an
//! event edited in the database, the wrong key.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::common;
use common::daemon::{Daemon, agent_key, request_action, status_json};
use common::{binary, client};

/// `audit verify` on `text` (written to a file) with `args`: success and
/// everything it printed.
pub(crate) fn verify(dir: &Path, text: &str, args: &[&str]) -> (bool, String) {
    let path = dir.join("check.jsonl");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(binary("actiongate"))
        .args(["audit", "verify"])
        .arg(&path)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn join(lines: &[String]) -> String {
    lines.join("\n") + "\n"
}

pub(crate) async fn export(http: &reqwest::Client, base: &str, key: &str) -> String {
    let resp = http
        .get(format!("{base}/v1/audit"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

/// Waits until the log holds `n` anchor events.
async fn anchors(http: &reqwest::Client, base: &str, key: &str, n: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = export(http, base, key).await;
        if text.matches("\"audit.anchor\"").count() >= n {
            return text;
        }
        assert!(Instant::now() < deadline, "no anchor was written:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn chain_hash(prev: &str, content: &Value) -> String {
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(b"\n");
    // serde_json's map is sorted: to_string is the canonical form.
    h.update(serde_json::to_string(content).unwrap().as_bytes());
    hex::encode(h.finalize())
}

/// Recomputes every hash from line `from` (0-based) on, as a forger who
/// changed a line would, including the anchors' stated hashes when
/// `forge_anchors`; the final line follows.
fn rehash(lines: &mut [String], from: usize, forge_anchors: bool) {
    let mut prev: String = if from == 0 {
        "0".repeat(64)
    } else {
        let v: Value = serde_json::from_str(&lines[from - 1]).unwrap();
        v["hash"].as_str().unwrap().to_owned()
    };
    let mut last_seq = 0;
    for line in lines.iter_mut().skip(from) {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v.get("audit").is_some() {
            v["hash"] = Value::String(prev.clone());
            *line = serde_json::to_string(&v).unwrap();
            continue;
        }
        let map = v.as_object_mut().unwrap();
        map.remove("hash");
        map.insert("prev_hash".into(), Value::String(prev.clone()));
        if forge_anchors && map["type"] == "audit.anchor" {
            map.get_mut("data").unwrap()["hash"] = Value::String(prev.clone());
        }
        let mut content = v.clone();
        content.as_object_mut().unwrap().remove("prev_hash");
        let hash = chain_hash(&prev, &content);
        v["hash"] = Value::String(hash.clone());
        last_seq = v["seq"].as_i64().unwrap();
        *line = serde_json::to_string(&v).unwrap();
        prev = hash;
    }
    let _ = last_seq;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strict_verify_refuses_every_tampered_export() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_EVENTS__AUDIT_ANCHOR_INTERVAL", "1s")],
    );
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    for i in 0..4 {
        let (s, _, a) = status_json(
            request_action(&http, &d.base, &agent, "deploy", &format!("one {i}")).await,
        )
        .await;
        assert_eq!(s, 201, "{a}");
    }
    anchors(&http, &d.base, &admin, 1).await;
    for i in 0..3 {
        let (s, _, a) = status_json(
            request_action(&http, &d.base, &agent, "deploy", &format!("two {i}")).await,
        )
        .await;
        assert_eq!(s, 201, "{a}");
    }
    let text = anchors(&http, &d.base, &admin, 2).await;
    let key: PathBuf = dir.path().join("audit.key");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the audit key is for its owner alone");
    }
    let key_arg = key.to_str().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let n = lines.len();
    assert!(
        lines[n - 1].starts_with("{\"audit\":\"end\""),
        "{}",
        lines[n - 1]
    );

    // The export as it is verifies, with and without the key.
    let (ok, out) = verify(w, &text, &[]);
    assert!(ok, "{out}");
    assert!(out.contains("unsigned: 2 anchors"), "{out}");
    let (ok, out) = verify(w, &text, &["--key", key_arg]);
    assert!(ok, "{out}");
    assert!(out.contains("signed: 2 anchors"), "{out}");

    // An empty file.
    let (ok, out) = verify(w, "", &[]);
    assert!(!ok && out.contains("empty"), "{out}");

    // The first line cut: the chain no longer starts at genesis...
    let (ok, out) = verify(w, &join(&lines[1..]), &[]);
    assert!(
        !ok && out.contains("line 1:") && out.contains("genesis"),
        "{out}"
    );
    // ...unless the user passes the anchor a part continues from (a part
    // counts its own events in its final line).
    let first: Value = serde_json::from_str(&lines[0]).unwrap();
    let from = format!("1:{}", first["hash"].as_str().unwrap());
    let mut part = lines[1..].to_vec();
    let last = part.len() - 1;
    part[last] = part[last].replace(
        &format!("\"events\":{}", n - 1),
        &format!("\"events\":{}", n - 2),
    );
    let (ok, out) = verify(w, &join(&part), &["--from-anchor", &from, "--key", key_arg]);
    assert!(ok, "{out}");
    let wrong = format!("1:{}", "ab".repeat(32));
    let (ok, out) = verify(w, &join(&part), &["--anchor", &wrong]);
    assert!(!ok && out.contains("line 1:"), "{out}");

    // The last event cut (the final line kept), or the final line too.
    let mut cut = lines.clone();
    cut.remove(n - 2);
    let (ok, out) = verify(w, &join(&cut), &[]);
    assert!(!ok && out.contains("final anchor"), "{out}");
    let (ok, out) = verify(w, &join(&lines[..n - 2]), &[]);
    assert!(!ok && out.contains("final anchor"), "{out}");

    // A line from the middle removed: the seqs have a gap.
    let mut gap = lines.clone();
    gap.remove(2);
    let (ok, out) = verify(w, &join(&gap), &[]);
    assert!(!ok && out.contains("line 3:"), "{out}");

    // A duplicate key: a reader keeping the first sees another type.
    let mut dup = lines.clone();
    dup[1] = dup[1].replacen('{', "{\"type\":\"action.denied\",", 1);
    let (ok, out) = verify(w, &join(&dup), &[]);
    assert!(
        !ok && out.contains("line 2:") && out.contains("duplicate"),
        "{out}"
    );

    // Not in canonical form (the same content, spaced out).
    let mut spaced = lines.clone();
    spaced[1] = spaced[1].replacen("\":", "\": ", 1);
    let (ok, out) = verify(w, &join(&spaced), &[]);
    assert!(
        !ok && out.contains("line 2:") && out.contains("canonical"),
        "{out}"
    );

    // An edit with every later hash recomputed, anchors left as signed:
    // the first anchor after it names another hash.
    let idx = lines.iter().position(|l| l.contains("one 1")).unwrap();
    let mut edited = lines.clone();
    edited[idx] = edited[idx].replace("one 1", "one X");
    rehash(&mut edited, idx, false);
    let (ok, out) = verify(w, &join(&edited), &[]);
    assert!(!ok && out.contains("anchor signed"), "{out}");
    // The anchors' stated hashes forged too: only the key tells.
    let mut forged = lines.clone();
    forged[idx] = forged[idx].replace("one 1", "one X");
    rehash(&mut forged, idx, true);
    let (ok, out) = verify(w, &join(&forged), &[]);
    assert!(
        ok,
        "without the key a full re-hash passes (docs/audit.md): {out}"
    );
    let (ok, out) = verify(w, &join(&forged), &["--key", key_arg]);
    assert!(!ok && out.contains("signature"), "{out}");

    // Another key.
    let other = w.join("other.key");
    std::fs::write(&other, "cd".repeat(32)).unwrap();
    let (ok, out) = verify(w, &text, &["--key", other.to_str().unwrap()]);
    assert!(!ok && out.contains("signature"), "{out}");

    // An event changed in the database itself: the export recomputes the
    // chain from what is stored, and the anchor written before the change
    // no longer matches it.
    let db = rusqlite::Connection::open(d.database()).unwrap();
    let seq: i64 = serde_json::from_str::<Value>(&lines[idx]).unwrap()["seq"]
        .as_i64()
        .unwrap();
    let changed = db
        .execute(
            "UPDATE events SET data = replace(data, 'one 1', 'one Y') WHERE seq = ?1",
            [seq],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(db);
    let after = export(&http, &d.base, &admin).await;
    assert!(after.contains("one Y"));
    let (ok, out) = verify(w, &after, &[]);
    assert!(!ok && out.contains("anchor signed"), "{out}");
    d.stop();
}
