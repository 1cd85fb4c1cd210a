//! Runs `check` on one preset and action many times, for instruction counts
//! under `valgrind --tool=callgrind`, which do not move with the load of a
//! shared machine the way wall-clock times do. See the README.
//!
//! `repeat <preset> <file|write|bash|git> <size> <iterations>`

use actiongate_policy::{check, get_preset};
use actiongate_policy_bench::{bash_action, file_action, git_action, write_action};
use std::hint::black_box;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [preset, kind, size, iterations] = args.as_slice() else {
        eprintln!("usage: repeat <preset> <file|write|bash|git> <size> <iterations>");
        std::process::exit(2);
    };
    let profile = get_preset(preset).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let size: usize = size.parse().unwrap_or(50);
    let action = match kind.as_str() {
        "bash" => bash_action(size),
        "write" => write_action(size),
        "git" => git_action(size),
        _ => file_action(size),
    };
    let iterations: u64 = iterations.parse().unwrap_or(1);
    let mut last = None;
    for _ in 0..iterations {
        last = Some(check(black_box(&action), black_box(&profile)));
    }
    println!("{action} -> {last:?}");
}
