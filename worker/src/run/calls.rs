//! The remote tool calls of a step (MCP servers, A2A agents, the web tools, the
//! advisor), made one by one.

use agentd_schema::NewEvent;

use super::{Attempt, Stop};
use crate::agent_loop::{self, RemoteCall, RemoteTarget};
use crate::remote::Outcome;

impl Attempt<'_> {
    /// Makes a step's remote tool calls one by one, committing each result as soon as
    /// it is known (so a crash repeats nothing already recorded). When a server fails,
    /// the remaining calls are recorded as not made and the turn ends; a user interrupt
    /// abandons the call in flight (recorded as such) and the rest.
    pub(super) async fn remote_calls(&mut self, calls: Vec<RemoteCall>) -> Result<(), Stop> {
        let seen_seq = self.last_seq();
        let thread = self.claim.thread_id.clone();
        let mut skip: Option<&str> = None;
        for call in calls {
            let not_made = |why: &str| vec![NewEvent::synthetic_result(&thread, call.kind(), &call.id, why)];
            if let Some(why) = skip {
                self.commit(not_made(why)).await?;
                continue;
            }
            // An interrupt committed since the decision was read: the call is not started
            // (the select below could otherwise start it before noticing).
            if self.interrupts.since(seen_seq) {
                skip = Some(agent_loop::NOT_MADE_INTERRUPTED);
                self.commit(not_made(agent_loop::NOT_MADE_INTERRUPTED)).await?;
                continue;
            }
            let providers = self.providers();
            let (remote, agent, history) = (&mut self.remote, &self.agent, &self.history);
            let made = async {
                match call.target {
                    RemoteTarget::Advisor => {
                        let model = crate::threads::advisor_model(agent);
                        let result = super::advisor::advise(&providers, model, agent, history, &thread, &call).await;
                        Outcome { events: vec![result], failed: false }
                    }
                    _ => remote.run(agent, &call).await,
                }
            };
            let outcome = tokio::select! {
                () = self.cancel.cancelled() => return Err(Stop::Fenced),
                outcome = made => Some(outcome),
                () = self.interrupts.after(seen_seq) => None,
            };
            let events = match outcome {
                Some(outcome) => {
                    if outcome.failed {
                        skip = Some("not made: an earlier tool call of this step failed and the turn ended");
                    }
                    outcome.events
                }
                None => {
                    skip = Some(agent_loop::NOT_MADE_INTERRUPTED);
                    not_made("interrupted by the user while it ran; it may or may not have taken effect")
                }
            };
            self.commit(events).await?;
        }
        Ok(())
    }
}
