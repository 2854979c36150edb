//! A minimal Server-Sent Events decoder for provider responses: splits the byte
//! stream into `(event, data)` frames at blank lines.

use bytes::Bytes;
use futures::{Stream, StreamExt};

/// One SSE frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The `event:` name, if any.
    pub event: Option<String>,
    /// The joined `data:` lines.
    pub data: String,
}

/// Decodes frames from a byte stream; errors end the stream.
pub fn frames<S, E>(bytes: S) -> impl Stream<Item = Result<Frame, E>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    futures::stream::unfold((bytes, String::new(), false), |(mut bytes, mut buffer, done)| async move {
        loop {
            if let Some(frame) = take_frame(&mut buffer) {
                return Some((Ok(frame), (bytes, buffer, done)));
            }
            if done {
                return None;
            }
            match bytes.next().await {
                Some(Ok(chunk)) => buffer.push_str(&String::from_utf8_lossy(&chunk).replace("\r\n", "\n")),
                Some(Err(error)) => return Some((Err(error), (bytes, buffer, true))),
                None => {
                    buffer.push_str("\n\n");
                    return take_frame(&mut buffer).map(|frame| (Ok(frame), (bytes, String::new(), true)));
                }
            }
        }
    })
}

fn take_frame(buffer: &mut String) -> Option<Frame> {
    loop {
        let end = buffer.find("\n\n")?;
        let raw: String = buffer.drain(..end + 2).collect();
        let mut event = None;
        let mut data = Vec::new();
        for line in raw.lines() {
            if let Some(value) = line.strip_prefix("event:") {
                event = Some(value.trim_start().to_owned());
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push(value.strip_prefix(' ').unwrap_or(value).to_owned());
            }
        }
        if event.is_some() || !data.is_empty() {
            return Some(Frame { event, data: data.join("\n") });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_split_across_chunks_and_ignore_comments() {
        let chunks: Vec<Result<Bytes, ()>> =
            vec![Ok(Bytes::from(": ping\n\nevent: a\ndata: {\"x\"")), Ok(Bytes::from(":1}\n\ndata: two\r\n\r\n"))];
        let got: Vec<Frame> = frames(futures::stream::iter(chunks)).map(Result::unwrap).collect().await;
        assert_eq!(
            got,
            vec![
                Frame { event: Some("a".into()), data: "{\"x\":1}".into() },
                Frame { event: None, data: "two".into() },
            ]
        );
    }
}
