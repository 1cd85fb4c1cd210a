//! The workspace's shape, checked: dependencies point inward, the gate
//! knows no HTTP, the client knows no daemon internals, no server module
//! imports another in a circle, and no source file grows past 700 lines
//! before its tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The `[dependencies]` names of a crate's manifest.
fn dependencies(krate: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("crates").join(krate).join("Cargo.toml"))
        .unwrap_or_default();
    let mut deps = BTreeSet::new();
    let mut in_deps = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && let Some((name, _)) = line.split_once(['=', '.']) {
            let name = name.trim();
            if !name.is_empty() && !name.starts_with('#') {
                deps.insert(name.to_owned());
            }
        }
    }
    deps
}

#[test]
fn the_gate_knows_no_http() {
    let deps = dependencies("gate");
    assert!(deps.contains("actiongate-store"), "{deps:?}");
    for http in ["axum", "tower", "tower-http", "hyper", "reqwest"] {
        assert!(!deps.contains(http), "crates/gate depends on {http}");
    }
}

/// The daemon's routes, streams, page, MCP endpoint, connectors and
/// data-dir commands all reach the store through the gate: the server does
/// not depend on the store crate at all.
#[test]
fn the_server_reaches_the_store_only_through_the_gate() {
    let deps = dependencies("server");
    assert!(deps.contains("actiongate-gate"), "{deps:?}");
    assert!(
        !deps.contains("actiongate-store"),
        "crates/server depends on actiongate-store"
    );
    // Nor through a re-export of the whole crate: the gate names the
    // store's types it hands out.
    let mut files = Vec::new();
    rust_files(&root().join("crates/server"), &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains("actiongate_gate::store"),
            "{} reaches the store crate through the gate",
            f.display()
        );
    }
}

#[test]
fn the_client_knows_only_the_api() {
    let deps = dependencies("cli");
    assert!(deps.contains("actiongate-api"), "{deps:?}");
    for inner in [
        "actiongate-store",
        "actiongate-gate",
        "actiongate",
        "actiongate-policy",
    ] {
        assert!(!deps.contains(inner), "crates/cli depends on {inner}");
    }
}

#[test]
fn dependencies_point_inward() {
    let order = ["policy", "store", "gate", "server"];
    let name = |k: &str| match k {
        "server" => "actiongate".to_owned(),
        k => format!("actiongate-{k}"),
    };
    for (i, inner) in order.iter().enumerate() {
        for outer in &order[i + 1..] {
            assert!(
                !dependencies(inner).contains(&name(outer)),
                "crates/{inner} depends on crates/{outer}"
            );
        }
    }
    assert!(
        !dependencies("api")
            .iter()
            .any(|d| d.starts_with("actiongate"))
    );
}

/// `crate::x` modules each top-level server module imports.
fn server_imports() -> BTreeMap<String, BTreeSet<String>> {
    let dir = root().join("crates/server/src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let Some(module) = path.file_stem().and_then(|s| s.to_str()).map(str::to_owned) else {
            continue;
        };
        let text = if path.is_dir() {
            // A module tree: everything under it counts as the module.
            walk(&path)
        } else {
            std::fs::read_to_string(&path).unwrap_or_default()
        };
        let mut uses = BTreeSet::new();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let dep: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !dep.is_empty() && dep != module {
                uses.insert(dep);
            }
        }
        graph.insert(module, uses);
    }
    graph
}

fn walk(dir: &Path) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text.push_str(&walk(&path));
        } else {
            text.push_str(&std::fs::read_to_string(&path).unwrap_or_default());
        }
    }
    text
}

#[test]
fn no_server_module_imports_another_in_a_circle() {
    let graph = server_imports();
    assert!(graph.contains_key("state"), "{graph:?}");
    // Depth-first search for a back edge.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(m) {
            return;
        }
        if let Some(at) = path.iter().position(|p| p == m) {
            panic!("import cycle: {} -> {m}", path[at..].join(" -> "));
        }
        path.push(m.to_owned());
        for dep in graph.get(m).into_iter().flatten() {
            visit(dep, graph, path, done);
        }
        path.pop();
        done.insert(m.to_owned());
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        visit(m, &graph, &mut Vec::new(), &mut done);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_source_file_is_over_700_lines_before_its_tests() {
    let mut files = Vec::new();
    for krate in [
        "policy", "store", "api", "gate", "cli", "server", "executor",
    ] {
        rust_files(&root().join("crates").join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 50, "{}", files.len());
    let mut long = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let before_tests = text
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .count();
        if before_tests > 700 {
            long.push(format!("{} ({before_tests})", f.display()));
        }
    }
    assert!(long.is_empty(), "over 700 lines: {long:?}");
}
