//! git: which global options and subcommand forms keep it read-only.

use super::commands::{long_prefix_of, options, short_option_before_value};
use super::{Collector, Hazard};

/// git: global options, then the read-only forms of the subcommands the
/// read-only preset allows.
pub(super) fn judge(lits: &[&str], c: &mut Collector) {
    let unsafe_option = |c: &mut Collector, option: &str| {
        c.hazard(Hazard::UnsafeOption {
            command: "git".to_owned(),
            option: option.to_owned(),
        });
    };
    let mut i = 0;
    while let Some(a) = lits.get(i) {
        if !a.starts_with('-') {
            break;
        }
        match *a {
            "-C" | "--git-dir" | "--work-tree" | "--namespace" => i += 1,
            "-P"
            | "--no-pager"
            | "--bare"
            | "--no-replace-objects"
            | "--literal-pathspecs"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-optional-locks"
            | "--no-lazy-fetch"
            | "--no-advice"
            | "--version"
            | "-v"
            | "--help"
            | "-h"
            | "--html-path"
            | "--man-path"
            | "--info-path" => {}
            _ if a.starts_with("--git-dir=")
                || a.starts_with("--work-tree=")
                || a.starts_with("--namespace=") => {}
            // `-c`, `--config-env` (set config: pagers, aliases, hooks),
            // `--exec-path`, `-p`/`--paginate` (runs the pager), and any
            // option not known to be harmless.
            _ => unsafe_option(c, a),
        }
        i += 1;
    }
    let Some(sub) = lits.get(i) else {
        return;
    };
    let rest = lits.get(i + 1..).unwrap_or_default();
    match *sub {
        "log" | "show" | "diff" | "whatchanged" => {
            for a in options(rest) {
                if long_prefix_of(a, "output", 2) || long_prefix_of(a, "ext-diff", 3) {
                    unsafe_option(c, a);
                }
            }
        }
        "grep" => {
            for a in options(rest) {
                if long_prefix_of(a, "open-files-in-pager", 2)
                    || short_option_before_value(a, 'O', "ABCefm")
                {
                    unsafe_option(c, a);
                }
            }
        }
        "branch" => {
            if let Some(bad) = git_branch_mutation(rest) {
                unsafe_option(c, &format!("branch {bad}"));
            }
        }
        _ => {}
    }
}

/// The first argument that makes `git branch` do anything but list, or
/// `None` if it only lists. Unknown options count as mutations.
fn git_branch_mutation<'a>(args: &[&'a str]) -> Option<&'a str> {
    const FLAGS: &[&str] = &[
        "-a",
        "--all",
        "-r",
        "--remotes",
        "-l",
        "--list",
        "-v",
        "-vv",
        "--verbose",
        "-i",
        "--ignore-case",
        "--show-current",
        "--color",
        "--no-color",
        "--column",
        "--no-column",
        "--omit-empty",
        "-q",
        "--quiet",
        "--abbrev",
        "--no-abbrev",
    ];
    const VALUE_REQUIRED: &[&str] = &["--sort", "--format", "--points-at"];
    const VALUE_OPTIONAL: &[&str] = &["--contains", "--no-contains", "--merged", "--no-merged"];
    const WITH_EQUALS: &[&str] = &[
        "--color=",
        "--column=",
        "--abbrev=",
        "--sort=",
        "--format=",
        "--points-at=",
        "--contains=",
        "--no-contains=",
        "--merged=",
        "--no-merged=",
    ];
    let mut list_mode = false;
    let mut positional = None;
    let mut i = 0;
    let mut after_dashes = false;
    while let Some(&a) = args.get(i) {
        i += 1;
        if after_dashes || !a.starts_with('-') || a == "-" {
            positional = positional.or(Some(a));
            continue;
        }
        if a == "--" {
            after_dashes = true;
        } else if a == "-l" || a == "--list" {
            list_mode = true;
        } else if FLAGS.contains(&a) || WITH_EQUALS.iter().any(|p| a.starts_with(p)) {
        } else if VALUE_REQUIRED.contains(&a) {
            i += 1;
        } else if VALUE_OPTIONAL.contains(&a) {
            if args.get(i).is_some_and(|next| !next.starts_with('-')) {
                i += 1;
            }
        } else if !a.starts_with("--")
            && a.len() > 1
            && a.chars().skip(1).all(|ch| "arlviq".contains(ch))
        {
            list_mode |= a.contains('l');
        } else {
            return Some(a);
        }
    }
    // Without `--list`, a name creates a branch.
    if list_mode { None } else { positional }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_branch_listing_forms_pass() {
        for args in [
            &[][..],
            &["-a"],
            &["-vv"],
            &["--list", "feat*"],
            &["-l", "x"],
            &["--merged", "main"],
            &["--contains"],
            &["--sort=-committerdate"],
            &["--format", "%(refname)"],
            &["--show-current"],
        ] {
            assert_eq!(git_branch_mutation(args), None, "{args:?}");
        }
    }

    #[test]
    fn git_branch_mutating_forms_are_caught() {
        for args in [
            &["-D", "x"][..],
            &["-d", "x"],
            &["new"],
            &["-m", "a", "b"],
            &["-M", "b"],
            &["-c", "a", "b"],
            &["--set-upstream-to=origin/x"],
            &["-u", "origin/x"],
            &["--unset-upstream"],
            &["-f", "x", "y"],
            &["--edit-description"],
            &["--track", "x", "origin/x"],
            &["-av", "newbranch"],
            &["--merged", "main", "new"],
        ] {
            assert!(git_branch_mutation(args).is_some(), "{args:?}");
        }
    }
}
