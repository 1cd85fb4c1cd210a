//! Black-box test, both sides real processes: an `update_file` approved
//! through the daemon and run by the reference executor does not leave a
//! setuid or setgid file behind (neither the new file nor its backup), so
//! an agent that may update a file cannot keep its privilege bits on
//! content it chose.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use crate::common;
use common::daemon::{Daemon, agent_key, set_profile};
use common::executor::start_executor;
use common::{call, client};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_file_through_the_daemon_drops_setuid_and_setgid_bits() {
    let dir = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("bin")).unwrap();
    let tool = root.path().join("bin/tool");
    std::fs::write(&tool, "#!/bin/sh\necho one\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o6755)).unwrap();
    assert_eq!(
        std::fs::metadata(&tool).unwrap().permissions().mode() & 0o7777,
        0o6755
    );

    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    let _executor = start_executor(root.path(), state.path(), &d.base, &admin, false);

    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions?wait=30", d.base),
        &agent,
        Some(json!({"handler": "fs", "action": "update_file", "params": {
            "filepath": "bin/tool", "content": "#!/bin/sh\necho two\n", "reason": "r"}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "completed", "{a}");
    assert_eq!(
        std::fs::read_to_string(&tool).unwrap(),
        "#!/bin/sh\necho two\n"
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&tool), 0o755, "the new file");
    assert_eq!(mode(&root.path().join("bin/tool.bak")), 0o755, "its backup");
    d.stop();
}
