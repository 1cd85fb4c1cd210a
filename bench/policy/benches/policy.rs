//! `check` on its own: every preset on short and long actions, a
//! 200-pattern profile, and shell pipelines.

use actiongate_policy::{Verdict, check, get_preset, preset_names};
use actiongate_policy_bench::{
    SIZES, bash_action, file_action, git_action, pipelines, svc_profile, svc_requests,
    write_action,
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::hint::black_box;

/// Every preset × action size, for a file view (one regex pass), a file
/// write (`standard` looks for protected paths), a shell action (parsed,
/// then judged per simple command) and a git action (read as git's
/// argument list).
fn check_presets(c: &mut Criterion) {
    let mut group = c.benchmark_group("check_presets");
    for name in preset_names() {
        let profile = get_preset(name).expect("preset exists");
        for size in SIZES {
            for (kind, action) in [
                ("file", file_action(size)),
                ("write", write_action(size)),
                ("bash", bash_action(size)),
                ("git", git_action(size)),
            ] {
                group.bench_with_input(
                    BenchmarkId::new(format!("{name}/{kind}"), size),
                    &action,
                    |b, action| b.iter(|| check(black_box(action), black_box(&profile))),
                );
            }
        }
    }
    group.finish();
}

/// The allow list `tool:svc000:op.*` … `tool:svc199:op.*`.
fn check_200_patterns(c: &mut Criterion) {
    let profile = svc_profile().expect("svc patterns compile");
    let mut group = c.benchmark_group("check_200_patterns");
    for (name, action) in svc_requests() {
        let expected = if name == "miss" {
            Verdict::Deny
        } else {
            Verdict::Allow
        };
        assert_eq!(check(&action, &profile), expected, "{name}");
        group.bench_with_input(BenchmarkId::from_parameter(name), &action, |b, action| {
            b.iter(|| check(black_box(action), black_box(&profile)))
        });
    }
    group.finish();
}

/// Five-command pipelines under `readonly`.
fn check_shell_pipeline(c: &mut Criterion) {
    let profile = get_preset("readonly").expect("preset exists");
    let mut group = c.benchmark_group("check_shell_pipeline");
    for (name, action, expected) in pipelines() {
        assert_eq!(check(action, &profile), expected, "{name}");
        group.bench_with_input(BenchmarkId::from_parameter(name), action, |b, action| {
            b.iter(|| check(black_box(action), black_box(&profile)))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    check_presets,
    check_200_patterns,
    check_shell_pipeline
);
criterion_main!(benches);
