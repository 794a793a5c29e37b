//! Snapshots of a typed answer's schema as each provider is sent it
//! (`OutputSchema::lowered` in the backend's output dialect), with the
//! lowering report: nested structs, enums, options and vectors.
//!
//! A change to a lowering shows here as a snapshot diff to review
//! (`cargo insta review`, or `INSTA_UPDATE=always cargo test`).

// The types exist for their schemas; their fields are never read.
#![allow(dead_code)]

use kesoku::llm::{ClaudeLlm, GeminiLlm, Llm, OpenAiLlm};
use kesoku::{OutputSchema, ToolArg};
use serde::Deserialize;

/// The invoice's currency.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(rename_all = "lowercase")]
enum Currency {
    /// Euros.
    Eur,
    /// US dollars.
    Usd,
}

/// A reduction of the total.
#[derive(Debug, Deserialize, ToolArg)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Discount {
    /// A share of the total.
    Percent {
        /// The share, in percent.
        pct: u8,
    },
    /// A fixed amount.
    Amount {
        /// In cents.
        cents: u64,
    },
}

/// A postal address.
#[derive(Debug, Deserialize, ToolArg)]
struct Address {
    /// Street and number.
    street: String,
    /// The city.
    city: String,
    /// The postcode, if the text gives one.
    postcode: Option<String>,
}

/// One line of an invoice.
#[derive(Debug, Deserialize, ToolArg)]
struct Line {
    /// What was sold.
    item: String,
    /// How many.
    quantity: u32,
    /// The price of one, in cents.
    cents: u64,
}

/// An invoice read from a text.
#[derive(Debug, Deserialize, ToolArg)]
struct Invoice {
    /// Who pays.
    customer: String,
    /// Where it goes.
    ship_to: Address,
    /// What was sold.
    lines: Vec<Line>,
    /// The currency.
    currency: Currency,
    /// A reduction, if any.
    discount: Option<Discount>,
    /// Labels on the invoice.
    tags: Vec<String>,
}

/// The schema `llm` is sent for `T`, and its report, as one text.
fn sent<T: ToolArg + serde::de::DeserializeOwned + 'static>(llm: &dyn Llm) -> String {
    let dialect = llm.output_dialect().expect("a backend takes typed answers");
    let output = OutputSchema::of::<T>();
    let lowered = output.lowered(dialect);
    format!(
        "{}\n\n{}",
        serde_json::to_string_pretty(&lowered.schema).unwrap(),
        lowered.report
    )
}

#[test]
fn claude() {
    insta::assert_snapshot!(sent::<Invoice>(&ClaudeLlm::new("k")));
}

#[test]
fn openai() {
    insta::assert_snapshot!(sent::<Invoice>(&OpenAiLlm::new("k")));
}

#[test]
fn openai_compatible() {
    // A local server takes the same strict request as OpenAI.
    insta::assert_snapshot!(sent::<Invoice>(&OpenAiLlm::compatible(
        "http://localhost:11434/v1"
    )));
}

#[test]
fn gemini() {
    insta::assert_snapshot!(sent::<Invoice>(&GeminiLlm::new("k")));
}

#[test]
fn gemini_legacy_parameters() {
    insta::assert_snapshot!(sent::<Invoice>(
        &GeminiLlm::new("k").with_legacy_parameters(true)
    ));
}

/// A tree of labels.
#[derive(Debug, Deserialize, ToolArg)]
struct Tree {
    /// The label.
    label: String,
    /// The subtrees.
    children: Vec<Tree>,
}

#[test]
fn a_recursive_type_has_its_object_at_the_root() {
    let output = OutputSchema::of::<Tree>();
    assert_eq!(output.schema()["type"], "object");
    assert!(output.schema()["$defs"]["Tree"].is_object());
    let openai = output.lowered(OpenAiLlm::new("k").output_dialect().unwrap());
    assert!(!openai.report.has_unsupported(), "{}", openai.report);
    // Claude's structured outputs take no recursion.
    let claude = output.lowered(ClaudeLlm::new("k").output_dialect().unwrap());
    assert!(claude.report.has_unsupported(), "{}", claude.report);
    let tree: Tree = output
        .read_as(r#"{"label": "a", "children": [{"label": "b", "children": []}]}"#)
        .unwrap();
    assert_eq!(tree.children[0].label, "b");
    let e = output
        .read(r#"{"label": "a", "children": [{"label": 1, "children": []}]}"#)
        .unwrap_err();
    assert_eq!(e.errors[0].path, "children[0].label");
}
