//! [`Team`]: agents that know each other by name, so each may hand a
//! session to any other ([`AgentBuilder::handoff_to`](super::AgentBuilder::handoff_to)), however they
//! were built (two agents that hand back to each other cannot each be
//! built with the other), and any of them serving runs every member's
//! turns.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// A member, as the team keeps it: what every clone of an agent shares
/// (`shared.rs` reads it back), held weakly, so a dropped agent leaves.
type Member = Weak<dyn Any + Send + Sync>;

/// Agents that know each other by name: each joins as it is built
/// ([`AgentBuilder::team`](super::AgentBuilder::team)), and hands sessions to the others by name
/// ([`AgentBuilder::handoff_to`](super::AgentBuilder::handoff_to)). Members share one store, and each
/// has a name of its own; a member that is dropped leaves the team.
/// Cheap to clone: clones are the same team.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use kesoku_agent::{Agent, Team};
/// use kesoku_llm::ScriptedLlm;
/// use serde_json::json;
///
/// let team = Team::new();
/// let triage = Agent::builder(ScriptedLlm::from_json(json!([
///     {"tool_calls": [{"id": "h1", "name": "transfer_to_billing", "arguments": {}}]}
/// ])).unwrap())
/// .name("triage")
/// .team(&team)
/// .handoff_to("billing", "invoices and payments")
/// .build()
/// .unwrap();
/// let _billing = Agent::builder(ScriptedLlm::from_json(json!([
///     {"text": "Billing here."}
/// ])).unwrap())
/// .name("billing")
/// .team(&team)
/// .handoff_to("triage", "anything but invoices")
/// .build()
/// .unwrap();
/// assert_eq!(team.names(), ["billing", "triage"]);
/// let outcome = triage.send("s", "Is my invoice paid?").await.unwrap();
/// assert_eq!(outcome.answer.as_deref(), Some("Billing here."));
/// # });
/// ```
#[derive(Clone, Default)]
pub struct Team {
    members: Arc<Mutex<HashMap<String, Member>>>,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("members", &self.names())
            .finish()
    }
}

impl Team {
    /// A team with no members yet.
    pub fn new() -> Self {
        Team::default()
    }

    /// The names of its members, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, m)| m.strong_count() > 0)
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// The member named `name`, if it is still alive.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn Any + Send + Sync>> {
        self.lock().get(name)?.upgrade()
    }

    /// Any live member.
    pub(crate) fn any(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        self.lock().values().find_map(Weak::upgrade)
    }

    /// The live members.
    pub(crate) fn members(&self) -> Vec<Arc<dyn Any + Send + Sync>> {
        self.lock().values().filter_map(Weak::upgrade).collect()
    }

    /// Adds `member` as `name`; an error when another live member has
    /// that name.
    pub(crate) fn join(
        &self,
        name: &str,
        member: &Arc<dyn Any + Send + Sync>,
    ) -> Result<(), String> {
        let mut members = self.lock();
        if members.get(name).is_some_and(|m| m.strong_count() > 0) {
            return Err(format!(
                "the team has an agent named `{name}` already: give each member its own name (`AgentBuilder::name`)"
            ));
        }
        members.insert(name.to_owned(), Arc::downgrade(member));
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Member>> {
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
