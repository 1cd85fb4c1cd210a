//! `actiongate plans` and `actiongate plan approve|deny` (operator key): the
//! plans agents asked approval for (docs/sessions.md). An approved step
//! becomes a grant of one use in the plan's session.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::commands::{api, guarded, print_json};
use super::http::{path_segment, query_value};
use super::output::{clip, relative, s, table};
use super::{Common, Exit};

/// Flags of `plans`.
#[derive(Debug, Args)]
pub struct PlansArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Only plans in this status.
    #[arg(long, value_parser = ["pending", "approved", "denied", "expired"])]
    pub status: Option<String>,
}

/// `plan approve|deny`.
#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// Approve a plan, all of it or the steps given: each approved step
    /// runs once in the plan's session without another question.
    Approve(PlanApproveArgs),
    /// Deny a plan.
    Deny(PlanDenyArgs),
}

/// Flags of `plan approve`.
#[derive(Debug, Args)]
pub struct PlanApproveArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Plan id.
    pub id: String,
    /// Only these steps, numbered from 0 as `plans` shows them: `0,2`.
    #[arg(long, value_delimiter = ',', value_name = "N,N")]
    pub steps: Vec<usize>,
}

/// Flags of `plan deny`.
#[derive(Debug, Args)]
pub struct PlanDenyArgs {
    /// Connection and output.
    #[command(flatten)]
    pub common: Common,
    /// Plan id.
    pub id: String,
}

/// Runs `plan approve|deny`.
pub async fn run(cmd: PlanCommand) -> Exit {
    match cmd {
        PlanCommand::Approve(a) => approve(a).await,
        PlanCommand::Deny(a) => deny(a).await,
    }
}

/// One step as text: `tool detail` or `handler.action params`.
fn step_text(step: &Value) -> String {
    match (
        step.get("tool").and_then(Value::as_str),
        step.get("handler").and_then(Value::as_str),
    ) {
        (Some(tool), _) => format!("{tool}: {}", s(step, "detail")),
        (None, Some(handler)) => format!(
            "{handler}.{} {}",
            s(step, "action"),
            step.get("params").cloned().unwrap_or(Value::Null)
        ),
        (None, None) => "?".to_owned(),
    }
}

/// Plans read at a time.
const PAGE: usize = 200;

/// Most pending plans `plans --status pending` reads.
const MOST_PENDING: usize = 10_000;

/// `plans [--status S]`, each with its steps: every pending plan oldest
/// first (what waits longest first, as `pending`), otherwise the newest
/// [`PAGE`].
pub async fn plans(args: PlansArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let pending = args.status.as_deref() == Some("pending");
        let mut path = "/v1/plans".to_owned();
        if let Some(st) = &args.status {
            path.push_str(&format!("?status={}", query_value(st)));
        }
        let list = if pending {
            let oldest = format!("{path}&order=oldest&limit={PAGE}");
            Value::Array(api.after_pages(&oldest, PAGE, MOST_PENDING).await?)
        } else {
            api.get(&path).await?
        };
        if args.common.json {
            print_json(&list);
            return Ok(Exit::Ok);
        }
        let plans = list.as_array().cloned().unwrap_or_default();
        if plans.is_empty() {
            println!("no plans");
            return Ok(Exit::Ok);
        }
        for p in &plans {
            print_plan(p);
        }
        Ok(Exit::Ok)
    })
    .await
}

/// One plan: its line of the table, then each step (`+` where approved),
/// whole, with why it asks when it runs.
pub(crate) fn print_plan(p: &Value) {
    let steps = p["steps"].as_array().map_or(&[][..], Vec::as_slice);
    let rows = vec![vec![
        s(p, "id").to_owned(),
        relative(p, "created_at"),
        clip(s(p, "agent"), 20),
        clip(s(p, "session"), 24),
        s(p, "status").to_owned(),
        steps.len().to_string(),
        clip(s(p, "reason"), 40),
    ]];
    print!(
        "{}",
        table(
            &[
                "ID", "ASKED", "AGENT", "SESSION", "STATUS", "STEPS", "REASON"
            ],
            &rows
        )
    );
    for (i, step) in steps.iter().enumerate() {
        let mark = if step["approved"] == json!(true) {
            "+"
        } else {
            " "
        };
        // Whole: what a step's approval grants is all of it.
        println!(
            "  {mark} {i}: {}",
            super::visible::lines(&step_text(step), "       ")
        );
        if let Some(why) = step.get("asks").and_then(Value::as_str) {
            println!("       asks when it runs: {}", clip(why, 160));
        }
    }
}

/// The one-line summary of a decided plan.
fn summary(p: &Value) -> String {
    let steps = p["steps"].as_array().map_or(&[][..], Vec::as_slice);
    let approved = steps
        .iter()
        .filter(|s| s["approved"] == json!(true))
        .count();
    // Steps that ask when they run were granted nothing.
    let asks: Vec<String> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            s.get("asks")
                .and_then(Value::as_str)
                .map(|why| format!("step {i} asks when it runs: {}", clip(why, 160)))
        })
        .collect();
    match s(p, "status") {
        "approved" if !asks.is_empty() => format!(
            "plan {} approved: {approved} of {} steps, in session {}; {}",
            s(p, "id"),
            steps.len(),
            s(p, "session"),
            asks.join("; ")
        ),
        "approved" => format!(
            "plan {} approved: {approved} of {} steps, in session {}",
            s(p, "id"),
            steps.len(),
            s(p, "session")
        ),
        other => format!("plan {} {other}", s(p, "id")),
    }
}

/// `plan approve ID [--steps 0,2]`.
pub async fn approve(args: PlanApproveArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let body = if args.steps.is_empty() {
            json!({})
        } else {
            json!({ "steps": args.steps })
        };
        let plan = api
            .post_decision(
                &format!("/v1/plans/{}/approve", path_segment(&args.id)),
                &body,
            )
            .await?;
        if args.common.json {
            print_json(&plan);
        } else {
            println!("{}", summary(&plan));
        }
        Ok(Exit::Ok)
    })
    .await
}

/// `plan deny ID`.
pub async fn deny(args: PlanDenyArgs) -> Exit {
    guarded(async {
        let api = api(&args.common)?;
        let plan = api
            .post_decision(
                &format!("/v1/plans/{}/deny", path_segment(&args.id)),
                &json!({}),
            )
            .await?;
        if args.common.json {
            print_json(&plan);
        } else {
            println!("{}", summary(&plan));
        }
        Ok(Exit::Ok)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approved_plan_says_which_steps_still_ask_and_why() {
        let p = json!({"id": "pln_1", "status": "approved", "session": "rel", "steps": [
            {"tool": "bash", "detail": "make", "approved": true},
            {"tool": "deploy", "detail": "prod", "approved": false,
             "asks": "approvals rule #0 (pattern `tool:deploy:prod.*`) governs it: its approvers decide"}
        ]});
        assert_eq!(
            summary(&p),
            "plan pln_1 approved: 1 of 2 steps, in session rel; step 1 asks when it runs: \
             approvals rule #0 (pattern `tool:deploy:prod.*`) governs it: its approvers decide"
        );
        let p = json!({"id": "pln_2", "status": "approved", "session": "s",
            "steps": [{"tool": "bash", "detail": "make", "approved": true}]});
        assert_eq!(
            summary(&p),
            "plan pln_2 approved: 1 of 1 steps, in session s"
        );
    }
}
