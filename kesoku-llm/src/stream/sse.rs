//! Server-sent events, read incrementally as the WHATWG HTML standard's
//! "interpreting an event stream" says: one leading byte-order mark
//! dropped, lines ended by CR, LF or CRLF, `:` comments, a field without a
//! colon taken as a name with an empty value, `data` lines joined with LF,
//! `id` (without NUL) and `retry` (digits only) kept, unknown fields
//! ignored, and an event dispatched at each blank line when it has data.
//!
//! Written here rather than taken from a crate because none was right on
//! every point a provider's stream depends on: eventsource-stream 0.2.3
//! panics on a leading BOM, rescans its buffer on every chunk (quadratic in
//! an event's length) and keeps a last CR-ended line waiting for an LF that
//! never comes; sse-stream 0.2.6 fails on valid streams (a field without a
//! colon, an unknown field, a repeated `event` line); sseer has no size
//! limit; and sse-parse 0.1.0, correct otherwise, drops an oversized event
//! silently and reads on, where a reply must fail at that event with the
//! limit named.
//!
//! Each byte is scanned once for a line end and each line is read once, so
//! the work is linear in the stream's length however it is cut into
//! chunks; and the bytes held for one event (its unfinished line, its data
//! and its name) never exceed the limit: past it, [`Parser::feed`] fails.

use std::mem;
use std::sync::Arc;

/// A leading UTF-8 byte-order mark, which the format allows.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// Its name, the `event` field: empty when it has none (the standard
    /// then names it `message`; kept empty so a decoder can tell).
    pub(crate) name: String,
    /// The `data` lines, joined with LF.
    pub(crate) data: String,
    /// The last event id seen on the stream so far (kesoku does not
    /// reconnect, so only its tests read it). Shared, not copied: many
    /// tiny events after one long id must not each hold the id.
    pub(crate) id: Arc<str>,
}

/// An event held more bytes than the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLarge {
    /// The limit, in bytes.
    pub(crate) limit: usize,
}

/// Where the stream's start is, for the byte-order mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// This many bytes of a byte-order mark were read (it may come split).
    Bom(usize),
    /// Past it, or there was none.
    Done,
}

/// An incremental event-stream parser: feed it the body's chunks as they
/// come.
#[derive(Debug)]
pub(crate) struct Parser {
    limit: usize,
    start: Start,
    /// The line being read, when a chunk ended inside it.
    line: Vec<u8>,
    /// The last line ended with CR: an LF right after it belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    last_id: Arc<str>,
    /// The `retry` field's reconnection time, in milliseconds (kept as the
    /// standard says; kesoku does not reconnect).
    retry: Option<u64>,
    /// Once an event was too large, nothing more is read.
    failed: bool,
    /// Bytes looked at, scanning and reading lines: what the linear-work
    /// test counts.
    #[cfg(test)]
    pub(crate) work: usize,
}

impl Parser {
    /// A parser whose events may hold at most `limit` bytes each.
    pub(crate) fn new(limit: usize) -> Self {
        Parser {
            limit,
            start: Start::Bom(0),
            line: Vec::new(),
            after_cr: false,
            event: String::new(),
            data: String::new(),
            last_id: Arc::from(""),
            retry: None,
            failed: false,
            #[cfg(test)]
            work: 0,
        }
    }

    /// Reads a chunk, pushing each event it completes to `out`. Fails when
    /// the event being read exceeds the limit; the events before it are
    /// in `out`, and nothing after it is read.
    pub(crate) fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<Event>) -> Result<(), TooLarge> {
        if self.failed {
            return Err(self.too_large());
        }
        if let Start::Bom(seen) = self.start {
            let rest = &BOM[seen..];
            let n = rest.len().min(bytes.len());
            if bytes[..n] == rest[..n] {
                bytes = &bytes[n..];
                if seen + n < BOM.len() {
                    // All of the chunk was (part of) the mark.
                    self.start = Start::Bom(seen + n);
                    return Ok(());
                }
            } else {
                // Not a mark: what looked like its start is text (no line
                // end among it).
                self.line.extend_from_slice(&BOM[..seen]);
            }
            self.start = Start::Done;
        }
        while !bytes.is_empty() {
            if mem::take(&mut self.after_cr) && bytes[0] == b'\n' {
                bytes = &bytes[1..];
                continue;
            }
            let end = bytes.iter().position(|&b| b == b'\n' || b == b'\r');
            #[cfg(test)]
            {
                self.work += end.map_or(bytes.len(), |i| i + 1);
            }
            let Some(end) = end else {
                self.hold(bytes.len())?;
                self.line.extend_from_slice(bytes);
                return Ok(());
            };
            self.hold(end)?;
            if self.line.is_empty() {
                self.read_line(&bytes[..end], out);
            } else {
                let mut line = mem::take(&mut self.line);
                line.extend_from_slice(&bytes[..end]);
                self.read_line(&line, out);
                line.clear();
                // Its allocation serves the next long line.
                self.line = line;
            }
            // A line's value may grow as it is decoded (an invalid byte
            // becomes a 3-byte U+FFFD): the decoded event counts too.
            self.hold(0)?;
            self.after_cr = bytes[end] == b'\r';
            bytes = &bytes[end + 1..];
        }
        Ok(())
    }

    /// Fails if `more` bytes of the current line, on top of what the event
    /// holds, exceed the limit.
    fn hold(&mut self, more: usize) -> Result<(), TooLarge> {
        let held = self.line.len() + more + self.data.len() + self.event.len();
        if held > self.limit {
            self.failed = true;
            self.line = Vec::new();
            self.data = String::new();
            self.event = String::new();
            return Err(self.too_large());
        }
        Ok(())
    }

    fn too_large(&self) -> TooLarge {
        TooLarge { limit: self.limit }
    }

    /// One whole line, without its end.
    fn read_line(&mut self, line: &[u8], out: &mut Vec<Event>) {
        #[cfg(test)]
        {
            self.work += line.len();
        }
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match name {
            b"event" => {
                self.event.clear();
                push_utf8(&mut self.event, value);
            }
            b"data" => {
                push_utf8(&mut self.data, value);
                self.data.push('\n');
            }
            b"id" if !value.contains(&0) => {
                self.last_id = Arc::from(String::from_utf8_lossy(value));
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits only, so it parses unless it overflows (ignored).
                if let Some(ms) = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                    self.retry = Some(ms);
                }
            }
            _ => {}
        }
    }

    /// A blank line: the event read so far, if it has data.
    fn dispatch(&mut self, out: &mut Vec<Event>) {
        if self.data.is_empty() {
            self.event.clear();
            return;
        }
        // Each data line added an LF: the last one goes.
        self.data.pop();
        out.push(Event {
            name: mem::take(&mut self.event),
            data: mem::take(&mut self.data),
            id: Arc::clone(&self.last_id),
        });
    }
}

/// Appends `bytes` as UTF-8, each invalid sequence replaced by U+FFFD (as
/// the standard's decoder does; a line end never falls inside a
/// character, so lines decode alone).
fn push_utf8(to: &mut String, bytes: &[u8]) {
    to.push_str(&String::from_utf8_lossy(bytes));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The events of `chunks`, and whether an event was too large.
    fn parse(limit: usize, chunks: &[&[u8]]) -> (Vec<Event>, Option<TooLarge>) {
        let mut parser = Parser::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            if let Err(e) = parser.feed(chunk, &mut out) {
                return (out, Some(e));
            }
        }
        (out, None)
    }

    fn events(text: &[u8]) -> Vec<(String, String)> {
        let whole = parse(usize::MAX, &[text]).0;
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(parse(usize::MAX, &bytes).0, whole, "byte by byte");
        whole.into_iter().map(|e| (e.name, e.data)).collect()
    }

    fn ev(event: &str, data: &str) -> (String, String) {
        (event.into(), data.into())
    }

    #[test]
    fn a_leading_byte_order_mark_is_dropped_once_even_split() {
        let text = b"\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n";
        // The second mark starts a line: a field named "\u{feff}data",
        // unknown, so ignored.
        assert_eq!(events(text), [ev("", "a")]);
        for cut in 1..4 {
            let (head, tail) = text.split_at(cut);
            let (got, _) = parse(usize::MAX, &[b"", head, b"", tail]);
            assert_eq!(got.len(), 1, "cut at {cut}");
            assert_eq!(got[0].data, "a");
        }
        // Only a mark's start: text, not a mark.
        assert_eq!(events(b"\xEF\xBBdata: a\n\ndata: b\n\n"), [ev("", "b")]);
        assert_eq!(events(b"\xEFdata: a\n\n"), []);
        assert_eq!(events(b"\xEF\xBB\xBF"), []);
    }

    #[test]
    fn cr_lf_and_crlf_all_end_lines_and_a_last_cr_is_not_held() {
        for text in [
            &b"event: e\rdata: 1\r\rdata: 2\r\r"[..],
            b"event: e\ndata: 1\n\ndata: 2\n\n",
            b"event: e\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n",
            b"event: e\r\ndata: 1\r\rdata: 2\n\r\n",
        ] {
            assert_eq!(events(text), [ev("e", "1"), ev("", "2")], "{text:?}");
        }
        // The CR of a CRLF in one chunk, its LF in the next: one line end.
        let (got, _) = parse(usize::MAX, &[b"data: 1\r", b"\ndata: 2\r", b"\n\r", b"\n"]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data, "1\n2");
    }

    #[test]
    fn fields_comments_and_dispatch_follow_the_standard() {
        assert_eq!(
            events(b": a comment\ndata\ndata:x\ndata:  two spaces\n\n"),
            [ev("", "\nx\n two spaces")],
            "a field without a colon has an empty value; one space goes"
        );
        assert_eq!(
            events(b"data: \n\n"),
            [ev("", "")],
            "an empty data line is an event"
        );
        assert_eq!(
            events(b"event: a\n\nevent: b\nevent: c\nfoo: bar\ndata: d\n\n"),
            [ev("c", "d")],
            "no data, no event (and its name is forgotten); the last name wins; unknown fields are ignored"
        );
        assert_eq!(events(b"data: x\n"), [], "an event never ended is dropped");
        assert_eq!(
            events(b"data: \xFF\xE2\x82\n\n"),
            [ev("", "\u{FFFD}\u{FFFD}")]
        );

        let mut parser = Parser::new(usize::MAX);
        let mut out = Vec::new();
        parser
            .feed(
                b"id: 1\ndata: a\n\nid: 2\0\nretry: 10x\ndata: b\n\nid\nretry: 250\ndata: c\n\n",
                &mut out,
            )
            .unwrap();
        let ids: Vec<&str> = out.iter().map(|e| &*e.id).collect();
        assert_eq!(
            ids,
            ["1", "1", ""],
            "an id with NUL is ignored; `id` alone clears it"
        );
        assert_eq!(parser.retry, Some(250));
    }

    #[test]
    fn an_id_is_shared_by_the_events_after_it_not_copied_into_each() {
        // An id near the limit, then many tiny events in one chunk: were
        // each event to hold its own copy, 7 bytes of stream would cost a
        // whole id (64 MiB by default), and one chunk could exhaust memory.
        let id = "i".repeat(60_000);
        let mut parser = Parser::new(1 << 16);
        let mut out = Vec::new();
        parser
            .feed(format!("id: {id}\n").as_bytes(), &mut out)
            .unwrap();
        parser.feed(&b"data:\n\n".repeat(1000), &mut out).unwrap();
        assert_eq!(out.len(), 1000);
        assert!(out.iter().all(|e| *e.id == *id));
        let first = out[0].id.as_ptr();
        assert!(
            out.iter().all(|e| e.id.as_ptr() == first),
            "each event holds a copy of the id"
        );
    }

    #[test]
    fn an_event_over_the_limit_fails_where_it_is_at_every_split() {
        let text =
            b"data: small\n\nevent: big\ndata: 0123456789\ndata: 0123456789\n\ndata: after\n\n";
        for size in 1..text.len() {
            let chunks: Vec<&[u8]> = text.chunks(size).collect();
            let (got, error) = parse(29, &chunks);
            assert_eq!(error, Some(TooLarge { limit: 29 }), "size {size}");
            assert_eq!(got.len(), 1, "size {size}: only the event before it");
            assert_eq!(got[0].data, "small");
        }
        // Held at most: the second data line (16 bytes) on top of the
        // first (11 with its LF) and the name (3). At the limit, it passes.
        let (got, error) = parse(30, &[text]);
        assert_eq!((got.len(), error), (3, None));
        // A line never ended counts too, and nothing is read after.
        let mut parser = Parser::new(8);
        let mut out = Vec::new();
        assert!(parser.feed(b"data: 0123", &mut out).is_err());
        assert!(parser.feed(b"\n\n", &mut out).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn a_large_event_fed_byte_by_byte_is_read_in_linear_work() {
        // The issue's case: an 80 KB event a byte at a time. Each byte is
        // scanned once and read once as part of its line, so the work is
        // at most twice the bytes fed, where rescanning what is buffered
        // on each chunk (eventsource-stream) costs about n²/2.
        let payload = "x".repeat(80_000);
        let text = format!("event: big\ndata: {payload}\n\ndata: 1\ndata: 2\n\n");
        let mut parser = Parser::new(1 << 20);
        let mut out = Vec::new();
        for byte in text.as_bytes() {
            parser.feed(std::slice::from_ref(byte), &mut out).unwrap();
        }
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].data, payload);
        assert_eq!(out[1].data, "1\n2");
        assert!(
            parser.work <= 2 * text.len(),
            "{} bytes looked at for {} fed",
            parser.work,
            text.len()
        );
        // Nothing is held once the events are out.
        assert!(parser.line.is_empty() && parser.data.is_empty());
    }
}
