//! `actiongate receipt key` prints the daemon's receipt key (a JWK);
//! `actiongate receipt verify FILE` checks a receipt offline against a key
//! file (`--jwk`), or against the daemon's key when none is given.
//!
//! Exit codes of `verify`: 0 the receipt is valid (and, with
//! `--require-human`, a human allowed it); 1 it does not verify (altered,
//! another key, not a receipt) or a human did not allow it; 2 a file cannot
//! be read or the key is not an Ed25519 JWK; 5 and 6 as for every command
//! when the daemon's key was to be fetched.

use std::path::PathBuf;

use actiongate_receipt::ReceiptVerifier;
use clap::{Args, Subcommand};
use serde_json::Value;

use super::http::{Api, ClientError, report};
use super::output::one_line;
use super::{Common, Exit};

/// `receipt` subcommands.
#[derive(Debug, Subcommand)]
pub enum ReceiptCommand {
    /// Print the daemon's public receipt key (a JWK; no key needed).
    Key(KeyArgs),
    /// Check a signed decision receipt offline.
    Verify(VerifyArgs),
}

/// Flags of `receipt key`.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// Connection.
    #[command(flatten)]
    pub common: Common,
}

/// Flags of `receipt verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Connection (used only without `--jwk`).
    #[command(flatten)]
    pub common: Common,
    /// The receipt: the compact JWS, or the JSON of
    /// `GET /v1/actions/{id}/receipt` (its `receipt` field); `-` for stdin.
    pub file: PathBuf,
    /// The receipt key (a JWK file, as `receipt key` prints it); without it the
    /// daemon's key is fetched.
    #[arg(long, value_name = "JWK_FILE")]
    pub jwk: Option<PathBuf>,
    /// Also fail (exit 1) unless a human allowed the action.
    #[arg(long)]
    pub require_human: bool,
}

/// The line `receipt verify` prints for a valid receipt. Every value is
/// shown on one line with hidden characters named: the action string is
/// the agent's, and a carriage return or an escape sequence in it must
/// not overwrite "denied" with "allowed" on the auditor's terminal.
fn summary(claims: &actiongate_receipt::ReceiptClaims) -> String {
    let who: Vec<&str> = claims.deciders.iter().map(|d| d.id.as_str()).collect();
    let who = if who.is_empty() {
        claims.decided_by.clone().unwrap_or_else(|| "-".into())
    } else {
        who.join(", ")
    };
    format!(
        "valid: {} {} {} by {} at {}",
        one_line(&claims.action_id),
        one_line(&claims.outcome),
        one_line(&claims.action_string),
        one_line(&who),
        one_line(claims.decided_at.as_deref().unwrap_or("-")),
    )
}

/// What `receipt verify` says of a receipt it refuses: the error may
/// quote the receipt's own fields (its key id), shown on one line.
fn refusal(e: &impl std::fmt::Display) -> String {
    format!("actiongate: {}", one_line(&e.to_string()))
}

/// Runs a `receipt` subcommand.
pub async fn run(cmd: ReceiptCommand) -> Exit {
    match cmd {
        ReceiptCommand::Key(a) => match fetch_key(&a.common).await {
            Ok(jwk) => {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&jwk).unwrap_or_else(|_| jwk.to_string())
                );
                Exit::Ok
            }
            Err(e) => report(&e),
        },
        ReceiptCommand::Verify(a) => verify(a).await,
    }
}

async fn fetch_key(common: &Common) -> Result<Value, ClientError> {
    Api::new(&common.conn)?
        .get("/.well-known/actiongate-receipt-key")
        .await
}

fn read(path: &PathBuf) -> Result<String, ClientError> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| ClientError::Usage(format!("cannot read stdin: {e}")))?;
        return Ok(s);
    }
    std::fs::read_to_string(path)
        .map_err(|e| ClientError::Usage(format!("cannot read {}: {e}", path.display())))
}

/// The compact JWS in `text`: the text itself, or the `receipt` field of
/// a JSON object.
fn receipt_text(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => o
            .get("receipt")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => text.trim().to_owned(),
    }
}

async fn verify(a: VerifyArgs) -> Exit {
    let loaded = async {
        let receipt = receipt_text(&read(&a.file)?);
        let jwk = match &a.jwk {
            Some(path) => serde_json::from_str::<Value>(&read(path)?)
                .map_err(|e| ClientError::Usage(format!("{} is not JSON: {e}", path.display())))?,
            None => fetch_key(&a.common).await?,
        };
        let verifier =
            ReceiptVerifier::from_jwk(&jwk).map_err(|e| ClientError::Usage(e.to_string()))?;
        Ok::<_, ClientError>((receipt, verifier))
    };
    let (receipt, verifier) = match loaded.await {
        Ok(x) => x,
        Err(e) => return report(&e),
    };
    match verifier.verify(&receipt) {
        Ok(claims) => {
            // Refused: nothing on stdout a script could read as "valid".
            if a.require_human && !claims.human_allowed() {
                eprintln!(
                    "actiongate: the signature is valid, but no human allowed this action ({} by {})",
                    one_line(&claims.outcome),
                    one_line(claims.decided_by.as_deref().unwrap_or("-"))
                );
                return Exit::Denied;
            }
            if a.common.json {
                println!("{}", serde_json::to_value(&claims).unwrap_or_default());
            } else {
                println!("{}", summary(&claims));
            }
            Exit::Ok
        }
        Err(e) => {
            eprintln!("{}", refusal(&e));
            Exit::Denied
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    /// A carriage return and escape sequences in the signed action string
    /// (the agent wrote it) are named, not sent to the terminal: a denied
    /// action's receipt cannot be drawn as "allowed".
    #[test]
    fn the_summary_shows_hidden_characters_of_the_agents_text() {
        let claims: actiongate_receipt::ReceiptClaims = serde_json::from_value(serde_json::json!({
            "v": 2, "iss": "actiongate", "action_id": "act_1", "agent": "a",
            "action_string": "tool:misc:cleanup\r\u{1b}[2Kvalid: act_1 allowed x\u{1b}[8m",
            "outcome": "denied", "decided_by": "telegram:1", "deciders": [],
            "decided_at": "2026-12-06T12:00:00Z", "iat": 0
        }))
        .unwrap();
        let line = super::summary(&claims);
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
        assert!(line.contains("denied"), "{line}");
    }

    /// A forged receipt's key id, quoted by the refusal, is shown on one
    /// line too (it drew a valid receipt's line over the refusal).
    #[test]
    fn a_refusal_shows_hidden_characters_of_the_receipt() {
        let signer = actiongate_receipt::ReceiptSigner::from_seed(&[7; 32]).unwrap();
        let verifier = actiongate_receipt::ReceiptVerifier::from_jwk(&signer.jwk()).unwrap();
        // Header {"alg": "EdDSA", "typ": "actiongate-receipt+jwt", "kid":
        // "k\r\x1b[2Kvalid: act_1 allowed x"}, payload {"v": 2}.
        let forged = "eyJhbGciOiAiRWREU0EiLCAidHlwIjogImFjdGlvbmdhdGUtcmVjZWlwdCtqd3QiLCAia2lkIjogImtcclx1MDAxYlsyS3ZhbGlkOiBhY3RfMSBhbGxvd2VkIHgifQ.eyJ2IjogMn0.AAAA";
        let e = verifier.verify(forged).unwrap_err();
        let said = super::refusal(&e);
        assert!(said.contains("act_1"), "the key id is quoted: {said:?}");
        assert!(!said.chars().any(|c| c.is_control()), "{said:?}");
    }
}
