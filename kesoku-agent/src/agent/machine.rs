//! The rules of one turn, with no IO: a state machine that reads what has
//! happened (the history the turn starts from, the model's reply, the
//! calls' results, an interruption) and decides what comes next (ask the
//! model, run these calls, or finish with a status), with the messages to
//! post first. `run.rs` drives it: it does the posts, the model calls,
//! the runs, the leases and the streaming, and feeds back what came of
//! them.
//!
//! | state | fed | decides |
//! | --- | --- | --- |
//! | start ([`Machine::start`]) | the session's history | finish (answered already), run the calls waiting, or ask |
//! | [`Ask`] | [`replied`](Ask::replied) | nudge and ask again, run its calls, or finish `completed` |
//! | [`Ask`] | [`failed`](Ask::failed) | finish `failed` |
//! | [`Ask`] | [`interrupted`](Ask::interrupted) | finish `interrupted` |
//! | [`Run`] | [`results`](Run::results) | ask again, finish at the step limit, or pause for approval |
//!
//! Where a turn stands is read from its messages (those answering the
//! prompt, and the results answering its calls), so a turn can be picked
//! up from the store by any worker. A pause for a person's approval is
//! such a state: a step whose calls the policy asks about runs the others,
//! then finishes `awaiting_approval`; [`Machine::start`] re-enters it once
//! the calls are decided (`approval.rs`). The step count and the nudge
//! are one run's: a turn resumed elsewhere starts them again, as it
//! always has.
//!
//! What it is given besides the history is a [`Setup`]: the ids and times
//! of the messages it makes (a [`Clock`]), the answer asked for, the step
//! limit, and what a call held for a person is stamped with (its prompt's
//! place, its deadline); fed the same, a turn makes the same messages,
//! byte for byte. The calls a history left without results are answered
//! first, by the rule in `heal.rs`.

use std::collections::HashMap;
use std::time::Duration;

use kesoku_core::store::Seq;
use kesoku_core::{
    Message, MessageType, OutputError, OutputSchema, Role, Status, ToolRequest, keys,
};
use kesoku_llm::{AssistantTurn, LlmError, StopReason};

use super::approval::{self, Approval, Verdict};
use super::clock::Clock;
use super::guardrails::GuardVerdict;
use super::outcome::{GUARDRAIL, HookFailure, Tripped, TurnStatus};
use super::typed;
use super::view::{healing_result, orphans};

/// What the model is told when it answered with nothing.
pub(crate) const NUDGE: &str = "Your last reply was empty. Answer the user's last message now.";

/// A call to run: its request, and the message that records it.
pub(crate) type Call = (ToolRequest, Message);

/// What a turn is given besides its history: where its ids and times
/// come from, the answer it asks for, its limits, and what it stamps on a
/// call that waits for a person.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    pub(crate) clock: Clock,
    /// The shape a typed prompt asks for, with its repairs
    /// (`typed::answer_shape`).
    pub(crate) answer_shape: Option<(OutputSchema, usize)>,
    /// The most model calls a run makes.
    pub(crate) max_steps: usize,
    /// Where the prompt is stored: a decision reads the session from
    /// there on.
    pub(crate) prompt_seq: Seq,
    /// How long a call waits for a person before a sweep answers it as
    /// denied; `None`, as long as it takes.
    pub(crate) approval_wait: Option<Duration>,
    /// How many more answers the model may give after an output
    /// guardrail sent one back.
    pub(crate) guard_retries: usize,
}

/// The turn of one prompt, between two decisions.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    /// The ids and times of the messages it makes.
    clock: Clock,
    /// Where the prompt is stored, and how long a held call waits.
    prompt_seq: Seq,
    approval_wait: Option<Duration>,
    /// Answers an output guardrail may still send back (counted from the
    /// store, as repairs are), and its verdict on the reply being read.
    guard_retries: usize,
    guarded: Option<(String, GuardVerdict)>,
    session: String,
    /// The id of the user message the turn answers.
    prompt: String,
    max_steps: usize,
    /// Model calls asked for so far in this run.
    steps: usize,
    /// Whether this run has nudged the model after an empty reply.
    nudged: bool,
    /// Calls of each tool this turn has stored (for per-turn use limits).
    uses: HashMap<String, usize>,
    /// The shape a typed prompt's answer must have.
    output: Option<OutputSchema>,
    /// How many more answers the model may give after one that does not
    /// fit (counted from the store, so a resumed turn has no more).
    repairs: usize,
}

/// What to do next: post these messages (in order, each added to the
/// model's view), then [`next`](Self::next).
#[derive(Debug)]
#[must_use]
pub(crate) struct Decision {
    pub(crate) post: Vec<Message>,
    pub(crate) next: Next,
}

/// The step after the posts.
#[derive(Debug)]
pub(crate) enum Next {
    /// Ask the model, with the view as it stands.
    Ask(Ask),
    /// Run these calls.
    Run(Run),
    /// The turn is over.
    Finish(Finish),
}

/// Waiting for the model's reply.
#[derive(Debug)]
pub(crate) struct Ask(Machine);

/// Waiting for the results of [`calls`](Run::calls).
#[derive(Debug)]
pub(crate) struct Run {
    machine: Machine,
    calls: Vec<Call>,
    /// Calls of the step stored as waiting for a person: with some, the
    /// turn pauses after these results.
    held: Vec<Message>,
    /// Results of calls that will not run (refused by the policy, or
    /// denied by a person), posted before the step's others.
    refused: Vec<Message>,
    /// Whether an agent called as a tool paused for a person (`nested.rs`).
    nested_waits: bool,
}

/// How the turn ends: its status and answer, and the status its prompt
/// is settled with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finish {
    pub(crate) status: TurnStatus,
    pub(crate) answer: Option<String>,
    pub(crate) settle: Status,
    /// The model call's error that failed the turn.
    pub(crate) error: Option<LlmError>,
    /// The hook that failed the turn.
    pub(crate) hook_error: Option<HookFailure>,
    /// The guardrail that stopped it.
    pub(crate) tripped: Option<Tripped>,
}

impl Finish {
    fn new(status: TurnStatus, answer: Option<String>, settle: Status) -> Self {
        Finish {
            status,
            answer,
            settle,
            error: None,
            hook_error: None,
            tripped: None,
        }
    }

    /// A pause until a person decides the waiting calls.
    fn pause() -> Self {
        Finish::new(TurnStatus::AwaitingApproval, None, Status::AwaitingApproval)
    }
}

impl Decision {
    fn finish(post: Vec<Message>, finish: Finish) -> Self {
        Decision {
            post,
            next: Next::Finish(finish),
        }
    }
}

impl Machine {
    /// The turn of `prompt` (a user message), asking for the answer shape
    /// it stores if any (`answer_shape`, read by `typed::answer_shape`,
    /// with its repairs), at most `max_steps` model calls a run, from
    /// `history`, the session as stored, and the `decisions` on its calls
    /// that waited for a person (by call message id). A turn whose last message answers the prompt is over (its
    /// worker died before settling it); one with a waiting call not yet
    /// decided pauses again; one with calls left without results runs
    /// them (the approved ones; the denied ones are answered with their
    /// reasons); else the model is asked.
    pub(crate) fn start(
        setup: Setup,
        prompt: &Message,
        history: &[Message],
        decisions: &HashMap<&str, Verdict>,
    ) -> Decision {
        let mut machine = Machine::new(setup, prompt);
        // Whatever answers the prompt was stored after it, and the prompt
        // is at or near the end: the rest of a long history is not read.
        let from = history
            .iter()
            .rposition(|m| m.id == machine.prompt)
            .unwrap_or(0);
        let history = &history[from..];
        machine.count_stored(history);
        // A rejected answer whose feedback was never stored (its worker
        // stopped between the two posts) is not the answer: the feedback
        // now, and the try it gives.
        if let Some((error, cut)) = machine.rejected(history) {
            machine.repairs -= 1;
            let note = machine.feedback(&error, cut);
            return machine.next_step(vec![note]);
        }
        // The same for an answer an output guardrail sent back.
        if let Some(note) = machine.sent_back(history) {
            return machine.next_step(vec![note]);
        }
        if let Some(finish) = machine.answered(history) {
            return Decision::finish(Vec::new(), finish);
        }
        let Some((run, post)) = machine.left_calls(history, decisions) else {
            // Taken before its calls were decided: it waits on.
            return Decision::finish(Vec::new(), Finish::pause());
        };
        if !run.is_empty() || !post.is_empty() {
            return Decision {
                post: Vec::new(),
                next: Next::Run(Run {
                    machine,
                    calls: run,
                    held: Vec::new(),
                    refused: post,
                    nested_waits: false,
                }),
            };
        }
        machine.next_step(Vec::new())
    }

    /// A turn of `prompt` with nothing counted yet.
    fn new(setup: Setup, prompt: &Message) -> Self {
        let Setup {
            clock,
            answer_shape,
            max_steps,
            prompt_seq,
            approval_wait,
            guard_retries,
        } = setup;
        let (output, repairs) = answer_shape.map_or((None, 0), |(o, r)| (Some(o), r));
        Machine {
            clock,
            prompt_seq,
            approval_wait,
            guard_retries,
            guarded: None,
            session: prompt.session_id.clone(),
            prompt: prompt.id.clone(),
            max_steps,
            steps: 0,
            nudged: false,
            uses: HashMap::new(),
            output,
            repairs,
        }
    }

    /// What the stored `history` (from the prompt on) already spent: the
    /// repairs its feedback notes gave, and each tool's calls.
    fn count_stored(&mut self, history: &[Message]) {
        let answers = |m: &&Message| m.parent_id.as_deref() == Some(self.prompt.as_str());
        let given = history
            .iter()
            .filter(answers)
            .filter(|m| typed::is_feedback(m) && !m.metadata.contains_key(GUARDRAIL))
            .count();
        let sent_back = history
            .iter()
            .filter(answers)
            .filter(|m| typed::is_feedback(m) && m.metadata.contains_key(GUARDRAIL))
            .count();
        self.guard_retries = self.guard_retries.saturating_sub(sent_back);
        let mut uses = HashMap::new();
        for call in history
            .iter()
            .filter(answers)
            .filter(|m| m.kind == MessageType::ToolCall)
        {
            let tool = call.meta_str(keys::TOOL_NAME).unwrap_or_default();
            *uses.entry(tool.to_owned()).or_default() += 1;
        }
        self.repairs = self.repairs.saturating_sub(given);
        self.uses = uses;
    }

    /// The prompt's calls left without results in `history`, sorted by
    /// the `decisions` on those held for a person: the ones to run, and
    /// the results of those not to (denied, or begun by a worker that
    /// stopped); `None` while a held call is undecided.
    fn left_calls(
        &self,
        history: &[Message],
        decisions: &HashMap<&str, Verdict>,
    ) -> Option<(Vec<Call>, Vec<Message>)> {
        let mut run = Vec::new();
        // Denied: answered with the step's results.
        let mut post = Vec::new();
        let mut undecided = 0;
        for call in orphans(history)
            .into_iter()
            .filter(|m| m.parent_id.as_deref() == Some(self.prompt.as_str()))
        {
            if !approval::is_held(call) {
                run.push((request_of(call), call.clone()));
                continue;
            }
            match decisions.get(call.id.as_str()) {
                None => undecided += 1,
                // Begun by a worker that stopped before its result: it may
                // have run, so it is not run again.
                Some(Verdict::Approve) if call.status == Status::Processing => {
                    post.push(self.clock.stamp(healing_result(call)));
                }
                Some(Verdict::Approve) => run.push((request_of(call), call.clone())),
                Some(Verdict::Deny(reason)) => {
                    post.push(
                        self.clock
                            .stamp(approval::denied_result(call, reason.as_deref())),
                    );
                }
            }
        }
        (undecided == 0).then_some((run, post))
    }

    /// The last message answering the prompt.
    fn last_answer<'h>(&self, history: &'h [Message]) -> Option<&'h Message> {
        history
            .iter()
            .rev()
            .find(|m| m.parent_id.as_deref() == Some(self.prompt.as_str()))
    }

    /// What is wrong with the typed answer `history` ends on, when the
    /// model has tries left to fix it; and whether the output limit cut
    /// it short.
    fn rejected(&self, history: &[Message]) -> Option<(OutputError, bool)> {
        let output = self.output.as_ref().filter(|_| self.repairs > 0)?;
        let last = self.last_answer(history)?;
        let rejected = last.role == Role::Assistant
            && last.kind == MessageType::Text
            && last.metadata.contains_key(typed::REJECTED);
        let cut = last.metadata.get(typed::CUT).is_some_and(|v| v == true);
        let error = rejected
            .then(|| output.read(&last.content).err())
            .flatten()?;
        Some((error, cut))
    }

    /// The feedback on an answer that does not fit, read as the user's turn.
    fn feedback(&self, error: &OutputError, cut: bool) -> Message {
        let mut note = self.note(Role::System, typed::feedback(error, cut), Status::Responded);
        note.metadata.insert(keys::FEEDBACK.into(), true.into());
        note
    }

    /// How the turn ended, when `history` says it did: its last message
    /// answering the prompt is an assistant text (the answer, or the note
    /// of a failure or of the step limit).
    fn answered(&self, history: &[Message]) -> Option<Finish> {
        let last = self.last_answer(history)?;
        if last.role != Role::Assistant || last.kind != MessageType::Text {
            return None;
        }
        if last.metadata.contains_key("error") {
            return Some(Finish::new(TurnStatus::Failed, None, Status::Error));
        }
        if let Some(tripped) = Tripped::of(last) {
            return Some(Finish::tripped(tripped));
        }
        let answer = (!last.metadata.contains_key("step_limit")).then(|| last.content.clone());
        Some(Finish::new(
            TurnStatus::Completed,
            answer,
            Status::Processed,
        ))
    }

    /// After `post`: the next model call, or the end at the step limit.
    fn next_step(mut self, mut post: Vec<Message>) -> Decision {
        if self.steps >= self.max_steps {
            let note = format!(
                "I stopped after {} model calls, this agent's step limit, before reaching an answer. Ask me to continue if you want me to go on.",
                self.max_steps
            );
            let mut m = self.note(Role::Assistant, note, Status::Pending);
            m.metadata.insert("step_limit".into(), true.into());
            post.push(m);
            return Decision::finish(
                post,
                Finish::new(TurnStatus::StepLimit, None, Status::Processed),
            );
        }
        self.steps += 1;
        Decision {
            post,
            next: Next::Ask(Ask(self)),
        }
    }

    /// A message of the agent's own, answering the prompt.
    fn note(&self, role: Role, text: String, status: Status) -> Message {
        self.clock.stamp(
            Message::new(&self.session, role, MessageType::Text, text)
                .with_sender("agent")
                .with_status(status)
                .with_parent(&self.prompt),
        )
    }

    /// Marks the call `m` as waiting for a person, with where the prompt
    /// is stored (a decision reads the session from there on) and its
    /// deadline, if the agent gives one (a sweep then answers it as
    /// denied).
    fn hold(&self, m: &mut Message) {
        m.metadata.insert(approval::HELD.into(), "asked".into());
        m.metadata
            .insert(approval::AFTER.into(), self.prompt_seq.into());
        // A deadline past what a date can hold is none.
        let Some(deadline) = self.approval_wait.and_then(|wait| {
            let wait = chrono::Duration::from_std(wait).ok()?;
            self.clock.now().checked_add_signed(wait)
        }) else {
            return;
        };
        m.metadata.insert(
            approval::DEADLINE.into(),
            deadline
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                .into(),
        );
    }

    /// `m`, one of the model's messages, as posted: answering the prompt.
    fn answering(&self, mut m: Message, status: Status) -> Message {
        m.status = status;
        m.parent_id = Some(self.prompt.clone());
        m
    }
}

impl Ask {
    /// The model call this is, from 1.
    pub(crate) fn step(&self) -> usize {
        self.0.steps
    }

    /// The model replied. Without calls, its text is the answer; empty
    /// text gets one nudge a run, and is the (empty) answer after it. With
    /// calls, its text (if not empty) and each call are posted, then the
    /// calls run.
    pub(crate) fn replied(
        self,
        turn: AssistantTurn,
        policy: &dyn Fn(&ToolRequest) -> Approval,
        max_uses: &dyn Fn(&str) -> Option<usize>,
    ) -> Decision {
        let mut machine = self.0;
        // An output guardrail's verdict is on this reply's answer alone.
        let verdict = machine.guarded.take();
        if turn.calls.is_empty() {
            machine.text_reply(turn, verdict)
        } else {
            machine.calls_reply(turn, policy, max_uses)
        }
    }
}

impl Machine {
    /// A reply without calls: its text is the answer; empty text gets one
    /// nudge a run, and is the (empty) answer after it; a typed answer
    /// that does not fit gets feedback while the model has tries left.
    fn text_reply(self, turn: AssistantTurn, verdict: Option<(String, GuardVerdict)>) -> Decision {
        let mut machine = self;
        if turn.text.trim().is_empty() && !machine.nudged {
            machine.nudged = true;
            let mut nudge = machine.note(Role::System, NUDGE.to_owned(), Status::Responded);
            // The empty reply is not stored; the tokens it cost are,
            // with the note that answers it.
            if let Some(usage) = turn
                .messages()
                .next()
                .and_then(|m| m.metadata.get(keys::USAGE))
            {
                nudge.metadata.insert(keys::USAGE.into(), usage.clone());
            }
            return machine.next_step(vec![nudge]);
        }
        // A refusal stands: asking again would not change it, and the
        // caller reads it in the error's text.
        let refused = turn.stop_reason == StopReason::Refusal;
        let cut = turn.stop_reason == StopReason::MaxTokens;
        // The answer is posted as it came (provider fields kept), for
        // the user to take: `pending`; marked when the output limit
        // cut it short.
        let answer = turn
            .text_message
            .filter(|m| !m.content.trim().is_empty())
            .map(|m| {
                let mut m = machine.answering(*m, Status::Pending);
                if cut {
                    m.metadata.insert(typed::CUT.into(), true.into());
                }
                m
            });
        // A typed answer that does not fit is kept, and the model is
        // told what is wrong, while it has tries and steps left (at
        // the last step the answer stands, for the caller to see why).
        if let (Some(output), Some(given)) = (&machine.output, &answer)
            && machine.repairs > 0
            && machine.steps < machine.max_steps
            && !refused
            && let Err(error) = output.read(&given.content)
        {
            machine.repairs -= 1;
            let mut given = answer.unwrap_or_else(|| unreachable!("matched above"));
            given.status = Status::Responded;
            given.metadata.insert(typed::REJECTED.into(), true.into());
            let note = machine.feedback(&error, cut);
            return machine.next_step(vec![given, note]);
        }
        // A typed answer that does not fit is sent back above, before an
        // output guardrail's verdict on it counts.
        machine.complete(answer, verdict)
    }

    /// A reply with calls: its text (if not empty) and each call are
    /// posted, a call over its tool's limit or denied by the `policy`
    /// answered as refused, one it asks about held for a person; the rest
    /// run.
    fn calls_reply(
        self,
        turn: AssistantTurn,
        policy: &dyn Fn(&ToolRequest) -> Approval,
        max_uses: &dyn Fn(&str) -> Option<usize>,
    ) -> Decision {
        let mut machine = self;
        let mut post = Vec::with_capacity(turn.calls.len() + 1);
        if let Some(m) = turn.text_message.filter(|m| !m.content.is_empty()) {
            post.push(machine.answering(*m, Status::Responded));
        }
        let mut calls: Vec<Call> = Vec::with_capacity(turn.calls.len());
        let mut denied = Vec::new();
        let mut held = Vec::new();
        for call in turn.calls {
            let mut m = machine.answering(call.message, Status::Responded);
            let name = &call.request.name;
            let used = machine.uses.get(name).copied().unwrap_or(0);
            let limited = max_uses(name);
            if let Some(limit) = limited
                && used >= limit
            {
                denied.push(machine.clock.stamp(approval::refused_result(
                    &m,
                    &format!(
                        "`{name}` may be called at most {limit} time{} in one turn, and was called {used}; this call did not run",
                        if limit == 1 { "" } else { "s" }
                    ),
                    "limit",
                )));
                post.push(m);
                continue;
            }
            if limited.is_some() {
                *machine.uses.entry(name.clone()).or_default() += 1;
            }
            match policy(&call.request) {
                Approval::Allow => calls.push((call.request, m.clone())),
                Approval::Ask => {
                    machine.hold(&mut m);
                    held.push(m.clone());
                }
                Approval::Deny(reason) => {
                    denied.push(machine.clock.stamp(approval::refused_result(
                        &m,
                        &format!("the call to `{name}` is not allowed: {reason}"),
                        "denied",
                    )));
                }
            }
            post.push(m);
        }
        Decision {
            post,
            next: Next::Run(Run {
                machine,
                calls,
                held,
                refused: denied,
                nested_waits: false,
            }),
        }
    }
}

impl Run {
    /// The calls to run, each with its message, in the model's order.
    pub(crate) fn calls(&self) -> &[Call] {
        &self.calls
    }

    /// The calls a person approved, among those to run: each is marked
    /// begun in the store before any runs (`approval_in_turn.rs`), so a
    /// worker that dies running it leaves a mark.
    pub(crate) fn approved(&self) -> impl Iterator<Item = &Message> {
        self.calls
            .iter()
            .map(|(_, m)| m)
            .filter(|m| approval::is_held(m))
    }

    /// The approved call `id` was found marked begun already (another
    /// worker took it first): it may have run there, so it does not run
    /// here, and its result says so.
    pub(crate) fn begun_elsewhere(&mut self, id: &str) {
        if let Some(i) = self.calls.iter().position(|(_, m)| m.id == id) {
            let (_, call) = self.calls.remove(i);
            self.refused
                .push(self.machine.clock.stamp(healing_result(&call)));
        }
    }

    /// The calls' `results` came back: each call's result is posted
    /// after the others in call order, whatever order they came in; a
    /// call left without one gets an error result (it may or may not have
    /// run), and a result of no call here is kept, after them. Then the
    /// next step.
    pub(crate) fn results(mut self, results: Vec<Message>) -> Decision {
        let post = self.paired(results, healing_result);
        if !self.held.is_empty() || self.nested_waits {
            return Decision::finish(post, Finish::pause());
        }
        self.machine.next_step(post)
    }

    /// The step's results to post: the refused ones, then one per call in
    /// call order (`missing`'s for a call `results` has none of), then any
    /// result of no call here.
    fn paired(&mut self, results: Vec<Message>, missing: fn(&Message) -> Message) -> Vec<Message> {
        let mut results: Vec<Option<Message>> = results.into_iter().map(Some).collect();
        let mut post = Vec::with_capacity(self.calls.len() + self.refused.len());
        post.append(&mut self.refused);
        for (_, call) in &self.calls {
            let mine = results
                .iter_mut()
                .find(|r| {
                    r.as_ref()
                        .is_some_and(|r| r.parent_id.as_deref() == Some(call.id.as_str()))
                })
                .and_then(Option::take);
            post.push(mine.unwrap_or_else(|| self.machine.clock.stamp(missing(call))));
        }
        post.extend(results.into_iter().flatten());
        post
    }
}

/// The request a stored `tool_call` message records.
fn request_of(call: &Message) -> ToolRequest {
    ToolRequest::new(
        call.meta_str(keys::CALL_ID).unwrap_or_default(),
        call.meta_str(keys::TOOL_NAME).unwrap_or_default(),
        call.metadata
            .get(keys::ARGUMENTS)
            .cloned()
            .unwrap_or_default(),
    )
}

mod failed;
#[cfg(test)]
mod guard_tests;
mod guarded;
#[cfg(test)]
mod held_tests;
mod hooked;
mod nested;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod typed_tests;
