//! Parameters filled from the context rather than by the model.

use kesoku::{FromToolContext, InjectError, State, ToolContext, tool};
use serde_json::json;

struct Greeting(&'static str);

struct SessionId(String);

impl FromToolContext for SessionId {
    fn from_tool_context(ctx: &ToolContext) -> Result<Self, InjectError> {
        Ok(SessionId(ctx.session_id().to_owned()))
    }
}

/// Owned context.
#[tool]
fn owned(c: ToolContext) -> String {
    c.session_id().to_owned()
}

/// Borrowed context named `context`.
///
/// # Arguments
/// * `n` - A number.
#[tool]
async fn borrowed(context: &ToolContext, n: u32) -> String {
    format!("{}:{n}", context.session_id())
}

/// Borrowed context named otherwise, with a fully qualified path.
#[tool]
fn borrowed_other(whatever: &kesoku::ToolContext) -> String {
    whatever.session_id().to_owned()
}

/// Typed state.
///
/// # Arguments
/// * `name` - Who to greet.
#[tool]
fn greet(greeting: State<Greeting>, name: String) -> String {
    format!("{} {name}", greeting.0.0)
}

/// A custom injected type.
#[tool]
fn whoami(#[inject] id: SessionId) -> String {
    id.0
}

fn main() {
    for schema in [owned::SCHEMA, borrowed_other::SCHEMA, whoami::SCHEMA] {
        let params = schema.parameters_json();
        assert_eq!(params["properties"], json!({}), "{}", schema.name);
    }
    assert_eq!(borrowed::SCHEMA.parameters_json()["required"], json!(["n"]));
    assert_eq!(greet::SCHEMA.parameters_json()["required"], json!(["name"]));

    let ctx = ToolContext::new("sess").with_state(Greeting("hi"));
    let registry = kesoku::default_registry();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let call = |name: &'static str, args| {
            let ctx = ctx.clone();
            async move {
                let tool = registry.get(name).unwrap();
                tool.call(args, &ctx).await.unwrap().text()
            }
        };
        assert_eq!(call("owned", json!({})).await, "sess");
        assert_eq!(call("borrowed", json!({"n": 7})).await, "sess:7");
        assert_eq!(call("borrowed_other", json!({})).await, "sess");
        assert_eq!(call("greet", json!({"name": "bob"})).await, "hi bob");
        assert_eq!(call("whoami", json!({})).await, "sess");
    });
}
