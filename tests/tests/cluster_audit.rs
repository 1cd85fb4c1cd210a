//! The audit export on Postgres: two daemons sharing the audit key (as the
//! docs/several-daemons.md sets them up) both anchor the one log; `GET /v1/audit` on either
//! and `actiongate audit export --database-url` give the same export, and
//! `audit verify --key` accepts it with every anchor signed.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::daemon::{Daemon, agent_key, request_action, status_json};
use crate::common::pg_cluster::Cluster;
use crate::common::{binary, client};

async fn export(http: &reqwest::Client, base: &str, key: &str) -> String {
    let resp = http
        .get(format!("{base}/v1/audit"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

/// The export of `base` once it holds `n` anchors and the newest event is
/// one (nothing more will be written until new events come).
async fn settled(http: &reqwest::Client, base: &str, key: &str, n: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = export(http, base, key).await;
        let lines: Vec<&str> = text.lines().collect();
        let last_event = lines.len().checked_sub(2).map(|i| lines[i]);
        if text.matches("\"audit.anchor\"").count() >= n
            && last_event.is_some_and(|l| l.contains("\"type\":\"audit.anchor\""))
        {
            return text;
        }
        assert!(Instant::now() < deadline, "fewer than {n} anchors:\n{text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_anchor_one_log_and_its_export_verifies() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let env = [
        ("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str()),
        ("ACTIONGATE_EVENTS__AUDIT_ANCHOR_INTERVAL", "1s"),
    ];
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let a = Daemon::start(dirs[0].path(), &env);
    // docs/several-daemons.md: copy the first daemon's audit key before the others start.
    let key = dirs[0].path().join("audit.key");
    std::fs::copy(&key, dirs[1].path().join("audit.key")).unwrap();
    let b = Daemon::start(dirs[1].path(), &env);
    let http = client();
    let admin = a.admin_key();
    let agent = agent_key(&http, &a.base, &admin, "bot").await;
    for round in 0..2 {
        for (i, base) in [&a.base, &b.base, &a.base].into_iter().enumerate() {
            let detail = format!("round {round} #{i}");
            let (s, _, body) =
                status_json(request_action(&http, base, &agent, "deploy", &detail).await).await;
            assert_eq!(s, 201, "{body}");
        }
        settled(&http, &b.base, &admin, round + 1).await;
    }
    let from_b = settled(&http, &b.base, &admin, 2).await;
    let from_a = export(&http, &a.base, &admin).await;
    assert_eq!(from_a, from_b, "one log, whichever daemon exports it");

    // The command, straight from the database.
    let out = dirs[0].path().join("export.jsonl");
    let done = Command::new(binary("actiongate"))
        .args(["audit", "export", "--database-url", &url, "--data-dir"])
        .arg(dirs[0].path())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), from_a);

    let verified = Command::new(binary("actiongate"))
        .args(["audit", "verify"])
        .arg(&out)
        .arg("--key")
        .arg(&key)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&verified.stdout).into_owned()
        + &String::from_utf8_lossy(&verified.stderr);
    assert!(verified.status.success(), "{said}");
    let anchors = from_a.matches("\"audit.anchor\"").count();
    assert!(
        said.contains(&format!("signed: {anchors} anchors")),
        "{said}"
    );
    // Either node may have written each anchor; two in a row would mean
    // both anchored one point.
    let kinds: Vec<bool> = from_a
        .lines()
        .map(|l| l.contains("\"type\":\"audit.anchor\""))
        .collect();
    assert!(kinds.windows(2).all(|w| !(w[0] && w[1])), "{from_a}");
}
