//! Pages of the grant request and plan listings: `order` (newest or oldest
//! first), `after` (the last id of the previous page) and `limit`, so a
//! queue longer than one page is read whole, the longest waiting first.

use actiongate_store::Page;

use crate::{GateError, GateResult};

/// Most items of one page.
pub const MAX_PAGE: i64 = 500;

/// Most bytes of JSON one page of a listing holds (past its first item):
/// a page of the largest actions (each up to a few hundred KiB) was tens of
/// megabytes, held in memory for as long as a client took to read it.
pub const PAGE_BYTES: usize = 2 << 20;

/// Cuts `items` after the last one that keeps the page within
/// [`PAGE_BYTES`] (the first always stays); whether it cut any.
pub(crate) fn cut_to_bytes<T: serde::Serialize>(items: &mut Vec<T>) -> bool {
    let mut used = 0usize;
    for (i, item) in items.iter().enumerate() {
        used = used.saturating_add(crate::bounds::json_len(item, PAGE_BYTES));
        if i > 0 && used > PAGE_BYTES {
            items.truncate(i);
            return true;
        }
    }
    false
}

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

    /// A page of large items stops where it would pass `PAGE_BYTES`,
    /// keeping its first item however large; small items are not cut.
    #[test]
    fn a_page_is_cut_to_its_bytes() {
        let mut big = vec!["x".repeat(900_000); 5];
        assert!(cut_to_bytes(&mut big));
        assert_eq!(big.len(), 2);
        let mut huge = vec!["x".repeat(5 << 20), "y".to_owned()];
        assert!(cut_to_bytes(&mut huge));
        assert_eq!(huge.len(), 1);
        let mut small = vec!["x".repeat(1000); 200];
        assert!(!cut_to_bytes(&mut small));
        assert_eq!(small.len(), 200);
    }
}
