//! An idle long-poll's memory is mostly its future. The store boxes its
//! Postgres calls (each future several KiB, where SQLite's are a few
//! hundred bytes) and `unless_revoked` boxes the wait once, so the calls
//! that wait for a human hold 1.5-4.5 KiB, not the 9-23 KiB they held
//! before; this keeps them from creeping back.

use std::time::Duration;

use actiongate_api::Role;
use actiongate_gate::caller::Caller;
use actiongate_server::config::Settings;
use serde_json::json;

/// Most bytes a waiting call's future may take.
const MAX_WAITING: usize = 6 * 1024;

#[tokio::test]
async fn the_calls_that_wait_hold_small_futures() {
    let dir = tempfile::tempdir().unwrap();
    let settings = Settings {
        data_dir: dir.path().to_owned(),
        ..Settings::default()
    };
    let gate = actiongate_server::app::open_offline(&settings)
        .await
        .unwrap();
    let agent = Caller {
        key_id: "key_1".to_owned(),
        name: "bot".to_owned(),
        role: Role::Agent,
        agent: Some("bot".to_owned()),
        via: None,
    };
    let wait = Duration::from_secs(1);

    let get = gate.get_action(&agent, "act_1", wait);
    let request = gate.request_action(
        &agent,
        serde_json::from_value(json!({"tool": "bash", "detail": "ls"})).unwrap(),
        wait,
    );
    let grant_request = gate.get_grant_request(&agent, "grq_1", wait);
    for (name, size) in [
        ("get_action", size_of_val(&get)),
        ("request_action", size_of_val(&request)),
        ("get_grant_request", size_of_val(&grant_request)),
    ] {
        assert!(
            size <= MAX_WAITING,
            "{name}'s future is {size} bytes (at most {MAX_WAITING})"
        );
    }
}
