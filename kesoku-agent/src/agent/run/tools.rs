//! A turn's tools: the runner of its calls (the tools read as the turn
//! starts, the context they are given: the session, its workspace, where
//! progress notes go, where the turn stands among nested agents), a step
//! of calls run between the hooks, and the machine's decision on a reply
//! under the approval policy and the tools' use limits.

use std::pin::pin;
use std::sync::Arc;

use kesoku_core::{Message, Tool, ToolContext, ToolRunner};

use super::super::approval::ApprovalCheck;
use super::super::fit;
use super::super::hooks_in_turn;
use super::super::machine::{Ask, Call, Decision, Run};
use super::super::nested::Forwarding;
use super::super::outcome::AgentError;
use super::super::workspace::workspace;
use super::Turn;

impl Turn<'_> {
    /// The machine's decision on the results of `run`'s calls, run by
    /// `runner` between the hooks' before and after.
    pub(super) async fn tools_step(&mut self, runner: &ToolRunner, mut run: Run) -> Decision {
        let hooks = &self.shared.hooks;
        let session = &self.user.session_id;
        // A newer prompt stops the hooks: the calls are then answered as
        // the runner answers calls an interruption kept from running.
        let before = hooks_in_turn::before_tools(hooks, session, &mut run);
        if let Some(Err(failure)) = self.unless_newer(before).await {
            tracing::warn!(error = %failure, "a hook failed; the turn ends");
            return run.hook_failed(Vec::new(), failure);
        }
        let mut results = self.execute(runner, run.calls()).await;
        if let Some(paused) = self.position.as_ref().map(|p| p.take_paused())
            && !paused.is_empty()
        {
            // Agents called as tools that paused for a person: their calls
            // stay open, and the turn pauses after the others' results.
            let (calls, waiting): (Vec<String>, Vec<_>) = paused.into_iter().unzip();
            results.retain(|r| !r.parent_id.as_ref().is_some_and(|p| calls.contains(p)));
            run.wait_on_nested(&calls);
            self.nested_waiting.extend(waiting.into_iter().flatten());
        }
        self.shared.metrics.tool_calls(&results);
        self.count_tools_usage(&mut results);
        let after = hooks_in_turn::after_tools(hooks, run.calls(), &mut results);
        match self.unless_newer(after).await.unwrap_or(Ok(())) {
            Ok(()) => {
                self.handoffs_in(&mut results, run.pauses());
                run.results(results)
            }
            Err(failure) => {
                tracing::warn!(error = %failure, "a hook failed; the turn ends");
                run.hook_failed(results, failure)
            }
        }
    }

    /// The machine's decision on the model's `reply`, under the agent's
    /// approval policy and each tool's use limit (the tools read as the
    /// turn started).
    pub(super) fn replied(&self, ask: Ask, reply: kesoku_llm::AssistantTurn) -> Decision {
        let registry = self.shared.tools.current().0;
        let policy = &self.shared.approval;
        let default_uses = self.shared.max_uses_per_turn;
        ask.replied(
            reply,
            &|request| {
                let tool = registry.get(&request.name);
                policy(&ApprovalCheck {
                    request,
                    hints: tool.map(Tool::hints).unwrap_or_default(),
                    marked: tool.is_some_and(Tool::needs_approval),
                })
            },
            &|name| {
                registry
                    .get(name)
                    .and_then(Tool::max_uses)
                    .map(|n| n as usize)
                    .or(default_uses)
            },
        )
    }

    /// The runner of this turn's calls; the tools as the model sees them
    /// are read with it.
    pub(super) async fn runner(&mut self) -> Result<ToolRunner, AgentError> {
        let (registry, declarations) = self.shared.tools.current();
        // Agents called as tools learn where this turn stands.
        if registry.iter().any(Tool::needs_tool_call_id) && self.position.is_none() {
            self.position = Some(Arc::new(self.place()));
        }
        let ctx = self.context().await?;
        // What the tools and instructions add to each request, estimated
        // once a turn (the tools are read once a turn).
        self.overhead = fit::overhead(self.shared, &declarations);
        self.declarations = declarations;
        let mut runner = ToolRunner::new(registry, ctx)
            .with_max_concurrency(self.shared.max_parallel_calls)
            .with_content_capture(self.shared.capture_content);
        if let Some(limit) = self.shared.tool_timeout {
            runner = runner.with_default_timeout(limit);
        }
        Ok(runner)
    }

    /// The tools' context for this turn.
    pub(super) async fn context(&self) -> Result<ToolContext, AgentError> {
        let session = &self.user.session_id;
        let mut ctx = ToolContext::new(session.clone())
            .with_original_msg_id(self.user.id.clone())
            .with_cancellation(self.cancel.clone());
        ctx = match &self.position {
            // A nested turn's progress notes are shown on the top session.
            Some(position) if position.is_nested() => ctx.with_progress(Forwarding {
                own: self.shared.gateway.clone(),
                position: Arc::clone(position),
            }),
            _ => ctx.with_progress(self.shared.gateway.clone()),
        };
        if let Some(position) = &self.position {
            ctx = ctx.with_state_arc(Arc::clone(position));
        }
        ctx = ctx
            .with_state_arc(Arc::clone(&self.shared.sandbox))
            .with_state_arc(Arc::clone(&self.shared.turn_model));
        for add in &self.shared.states {
            ctx = add(ctx);
        }
        if let Some(dir) = workspace(self.shared, session) {
            tokio::fs::create_dir_all(&dir)
                .await
                .map_err(|e| AgentError::Workspace {
                    session: session.clone(),
                    path: dir.display().to_string(),
                    message: e.to_string(),
                })?;
            ctx = ctx.with_workspace(dir);
        }
        Ok(ctx)
    }

    /// Stores the tokens of the model calls the step's tools made (through
    /// the turn's [`TurnModel`](crate::tools::TurnModel)) with its first
    /// result, as a model call's are with its first message, so that
    /// [`Agent::usage`](super::Agent::usage) and the outcome's count them.
    /// One turn of a session runs here at a time, so what the session's
    /// tools spent since the step began is this step's.
    pub(super) fn count_tools_usage(&self, results: &mut [Message]) {
        let Some(spent) = self.shared.turn_model.take_usage(&self.user.session_id) else {
            return;
        };
        let Some(first) = results.first_mut() else {
            return;
        };
        let total = kesoku_llm::Usage::of(first).unwrap_or_default() + spent;
        if let Ok(value) = serde_json::to_value(total) {
            first
                .metadata
                .insert(kesoku_core::keys::USAGE.into(), value);
        }
    }

    /// Runs the calls; on interruption, cancels the waiting ones and still
    /// returns one result per call.
    pub(super) async fn execute(&self, runner: &ToolRunner, calls: &[Call]) -> Vec<Message> {
        let slot = self.slot;
        let seq = self.seq;
        let is_interrupted = move || slot.is_newer_than(seq);
        let mut running = pin!(runner.execute_all(calls, Some(&is_interrupted)));
        tokio::select! {
            biased;
            results = &mut running => return results,
            () = slot.newer_than(seq) => self.cancel.cancel(),
        }
        running.await
    }
}
