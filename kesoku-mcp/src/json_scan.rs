//! A JSON text scanned without recursion: the top-level `id` and
//! `method` with their spans, and what `serde_json` would refuse (nesting
//! deeper than its limit, numbers beyond a 64-bit float, lone surrogate
//! escapes), so a request can be answered with its id whatever its body.

use std::borrow::Cow;

/// `serde_json` refuses a document nested deeper than this.
pub(crate) const MAX_DEPTH: usize = 127;

/// Where in a message a problem lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Id,
    Params,
    Other,
}

impl Place {
    fn of(member: &str) -> Self {
        match member {
            "id" => Place::Id,
            "params" => Place::Params,
            _ => Place::Other,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

/// A top-level member's value: its span in the text.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) kind: Kind,
    /// A string with a lone surrogate escape.
    pub(crate) lone_surrogate: bool,
}

impl Token {
    /// The id to answer with: as the client wrote it if a string or a
    /// number, else `null` (JSON-RPC: an id that cannot be read).
    pub(crate) fn reply<'t>(&self, text: &'t str) -> &'t str {
        match self.kind {
            Kind::String | Kind::Number => &text[self.start..self.end],
            _ => "null",
        }
    }

    /// An id rmcp carries unchanged: a string without lone surrogates, or
    /// an integer that fits an i64.
    pub(crate) fn is_plain(&self, text: &str) -> bool {
        match self.kind {
            Kind::String => !self.lone_surrogate,
            Kind::Number => text[self.start..self.end].parse::<i64>().is_ok(),
            _ => false,
        }
    }
}

/// The top-level object's members that matter here.
#[derive(Debug, Default)]
pub(crate) struct Top {
    pub(crate) id: Option<Token>,
    pub(crate) method: Option<Token>,
    /// `id` is given more than once (`serde_json` would keep the last).
    pub(crate) repeated_id: bool,
}

/// What a scan of a JSON text found.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// `None` if the text is not an object.
    pub(crate) top: Option<Top>,
    /// Byte offsets of lone surrogate escapes (the `\`).
    pub(crate) lone: Vec<usize>,
    /// The first place nested deeper than [`MAX_DEPTH`].
    pub(crate) too_deep: Option<Place>,
    /// The first number beyond a 64-bit float, and where.
    pub(crate) out_of_range: Option<(Place, String)>,
}

impl Scan {
    /// Scans `text`; `None` if it is not JSON.
    pub(crate) fn of(text: &str) -> Option<Scan> {
        Scanner {
            b: text.as_bytes(),
            i: 0,
            scan: Scan::default(),
        }
        .run()
    }

    /// What `serde_json` would refuse, and where.
    pub(crate) fn unparsable(&self) -> Option<(Place, String)> {
        if let Some(place) = self.too_deep {
            return Some((place, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.out_of_range.as_ref().map(|(place, number)| {
            let shown: String = number.chars().take(40).collect();
            (
                *place,
                format!("the number {shown} is beyond the range of a 64-bit float"),
            )
        })
    }

    /// The text with each lone surrogate escape replaced by `\ufffd` (the
    /// same length, so spans still hold).
    pub(crate) fn repaired<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if self.lone.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = text.to_owned();
        for &at in &self.lone {
            out.replace_range(at..at + 6, "\\ufffd");
        }
        Cow::Owned(out)
    }
}

/// A JSON scanner with an explicit stack, so that depth costs no recursion.
struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    scan: Scan,
}

impl Scanner<'_> {
    fn run(mut self) -> Option<Scan> {
        // Open containers: `{` or `[`.
        let mut stack: Vec<u8> = Vec::new();
        // The top-level member being read: its name, and where its value
        // starts once it has begun.
        let mut member: Option<(String, Option<usize>)> = None;
        if self.peek() == Some(b'{') {
            self.scan.top = Some(Top::default());
        }
        'value: loop {
            self.ws();
            let start = self.i;
            if stack.len() == 1
                && let Some((_, begun @ None)) = &mut member
            {
                *begun = Some(start);
            }
            let place = member.as_ref().map_or(Place::Other, |(m, _)| Place::of(m));
            let kind;
            let mut lone = false;
            match self.peek()? {
                open @ (b'{' | b'[') => {
                    self.i += 1;
                    stack.push(open);
                    if stack.len() > MAX_DEPTH && self.scan.too_deep.is_none() {
                        self.scan.too_deep = Some(place);
                    }
                    self.ws();
                    let close = if open == b'{' { b'}' } else { b']' };
                    if self.peek() != Some(close) {
                        if open == b'{' {
                            let name = self.key()?;
                            if stack.len() == 1 {
                                member = Some((self.name(name), None));
                            }
                        }
                        continue 'value;
                    }
                    self.i += 1;
                    stack.pop();
                    kind = if open == b'{' {
                        Kind::Object
                    } else {
                        Kind::Array
                    };
                }
                b'"' => {
                    lone = self.string()?;
                    kind = Kind::String;
                }
                b'-' | b'0'..=b'9' => {
                    self.number(place)?;
                    kind = Kind::Number;
                }
                b't' => {
                    self.literal(b"true")?;
                    kind = Kind::Bool;
                }
                b'f' => {
                    self.literal(b"false")?;
                    kind = Kind::Bool;
                }
                b'n' => {
                    self.literal(b"null")?;
                    kind = Kind::Null;
                }
                _ => return None,
            }
            // A value ended (a scalar, or an empty container).
            self.ended(&stack, &mut member, kind, lone);
            // Close containers, or go on to the next element.
            loop {
                self.ws();
                let Some(&open) = stack.last() else {
                    return (self.i == self.b.len()).then_some(self.scan);
                };
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        if open == b'{' {
                            let name = self.key()?;
                            if stack.len() == 1 {
                                member = Some((self.name(name), None));
                            }
                        }
                        continue 'value;
                    }
                    b'}' if open == b'{' => {}
                    b']' if open == b'[' => {}
                    _ => return None,
                }
                self.i += 1;
                stack.pop();
                let kind = if open == b'{' {
                    Kind::Object
                } else {
                    Kind::Array
                };
                self.ended(&stack, &mut member, kind, false);
            }
        }
    }

    /// Records a value that ended at `self.i`, if it is a top-level member.
    fn ended(
        &mut self,
        stack: &[u8],
        member: &mut Option<(String, Option<usize>)>,
        kind: Kind,
        lone_surrogate: bool,
    ) {
        if stack.len() != 1 {
            return;
        }
        let Some((name, Some(start))) = member.take() else {
            return;
        };
        let Some(top) = &mut self.scan.top else {
            return;
        };
        let token = Token {
            start,
            end: self.i,
            kind,
            lone_surrogate,
        };
        // The first of a repeated member is kept; a repeated id is noted,
        // as it leaves the request's id unknown.
        match name.as_str() {
            "id" if top.id.is_none() => top.id = Some(token),
            "id" => top.repeated_id = true,
            "method" if top.method.is_none() => top.method = Some(token),
            _ => {}
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// A member name and its colon; the name's span, quotes included.
    fn key(&mut self) -> Option<(usize, usize)> {
        self.ws();
        if self.peek() != Some(b'"') {
            return None;
        }
        let start = self.i;
        self.string()?;
        let end = self.i;
        self.ws();
        if self.peek() != Some(b':') {
            return None;
        }
        self.i += 1;
        Some((start, end))
    }

    /// A member name, decoded (`"\u0069d"` is `id`); one with a lone
    /// surrogate is no name that matters here.
    fn name(&self, (start, end): (usize, usize)) -> String {
        serde_json::from_slice(&self.b[start..end]).unwrap_or_default()
    }

    /// A string; whether it has a lone surrogate escape.
    fn string(&mut self) -> Option<bool> {
        self.i += 1;
        let mut lone = false;
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(lone);
                }
                b'\\' => match *self.b.get(self.i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.i += 2,
                    b'u' => {
                        let unit = self.hex(self.i + 2)?;
                        if (0xD800..0xDC00).contains(&unit)
                            && self.b.get(self.i + 6..self.i + 8) == Some(b"\\u")
                            && self
                                .hex(self.i + 8)
                                .is_some_and(|low| (0xDC00..0xE000).contains(&low))
                        {
                            self.i += 12;
                        } else {
                            if (0xD800..0xE000).contains(&unit) {
                                self.scan.lone.push(self.i);
                                lone = true;
                            }
                            self.i += 6;
                        }
                    }
                    _ => return None,
                },
                0..0x20 => return None,
                _ => self.i += 1,
            }
        }
    }

    fn hex(&self, at: usize) -> Option<u32> {
        let digits = self.b.get(at..at + 4)?;
        let digits = std::str::from_utf8(digits).ok()?;
        if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    }

    /// A number, by RFC 8259's grammar; notes one beyond a 64-bit float.
    fn number(&mut self, place: Place) -> Option<()> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
            integer = false;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.digits();
            integer = false;
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).ok()?;
        // serde_json reads integers as i64 or u64, and anything else as an
        // f64, refusing one that would be infinite.
        let fits = (integer && (text.parse::<i64>().is_ok() || text.parse::<u64>().is_ok()))
            || text.parse::<f64>().is_ok_and(f64::is_finite);
        if !fits && self.scan.out_of_range.is_none() {
            self.scan.out_of_range = Some((place, text.to_owned()));
        }
        Some(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|d| d.is_ascii_digit()) {
            self.i += 1;
        }
    }
}
