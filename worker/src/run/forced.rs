//! A side model call forced to answer through one tool (the permission judge, the
//! outcome grader, the advisor): the answer is the input of its first call of that tool, with its
//! text kept as the fallback the callers' strict parsers may accept.

use futures::StreamExt;

use crate::providers::{BlockKind, ModelEvent, ModelRequest, ProviderError, Registry, Usage};

/// What the model answered: its text, and the input of its first call of the tool.
#[derive(Debug, Default)]
pub(super) struct Answer {
    /// Every text delta, concatenated.
    pub text: String,
    /// The JSON input of its first call of the tool, if it made one.
    pub call: Option<String>,
}

/// Streams the answer to `request`, keeping the usage it reports in `usage` (so a caller
/// that times out still counts what was spent).
pub(super) async fn ask(
    providers: &Registry,
    mut request: ModelRequest,
    tool: &str,
    usage: &mut Usage,
) -> Result<Answer, ProviderError> {
    let (provider, model) = providers.route(&request.model).await?;
    request.model = model;
    let mut stream = provider.stream(request).await?;
    let mut answer = Answer::default();
    let mut call_block = None;
    while let Some(event) = stream.next().await {
        match event? {
            ModelEvent::BlockStart { index, kind: BlockKind::ToolUse { name, .. } }
                if name == tool && call_block.is_none() =>
            {
                call_block = Some(index);
                answer.call = Some(String::new());
            }
            ModelEvent::InputDelta { index, json } if call_block == Some(index) => {
                answer.call.get_or_insert_default().push_str(&json);
            }
            ModelEvent::TextDelta { text, .. } => answer.text.push_str(&text),
            ModelEvent::Usage(latest) => *usage = latest,
            ModelEvent::Done { .. } => return Ok(answer),
            _ => {}
        }
    }
    Err(ProviderError::transport("the response ended before it was complete"))
}

/// The last of `lines` that fit in `max` characters, oldest first, saying how many
/// earlier ones were left out: the bounded transcript a side call reads.
pub(super) fn tail(lines: &[String], max: usize) -> String {
    let mut kept = 0;
    let mut size = 0;
    for line in lines.iter().rev() {
        if size + line.len() > max {
            break;
        }
        size += line.len() + 1;
        kept += 1;
    }
    let omitted = lines.len() - kept;
    let mut out = if omitted > 0 { format!("[{omitted} earlier lines omitted]\n") } else { String::new() };
    out.push_str(&lines[omitted..].join("\n"));
    out
}
