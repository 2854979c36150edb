//! The answer artifact of a task while it is being written: live previews of the
//! model's text as `artifactUpdate` chunks (`append: true`), settled by committed
//! history. A task has one answer artifact, `{task}-answer`; the streams hand it each
//! agent message as it is written, take it back (empty parts) when the message turns
//! out not to be the answer, and end with the committed answer (`lastChunk`).

use serde_json::{Value, json};

use crate::adapters::follow::Kind;
use crate::adapters::{Preview, Shown};

/// The id of a task's answer artifact.
pub fn artifact_id(task_id: &str) -> String {
    format!("{task_id}-answer")
}

/// The last chunk of a task that ended without an answer: its artifact emptied of
/// whatever previews showed.
pub(super) fn emptied(task_id: &str, context_id: &str) -> Value {
    let mut update = LiveArtifact::new(task_id, context_id).update(json!([]), false);
    update["artifactUpdate"]["lastChunk"] = json!(true);
    update
}

/// What one stream has shown of a task's answer artifact.
#[derive(Debug)]
pub(super) struct LiveArtifact {
    task_id: String,
    context_id: String,
    /// The message the artifact shows.
    showing: Option<String>,
    /// The text of it the client holds.
    text: String,
    /// Whether the client's artifact holds any text (possibly an earlier message's).
    held: bool,
}

impl LiveArtifact {
    pub(super) fn new(task_id: &str, context_id: &str) -> Self {
        Self {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            showing: None,
            text: String::new(),
            held: false,
        }
    }

    /// An `artifactUpdate` with `parts`, appended to what the client holds or replacing it.
    fn update(&self, parts: Value, append: bool) -> Value {
        let mut update = json!({
            "taskId": self.task_id, "contextId": self.context_id,
            "artifact": { "artifactId": artifact_id(&self.task_id), "name": "answer", "parts": parts },
        });
        if append {
            update["append"] = json!(true);
        }
        json!({ "artifactUpdate": update })
    }

    /// Text appended to the message the artifact shows; the first text replaces whatever
    /// an earlier message left there.
    fn append(&mut self, text: &str) -> Vec<Value> {
        let append = !self.text.is_empty();
        self.text.push_str(text);
        self.held = true;
        vec![self.update(json!([{ "text": text }]), append)]
    }

    /// A live change to an agent message.
    pub(super) fn preview(&mut self, change: &Preview) -> Vec<Value> {
        match change {
            // The client keeps the previous message's text until the first delta replaces it.
            Preview::Open { id, kind: Kind::Message } => {
                self.showing = Some(id.clone());
                self.text.clear();
                Vec::new()
            }
            Preview::Delta { id, kind: Kind::Message, delta, .. } if self.shows(id) => self.append(delta),
            Preview::Drop { id, kind: Kind::Message, .. } if self.shows(id) => self.clear(),
            _ => Vec::new(),
        }
    }

    /// A committed agent message: what the client lacks of it, or a replacement.
    pub(super) fn settle(&mut self, event_id: &str, committed: &str, shown: &Shown) -> Vec<Value> {
        if !self.shows(event_id) {
            return Vec::new();
        }
        match shown {
            Shown::Prefix { rest } if rest.is_empty() => Vec::new(),
            Shown::Prefix { rest } => self.append(rest),
            Shown::Diverged { .. } | Shown::Nothing => {
                self.text = committed.to_owned();
                self.held = true;
                vec![self.update(json!([{ "text": committed }]), false)]
            }
        }
    }

    /// The message `event_id` was not the answer (the agent went on): take it back.
    pub(super) fn not_the_answer(&mut self, event_id: &str) -> Vec<Value> {
        if self.shows(event_id) { self.clear() } else { Vec::new() }
    }

    /// Whether the client holds text that only committed history can confirm.
    pub(super) fn holds_text(&self) -> bool {
        self.held
    }

    fn shows(&self, id: &str) -> bool {
        self.showing.as_deref() == Some(id)
    }

    /// Empties the artifact on the client (if it holds anything).
    pub(super) fn clear(&mut self) -> Vec<Value> {
        self.showing = None;
        self.text.clear();
        if std::mem::take(&mut self.held) { vec![self.update(json!([]), false)] } else { Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(updates: &[Value]) -> Vec<(String, bool)> {
        updates
            .iter()
            .map(|u| {
                let update = &u["artifactUpdate"];
                let text = update["artifact"]["parts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["text"].as_str().unwrap())
                    .collect();
                (text, update["append"] == true)
            })
            .collect()
    }

    fn open(id: &str) -> Preview {
        Preview::Open { id: id.into(), kind: Kind::Message }
    }

    fn delta(id: &str, delta: &str) -> Preview {
        Preview::Delta { id: id.into(), kind: Kind::Message, delta: delta.into(), text: String::new() }
    }

    #[test]
    fn deltas_append_and_the_commit_sends_the_rest() {
        let mut live = LiveArtifact::new("t1", "c1");
        assert!(live.preview(&open("x")).is_empty());
        let mut out = live.preview(&delta("x", "Hel"));
        out.extend(live.preview(&delta("x", "lo")));
        out.extend(live.settle("x", "Hello world", &Shown::Prefix { rest: " world".into() }));
        assert_eq!(texts(&out), [("Hel".into(), false), ("lo".into(), true), (" world".into(), true)]);
        assert_eq!(out[0]["artifactUpdate"]["artifact"]["artifactId"], "t1-answer");
    }

    #[test]
    fn a_divergent_commit_replaces_and_a_dropped_preview_is_emptied() {
        let mut live = LiveArtifact::new("t1", "c1");
        live.preview(&open("x"));
        live.preview(&delta("x", "Goodbye"));
        let out = live.settle("x", "Good day", &Shown::Diverged { shown: "Goodbye".into() });
        assert_eq!(texts(&out), [("Good day".into(), false)]);
        live.preview(&open("y"));
        let out = live.preview(&delta("y", "cut"));
        assert_eq!(texts(&out), [("cut".into(), false)], "a new message replaces the old one");
        let out = live.preview(&Preview::Drop { id: "y".into(), kind: Kind::Message, shown: "cut".into() });
        assert_eq!(texts(&out), [(String::new(), false)]);
        assert!(!live.holds_text());
    }

    #[test]
    fn a_message_that_is_not_the_answer_is_taken_back() {
        let mut live = LiveArtifact::new("t1", "c1");
        live.preview(&open("x"));
        live.preview(&delta("x", "let me check"));
        live.settle("x", "let me check", &Shown::Prefix { rest: String::new() });
        assert_eq!(texts(&live.not_the_answer("other")), []);
        assert_eq!(texts(&live.not_the_answer("x")), [(String::new(), false)]);
    }
}
