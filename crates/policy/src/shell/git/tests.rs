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

#[test]
fn known_and_running_subcommands_do_not_overlap() {
    for sub in RUNS {
        assert!(!KNOWN.contains(sub), "{sub}");
    }
}

#[test]
fn inert_keys_are_only_the_listed_ones() {
    for key in [
        "user.name",
        "User.Email",
        "color.ui",
        "color.diff",
        "log.date",
    ] {
        assert!(inert_key(key), "{key}");
    }
    for key in [
        "core.pager",
        "core.editor",
        "core.fsmonitor",
        "core.hookspath",
        "core.sshcommand",
        "alias.x",
        "pager.log",
        "include.path",
        "includeif.gitdir:x.path",
        "color.x.y",
        "credential.helper",
        "diff.x.textconv",
        "filter.x.clean",
        "remote.origin.uploadpack",
        "protocol.ext.allow",
        "gpg.program",
        "user",
        "help.autocorrect",
    ] {
        assert!(!inert_key(key), "{key}");
    }
}

#[test]
fn transports_are_recognized() {
    for a in [
        "ext::sh -c id",
        "fd::3",
        "--url=ext::x",
        "foo::bar",
        "x+y::z",
    ] {
        assert!(is_transport(a), "{a}");
    }
    for a in ["origin", "https://h/x", "git@h:x", "a:b", "::x", "HEAD~1"] {
        assert!(!is_transport(a), "{a}");
    }
}

/// `is_transport` as it was first written, with `str` searches.
fn transport_by_str(arg: &str) -> bool {
    let value = arg.split_once('=').map_or(arg, |(_, v)| v);
    value.split_once("::").is_some_and(|(helper, _)| {
        !helper.is_empty()
            && helper
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.' | '+'))
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

    #[test]
    fn transports_by_bytes_agree_with_str_searches(arg in "[a:=!+._é-]{0,10}") {
        proptest::prop_assert_eq!(is_transport(&arg), transport_by_str(&arg), "{:?}", arg);
    }
}
