//! The guide: each page is one of the repository's `docs/*.md` files,
//! included here so that every Rust block in it is compiled and run as a
//! doctest, and cannot drift from the API. The README is the way in; its
//! examples are doctests too.
//!
//! Links between pages point at the `.md` files, as read on the
//! repository's site.

// The pages are written to be read on that site too, where a product name
// in backticks (`SQLite`) would show as code.
#![allow(clippy::doc_markdown)]

#[doc = include_str!("../docs/tools.md")]
pub mod tools {}

#[doc = include_str!("../docs/runner.md")]
pub mod runner {}

#[doc = include_str!("../docs/agents.md")]
pub mod agents {}

#[doc = include_str!("../docs/composition.md")]
pub mod composition {}

#[doc = include_str!("../docs/console.md")]
pub mod console {}

// Its lint example is a `#[test]` to copy into a crate's tests: the doctest
// only compiles it.
#[allow(clippy::test_attr_in_doctest)]
#[doc = include_str!("../docs/llm.md")]
pub mod llm {}

#[doc = include_str!("../docs/telemetry.md")]
pub mod telemetry {}

#[doc = include_str!("../docs/mcp.md")]
pub mod mcp {}

#[doc = include_str!("../docs/scale.md")]
pub mod scale {}

#[doc = include_str!("../docs/registries.md")]
pub mod registries {}

#[doc = include_str!("../docs/testing.md")]
pub mod testing {}

#[doc = include_str!("../docs/performance.md")]
pub mod performance {}

#[doc = include_str!("../docs/layout.md")]
pub mod layout {}
