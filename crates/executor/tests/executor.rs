//! The executor binary over real HTTP: actions on disk, confinement,
//! signatures, deduplication across kill -9, the journal, async results.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use std::fs;
use std::time::{Duration, Instant};

use common::{Exec, new_id};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn lines(path: &std::path::Path) -> usize {
    fs::read_to_string(path).unwrap_or_default().lines().count()
}

#[tokio::test]
async fn file_actions_work_on_disk_atomically_with_a_backup_and_a_readme_log() {
    let ex = Exec::start().await;
    let (s, body) = ex
        .run(
            "create_file",
            json!({"filepath": "src/app.py", "content": "print(1)\n", "reason": "start"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["path"], "src/app.py");
    assert_eq!(
        fs::read_to_string(ex.path("src/app.py")).unwrap(),
        "print(1)\n"
    );

    let (s, body) = ex
        .run(
            "create_file",
            json!({"filepath": "src/app.py", "content": "clobber", "reason": "again"}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["kind"], "exists");
    assert_eq!(
        fs::read_to_string(ex.path("src/app.py")).unwrap(),
        "print(1)\n"
    );

    let (s, body) = ex
        .run(
            "update_file",
            json!({"filepath": "src/app.py", "content": "print(2)\n", "reason": "fix"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["backup"], "src/app.py.bak");
    assert_eq!(
        fs::read_to_string(ex.path("src/app.py")).unwrap(),
        "print(2)\n"
    );
    assert_eq!(
        fs::read_to_string(ex.path("src/app.py.bak")).unwrap(),
        "print(1)\n"
    );
    // Atomic writes leave no temporary files behind.
    let mut names: Vec<String> = fs::read_dir(ex.path("src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["app.py", "app.py.bak"]);

    let (s, body) = ex
        .run(
            "read_file",
            json!({"filepath": "src/app.py", "reason": "look"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body["content"], "print(2)\n");
    assert_eq!(body["truncated"], false);

    fs::write(ex.path("README.md"), "# Project\n\nAbout it.\n").unwrap();
    for reason in ["added app.py", "fixed\nthe print"] {
        let (s, body) = ex.run("update_readme", json!({"reason": reason})).await;
        assert_eq!(s, StatusCode::OK, "{body}");
    }
    let readme = fs::read_to_string(ex.path("README.md")).unwrap();
    assert!(readme.starts_with("# Project\n\nAbout it.\n\n## Auto-update log\n\n- "));
    let entries: Vec<&str> = readme.lines().filter(|l| l.starts_with("- ")).collect();
    assert_eq!(entries.len(), 2, "{readme}");
    assert!(entries[0].ends_with(": added app.py"));
    assert!(entries[1].ends_with(": fixed the print"));
    let (s, _) = ex
        .run(
            "update_readme",
            json!({"reason": "docs", "filepath": "docs/README.md"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        fs::read_to_string(ex.path("docs/README.md"))
            .unwrap()
            .contains("## Auto-update log")
    );
}

#[tokio::test]
async fn update_file_drops_setuid_and_setgid_bits_of_the_file_and_its_backup() {
    use std::os::unix::fs::PermissionsExt;
    let ex = Exec::start().await;
    fs::create_dir_all(ex.path("bin")).unwrap();
    fs::write(ex.path("bin/tool"), "#!/bin/sh\necho one\n").unwrap();
    fs::set_permissions(ex.path("bin/tool"), fs::Permissions::from_mode(0o6755)).unwrap();
    let (s, body) = ex
        .run(
            "update_file",
            json!({"filepath": "bin/tool", "content": "#!/bin/sh\necho two\n", "reason": "r"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let mode = |p: &str| fs::metadata(ex.path(p)).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode("bin/tool"), 0o755);
    assert_eq!(mode("bin/tool.bak"), 0o755);
    assert_eq!(
        fs::read_to_string(ex.path("bin/tool")).unwrap(),
        "#!/bin/sh\necho two\n"
    );
}

#[tokio::test]
async fn commands_capture_output_and_exit_codes_in_the_root_without_the_executor_secrets() {
    let ex = Exec::start().await;
    let (s, body) = ex
        .run(
            "execute_command",
            json!({"content": "echo out; echo err >&2; pwd; echo \"[${ACTIONGATE_KEY:-}]\"", "reason": "look"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["exit_code"], 0);
    let root = fs::canonicalize(ex.root.path()).unwrap();
    assert_eq!(
        body["stdout"],
        format!("out\n{}\n[]\n", root.display()),
        "commands run in the root and never see the admin key"
    );
    assert_eq!(body["stderr"], "err\n");
    assert_eq!(body["truncated"], false);

    let (s, body) = ex
        .run(
            "execute_command",
            json!({"content": "echo partial; exit 3", "filepath": "bash", "reason": "fail"}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["kind"], "command_failed");
    assert_eq!(body["exit_code"], 3);
    assert_eq!(body["stdout"], "partial\n");
    assert_eq!(body["shell"], "bash");

    let (s, body) = ex
        .run(
            "execute_command",
            json!({"content": "head -c 200000 /dev/zero | tr '\\0' x", "reason": "big"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body["stdout"].as_str().unwrap().len(), 64 * 1024);
    assert_eq!(body["stdout_truncated"], true);
    assert_eq!(body["truncated"], true);

    let (s, body) = ex
        .run(
            "execute_command",
            json!({"content": "true", "filepath": "zsh", "reason": "x"}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["kind"], "invalid_params");
}

fn alive(pid: &str) -> bool {
    // A zombie (no init reaping it in a container) counts as dead.
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[tokio::test]
async fn the_timeout_kills_a_sleep_60_and_its_process() {
    let ex = Exec::start_with(&["--command-timeout", "1s"]).await;
    let t = Instant::now();
    let (s, body) = ex
        .run(
            "execute_command",
            json!({"content": "echo started; sh -c 'echo $$ > sleeper.pid; exec sleep 60'", "reason": "slow"}),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["kind"], "timed_out");
    assert_eq!(body["timed_out"], true);
    assert_eq!(body["stdout"], "started\n");
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    let pid = fs::read_to_string(ex.path("sleeper.pid")).unwrap();
    let pid = pid.trim();
    let mut gone = false;
    for _ in 0..40 {
        if !alive(pid) {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "sleep 60 (pid {pid}) survived the timeout");
}

#[tokio::test]
async fn path_escapes_are_refused_and_nothing_outside_is_touched() {
    let ex = Exec::start().await;
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("target.txt"), "original").unwrap();
    std::os::unix::fs::symlink(outside.path(), ex.path("out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("target.txt"), ex.path("link.txt")).unwrap();
    let abs_outside = outside.path().join("abs.txt").display().to_string();
    // Beside the root (a temporary dir), under a name nothing else uses.
    let escaped = format!(
        "{}-escaped",
        ex.root.path().file_name().unwrap().to_string_lossy()
    );
    let (up, up_again) = (format!("../{escaped}"), format!("a/../../{escaped}"));
    let cases = [
        ("create_file", up.as_str()),
        ("create_file", up_again.as_str()),
        ("create_file", abs_outside.as_str()),
        ("create_file", "out/new.txt"),
        ("update_file", "link.txt"),
        ("update_file", "out/target.txt"),
        ("read_file", "/etc/passwd"),
        ("read_file", "link.txt"),
        ("read_file", "../../../../etc/passwd"),
        ("update_readme", "../README.md"),
    ];
    for (action, filepath) in cases {
        let params = match action {
            "read_file" => json!({"filepath": filepath, "reason": "try"}),
            "update_readme" => json!({"filepath": filepath, "reason": "try"}),
            _ => json!({"filepath": filepath, "content": "pwned", "reason": "try"}),
        };
        let (s, body) = ex.run(action, params).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{action} {filepath}");
        assert_eq!(body["kind"], "path_refused", "{action} {filepath}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(filepath),
            "the error names the path: {body}"
        );
        assert!(body.get("content").is_none());
    }
    assert_eq!(
        fs::read_to_string(outside.path().join("target.txt")).unwrap(),
        "original"
    );
    let mut left: Vec<String> = fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["target.txt"]);
    assert!(!ex.root.path().parent().unwrap().join(&escaped).exists());
    assert!(!ex.path("a").exists(), "a refused path created a directory");
    // An absolute path inside the root is fine.
    let inside = ex.path("ok.txt").display().to_string();
    let (s, _) = ex
        .run(
            "create_file",
            json!({"filepath": inside, "content": "fine", "reason": "ok"}),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn forged_and_stale_signatures_get_401_and_nothing_runs() {
    let ex = Exec::start().await;
    let id = new_id();
    let body = Exec::envelope(
        &id,
        "create_file",
        json!({"filepath": "forged.txt", "content": "x", "reason": "r"}),
        1,
    );
    let bytes = serde_json::to_vec(&body).unwrap();

    let other = actiongate_executor::signing::Signer::new(
        "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    )
    .unwrap();
    let forged = other.headers(&id, &bytes).unwrap();
    let (s, _) = ex.post_raw(&bytes, &forged).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    let mut tampered = ex.signer.headers(&id, b"{}").unwrap().to_vec();
    let (s, _) = ex.post_raw(&bytes, &tampered).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "signature of another body");
    tampered[0].1 = "act_other".into();
    let (s, _) = ex.post_raw(&bytes, &tampered).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    let (s, _) = ex.post_raw(&bytes, &[]).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "no signature at all");

    // Correctly signed, but ten minutes old.
    let stale_ts = chrono::Utc::now().timestamp() - 600;
    let raw = standardwebhooks::Webhook::new(common::SECRET).unwrap();
    let stale = [
        ("webhook-id", id.clone()),
        ("webhook-timestamp", stale_ts.to_string()),
        (
            "webhook-signature",
            raw.sign(&id, stale_ts, &bytes).unwrap(),
        ),
    ];
    let (s, _) = ex.post_raw(&bytes, &stale).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);

    assert!(!ex.path("forged.txt").exists());
    assert!(ex.journal().is_empty(), "{:?}", ex.journal());

    // A refused delivery does not use up the id: the genuine one runs.
    let (s, _) = ex.deliver_body(&id, &body).await;
    assert_eq!(s, StatusCode::OK);
    assert!(ex.path("forged.txt").exists());
}

#[tokio::test]
async fn a_replayed_webhook_id_gets_the_first_outcome_and_runs_once() {
    let ex = Exec::start().await;
    let id = new_id();
    let params = json!({"content": "echo x >> count.txt; wc -l < count.txt", "reason": "count"});
    let first = ex
        .deliver_attempt(&id, "execute_command", params.clone(), 1)
        .await;
    assert_eq!(first.0, StatusCode::OK, "{}", first.1);
    for attempt in [1, 2, 3] {
        let again = ex
            .deliver_attempt(&id, "execute_command", params.clone(), attempt)
            .await;
        assert_eq!(again, first, "attempt {attempt}");
    }
    assert_eq!(lines(&ex.path("count.txt")), 1);

    // A failure is remembered the same way.
    let id = new_id();
    let params = json!({"content": "echo y >> fail.txt; exit 7", "reason": "fail"});
    let first = ex
        .deliver_attempt(&id, "execute_command", params.clone(), 1)
        .await;
    assert_eq!(first.0, StatusCode::UNPROCESSABLE_ENTITY);
    let again = ex.deliver_attempt(&id, "execute_command", params, 2).await;
    assert_eq!(again, first);
    assert_eq!(lines(&ex.path("fail.txt")), 1);
    assert_eq!(ex.journal().len(), 2, "a replay is not a new action");
}

#[tokio::test]
async fn a_redelivery_while_running_is_told_to_retry_and_never_runs_twice() {
    let ex = Exec::start().await;
    let id = new_id();
    let params = json!({"content": "echo x >> once.txt; sleep 2", "reason": "slow"});
    let body = Exec::envelope(&id, "execute_command", params, 1);
    let first = {
        let (url, client, signer, body, id) = (
            ex.url.clone(),
            ex.client.clone(),
            ex.signer.clone(),
            serde_json::to_vec(&body).unwrap(),
            id.clone(),
        );
        tokio::spawn(async move {
            let mut req = client.post(url).body(body.clone());
            for (k, v) in signer.headers(&id, &body).unwrap() {
                req = req.header(k, v);
            }
            req.send().await.unwrap().status()
        })
    };
    while !ex.path("once.txt").exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let resp = {
        let bytes = serde_json::to_vec(&body).unwrap();
        let mut req = ex.client.post(&ex.url).body(bytes.clone());
        for (k, v) in ex.signer.headers(&id, &bytes).unwrap() {
            req = req.header(k, v);
        }
        req.send().await.unwrap()
    };
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(resp.headers().get("retry-after").is_some());
    assert_eq!(first.await.unwrap(), StatusCode::OK);
    let (s, _) = ex.deliver_body(&id, &body).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(lines(&ex.path("once.txt")), 1);
}

#[tokio::test]
async fn a_delivery_whose_caller_hangs_up_still_finishes_and_its_redelivery_gets_the_outcome() {
    let ex = Exec::start().await;
    let id = new_id();
    let params = json!({"content": "sleep 1; echo x >> once.txt", "reason": "slow"});
    let body = Exec::envelope(&id, "execute_command", params, 1);
    let bytes = serde_json::to_vec(&body).unwrap();
    // The daemon gives up (or dies) while the command runs: the connection
    // closes under the executor's handler.
    let mut req = ex
        .client
        .post(&ex.url)
        .timeout(Duration::from_millis(300))
        .body(bytes.clone());
    for (k, v) in ex.signer.headers(&id, &bytes).unwrap() {
        req = req.header(k, v);
    }
    assert!(req.send().await.unwrap_err().is_timeout());
    // It ran to the end anyway, once; the redelivery gets its outcome
    // rather than "still running" for ever.
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let (s, out) = loop {
        let (s, out) = ex.deliver_body(&id, &body).await;
        if s != StatusCode::SERVICE_UNAVAILABLE || std::time::Instant::now() > until {
            break (s, out);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(s, StatusCode::OK, "{out}");
    assert_eq!(lines(&ex.path("once.txt")), 1);
    assert_eq!(ex.journal().len(), 1);
}

#[tokio::test]
async fn kill_9_loses_no_outcome_and_an_interrupted_action_is_not_rerun() {
    let ex = Exec::start().await;
    let done_id = new_id();
    let done_params = json!({"content": "echo x >> done.txt; echo ran", "reason": "append"});
    let first = ex
        .deliver_attempt(&done_id, "execute_command", done_params.clone(), 1)
        .await;
    assert_eq!(first.0, StatusCode::OK);

    // Another one is mid-run when the executor dies.
    let cut_id = new_id();
    let cut_body = Exec::envelope(
        &cut_id,
        "execute_command",
        json!({"content": "echo y >> cut.txt; sleep 5", "reason": "slow"}),
        1,
    );
    let pending = {
        let (url, signer, body, id) = (
            ex.url.clone(),
            ex.signer.clone(),
            serde_json::to_vec(&cut_body).unwrap(),
            cut_id.clone(),
        );
        tokio::spawn(async move {
            let mut req = {
                actiongate_executor::install_tls_provider();
                reqwest::Client::new()
            }
            .post(url)
            .body(body.clone());
            for (k, v) in signer.headers(&id, &body).unwrap() {
                req = req.header(k, v);
            }
            req.send().await.is_err()
        })
    };
    while !ex.path("cut.txt").exists() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let ex = ex.kill9_and_restart().await;
    assert!(pending.await.unwrap(), "the cut request should have failed");

    let again = ex
        .deliver_attempt(&done_id, "execute_command", done_params, 2)
        .await;
    assert_eq!(again, first, "the first outcome survives kill -9");
    assert_eq!(lines(&ex.path("done.txt")), 1);

    let mut redelivery = cut_body.clone();
    redelivery["attempt"] = json!(2);
    let (s, body) = ex.deliver_body(&cut_id, &redelivery).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["kind"], "interrupted");
    assert!(body["error"].as_str().unwrap().contains("not re-run"));
    assert_eq!(
        lines(&ex.path("cut.txt")),
        1,
        "an interrupted action re-ran"
    );
    // And that answer is itself final.
    let (s2, body2) = ex.deliver_body(&cut_id, &redelivery).await;
    assert_eq!((s2, body2), (s, body));
    let last = ex.journal().last().cloned().unwrap();
    assert_eq!(last["action_id"], cut_id.as_str());
    assert_eq!(last["status"], "error");
    assert_eq!(last["attempt"], 2);
}

#[tokio::test]
async fn the_journal_has_the_seed_fields_and_a_failure_does_not_stop_the_next() {
    let ex = Exec::start().await;
    let runs: Vec<(&str, Value, StatusCode)> = vec![
        (
            "create_file",
            json!({"filepath": "../escape.txt", "content": "x", "reason": "bad"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "create_file",
            json!({"filepath": "good.txt", "content": "x", "reason": "good"}),
            StatusCode::OK,
        ),
        (
            "execute_command",
            json!({"content": "exit 1", "reason": "fails"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "read_file",
            json!({"filepath": "good.txt", "reason": "check", "extra": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "delete_everything",
            json!({"reason": "no"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "read_file",
            json!({"filepath": "good.txt", "reason": "check"}),
            StatusCode::OK,
        ),
    ];
    for (action, params, want) in &runs {
        let (s, body) = ex.run(action, params.clone()).await;
        assert_eq!(s, *want, "{action}: {body}");
    }
    let journal = ex.journal();
    assert_eq!(journal.len(), runs.len());
    let statuses: Vec<&str> = journal
        .iter()
        .map(|e| e["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["failed", "success", "failed", "failed", "failed", "success"]
    );
    for (entry, (action, params, _)) in journal.iter().zip(&runs) {
        assert!(entry["timestamp"].is_i64(), "{entry}");
        assert_eq!(entry["action_type"], *action);
        assert_eq!(
            entry["filepath"],
            params.get("filepath").cloned().unwrap_or(Value::Null)
        );
        assert_eq!(entry["reason"], params["reason"]);
        assert!(!entry["details"].as_str().unwrap().is_empty());
        assert!(entry["action_id"].as_str().unwrap().starts_with("act_"));
        assert_eq!(entry["attempt"], 1);
        assert_eq!(entry["agent"], "agent-1");
    }
    assert!(journal[0]["details"].as_str().unwrap().contains(".."));
    assert_eq!(journal[1]["details"], "created good.txt (1 bytes)");
}

#[tokio::test]
async fn deliveries_for_another_handler_or_past_their_deadline_do_not_run() {
    let ex = Exec::start().await;
    let id = new_id();
    let mut body = Exec::envelope(
        &id,
        "create_file",
        json!({"filepath": "late.txt", "content": "x", "reason": "r"}),
        1,
    );
    body["deadline"] = json!("2001-01-01T00:00:00Z");
    let (s, resp) = ex.deliver_body(&id, &body).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(resp["kind"], "deadline_passed");

    let id = new_id();
    let mut body = Exec::envelope(
        &id,
        "create_file",
        json!({"filepath": "other.txt", "content": "x", "reason": "r"}),
        1,
    );
    body["handler"] = json!("mail");
    let (s, resp) = ex.deliver_body(&id, &body).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(resp["kind"], "bad_delivery");
    assert!(!ex.path("late.txt").exists() && !ex.path("other.txt").exists());
}

#[tokio::test]
async fn a_state_dir_inside_the_root_is_refused_at_start() {
    let root = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(common::bin())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--secret",
            common::SECRET,
            "--root",
        ])
        .arg(root.path())
        .arg("--state-dir")
        .arg(root.path().join(".state"))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("inside --root"), "{err}");
}

mod async_mode {
    use super::*;
    use axum::body::Bytes;
    use axum::http::HeaderMap;
    use std::sync::{Arc, Mutex};

    type Seen = Arc<Mutex<Vec<(String, HeaderMap, Bytes)>>>;

    /// A stand-in for the daemon's result endpoint: the first try gets 503.
    async fn receiver() -> (String, Seen) {
        let seen: Seen = Arc::default();
        let app = axum::Router::new().fallback({
            let seen = seen.clone();
            move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
                let seen = seen.clone();
                async move {
                    let mut s = seen.lock().unwrap();
                    s.push((uri.path().to_owned(), headers, body));
                    if s.len() == 1 {
                        StatusCode::SERVICE_UNAVAILABLE
                    } else {
                        StatusCode::OK
                    }
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (url, seen)
    }

    #[tokio::test]
    async fn answers_202_then_posts_a_signed_result_and_retries_on_503() {
        let (daemon, seen) = receiver().await;
        let ex = Exec::start_with(&["--async", "--daemon-url", &daemon]).await;
        let id = new_id();
        let params = json!({"content": "echo x >> a.txt; echo hi", "reason": "r"});
        let (s, _) = ex
            .deliver_attempt(&id, "execute_command", params.clone(), 3)
            .await;
        assert_eq!(s, StatusCode::ACCEPTED);
        let deadline = Instant::now() + Duration::from_secs(20);
        while seen.lock().unwrap().len() < 2 {
            assert!(Instant::now() < deadline, "no result posted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (path, headers, body) = seen.lock().unwrap()[1].clone();
        assert_eq!(path, format!("/v1/actions/{id}/result"));
        assert_eq!(headers["webhook-id"], format!("res_{id}_3").as_str());
        ex.signer.verify(&body, &headers).unwrap();
        let result: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(result["status"], "completed");
        assert_eq!(result["attempt"], 3);
        assert_eq!(result["result"]["stdout"], "hi\n");

        // A redelivery after the fact gets the outcome at once, and nothing re-runs.
        let (s, again) = ex.deliver_attempt(&id, "execute_command", params, 4).await;
        assert_eq!(s, StatusCode::OK);
        assert_eq!(again, result["result"]);
        assert_eq!(lines(&ex.path("a.txt")), 1);
    }
}
