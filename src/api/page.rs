//! The page JSON every list answers with: Spring Data's `Page` (`content`, `number`, `size`,
//! `totalElements`, `totalPages`), zero-based like the Java original's.

use serde::Serialize;

use crate::store::{Listing, PageRequest};

/// A page of results, shaped like Spring Data's `Page` JSON.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub content: Vec<T>,
    /// Zero-based page number.
    pub number: u32,
    pub size: u32,
    pub total_elements: i64,
    pub total_pages: i64,
    /// Present (`true`) when counting stopped at a cap (execution search: 100,000), so
    /// `totalElements` and `totalPages` are lower bounds; narrow the search to count exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_elements_capped: Option<bool>,
}

impl<T> Page<T> {
    /// The page `req` of a listing, its items shown as `show` makes them.
    pub fn of<S>(listing: Listing<S>, req: PageRequest, show: impl FnMut(S) -> T) -> Self {
        let size = req.size.max(1) as i64;
        Self {
            content: listing.items.into_iter().map(show).collect(),
            number: req.page,
            size: req.size,
            total_elements: listing.total,
            total_pages: (listing.total + size - 1) / size,
            total_elements_capped: listing.capped.then_some(true),
        }
    }
}
