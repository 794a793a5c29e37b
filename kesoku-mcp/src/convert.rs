//! Between kesoku's types and MCP's: a registered tool as a `tools/list`
//! entry, a runner's `tool_result` message as a `tools/call` result, and a
//! remote `tools/call` result as a [`ToolOutput`].

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kesoku_core::lowering::{Dialect, lower};
use kesoku_core::{ContentBlock, Message, Tool, ToolOutput, keys};
use rmcp::model::{self as mcp, CallToolResult, JsonObject, ResourceContents, ToolAnnotations};
use serde_json::Value;

/// The `tools/list` entry of `tool`: its description (with the `# Returns`
/// text, as models get it), its arguments schema lowered to MCP's dialect,
/// an output schema where the return type has an object one, and its title
/// and hints as annotations.
pub(crate) fn listing(tool: &Tool) -> mcp::Tool {
    let mut description = tool.description().to_owned();
    if let Some(returns) = tool.returns() {
        description.push_str("\n\nReturns: ");
        description.push_str(returns);
    }
    let input = lower(Dialect::Mcp, tool.name(), tool.parameters_ref()).schema;
    let mut out = mcp::Tool::new(tool.name().to_owned(), description, Arc::new(object(input)));
    // MCP wants an object at the root of an output schema (the result's
    // `structuredContent` is an object); other return types go as text.
    if let Some(Value::Object(schema)) = tool.output_schema()
        && schema.get("type").is_some_and(|t| t == "object")
    {
        out = out.with_raw_output_schema(Arc::new(schema));
    }
    if let Some(title) = tool.title() {
        out = out.with_title(title);
    }
    let hints = tool.hints();
    if !hints.is_empty() || tool.title().is_some() {
        out = out.with_annotations(ToolAnnotations::from_raw(
            tool.title().map(str::to_owned),
            hints.read_only,
            hints.destructive,
            hints.idempotent,
            hints.open_world,
        ));
    }
    out
}

/// MCP requires `"type": "object"` at the root of `inputSchema`; a
/// dynamic tool's schema may leave it implicit.
fn object(schema: Value) -> JsonObject {
    match schema {
        Value::Object(mut map) => {
            map.entry("type").or_insert_with(|| "object".into());
            map
        }
        // Lowering reports a non-object root; `DynamicTool` and `#[tool]`
        // never make one.
        _ => JsonObject::new(),
    }
}

/// A runner's `tool_result` message as a `tools/call` result: an error is
/// `isError` with the runner's text (what a model would read); a success
/// is its text, its content blocks, and, when the value is an object,
/// `structuredContent`.
pub(crate) fn call_result(message: &Message) -> CallToolResult {
    // `isError` says it is an error: the text is the runner's without the
    // "Error: " a model's history gets.
    if let Some(error) = message.metadata.get(keys::TOOL_ERROR) {
        let text = error
            .as_str()
            .map_or_else(|| message.content.clone(), str::to_owned);
        return CallToolResult::error(vec![mcp::ContentBlock::text(text)]);
    }
    let blocks: Vec<ContentBlock> = message
        .metadata
        .get(keys::CONTENT_BLOCKS)
        .and_then(|b| serde_json::from_value(b.clone()).ok())
        .unwrap_or_default();
    let mut content = Vec::with_capacity(1 + blocks.len());
    if blocks.is_empty() || !message.content.is_empty() {
        content.push(mcp::ContentBlock::text(message.content.clone()));
    }
    content.extend(blocks.iter().map(block));
    let mut result = CallToolResult::success(content);
    if let Some(value @ Value::Object(_)) = message.metadata.get(keys::TOOL_RESULT) {
        result.structured_content = Some(value.clone());
    }
    result
}

fn block(b: &ContentBlock) -> mcp::ContentBlock {
    match b {
        ContentBlock::Text { text } => mcp::ContentBlock::text(text.clone()),
        ContentBlock::Image { mime_type, data } => {
            mcp::ContentBlock::image(STANDARD.encode(data), mime_type.clone())
        }
        ContentBlock::Media { mime_type, data } if mime_type.starts_with("audio/") => {
            mcp::ContentBlock::audio(STANDARD.encode(data), mime_type.clone())
        }
        // Documents and video have no content type of their own in MCP:
        // they go as embedded resources with their bytes.
        ContentBlock::Document {
            mime_type,
            data,
            name,
            ..
        } => resource(mime_type, data, name.as_deref()),
        ContentBlock::Media { mime_type, data } => resource(mime_type, data, None),
    }
}

fn resource(mime_type: &str, data: &[u8], name: Option<&str>) -> mcp::ContentBlock {
    let uri = format!("kesoku://content/{}", name.unwrap_or("attachment"));
    mcp::ContentBlock::resource(
        ResourceContents::blob(STANDARD.encode(data), uri).with_mime_type(mime_type),
    )
}

/// A remote `tools/call` result as what the local tool returns: the text
/// of its text blocks (or its `structuredContent`) as the value, its
/// images, audio and embedded files as content blocks. `Err` carries the
/// text of an `isError` result.
pub(crate) fn remote_output(result: CallToolResult) -> Result<ToolOutput, String> {
    let mut texts = Vec::new();
    let mut blocks = Vec::new();
    for c in result.content {
        match c {
            mcp::ContentBlock::Text(t) => texts.push(t.text),
            mcp::ContentBlock::Image(i) => match STANDARD.decode(&i.data) {
                Ok(data) => blocks.push(ContentBlock::image(i.mime_type, data)),
                Err(_) => texts.push(format!(
                    "[an image the server sent as invalid base64 ({})]",
                    i.mime_type
                )),
            },
            mcp::ContentBlock::Audio(a) => match STANDARD.decode(&a.data) {
                Ok(data) => blocks.push(ContentBlock::media(a.mime_type, data)),
                Err(_) => texts.push(format!(
                    "[audio the server sent as invalid base64 ({})]",
                    a.mime_type
                )),
            },
            mcp::ContentBlock::Resource(r) => match r.resource {
                ResourceContents::TextResourceContents { text, .. } => texts.push(text),
                ResourceContents::BlobResourceContents {
                    blob,
                    mime_type,
                    uri,
                    ..
                } => {
                    let mime = mime_type.unwrap_or_else(|| "application/octet-stream".into());
                    match STANDARD.decode(&blob) {
                        Ok(data) => blocks.push(ContentBlock::document(mime, data)),
                        Err(_) => {
                            texts
                                .push(format!("[a file the server sent as invalid base64: {uri}]"));
                        }
                    }
                }
                _ => texts.push("[a resource of a kind this client does not know]".to_owned()),
            },
            mcp::ContentBlock::ResourceLink(link) => {
                texts.push(format!("[resource: {} <{}>]", link.name, link.uri));
            }
            _ => texts.push("[content of a kind this client does not know]".to_owned()),
        }
    }
    let text = texts.join("\n");
    if result.is_error == Some(true) {
        return Err(if text.is_empty() {
            "the server reported an error and sent no text".to_owned()
        } else {
            text
        });
    }
    let value = match result.structured_content {
        Some(v) if !v.is_null() => v,
        _ => Value::String(text),
    };
    let mut out = ToolOutput::new(value);
    for b in blocks {
        out = out.with_block(b);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use kesoku_core::{DynamicTool, ToolHints};
    use serde_json::json;

    use super::*;

    #[test]
    fn a_listing_carries_schema_output_title_and_hints() {
        let tool = Tool::from(
            DynamicTool::new(
                "look",
                "Looks.",
                json!({"type": "object", "properties": {"q": {"type": "string"}}}),
                |_, _| async { Ok(ToolOutput::new(Value::Null)) },
            )
            .unwrap()
            .with_returns("What it saw.")
            .with_title("Look around")
            .with_hints(ToolHints::new().with_read_only(true))
            .with_output_schema(
                json!({"type": "object", "properties": {"seen": {"type": "integer"}}}),
            ),
        );
        let listed = serde_json::to_value(listing(&tool)).unwrap();
        assert_eq!(listed["description"], "Looks.\n\nReturns: What it saw.");
        assert_eq!(listed["inputSchema"]["properties"]["q"]["type"], "string");
        assert_eq!(
            listed["outputSchema"]["properties"]["seen"]["type"],
            "integer"
        );
        assert_eq!(listed["title"], "Look around");
        assert_eq!(listed["annotations"]["readOnlyHint"], true);
        assert!(listed["annotations"].get("destructiveHint").is_none());
    }

    #[test]
    fn a_remote_result_keeps_its_text_structure_and_images() {
        let mut result = CallToolResult::success(vec![
            mcp::ContentBlock::text("42"),
            mcp::ContentBlock::image(STANDARD.encode([1, 2, 3]), "image/png"),
        ]);
        result.structured_content = Some(json!({"sum": 42}));
        let out = remote_output(result).unwrap();
        assert_eq!(out.value, json!({"sum": 42}));
        assert_eq!(
            out.blocks,
            [ContentBlock::image("image/png", vec![1, 2, 3])]
        );
        let err = remote_output(CallToolResult::error(vec![mcp::ContentBlock::text("no")]));
        assert_eq!(err.unwrap_err(), "no");
    }
}
