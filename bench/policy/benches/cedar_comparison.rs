//! actiongate against cedar-policy on the same rules and requests, in the
//! same run. Each request's answer is checked to be the same in both
//! engines before anything is timed.

use actiongate_policy::{Verdict, check, get_preset};
use actiongate_policy_bench::{
    standard_cedar, standard_requests, svc_cedar, svc_profile, svc_requests,
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::hint::black_box;

/// For each request: actiongate's `check`, Cedar with the request built
/// beforehand (its cheapest form), and Cedar building the request from the
/// action string as a caller would.
fn cedar_comparison(c: &mut Criterion) {
    let mut group = c.benchmark_group("cedar_comparison");

    let standard = get_preset("standard").expect("preset exists");
    let cedar = standard_cedar().expect("cedar standard compiles");
    for (name, action, expected) in standard_requests() {
        let request = cedar.request(action).expect("request builds");
        assert_eq!(check(action, &standard), expected, "actiongate {name}");
        assert_eq!(cedar.check_request(&request), expected, "cedar {name}");
        let id = format!("standard/{name}");
        group.bench_function(BenchmarkId::new("actiongate", &id), |b| {
            b.iter(|| check(black_box(action), black_box(&standard)))
        });
        group.bench_function(BenchmarkId::new("cedar", &id), |b| {
            b.iter(|| cedar.check_request(black_box(&request)))
        });
        group.bench_function(BenchmarkId::new("cedar_with_request", &id), |b| {
            b.iter(|| cedar.check(black_box(action)))
        });
    }

    let svc = svc_profile().expect("svc patterns compile");
    let cedar = svc_cedar().expect("cedar svc compiles");
    for (name, action) in svc_requests() {
        let expected = if name == "miss" {
            Verdict::Deny
        } else {
            Verdict::Allow
        };
        let request = cedar.request(&action).expect("request builds");
        assert_eq!(check(&action, &svc), expected, "actiongate {name}");
        assert_eq!(cedar.check_request(&request), expected, "cedar {name}");
        let id = format!("200_patterns/{name}");
        group.bench_function(BenchmarkId::new("actiongate", &id), |b| {
            b.iter(|| check(black_box(&action), black_box(&svc)))
        });
        group.bench_function(BenchmarkId::new("cedar", &id), |b| {
            b.iter(|| cedar.check_request(black_box(&request)))
        });
        group.bench_function(BenchmarkId::new("cedar_with_request", &id), |b| {
            b.iter(|| cedar.check(black_box(&action)))
        });
    }
    group.finish();
}

criterion_group!(benches, cedar_comparison);
criterion_main!(benches);
