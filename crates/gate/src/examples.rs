//! A profile is set only if it answers its own examples
//! (`actiongate_policy::examples`): otherwise 422, one field error per
//! example that gets another answer, all of them.

use actiongate_api::FieldError;
use actiongate_policy::Profile;
use actiongate_policy::examples::mismatches;

use crate::{GateError, GateResult};

/// `Ok` when every example of `profile` gets the answer written; else a
/// validation error naming each one (`profile.examples.allow[1]`).
pub fn check_examples(profile: &Profile) -> GateResult<()> {
    let misses = mismatches(profile);
    if misses.is_empty() {
        return Ok(());
    }
    Err(GateError::invalid_fields(
        misses
            .iter()
            .map(|m| FieldError {
                field: format!("profile.{}", m.field),
                message: m.to_string(),
            })
            .collect(),
    ))
}
