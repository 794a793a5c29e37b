//! An agent offered to another as a tool ([`AgentTool`]): each call runs
//! a turn of the child agent in a session of its own, named after the
//! parent's session and call, so a turn resumed after a crash finds the
//! child where it stopped; the child's answer is the call's result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kesoku_core::store::StoreError;
use kesoku_core::{
    DynamicTool, GatewayError, Message, MessageType, OutputSchema, RegistryError, Role, Status,
    Tool, ToolArg, ToolContext, ToolError, ToolOutput, Via,
};
use serde_json::{Value, json};

use super::Agent;
use super::approval;
use super::nested::{Lineage, Position};
use super::nested_ids;
use super::outcome::{self, AgentError, TurnOutcome, TurnStatus};
use super::retry::retried_store;
use super::typed;

/// An [`Agent`] offered to another as a tool ([`Agent::as_tool`]): the
/// model calls it with a prompt (or typed input), and the child's answer
/// is the call's result.
///
/// Each call runs one turn of the child in a session of its own,
/// `<parent session>/<tool name>/<call id>` (the call's `tool_call`
/// message id), whose prompt stores where it comes from (the parent's
/// session, prompt and call, and the path from the top). A turn resumed
/// after a crash runs the call again, and it goes on from the child's
/// stored history: a finished child's answer is read back, not asked
/// again. What the child does (its streamed text, its calls and results,
/// its tools' progress notes) reaches the parent's
/// [`Gateway::deltas`](kesoku_core::Gateway::deltas) listeners as it
/// happens, on the top session, tagged with the path of calls
/// ([`Delta::path`](kesoku_core::Delta::path)). Interrupting the parent
/// interrupts the child; nesting deeper than
/// [`max_depth`](Self::max_depth) is refused with an error the model
/// reads.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use kesoku_agent::Agent;
/// use kesoku_llm::ScriptedLlm;
/// use serde_json::json;
///
/// let researcher = Agent::builder(
///     ScriptedLlm::from_json(json!([{"text": "Lyon has 522,250 people."}])).unwrap(),
/// )
/// .name("researcher")
/// .build()
/// .unwrap();
/// let model = ScriptedLlm::from_json(json!([
///     {"tool_calls": [{"id": "c1", "name": "research", "arguments": {"prompt": "Lyon's population?"}}]},
///     {"text": "About half a million."}
/// ]))
/// .unwrap();
/// let agent = Agent::builder(model)
///     .sub_agent(researcher.as_tool("research", "Finds facts."))
///     .build()
///     .unwrap();
/// let outcome = agent.send("s", "How big is Lyon?").await.unwrap();
/// assert_eq!(outcome.answer.as_deref(), Some("About half a million."));
/// assert_eq!(outcome.messages[1].content, "Lyon has 522,250 people.");
/// # });
/// ```
#[derive(Clone)]
pub struct AgentTool {
    agent: Agent,
    name: String,
    description: String,
    /// The arguments' schema, and whether the prompt is their JSON text
    /// (typed input) rather than their `prompt` string.
    parameters: Value,
    typed_input: bool,
    output: Option<OutputSchema>,
    max_depth: usize,
    timeout: Duration,
}

impl std::fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentTool")
            .field("name", &self.name)
            .field("agent", &self.agent.shared.name)
            .field("typed_input", &self.typed_input)
            .field("output", &self.output.as_ref().map(OutputSchema::name))
            .field("max_depth", &self.max_depth)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// This agent as a tool named `name`, described to the model by
    /// `description`: its input is a `prompt` string unless
    /// [`AgentTool::input`] says otherwise. Offer it with
    /// [`AgentBuilder::sub_agent`](super::AgentBuilder::sub_agent), which
    /// also lets `serve` run its turns when they are resumed.
    pub fn as_tool(&self, name: impl Into<String>, description: impl Into<String>) -> AgentTool {
        AgentTool {
            agent: self.clone(),
            name: name.into(),
            description: description.into(),
            parameters: json!({
                "type": "object",
                "properties": {"prompt": {
                    "type": "string",
                    "description": "What to ask the agent, with everything it needs to know."
                }},
                "required": ["prompt"],
                "additionalProperties": false
            }),
            typed_input: false,
            output: None,
            max_depth: AgentTool::DEFAULT_MAX_DEPTH,
            timeout: AgentTool::DEFAULT_TIMEOUT,
        }
    }
}

impl AgentTool {
    /// How deep agents called as tools may nest by default.
    pub const DEFAULT_MAX_DEPTH: usize = 4;

    /// How long a call of an agent may run by default (its turn's model
    /// calls and tools; a pause for a person ends the call, so waiting for
    /// one does not count).
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

    /// Takes typed input: the model fills `I`'s compile-time schema, and
    /// the child's prompt is the arguments' JSON text.
    #[must_use]
    pub fn input<I>(mut self) -> Self
    where
        I: ToolArg + serde::de::DeserializeOwned + 'static,
    {
        self.parameters = OutputSchema::of::<I>().schema().clone();
        self.typed_input = true;
        self
    }

    /// Asks the child for an answer of type `O` (as
    /// [`Agent::send_as`]), given as the call's structured result.
    #[must_use]
    pub fn output<O>(mut self) -> Self
    where
        O: ToolArg + serde::de::DeserializeOwned + 'static,
    {
        self.output = Some(OutputSchema::of::<O>());
        self
    }

    /// How many agents deep a call of this one may be, counting it
    /// ([`DEFAULT_MAX_DEPTH`](Self::DEFAULT_MAX_DEPTH) by default): a call past it is refused.
    #[must_use]
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }

    /// How long one call may run ([`DEFAULT_TIMEOUT`](Self::DEFAULT_TIMEOUT) by default).
    #[must_use]
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The agent it runs.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The tool, for a registry of one's own (an MCP server's, say).
    /// An agent that offers it should use
    /// [`AgentBuilder::sub_agent`](super::AgentBuilder::sub_agent)
    /// instead, so its `serve` knows the child by name.
    ///
    /// # Errors
    /// A name a model cannot call.
    pub fn into_tool(self) -> Result<Tool, RegistryError> {
        let spec = Arc::new(self);
        let handler = Arc::clone(&spec);
        let tool = DynamicTool::new(
            spec.name.clone(),
            spec.description.clone(),
            spec.parameters.clone(),
            move |args, ctx| {
                let spec = Arc::clone(&handler);
                async move { spec.call(args, ctx).await }
            },
        )?
        .needs_tool_call_id()
        .with_timeout(spec.timeout);
        let tool = match &spec.output {
            Some(output) => tool.with_output_schema(output.schema().clone()),
            None => tool,
        };
        Ok(tool.into())
    }

    /// One call: the child's turn, run (or resumed, or read back) in its
    /// own task, interrupted when the call stops waiting for it.
    async fn call(&self, args: Value, ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(call_id) = ctx.tool_call_id() else {
            return Err(ToolError::failed(format!(
                "the agent tool `{}` needs its call's `tool_call` message id (the runner gives it; a direct call sets it with `ToolContext::with_tool_call_id`)",
                self.name
            )));
        };
        let parent = ctx.state::<Position>();
        let mut path = parent.as_ref().map(|p| p.path.clone()).unwrap_or_default();
        if path.len() >= self.max_depth {
            let mut through: Vec<&str> = path.iter().map(|v| v.tool.as_str()).collect();
            through.push(&self.name);
            return Err(ToolError::failed(format!(
                "the agent tool `{}` would nest {} agents deep ({}), past its limit of {}: answer without it",
                self.name,
                path.len() + 1,
                through.join(" > "),
                self.max_depth
            )));
        }
        let session = nested_ids::child_session(ctx.session_id(), &self.name, call_id);
        let via = Via::new(self.name.clone(), call_id, session.clone());
        path.push(via.clone());
        let prompt = self.prompt(&args, &ctx, parent.as_deref(), path, &session);
        let child = self.agent.clone();
        let upstream = parent.as_ref().map(|p| p.gateway.clone());
        let parent_position = parent;
        let mut stop = StopChild {
            agent: self.agent.clone(),
            prompt: prompt.id.clone(),
            session: session.clone(),
            done: Arc::default(),
            armed: true,
        };
        // The child's turn is traced under this call (its `execute_tool`
        // span): one trace for the whole nested run.
        let run = tokio::spawn(tracing::Instrument::instrument(
            {
                let done = Arc::clone(&stop.done);
                async move {
                    let _forwarding = upstream.map(|g| child.forward_to(&session, g));
                    let ran = child.run_nested(prompt).await;
                    done.store(true, Ordering::Release);
                    ran
                }
            },
            tracing::Span::current(),
        ));
        let ran = run.await;
        stop.armed = false;
        let outcome = ran
            .map_err(|e| ToolError::failed(format!("the agent `{}` panicked: {e}", self.name)))?
            .map_err(|e| {
                ToolError::failed(format!(
                    "the agent `{}` failed: {}",
                    self.name,
                    kesoku_core::ErrorChain(&e)
                ))
            })?;
        if outcome.status == TurnStatus::AwaitingApproval
            && let Some(parent) = &parent_position
        {
            // The parent's turn pauses with this call open; its result
            // (below) is not posted. What the child waits for is the
            // parent's too, one step further down.
            let mut waiting = outcome.pending_approvals();
            for w in &mut waiting {
                w.path.insert(0, via.clone());
            }
            parent.pause(call_id, waiting);
        }
        self.result(outcome)
    }

    /// The child's prompt for `args`, keyed by its session, with its
    /// lineage.
    fn prompt(
        &self,
        args: &Value,
        ctx: &ToolContext,
        parent: Option<&Position>,
        path: Vec<Via>,
        session: &str,
    ) -> Message {
        let text = match (self.typed_input, args.get("prompt")) {
            (false, Some(Value::String(text))) => text.clone(),
            _ => args.to_string(),
        };
        let mut prompt = Message::new(session, Role::User, MessageType::Text, text)
            .with_sender(ctx.session_id())
            .with_status(Status::PendingAgent);
        prompt.id = nested_ids::prompt_id(session);
        let parent_prompt = ctx.original_msg_id().unwrap_or_default().to_owned();
        let (root_session, root_prompt) = match parent {
            Some(p) => (p.root_session.clone(), p.root_prompt.clone()),
            None => (ctx.session_id().to_owned(), parent_prompt.clone()),
        };
        Lineage {
            agent: self.agent.shared.name.clone(),
            root_session,
            root_prompt,
            parent_session: ctx.session_id().to_owned(),
            parent_prompt,
            parent_after: parent.map_or(0, |p| p.prompt_seq),
            path,
        }
        .stamp(&mut prompt);
        if let Some(output) = &self.output {
            typed::ask_for(&mut prompt, output, self.agent.shared.output_repairs);
        }
        prompt
    }

    /// The call's result from the child's outcome.
    fn result(&self, outcome: TurnOutcome) -> Result<ToolOutput, ToolError> {
        let name = &self.name;
        match outcome.status {
            TurnStatus::Completed => {
                let answer = outcome.answer.unwrap_or_default();
                match &self.output {
                    Some(output) => output.read(&answer).map(ToolOutput::new).map_err(|e| {
                        ToolError::failed(format!(
                            "the agent `{name}` answered in the wrong shape: {e}"
                        ))
                    }),
                    None => Ok(ToolOutput::new(Value::String(answer))),
                }
            }
            TurnStatus::Interrupted => Err(ToolError::Cancelled { tool: name.clone() }),
            TurnStatus::Tripped => Err(ToolError::failed(format!(
                "the agent `{name}` was stopped: {}",
                outcome
                    .tripped
                    .map_or_else(String::new, |t| format!("{} ({})", t.reason, t.guardrail))
            ))),
            TurnStatus::AwaitingApproval => Err(ToolError::failed(format!(
                "the agent `{name}` waits for a person's decision"
            ))),
            status => Err(ToolError::failed(format!(
                "the agent `{name}` gave no answer ({status:?}): {}",
                last_note(&outcome.messages)
            ))),
        }
    }
}

/// Stops the child's turn when its call stops waiting for it (the parent
/// interrupted, the call timed out) while `armed`: the turn running here
/// is interrupted; one not begun (waiting for a turn permit, say) is
/// settled `interrupted` before a worker takes it, so it never runs for a
/// call no one waits on.
struct StopChild {
    agent: Agent,
    session: String,
    prompt: String,
    /// Set once the child's task is over.
    done: Arc<AtomicBool>,
    armed: bool,
}

impl Drop for StopChild {
    fn drop(&mut self) {
        if !self.armed || self.agent.interrupt(&self.session) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let agent = self.agent.clone();
        let (session, prompt) = (self.session.clone(), self.prompt.clone());
        let done = Arc::clone(&self.done);
        runtime.spawn(async move {
            // Until the child's task ends: its turn begins (and is
            // interrupted) or its prompt is settled first. Backing off:
            // a turn another worker runs keeps this asking till it ends.
            let mut pause = Duration::from_millis(10);
            while !done.load(Ordering::Acquire) {
                if agent.interrupt(&session) {
                    return;
                }
                let settled = agent
                    .shared
                    .gateway
                    .transition(&prompt, &[Status::PendingAgent], Status::Interrupted)
                    .await;
                if settled.unwrap_or(false) {
                    return;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        });
    }
}

/// The text of the last note a turn ended with.
fn last_note(messages: &[Message]) -> &str {
    messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && m.kind == MessageType::Text)
        .map_or("", |m| m.content.as_str())
}

/// Removes a session's upstream gateway when the call that set it ends.
pub(crate) struct Forwarding {
    agent: Agent,
    session: String,
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        self.agent.shared.upstreams.remove(&self.session);
    }
}

impl Agent {
    /// While the returned guard lives, the turns of `session` here show
    /// what they do through `gateway` (their caller's).
    fn forward_to(&self, session: &str, gateway: kesoku_core::Gateway) -> Forwarding {
        self.shared.upstreams.insert(session, gateway);
        Forwarding {
            agent: self.clone(),
            session: session.to_owned(),
        }
    }

    /// Runs the nested `prompt`'s turn, or goes on with it where it
    /// stands when it is stored already (a call run again after a crash,
    /// or a decision): read back when finished, resumed when put back or
    /// decided, waited for while another worker runs it.
    pub(crate) async fn run_nested(&self, prompt: Message) -> Result<TurnOutcome, AgentError> {
        // Posted as new, without a read first: a prompt stored already
        // (its id is the call's) is refused as a duplicate, then read.
        let id = prompt.id.clone();
        match self.send_message(prompt).await {
            Err(AgentError::Gateway(GatewayError::Store(StoreError::Duplicate { .. }))) => {}
            ran => return ran,
        }
        let store = self.shared.gateway.store();
        let stored = retried_store(self.shared.lease, "reading a nested prompt", || {
            store.get(&id)
        })
        .await?
        .ok_or_else(|| {
            AgentError::Config(format!(
                "the nested prompt `{id}` was refused as stored already, and is not"
            ))
        })?;
        self.go_on(stored).await
    }

    /// Goes on with the stored nested `prompt` where it stands.
    async fn go_on(&self, prompt: Message) -> Result<TurnOutcome, AgentError> {
        let store = self.shared.gateway.store();
        let finished = match prompt.status {
            Status::Processed => Some(TurnStatus::Completed),
            Status::Interrupted => Some(TurnStatus::Interrupted),
            Status::Error => Some(TurnStatus::Failed),
            _ => None,
        };
        if let Some(status) = finished {
            let history = self.history(&prompt.session_id).await?;
            return Ok(outcome::outcome_from_history(status, &prompt, history));
        }
        let history = retried_store(self.shared.lease, "reading a nested session", || {
            store.history_after(&prompt.session_id, 0)
        })
        .await?;
        let seq = history
            .iter()
            .find(|(_, m)| m.id == prompt.id)
            .map_or(0, |(seq, _)| *seq);
        if prompt.status == Status::AwaitingApproval {
            let found =
                approval::put_back_if_decided(&**store, &prompt.session_id, &prompt.id, seq)
                    .await
                    .map_err(GatewayError::from)?;
            if found.undecided > 0 {
                let history = history.into_iter().map(|(_, m)| m).collect();
                return Ok(outcome::outcome_from_history(
                    TurnStatus::AwaitingApproval,
                    &prompt,
                    history,
                ));
            }
        }
        self.shared
            .sessions
            .saw_user_message(&prompt.session_id, seq);
        self.finished_elsewhere(&prompt, seq).await
    }
}
