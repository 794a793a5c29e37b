//! Putting agents together as one is built: the agents it offers as
//! tools and hands sessions to share its store and have names of their
//! own; their tools join its own; and it knows each of them (and theirs)
//! by name, for `serve` and for handoffs.

use std::collections::HashMap;
use std::sync::Arc;

use kesoku_core::gateway::Gateway;
use kesoku_core::store::MemoryStore;
use kesoku_core::{RegistryRef, ToolRegistry};

use super::Agent;
use super::handoff;
use super::outcome::AgentError;
use super::shared::Shared;
use super::subagent::AgentTool;
use super::team::Team;
use super::toolset::Toolset;

/// A handoff as the builder was given it.
pub(crate) enum Handoff {
    /// To this agent.
    To(Agent, String),
    /// To the member of the agent's team with this name.
    Named(String, String),
}

/// What the builder gives.
pub(crate) struct Parts<'a> {
    pub(crate) name: &'a str,
    pub(crate) gateway: Option<Gateway>,
    pub(crate) team: Option<&'a Team>,
    pub(crate) tools: Option<Toolset>,
    pub(crate) sub_agents: Vec<AgentTool>,
    pub(crate) handoffs: Vec<Handoff>,
}

/// What the agent is made of.
pub(crate) struct Composed {
    pub(crate) gateway: Gateway,
    pub(crate) tools: Toolset,
    pub(crate) roster: HashMap<String, Arc<Shared>>,
    pub(crate) handoffs: HashMap<String, String>,
}

/// The agent's store, tools and the agents it knows; an error names what
/// does not fit (another store, a name twice, a handoff by name without
/// a team, a tool name taken).
pub(crate) fn compose(parts: Parts<'_>) -> Result<Composed, AgentError> {
    let config = |e: String| AgentError::Config(e);
    let known: Vec<(&str, &Arc<Shared>)> = parts
        .sub_agents
        .iter()
        .map(|t| (t.name(), &t.agent().shared))
        .chain(parts.handoffs.iter().filter_map(|h| match h {
            Handoff::To(agent, _) => Some((agent.shared.name.as_str(), &agent.shared)),
            Handoff::Named(..) => None,
        }))
        .collect();
    let team_store = parts
        .team
        .and_then(Team::any)
        .and_then(|m| m.downcast::<Shared>().ok());
    // An agent that sets no store keeps its sessions where the agents it
    // knows keep theirs.
    let gateway = parts
        .gateway
        .or_else(|| known.first().map(|(_, s)| s.gateway.clone()))
        .or_else(|| team_store.as_ref().map(|s| s.gateway.clone()))
        .unwrap_or_else(|| Gateway::new(MemoryStore::new()));
    let others = known.iter().copied();
    let others = others.chain(team_store.as_ref().map(|s| ("a member of its team", s)));
    for (name, other) in others {
        if !same_store(&other.gateway, &gateway) {
            return Err(config(format!(
                "the agent `{name}` keeps its sessions in another store than this agent: build both over one (`AgentBuilder::gateway` with a clone of one gateway), so a decision or a resumed turn finds each one's sessions from the other's"
            )));
        }
    }
    let roster = roster(parts.name, &known)?;
    let mut handoffs = HashMap::new();
    let mut extra = Vec::new();
    for h in &parts.handoffs {
        let (target, description) = match h {
            Handoff::To(agent, d) => (agent.shared.name.as_str(), d),
            Handoff::Named(name, d) if parts.team.is_some() => (name.as_str(), d),
            Handoff::Named(name, _) => {
                return Err(config(format!(
                    "`handoff_to(\"{name}\")` names an agent by its name within a team: join one with `AgentBuilder::team`, or give the agent itself to `handoff`"
                )));
            }
        };
        handoffs.insert(handoff::tool_name(target), target.to_owned());
        extra.push(handoff::tool(target, description).map_err(|e| config(e.to_string()))?);
    }
    for tool in parts.sub_agents {
        extra.push(tool.into_tool().map_err(|e| config(e.to_string()))?);
    }
    let tools = parts
        .tools
        .unwrap_or_else(|| Toolset::fixed(RegistryRef::from(ToolRegistry::new())))
        .with(extra)
        .map_err(config)?;
    Ok(Composed {
        gateway,
        tools,
        roster,
        handoffs,
    })
}

/// Whether two gateways keep their sessions in one store.
fn same_store(a: &Gateway, b: &Gateway) -> bool {
    Arc::as_ptr(a.store()).cast::<()>() == Arc::as_ptr(b.store()).cast::<()>()
}

/// The agents given (by name), and those they know; an error when two
/// differ but share a name, or one has the name of the agent being built
/// (`name`).
fn roster(
    name: &str,
    given: &[(&str, &Arc<Shared>)],
) -> Result<HashMap<String, Arc<Shared>>, AgentError> {
    let mut roster: HashMap<String, Arc<Shared>> = HashMap::new();
    let known = given
        .iter()
        .flat_map(|(_, s)| std::iter::once((&s.name, *s)).chain(s.roster.iter()));
    for (child, shared) in known {
        let clash = match roster.get(child) {
            Some(other) => !Arc::ptr_eq(other, shared),
            None => child == name,
        };
        if clash {
            return Err(AgentError::Config(format!(
                "two agents are named `{child}` here (this one, or one it offers as a tool or hands sessions to): give each its own with `AgentBuilder::name`, so `serve` can tell their turns apart"
            )));
        }
        roster.insert(child.clone(), Arc::clone(shared));
    }
    Ok(roster)
}
