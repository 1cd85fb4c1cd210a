//! Pages of the grant request and plan listings: `order` (newest or oldest
//! first), `after` (the last id of the previous page) and `limit`, so a
//! queue longer than one page is read whole, the longest waiting first.

use actiongate_store::Page;

use crate::{GateError, GateResult};

/// Most items of one page.
pub const MAX_PAGE: i64 = 500;

/// Longest `after` (ids are far shorter).
const MAX_AFTER: usize = 200;

/// Which page of a listing the caller asks for.
#[derive(Debug, Clone, Default)]
pub struct ListPage {
    /// Only items strictly after this id in the order asked (the last id
    /// of the previous page).
    pub after: Option<String>,
    /// Page size, 1-500; the listing's own default when absent.
    pub limit: Option<i64>,
    /// Oldest first (the longest waiting first) instead of newest first.
    pub oldest_first: bool,
}

impl ListPage {
    /// The first page of at most `limit`, the longest waiting first.
    pub fn oldest(limit: i64) -> ListPage {
        ListPage {
            after: None,
            limit: Some(limit),
            oldest_first: true,
        }
    }

    /// The store's page, checked: `limit` 1-500 (`default` when absent),
    /// `after` an id's worth of printable characters.
    pub(crate) fn checked(self, default: i64) -> GateResult<Page> {
        let limit = self.limit.unwrap_or(default);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(GateError::invalid("limit", format!("must be 1-{MAX_PAGE}")));
        }
        if let Some(after) = &self.after
            && (after.is_empty()
                || after.len() > MAX_AFTER
                || !after.chars().all(|c| c.is_ascii_graphic()))
        {
            return Err(GateError::invalid(
                "after",
                "the last id of the previous page",
            ));
        }
        Ok(Page {
            after: self.after,
            limit,
            oldest_first: self.oldest_first,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn limits_and_cursors_are_checked() {
        let page = |after: Option<&str>, limit: Option<i64>| ListPage {
            after: after.map(str::to_owned),
            limit,
            oldest_first: true,
        };
        assert_eq!(page(None, None).checked(200).unwrap().limit, 200);
        assert_eq!(page(None, Some(500)).checked(200).unwrap().limit, 500);
        for bad in [0, -1, 501] {
            let e = page(None, Some(bad)).checked(200).unwrap_err();
            assert_eq!(e.errors[0].field, "limit");
        }
        let ok = page(Some("grq_0190"), None).checked(500).unwrap();
        assert_eq!(ok.after.as_deref(), Some("grq_0190"));
        assert!(ok.oldest_first);
        for bad in ["", "a b", &"x".repeat(201)] {
            let e = page(Some(bad), None).checked(500).unwrap_err();
            assert_eq!(e.errors[0].field, "after");
        }
    }
}
