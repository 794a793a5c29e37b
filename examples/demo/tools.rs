//! The demo's own tools, and the registry it runs with. Each declares
//! every provider target, so a parameter one of them would refuse fails
//! the build (`tests/ui/pass/targets.rs` compiles this file too).

use std::sync::Mutex;

use kesoku::llm::tools::{analyze_media, list_files, read_file};
use kesoku::{State, ToolContext, ToolRegistry, tool};

/// Adds two integers.
///
/// # Arguments
/// * `a` - The first integer.
/// * `b` - The second integer.
#[tool(targets(
    anthropic,
    anthropic_structured,
    openai,
    openai_strict,
    gemini,
    gemini_json_schema,
    mcp
))]
fn calculate_sum(a: i64, b: i64) -> Result<i64, String> {
    a.checked_add(b)
        .ok_or_else(|| format!("{a} + {b} does not fit in a 64-bit integer"))
}

/// Tells the current date and time.
///
/// # Arguments
/// * `timezone` - An IANA time zone, such as `Europe/Paris`; UTC if
///   omitted.
#[tool(targets(
    anthropic,
    anthropic_structured,
    openai,
    openai_strict,
    gemini,
    gemini_json_schema,
    mcp
))]
fn current_time(timezone: Option<String>) -> Result<String, String> {
    let name = timezone.as_deref().unwrap_or("UTC");
    let zone = jiff::tz::TimeZone::get(name).map_err(|e| {
        format!("unknown time zone `{name}` (use an IANA name such as `Europe/Paris`): {e}")
    })?;
    let now = jiff::Zoned::now().with_time_zone(zone);
    Ok(now.strftime("%Y-%m-%d %H:%M %Z").to_string())
}

/// The notes `save_note` keeps, shared by every turn.
#[derive(Default)]
pub(crate) struct Notebook(Mutex<Vec<String>>);

/// Saves a note for later.
///
/// # Arguments
/// * `text` - The note.
#[tool(targets(
    anthropic,
    anthropic_structured,
    openai,
    openai_strict,
    gemini,
    gemini_json_schema,
    mcp
))]
async fn save_note(
    text: String,
    context: &ToolContext,
    notebook: State<Notebook>,
) -> Result<String, String> {
    context
        .post(format!(
            "saving a note of {} characters",
            text.chars().count()
        ))
        .await
        .map_err(|e| format!("could not post progress: {e}"))?;
    let count = {
        let Notebook(notes) = &*notebook.0;
        let mut notes = notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        notes.push(text);
        notes.len()
    };
    Ok(format!("Saved as note {count}"))
}

/// Deletes a saved note. Asks first: a person must approve each call.
///
/// # Arguments
/// * `number` - The note's number, as `save_note` gave it.
#[tool(
    approval,
    destructive,
    targets(
        anthropic,
        anthropic_structured,
        openai,
        openai_strict,
        gemini,
        gemini_json_schema,
        mcp
    )
)]
fn delete_note(number: usize, notebook: State<Notebook>) -> Result<String, String> {
    let Notebook(notes) = &*notebook.0;
    let mut notes = notes
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if number == 0 || number > notes.len() {
        return Err(format!(
            "there is no note {number}: the notebook holds {}",
            notes.len()
        ));
    }
    let gone = notes.remove(number - 1);
    Ok(format!("Deleted note {number} (\"{gone}\")"))
}

pub(crate) fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in [
        calculate_sum::TOOL,
        current_time::TOOL,
        save_note::TOOL,
        delete_note::TOOL,
        list_files::TOOL,
        read_file::TOOL,
        analyze_media::TOOL,
    ] {
        registry.register(tool).expect("distinct tool names");
    }
    registry
}
