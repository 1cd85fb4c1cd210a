//! The gate's one error type: a closed set of codes, each of which an
//! adapter maps to exactly one answer (the HTTP API: one problem+json
//! `type` and status per [`ErrorCode`]).

use actiongate_api::FieldError;
use actiongate_store::StoreError;

/// Every way a workflow of the gate can refuse or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// No valid key: unknown, revoked, or none.
    Unauthorized,
    /// The caller's role or binding does not allow this.
    Forbidden,
    /// Nothing there, or nothing this caller may see.
    NotFound,
    /// The change conflicts with the current state (a reused idempotency
    /// key, a retired handler, a duplicate id).
    Conflict,
    /// The action is no longer in a state the request acts on.
    ActionSettled,
    /// The grant request was already answered, or expired.
    GrantRequestSettled,
    /// One or more fields of the input are invalid.
    Validation,
    /// A limit on what the caller may hold at once was reached.
    LimitReached,
    /// The database is closing; retrying shortly may work.
    Unavailable,
    /// Another process holds the database's lock; nothing was written.
    DatabaseBusy,
    /// The database has no room left.
    StorageFull,
    /// A fault of the gate itself; the cause is in the log.
    Internal,
}

impl ErrorCode {
    /// Every code, in the order the README's table lists them.
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::ActionSettled,
        ErrorCode::GrantRequestSettled,
        ErrorCode::Validation,
        ErrorCode::LimitReached,
        ErrorCode::Unavailable,
        ErrorCode::DatabaseBusy,
        ErrorCode::StorageFull,
        ErrorCode::Internal,
    ];

    /// The stable machine-readable name (`not-found`, `action-settled`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not-found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::ActionSettled => "action-settled",
            ErrorCode::GrantRequestSettled => "grant-request-settled",
            ErrorCode::Validation => "validation",
            ErrorCode::LimitReached => "limit-reached",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::DatabaseBusy => "database-busy",
            ErrorCode::StorageFull => "storage-full",
            ErrorCode::Internal => "internal",
        }
    }
}

/// Why a workflow did not do what was asked.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}: {detail}", code.as_str())]
pub struct GateError {
    /// What kind of refusal or failure.
    pub code: ErrorCode,
    /// What went wrong this time, for the caller (nothing internal).
    pub detail: String,
    /// The invalid fields, for [`ErrorCode::Validation`].
    pub errors: Vec<FieldError>,
    /// The state the action or grant request is in now, for the two
    /// `*Settled` codes.
    pub current_status: Option<String>,
}

impl GateError {
    /// An error of `code` saying `detail`.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> GateError {
        GateError {
            code,
            detail: detail.into(),
            errors: Vec::new(),
            current_status: None,
        }
    }

    /// No valid key.
    pub fn unauthorized(detail: impl Into<String>) -> GateError {
        GateError::new(ErrorCode::Unauthorized, detail)
    }

    /// Not allowed for this caller.
    pub fn forbidden(detail: impl Into<String>) -> GateError {
        GateError::new(ErrorCode::Forbidden, detail)
    }

    /// Nothing there (or nothing this caller may see).
    pub fn not_found(detail: impl Into<String>) -> GateError {
        GateError::new(ErrorCode::NotFound, detail)
    }

    /// Conflicts with the current state.
    pub fn conflict(detail: impl Into<String>) -> GateError {
        GateError::new(ErrorCode::Conflict, detail)
    }

    /// The action is `current`, which the request cannot act on.
    pub fn action_settled(current: impl Into<String>) -> GateError {
        let current = current.into();
        let mut e = GateError::new(ErrorCode::ActionSettled, format!("the action is {current}"));
        e.current_status = Some(current);
        e
    }

    /// The grant request is `current` (answered or expired).
    pub fn grant_request_settled(current: impl Into<String>) -> GateError {
        let current = current.into();
        let mut e = GateError::new(
            ErrorCode::GrantRequestSettled,
            format!("the grant request is {current}"),
        );
        e.current_status = Some(current);
        e
    }

    /// One invalid field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> GateError {
        GateError::invalid_fields(vec![FieldError {
            field: field.into(),
            message: message.into(),
        }])
    }

    /// Every invalid field.
    pub fn invalid_fields(errors: Vec<FieldError>) -> GateError {
        let detail = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ");
        let mut e = GateError::new(ErrorCode::Validation, detail);
        e.errors = errors;
        e
    }

    /// A limit was reached.
    pub fn limit_reached(detail: impl Into<String>) -> GateError {
        GateError::new(ErrorCode::LimitReached, detail)
    }

    /// Busy or closing; retry shortly.
    pub fn unavailable(detail: impl Into<String>) -> GateError {
        GateError::new(ErrorCode::Unavailable, detail)
    }

    /// A fault of the gate itself; says nothing internal (log the cause).
    pub fn internal() -> GateError {
        GateError::new(
            ErrorCode::Internal,
            "the server failed to handle the request; see its log",
        )
    }

    /// Whether this is [`ErrorCode::NotFound`].
    pub fn is_not_found(&self) -> bool {
        self.code == ErrorCode::NotFound
    }
}

impl From<StoreError> for GateError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound => GateError::not_found("no such resource"),
            StoreError::Conflict(msg) => GateError::conflict(msg),
            StoreError::WrongState { current } => GateError::action_settled(current),
            StoreError::Busy => {
                tracing::warn!("database busy: a write waited out the busy timeout");
                GateError::new(
                    ErrorCode::DatabaseBusy,
                    "the database is locked by another process; nothing was written, retry shortly",
                )
            }
            // The store logs it once, when writes start to fail.
            StoreError::Full => GateError::new(
                ErrorCode::StorageFull,
                "the database or disk is full; nothing was written until space is freed",
            ),
            StoreError::Unavailable(why) => {
                tracing::warn!(error = %why, "database unavailable");
                GateError::unavailable(
                    "the database is unavailable; nothing was written, retry shortly",
                )
            }
            StoreError::Lost(why) => {
                tracing::warn!(error = %why, "connection to the database lost");
                GateError::unavailable(
                    "the connection to the database was lost during the request; a change may \
                     or may not have been written: look before you retry (a new action: retry \
                     with the same Idempotency-Key)",
                )
            }
            StoreError::TimedOut(after) => {
                tracing::warn!(after = ?after, "the database did not answer in time");
                GateError::unavailable(
                    "the database did not answer in time; a change may or may not have been \
                     written: retry shortly (with the same Idempotency-Key for a new action)",
                )
            }
            StoreError::Invalid(why) => {
                tracing::info!(error = %why, "the database refused a value");
                GateError::new(
                    ErrorCode::Validation,
                    "a value cannot be stored: text may not hold the NUL character (U+0000)",
                )
            }
            StoreError::NamesTaken(taken) => GateError::invalid_fields(
                taken
                    .into_iter()
                    .map(|(field, message)| actiongate_api::FieldError { field, message })
                    .collect(),
            ),
            StoreError::Newer(v) => GateError::conflict(format!(
                "the database was migrated by a newer actiongate (its migration {v} is unknown \
                 to this version): run that version or a later one, or restore the backup \
                 taken before the upgrade (docs/operations.md)"
            )),
            StoreError::Migrate(e) => {
                tracing::error!(error = %e, "applying migrations failed");
                GateError::unavailable(format!("applying the database migrations failed: {e}"))
            }
            StoreError::Closed => {
                tracing::warn!(error = %err, "store unavailable");
                GateError::unavailable("the database is unavailable; retry shortly")
            }
            other => {
                tracing::error!(error = %other, "store error");
                GateError::internal()
            }
        }
    }
}

/// What workflows return.
pub type GateResult<T> = Result<T, GateError>;

#[cfg(test)]
mod tests {
    use super::GateError;
    use actiongate_store::StoreError;

    #[test]
    fn only_a_call_that_never_reached_the_database_says_nothing_was_written() {
        let said = |e: StoreError| GateError::from(e).detail;
        assert!(said(StoreError::Unavailable("refused".into())).contains("nothing was written"));
        for e in [
            StoreError::Lost("reset".into()),
            StoreError::TimedOut(std::time::Duration::from_secs(5)),
        ] {
            let detail = said(e);
            assert!(!detail.contains("nothing was written"), "{detail}");
            assert!(
                detail.contains("may or may not have been written"),
                "{detail}"
            );
        }
    }
}
