//! What a fetched page becomes for the model: HTML reduced to text, other text as it
//! is, then cut to the configured budget.
//!
//! HTML goes through `html2text` (a maintained crate, built on html5ever, the HTML5
//! parser Servo uses): it parses the way browsers do, drops scripts and styles, keeps
//! headings, lists and table cells readable, and lists link targets as numbered
//! footnotes, so URLs on the page can be fetched next. A DOM crate such as `scraper`
//! would leave that layout to us.

use reqwest::Url;

/// Text columns of the rendering. Wide, so sentences are not broken needlessly.
const WIDTH: usize = 100;

/// Characters per token when turning `max_content_tokens` into a cut: a conservative
/// average for English text (a tokenizer would be exact, and model-specific).
pub const CHARS_PER_TOKEN: usize = 4;

/// The page's text from its HTML, its links' footnotes made absolute against `base`
/// (the page's URL), so the model can fetch them.
pub fn html_to_text(html: &str, base: &Url) -> String {
    let text = render(html);
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match footnote(line) {
            Some((label, target)) => match base.join(target) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => out.push_str(&format!("{label} {url}")),
                _ => out.push_str(line),
            },
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// A link footnote line of html2text, `[3]: target`, split after its colon.
fn footnote(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('[')?;
    let close = rest.find("]: ")?;
    rest[..close].chars().all(|c| c.is_ascii_digit()).then(|| (&line[..close + 3], &rest[close + 3..]))
}

fn render(html: &str) -> String {
    let rendered = html2text::config::plain()
        // Tables as one cell per line: nested layout tables cannot blow the width up.
        .raw_mode(true)
        .no_link_wrapping()
        .allow_width_overflow()
        .string_from_read(html.as_bytes(), WIDTH);
    match rendered {
        Ok(text) => tidy(&text),
        // html5ever recovers from any markup; a rendering failure leaves the raw source,
        // which still carries the words.
        Err(error) => {
            tracing::debug!(%error, "html2text could not render a page; returning its source");
            html.to_owned()
        }
    }
}

/// Trailing spaces off every line, and at most one blank line in a row.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines().map(str::trim_end) {
        if line.is_empty() {
            if blank || out.is_empty() {
                continue;
            }
            blank = true;
        } else {
            blank = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// The document's `<title>`, if it has one.
pub fn title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title = html2text::config::plain_no_decorate().string_from_read(&html.as_bytes()[start..end], WIDTH).ok()?;
    let title = title.split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}

/// `text` cut to about `max_tokens` tokens at a character boundary; whether it was cut.
pub fn truncate(text: &str, max_tokens: usize) -> (&str, bool) {
    let max_chars = max_tokens.saturating_mul(CHARS_PER_TOKEN);
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => (&text[..cut], true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_becomes_readable_text_without_scripts_or_styles() {
        let html = r#"<!doctype html><html><head><title> The  Page </title>
            <style>body { color: red }</style><script>alert("no")</script></head>
            <body><h1>Heading</h1><p>First <b>bold</b> paragraph.</p>
            <ul><li>one</li><li>two</li></ul>
            <table><tr><td>cell a</td><td>cell b</td></tr></table>
            <p>See <a href="https://example.com/next">the next page</a> and <a href="/docs/b?x=1">b</a>,
            <a href="mailto:x@example.com">mail</a>.</p></body></html>"#;
        let text = html_to_text(html, &Url::parse("https://site.example/docs/a").unwrap());
        for kept in ["Heading", "First **bold** paragraph.", "one", "two", "cell a", "cell b", "the next page"] {
            assert!(text.contains(kept), "{kept:?} missing from {text:?}");
        }
        assert!(text.contains("[1]: https://example.com/next"), "links are listed: {text:?}");
        assert!(text.contains("[2]: https://site.example/docs/b?x=1"), "relative links are resolved: {text:?}");
        assert!(text.contains("[3]: mailto:x@example.com"), "{text:?}");
        for dropped in ["color: red", "alert", "<p>", "<title>"] {
            assert!(!text.contains(dropped), "{dropped:?} left in {text:?}");
        }
        assert!(!text.contains("\n\n\n"), "blank lines are collapsed: {text:?}");
        assert_eq!(title(html).as_deref(), Some("The Page"));
    }

    #[test]
    fn broken_markup_and_entities_still_give_text() {
        let base = Url::parse("https://example.com/").unwrap();
        let text = html_to_text("<div><p>unclosed <i>tags &amp; entities &lt;ok&gt;<div>more", &base);
        assert!(text.contains("unclosed") && text.contains("& entities <ok>") && text.contains("more"), "{text:?}");
        assert_eq!(title("<p>no title</p>"), None);
        assert_eq!(title("<title></title>"), None);
    }

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate("abcdefgh", 1), ("abcd", true));
        assert_eq!(truncate("abcd", 1), ("abcd", false));
        assert_eq!(truncate("ééééé", 1), ("éééé", true));
        assert_eq!(truncate("", 10), ("", false));
    }
}
