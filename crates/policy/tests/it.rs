//! Every integration test of this crate in one binary, so the workspace
//! links it once: one module per file beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

mod analyser_prop;
mod decide;
mod engine;
mod expiry;
mod git;
mod grants;
mod hidden;
mod limits;
mod matcher_prop;
mod policy_corpus;
mod protected_files;
mod remember;
mod shell_corpus;
mod zsh_differential;
