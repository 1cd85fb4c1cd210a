//! The event types the log records, and filters over them (`?types=` of the
//! event stream, the `types` of a notification subscription).

/// Every event type actiongate writes.
pub const EVENT_TYPES: &[&str] = &[
    "action.enqueued",
    "permission.needed",
    "action.approval",
    "action.approved",
    "action.denied",
    "action.started",
    "action.completed",
    "action.failed",
    "action.expired",
    "action.cancelled",
    "action.escalated",
    "grant.created",
    "grant.revoked",
    "grant_request.created",
    "grant_request.approved",
    "grant_request.denied",
    "grant_request.expired",
    "audit.anchor",
    "limit.reached",
    "action.undecided",
    "plan.requested",
    "plan.approved",
    "plan.denied",
    "plan.expired",
];

/// Which event types a reader wants: exact types, `prefix.*` patterns, or
/// `*` for all. Only names that match a known type are accepted, so a typo
/// is an error rather than a filter that silently matches nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeFilter {
    all: bool,
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl TypeFilter {
    /// Matches every type.
    pub fn all() -> TypeFilter {
        TypeFilter {
            all: true,
            exact: Vec::new(),
            prefixes: Vec::new(),
        }
    }

    /// Parses type names and `prefix.*` patterns; an empty list means all.
    /// The error names the first item that matches no known type.
    pub fn parse<I, S>(items: I) -> Result<TypeFilter, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut f = TypeFilter {
            all: false,
            exact: Vec::new(),
            prefixes: Vec::new(),
        };
        let mut any = false;
        for item in items {
            let item = item.as_ref().trim();
            any = true;
            if item == "*" {
                f.all = true;
            } else if let Some(prefix) = item.strip_suffix('*') {
                if !prefix.ends_with('.') || !EVENT_TYPES.iter().any(|t| t.starts_with(prefix)) {
                    return Err(format!(
                        "'{item}' matches no event type (use a type like action.approved, a prefix like action.*, or *)"
                    ));
                }
                f.prefixes.push(prefix.to_owned());
            } else if EVENT_TYPES.contains(&item) {
                f.exact.push(item.to_owned());
            } else {
                return Err(format!(
                    "unknown event type '{item}'; known types: {}",
                    EVENT_TYPES.join(", ")
                ));
            }
        }
        if !any {
            f.all = true;
        }
        Ok(f)
    }

    /// Whether events of type `kind` pass.
    pub fn matches(&self, kind: &str) -> bool {
        self.all
            || self.exact.iter().any(|t| t == kind)
            || self.prefixes.iter().any(|p| kind.starts_with(p.as_str()))
    }

    /// Whether it passes everything.
    pub fn is_all(&self) -> bool {
        self.all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_and_exact_match() {
        let f =
            TypeFilter::parse(["action.*", "grant.created"]).unwrap_or_else(|_| TypeFilter::all());
        assert!(f.matches("action.approved"));
        assert!(f.matches("grant.created"));
        assert!(!f.matches("grant.revoked"));
        assert!(!f.matches("grant_request.created"));
        assert!(!f.is_all());
    }

    #[test]
    fn unknown_types_are_rejected() {
        assert!(TypeFilter::parse(["action.aproved"]).is_err());
        assert!(TypeFilter::parse(["nothing.*"]).is_err());
        assert!(TypeFilter::parse(["act*"]).is_err());
    }

    #[test]
    fn empty_and_star_mean_all() {
        assert!(
            TypeFilter::parse(Vec::<String>::new())
                .map(|f| f.is_all())
                .unwrap_or(false)
        );
        assert!(
            TypeFilter::parse(["*"])
                .map(|f| f.is_all())
                .unwrap_or(false)
        );
    }
}
