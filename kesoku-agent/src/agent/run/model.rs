//! A turn's model call: the view fitted to the window first (and again
//! after a refusal as too long), the call dropped when a newer prompt
//! comes, the reply streamed to the gateway's listeners when the model
//! streams, the telemetry around it.

use std::pin::pin;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use futures_util::StreamExt as _;
use kesoku_core::{Delta, DeltaKind, Message};
use kesoku_llm::{AssistantTurn, LlmError, LlmOptions, StreamEvent};
use tracing::Instrument;

use super::{CallError, Turn};
use crate::agent::compaction::Compaction;
use crate::agent::fit::{self, Fitted};
use crate::agent::guardrails::{GuardInput, GuardVerdict};
use crate::agent::outcome::AgentError;
use crate::agent::posts::post;
use crate::agent::view::View;
use crate::agent::{guardrails_in_turn, hooks_in_turn};
use crate::telemetry;

/// The most refusals as too long one model call takes before it fails
/// (each round at least halves the request).
const MAX_REFUSALS: usize = 24;

impl Turn<'_> {
    /// One model call on the view, compacted first when it passes its
    /// budget; after the provider refused it as too long, compacted again
    /// by what the refusal taught, and asked again, until a request is
    /// accepted or nothing more can be cut (the refusal is then the
    /// call's error). `None` when a newer user message arrived first.
    pub(super) async fn ask_fitted(
        &mut self,
        view: &mut View,
        step: usize,
    ) -> Result<Option<Result<AssistantTurn, CallError>>, AgentError> {
        let overhead = self.overhead;
        let mut refused = None;
        for _ in 0..MAX_REFUSALS {
            // A summary is a model call: a newer prompt interrupts it too
            // (the view is changed only once it is made).
            let fitted = tokio::select! {
                biased;
                () = self.slot.newer_than(self.seq) => return Ok(None),
                fitted = fit::fit(self.shared, view, &self.user, overhead, refused.is_some()) => fitted,
            };
            match fitted {
                // Stored, not part of the turn's answer (as a turn read
                // back from the store shows it).
                Fitted::Compacted(Some(summary)) => {
                    post(self.shared, self.holder, &summary).await?;
                }
                Fitted::Compacted(None) => {}
                Fitted::Unchanged => {
                    if let Some(e) = refused {
                        return Ok(Some(Err(CallError::Model(e))));
                    }
                }
            }
            let (_, raw) = view.estimate(overhead);
            match self.ask(&view.messages, step).await {
                Some(Ok(mut reply)) => {
                    fit::stamp(&mut reply, raw);
                    return Ok(Some(Ok(reply)));
                }
                Some(Err(CallError::Model(
                    e @ LlmError::ContextOverflow { tokens, limit, .. },
                ))) if !matches!(self.shared.compaction, Compaction::Off) => {
                    tracing::warn!(
                        ?tokens,
                        ?limit,
                        "the model refused the request as too long; compacting and asking again"
                    );
                    fit::learn(self.shared, view, raw, tokens, limit);
                    refused = Some(e);
                }
                other => return Ok(other),
            }
        }
        Ok(refused.map(|e| Err(CallError::Model(e))))
    }

    /// One model call; the first of a new prompt's, while the input
    /// guardrails check the prompt: when one objects, the call is dropped
    /// wherever it is, and its reply (if it came) is not the turn's.
    /// `None` when a newer user message arrived first.
    async fn ask(&self, view: &[Message], step: usize) -> Option<Result<AssistantTurn, CallError>> {
        let asked = self.ask_hooked(view, step);
        let guardrails = &self.shared.input_guardrails;
        // Nothing answers the prompt yet: this is its first model call.
        let first = view.last().is_some_and(|m| m.id == self.user.id);
        if guardrails.is_empty() || !first || self.input_checked.swap(true, Ordering::Relaxed) {
            return asked.await;
        }
        let input = GuardInput {
            session_id: self.user.session_id.clone(),
            prompt_id: self.user.id.clone(),
            text: self.user.content.clone(),
        };
        let checked = guardrails_in_turn::objection(guardrails, &input);
        // What the model streams waits for the checks: a prompt they stop
        // shows its user nothing of the reply.
        self.hold_deltas();
        let (mut asked, mut checked) = (pin!(asked), pin!(checked));
        let objection = tokio::select! {
            biased;
            objection = &mut checked => objection,
            reply = &mut asked => {
                let objection = match reply {
                    None => None,
                    Some(_) => self.unless_newer(checked).await,
                };
                let passed = matches!(objection, Some(Ok(None | Some((_, GuardVerdict::Pass)))));
                self.release_deltas(passed);
                if passed || objection.is_none() {
                    return reply.filter(|_| passed);
                }
                objection?
            }
        };
        let passed = matches!(objection, Ok(None | Some((_, GuardVerdict::Pass))));
        self.release_deltas(passed);
        match objection {
            Ok(None | Some((_, GuardVerdict::Pass))) => asked.await,
            Ok(Some((name, GuardVerdict::Trip(reason) | GuardVerdict::Retry(reason)))) => {
                Some(Err(CallError::Tripped(name, reason)))
            }
            Err(failure) => Some(Err(CallError::Hook(failure))),
        }
    }

    /// Holds what the model streams until [`release_deltas`](Self::release_deltas).
    fn hold_deltas(&self) {
        *self.held.lock().unwrap_or_else(PoisonError::into_inner) = Some(Vec::new());
    }

    /// Ends the hold: what was held is published (`publish`), or dropped.
    fn release_deltas(&self, publish: bool) {
        let held = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if publish {
            for delta in held.into_iter().flatten() {
                self.send_out(delta);
            }
        }
    }

    /// Publishes `delta` to the session's listeners, and a nested turn's
    /// to the top session's.
    fn send_out(&self, delta: Delta) {
        if let Some(position) = &self.position {
            position.delta(&delta);
        }
        self.shared.gateway.publish(delta);
    }

    /// Publishes a streamed piece to the gateway's listeners, or holds it.
    fn publish(&self, delta: Delta) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = held.as_mut() {
            held.push(delta);
        } else {
            drop(held);
            self.send_out(delta);
        }
    }

    /// One model call, between the hooks' before and after (a hook's reply
    /// stands for the model's); `None` when a newer user message arrived
    /// first (the call is dropped).
    async fn ask_hooked(
        &self,
        view: &[Message],
        step: usize,
    ) -> Option<Result<AssistantTurn, CallError>> {
        let shared = self.shared;
        let options = self.options.as_ref().unwrap_or(&shared.options);
        if shared.hooks.is_empty() {
            return self
                .call(view, step, options)
                .await
                .map(|r| r.map_err(CallError::Model));
        }
        // The hooks change this call's options, not the turn's.
        let mut options = options.clone();
        let before = hooks_in_turn::before_model(
            &shared.hooks,
            &self.user.session_id,
            step,
            view,
            &self.declarations,
            &mut options,
        );
        let given = tokio::select! {
            biased;
            () = self.slot.newer_than(self.seq) => return None,
            given = before => given,
        };
        let reply = match given {
            Err(failure) => return Some(Err(CallError::Hook(failure))),
            Ok(Some(reply)) => reply,
            Ok(None) => match self.call(view, step, &options).await? {
                Ok(reply) => reply,
                Err(e) => return Some(Err(CallError::Model(e))),
            },
        };
        let after = hooks_in_turn::after_model(&shared.hooks, &self.user.session_id, &reply);
        Some(match self.unless_newer(after).await? {
            Ok(()) => Ok(reply),
            Err(failure) => Err(CallError::Hook(failure)),
        })
    }

    /// The model call itself, with its span and metrics; `None` when a
    /// newer user message arrived first (the call is dropped).
    async fn call(
        &self,
        view: &[Message],
        step: usize,
        options: &LlmOptions,
    ) -> Option<Result<AssistantTurn, LlmError>> {
        let shared = self.shared;
        let streams = shared.streaming && shared.llm.streams();
        let span = telemetry::model_span(
            shared.llm.provider(),
            shared.llm.base_url(),
            options,
            &self.user.session_id,
            Some(step),
            streams,
        );
        if shared.capture_content {
            telemetry::record_input(&span, view);
        }
        let call = self.reply(view, &span, options).instrument(span.clone());
        let requested_at = std::time::Instant::now();
        let reply = tokio::select! {
            biased;
            () = self.slot.newer_than(self.seq) => return None,
            reply = call => reply,
        };
        shared.metrics.model_call(
            shared.llm.provider(),
            shared.llm.base_url(),
            &options.model,
            &reply,
            requested_at.elapsed(),
        );
        match &reply {
            Ok(turn) => telemetry::record_reply(&span, turn, shared.capture_content),
            Err(e) => telemetry::record_error(&span, e),
        }
        Some(reply)
    }

    /// The model's reply: streamed when the model streams and the agent
    /// does (each piece published to the gateway's delta listeners as it
    /// comes), else completed. Either way, one turn.
    async fn reply(
        &self,
        view: &[Message],
        span: &tracing::Span,
        options: &LlmOptions,
    ) -> Result<AssistantTurn, LlmError> {
        let shared = self.shared;
        let session = &self.user.session_id;
        if !(shared.streaming && shared.llm.streams()) {
            return shared
                .llm
                .complete(session, view, &self.declarations, options)
                .await;
        }
        let mut events = shared
            .llm
            .stream(session, view, &self.declarations, options);
        let requested_at = std::time::Instant::now();
        let mut first = true;
        while let Some(event) = events.next().await {
            // A chunk came only when the event is one: a refusal (a 401)
            // is an error before any.
            if event.is_ok() && std::mem::take(&mut first) {
                telemetry::record_first_chunk(span, requested_at.elapsed());
            }
            let kind = match event? {
                StreamEvent::Done(turn) => return Ok(turn),
                StreamEvent::Text(t) => DeltaKind::Text(t),
                StreamEvent::Thought(t) => DeltaKind::Thought(t),
                StreamEvent::ToolCallStart { index, id, name } => {
                    DeltaKind::ToolCall { index, id, name }
                }
                StreamEvent::ToolCallArguments { index, delta } => {
                    DeltaKind::ToolArguments { index, delta }
                }
                _ => continue,
            };
            self.publish(Delta::new(session.clone(), kind).replying_to(self.user.id.clone()));
        }
        // A stream ends with its turn or an error; this is neither.
        Err(LlmError::Stream {
            provider: shared.llm.provider(),
            message: "the stream ended without a turn".into(),
        })
    }
}
