//! The replies of our own connection (`link.rs`), read into `redis::Value` as the redis crate's
//! parser makes them. The crate's parser (parser combinators over a buffer it zeroes before
//! every read) cost a module decision more instructions than the rest of the client's work
//! together (callgrind, issue 24): this reader keeps one buffer per connection, first finds
//! where a reply ends without building anything, then builds it once.
//!
//! RESP2, what a connection that never sends `HELLO 3` receives, is built here. Anything rarer
//! (an error reply, a RESP3 type, nesting deeper than the crate allows) is handed, as the
//! complete reply's bytes, to the crate's own parser, so errors keep the crate's kinds and codes
//! (`MOVED`, `ASK`, `NOSCRIPT`, ... as `conn.rs` classifies them).
//!
//! A reply is at most [`MAX_REPLY`] bytes: a server sending more (a length no reply of ours
//! comes near, or bytes that never end a reply) is refused at once, where the crate's parser
//! kept every byte until the call's deadline.

use redis::{RedisError, RedisResult, Value};
use std::io::{self, Read};

/// The first size of a connection's buffer: every reply of a decision fits in it.
const FIRST: usize = 4096;

/// The crate's limit on nesting (`MAX_RECURSE_DEPTH`): deeper replies go to its parser, which
/// refuses them as it always did.
const MAX_DEPTH: usize = 100;

/// The most bytes a reply may take: over a hundred times the largest this extension asks for
/// (a SCAN batch of some 1000 names, about 100 KB). Redis's own bound on a string is 512 MiB.
const MAX_REPLY: usize = 16 << 20;

fn garbage(what: &'static str) -> RedisError {
    RedisError::from(redis::ParsingError::from(what))
}

/// A reply past [`MAX_REPLY`]: a sick or hostile server, refused before its bytes fill the
/// memory (the crate's parser kept them all until the deadline, 60 s at most).
fn too_long() -> RedisError {
    garbage("a RESP reply longer than any ratelimit asks for")
}

/// A connection's unread bytes, and the replies in them.
pub struct Reader {
    buf: Vec<u8>,
    /// The most bytes one reply may take (see [`MAX_REPLY`]).
    max: usize,
    /// Bytes framed so far, counted from where each framing started (tests' measure of it).
    #[cfg(test)]
    framed: usize,
    /// Where the framing of the reply at `start` stopped (see [`frame`]).
    progress: Progress,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl Default for Reader {
    fn default() -> Self {
        Self::new()
    }
}

impl Reader {
    pub fn new() -> Self {
        Self::bounded(MAX_REPLY)
    }

    /// A reader whose replies take at most `max` bytes.
    fn bounded(max: usize) -> Self {
        Self {
            buf: vec![0; FIRST],
            max,
            #[cfg(test)]
            framed: 0,
            progress: Progress::START,
            start: 0,
            end: 0,
        }
    }

    /// Whether bytes have arrived that no reply read yet: before a command is sent, a reply
    /// nobody asked for.
    pub fn has_unread(&self) -> bool {
        self.start < self.end
    }

    /// The next reply, reading from `src` until it is complete. A stream that ends inside a
    /// reply is an `UnexpectedEof` I/O error, as the crate's parser reports it.
    pub fn read<R: Read + ?Sized>(&mut self, src: &mut R) -> RedisResult<Value> {
        match self.read_with(src, |_| None::<(std::convert::Infallible, usize)>)? {
            Ok(never) => match never {},
            Err(v) => Ok(v),
        }
    }

    /// [`Self::read`], the bytes offered first to `take` (a decision's reply read straight into
    /// its numbers, neither framed nor built): `Ok` with what it made of the reply it found
    /// whole at their start, else (`take` declined them: an error reply, another shape) `Err`
    /// with the reply as `read` builds it. `take` gives the length of the reply it read, and
    /// declines bytes that do not hold it whole (it is asked again when more came).
    pub fn read_with<R: Read + ?Sized, T>(
        &mut self,
        src: &mut R,
        mut take: impl FnMut(&[u8]) -> Option<(T, usize)>,
    ) -> RedisResult<Result<T, Value>> {
        loop {
            let unread = &self.buf[self.start..self.end];
            if let Some((t, len)) = take(unread) {
                debug_assert!(len > 0 && len <= unread.len(), "a reply within the bytes");
                self.progress = Progress::START;
                self.start += len.min(unread.len());
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                return Ok(Ok(t));
            }
            #[cfg(test)]
            {
                self.framed += unread.len() - self.progress.resume();
            }
            if let Some(len) = frame(unread, self.max, &mut self.progress)? {
                self.progress = Progress::START;
                let bytes = &unread[..len];
                let v = match build(bytes, &mut 0, 0) {
                    Some(v) => v,
                    None => redis::parse_redis_value(bytes)?,
                };
                self.start += len;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                return Ok(Err(v));
            }
            if unread.len() >= self.max {
                return Err(too_long());
            }
            self.fill(src)?;
        }
    }

    /// Reads what `src` has into the free end of the buffer (moving the unread bytes to its
    /// start, or doubling it, when it is full).
    fn fill<R: Read + ?Sized>(&mut self, src: &mut R) -> RedisResult<()> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let len = (self.buf.len() * 2).min(self.max.max(FIRST));
                self.buf.resize(len, 0);
            }
        }
        loop {
            match src.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
                Ok(n) => {
                    self.end += n;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Writes a command into `out` (cleared first) as RESP, an array of `count` bulk strings,
/// without the crate's `Cmd` (which copies every argument twice and allocates for each): the
/// hot path's commands (`module.rs`). `count` must be the number of `args`.
pub fn pack<'a>(out: &mut Vec<u8>, count: usize, args: impl IntoIterator<Item = &'a [u8]>) {
    out.clear();
    header(out, count);
    let mut n = 0;
    for a in args {
        bulk(out, a);
        n += 1;
    }
    debug_assert_eq!(n, count, "a command's count is its arguments'");
}

/// A command's first line: an array of `count` arguments.
pub fn header(out: &mut Vec<u8>, count: usize) {
    out.push(b'*');
    decimal(out, count as u64);
    out.extend_from_slice(b"\r\n");
}

/// One argument.
pub fn bulk(out: &mut Vec<u8>, a: &[u8]) {
    bulk_head(out, a.len());
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

/// An argument's length line: `len` bytes and their CRLF must follow.
pub fn bulk_head(out: &mut Vec<u8>, len: usize) {
    out.push(b'$');
    decimal(out, len as u64);
    out.extend_from_slice(b"\r\n");
}

/// A number as one argument, in decimal (`-` first when `negative`), as `to_string` writes it.
/// Made on the stack and added at once (a plain acquire writes five of them).
pub fn bulk_number(out: &mut Vec<u8>, negative: bool, v: u64) {
    let (digits, at) = digits(v);
    let text = &digits[at..];
    // At most 21 characters: a two-digit length.
    let len = text.len() + usize::from(negative);
    let mut buf = [0u8; 28];
    buf[0] = b'$';
    let mut n = 1;
    if len >= 10 {
        buf[n] = b'0' + (len / 10) as u8;
        n += 1;
    }
    buf[n] = b'0' + (len % 10) as u8;
    buf[n + 1..n + 3].copy_from_slice(b"\r\n");
    n += 3;
    if negative {
        buf[n] = b'-';
        n += 1;
    }
    buf[n..n + text.len()].copy_from_slice(text);
    n += text.len();
    buf[n..n + 2].copy_from_slice(b"\r\n");
    out.extend_from_slice(&buf[..n + 2]);
}

/// `v`'s decimal digits: they are `digits[at..]`. Two at a time (a division per digit was a
/// tenth of a plain acquire's packing, callgrind, issue 24).
fn digits(mut v: u64) -> ([u8; 20], usize) {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
                                2021222324252627282930313233343536373839\
                                4041424344454647484950515253545556575859\
                                6061626364656667686970717273747576777879\
                                8081828384858687888990919293949596979899";
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while v >= 100 {
        let pair = 2 * (v % 100) as usize;
        v /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = 2 * v as usize;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + v as u8;
    }
    (digits, at)
}

/// `v` in decimal.
pub fn decimal(out: &mut Vec<u8>, v: u64) {
    let (digits, at) = digits(v);
    out.extend_from_slice(&digits[at..]);
}

/// The integer at the start of `b`, `b` moved past it: `:`, an optional `-` and 1 to 18
/// digits (what [`length`] reads: every integer Redis writes below 10^18), CRLF. None for
/// anything else, or bytes that end before it does.
pub fn integer(b: &mut &[u8]) -> Option<i64> {
    // Most fields of a decision's reply: one digit.
    if let [b':', d @ b'0'..=b'9', b'\r', b'\n', rest @ ..] = *b {
        *b = rest;
        return Some(i64::from(d - b'0'));
    }
    let rest = b.strip_prefix(b":")?;
    let (negative, digits) = match rest.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, rest),
    };
    let mut n = 0i64;
    let mut len = 0;
    while len < 18 {
        match digits.get(len) {
            Some(&d) if d.is_ascii_digit() => n = n * 10 + i64::from(d - b'0'),
            _ => break,
        }
        len += 1;
    }
    if len == 0 {
        return None;
    }
    *b = digits[len..].strip_prefix(b"\r\n")?;
    Some(if negative { -n } else { n })
}

/// An empty string at the start of `b` (`$0`, CRLF, CRLF), `b` moved past it.
pub fn empty(b: &mut &[u8]) -> Option<()> {
    *b = b.strip_prefix(b"$0\r\n\r\n")?;
    Some(())
}

/// Sends a command [`pack`]ed and reads its reply as `T`, as the crate's `Cmd::query` does (an
/// error reply is the call's error).
pub fn query<T: redis::FromRedisValue>(
    c: &mut dyn redis::ConnectionLike,
    packed: &[u8],
) -> RedisResult<T> {
    Ok(redis::from_redis_value(
        c.req_packed_command(packed)?.extract_error()?,
    )?)
}

/// The line at `at` (without its CRLF) and where the next one starts; None while incomplete.
/// No line end starts before `scanned` (when past `at`): the search starts there.
fn line(b: &[u8], at: usize, scanned: usize) -> Option<(&[u8], usize)> {
    let rest = b.get(at..)?;
    let mut from = scanned.saturating_sub(at);
    loop {
        let cr = from + rest[from..].iter().position(|&c| c == b'\r')?;
        match rest.get(cr + 1) {
            Some(b'\n') => return Some((&rest[..cr], at + cr + 2)),
            // A lone CR is part of the line, as the crate reads it (up to the first CRLF).
            Some(_) => from = cr + 1,
            None => return None,
        }
    }
}

/// A length or count: an optional `-`, then digits, as Redis writes them.
fn length(l: &[u8]) -> RedisResult<i64> {
    let (neg, digits) = match l.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, l),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(garbage("a RESP length that is not a number"));
    }
    let n = digits
        .iter()
        .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
    Ok(if neg { -n } else { n })
}

/// Where the framing of an incomplete reply stopped, so that the next piece is framed from
/// there: the start of the first value not framed whole, the values still to frame counting
/// it, and how far its first line is known to hold no line end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Progress {
    at: usize,
    pending: u64,
    scanned: usize,
}

impl Progress {
    /// A reply not framed at all.
    const START: Self = Self {
        at: 0,
        pending: 1,
        scanned: 0,
    };

    /// Where the next framing starts reading.
    #[cfg(test)]
    fn resume(&self) -> usize {
        self.at.max(self.scanned)
    }
}

/// How many bytes the first reply of `b` takes, or None while it is incomplete: its framing
/// only, nothing built. `progress` says where the framing of the same reply's bytes stopped
/// before (when they came in pieces), and is left where this one stops. A string that would
/// end past `max` bytes is an error at once.
fn frame(b: &[u8], max: usize, progress: &mut Progress) -> RedisResult<Option<usize>> {
    let Progress {
        mut at,
        // Values still to frame: the reply itself, then the elements its aggregates announce.
        mut pending,
        scanned,
    } = *progress;
    // Only the first value's line was scanned before.
    let mut from = scanned;
    while pending > 0 {
        let value = at;
        let Some(&kind) = b.get(at) else {
            *progress = Progress {
                at,
                pending,
                scanned: 0,
            };
            return Ok(None);
        };
        let Some((l, next)) = line(b, at + 1, std::mem::take(&mut from)) else {
            // A CR at the end may be the first half of the line's end.
            *progress = Progress {
                at,
                pending,
                scanned: b.len().saturating_sub(1).max(at + 1),
            };
            return Ok(None);
        };
        pending -= 1;
        at = next;
        match kind {
            b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {}
            b'$' | b'=' | b'!' => {
                let n = length(l)?;
                if n >= 0 {
                    // The payload and its CRLF.
                    let end = at + n as usize + 2;
                    if end > max {
                        return Err(too_long());
                    }
                    if b.len() < end {
                        *progress = Progress {
                            at: value,
                            pending: pending + 1,
                            scanned: 0,
                        };
                        return Ok(None);
                    }
                    if &b[end - 2..end] != b"\r\n" {
                        return Err(garbage("a RESP string not ended by CRLF"));
                    }
                    at = end;
                }
            }
            // Saturating: counts a server made up cannot overflow (nor ever be met: the
            // reply stays incomplete until the call's deadline).
            b'*' | b'~' | b'>' => pending = pending.saturating_add(length(l)?.max(0) as u64),
            b'%' => pending = pending.saturating_add(2 * length(l)?.max(0) as u64),
            // An attribute's pairs, then the value they describe.
            b'|' => pending = pending.saturating_add(2 * length(l)?.max(0) as u64 + 1),
            _ => return Err(garbage("a RESP reply of an unknown type")),
        }
    }
    Ok(Some(at))
}

/// The RESP2 value at `*at` of a complete reply (see [`frame`]), as the crate builds it; None
/// for anything this reader leaves to the crate's parser.
fn build(b: &[u8], at: &mut usize, depth: usize) -> Option<Value> {
    // `depth` counts from 0 where the crate counts from 1: a value at MAX_DEPTH is past it.
    if depth >= MAX_DEPTH {
        return None;
    }
    let kind = *b.get(*at)?;
    let (l, next) = line(b, *at + 1, 0)?;
    *at = next;
    match kind {
        b'+' => Some(if l == b"OK" {
            Value::Okay
        } else {
            Value::SimpleString(std::str::from_utf8(l).ok()?.to_string())
        }),
        // Digits as Redis writes them; anything else as the crate does (its trimmed text).
        b':' => Some(Value::Int(match length(l) {
            Ok(n) => n,
            Err(_) => std::str::from_utf8(l).ok()?.trim().parse().ok()?,
        })),
        b'$' => {
            let n = length(l).ok()?;
            if n < 0 {
                return Some(Value::Nil);
            }
            let s = b.get(*at..*at + n as usize)?.to_vec();
            *at += n as usize + 2;
            Some(Value::BulkString(s))
        }
        b'*' => {
            let n = length(l).ok()?;
            if n < 0 {
                return Some(Value::Nil);
            }
            // At most one element per remaining byte: the reply is complete, so a count
            // cannot ask for more than it holds.
            let mut items = Vec::with_capacity((n as usize).min(b.len() - *at));
            for _ in 0..n {
                items.push(build(b, at, depth + 1)?);
            }
            Some(Value::Array(items))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives its bytes in the pieces given, one piece per read, then the end of the stream.
    struct Pieces(Vec<Vec<u8>>);

    impl Read for Pieces {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some(first) = self.0.first_mut() else {
                return Ok(0);
            };
            let n = first.len().min(buf.len());
            buf[..n].copy_from_slice(&first[..n]);
            first.drain(..n);
            if first.is_empty() {
                self.0.remove(0);
            }
            Ok(n)
        }
    }

    fn whole(bytes: &[u8]) -> Pieces {
        Pieces(vec![bytes.to_vec()])
    }

    fn one(bytes: &[u8]) -> RedisResult<Value> {
        Reader::new().read(&mut whole(bytes))
    }

    /// What the crate's own parser makes of the same bytes.
    fn crates(bytes: &[u8]) -> Value {
        redis::parse_redis_value(bytes).unwrap()
    }

    #[test]
    fn every_resp2_type_is_built_as_the_crate_builds_it() {
        for bytes in [
            &b"+OK\r\n"[..],
            b"+PONG\r\n",
            b":42\r\n",
            b":-7\r\n",
            b"$5\r\nhello\r\n",
            b"$0\r\n\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*0\r\n",
            b"$4\r\na\r\nb\r\n",
        ] {
            assert_eq!(one(bytes).unwrap(), crates(bytes), "{bytes:?}");
        }
        assert_eq!(one(b":42\r\n").unwrap(), Value::Int(42));
        assert_eq!(one(b"$-1\r\n").unwrap(), Value::Nil);
        assert_eq!(one(b"+OK\r\n").unwrap(), Value::Okay);
    }

    #[test]
    fn a_decision_reply_of_ten_fields_is_read_whole() {
        let bytes =
            b"*10\r\n:0\r\n:9000\r\n:0\r\n:6000\r\n:6000\r\n:0\r\n$0\r\n\r\n:0\r\n:0\r\n:0\r\n";
        let v = one(bytes).unwrap();
        assert_eq!(v, crates(bytes));
        let Value::Array(items) = v else {
            panic!("not an array")
        };
        assert_eq!(items.len(), 10);
        assert_eq!(items[1], Value::Int(9000));
        assert_eq!(items[6], Value::BulkString(Vec::new()));
    }

    #[test]
    fn nested_arrays_and_nils_inside_them_are_kept() {
        // CLUSTER SLOTS' shape: ranges of [first, last, [host, port, id]].
        let bytes = b"*2\r\n*3\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n\
                      *3\r\n$-1\r\n*0\r\n*1\r\n*-1\r\n";
        let v = one(bytes).unwrap();
        assert_eq!(v, crates(bytes));
        assert_eq!(
            v,
            Value::Array(vec![
                Value::Array(vec![
                    Value::Int(0),
                    Value::Int(5460),
                    Value::Array(vec![
                        Value::BulkString(b"127.0.0.1".to_vec()),
                        Value::Int(7000),
                        Value::BulkString(b"id".to_vec()),
                    ]),
                ]),
                Value::Array(vec![
                    Value::Nil,
                    Value::Array(vec![]),
                    Value::Array(vec![Value::Nil]),
                ]),
            ])
        );
    }

    #[test]
    fn an_error_reply_keeps_the_crates_kind_and_code() {
        for bytes in [
            &b"-MOVED 3999 127.0.0.1:6381\r\n"[..],
            b"-ASK 3999 127.0.0.1:6381\r\n",
            b"-ERR unknown command 'RL.ACQUIRE'\r\n",
            b"-NOSCRIPT No matching script\r\n",
            b"-RLCORRUPT a bucket value ratelimit did not write\r\n",
        ] {
            let v = one(bytes).unwrap();
            assert_eq!(v, crates(bytes), "{bytes:?}");
            let Value::ServerError(e) = &v else {
                panic!("{v:?} is not an error")
            };
            let code = std::str::from_utf8(&bytes[1..]).unwrap();
            assert!(code.starts_with(e.code()), "{code} / {}", e.code());
        }
        let e = one(b"-MOVED 3999 127.0.0.1:6381\r\n")
            .unwrap()
            .extract_error()
            .unwrap_err();
        assert_eq!(e.redirect_node(), Some(("127.0.0.1:6381", 3999)));
    }

    #[test]
    fn an_error_inside_an_array_is_the_crates_too() {
        let bytes = b"*3\r\n+OK\r\n-LOADING server is loading\r\n:1\r\n";
        assert_eq!(one(bytes).unwrap(), crates(bytes));
    }

    #[test]
    fn resp3_types_are_left_to_the_crates_parser() {
        for bytes in [
            &b"_\r\n"[..],
            b"#t\r\n",
            b",1.5\r\n",
            b"%1\r\n+a\r\n:1\r\n",
            b"~2\r\n:1\r\n:2\r\n",
            b"*2\r\n:1\r\n%1\r\n+k\r\n_\r\n",
        ] {
            assert_eq!(one(bytes).unwrap(), crates(bytes), "{bytes:?}");
        }
    }

    #[test]
    fn a_reply_split_across_reads_anywhere_is_read_whole() {
        let bytes: &[u8] =
            b"*10\r\n:0\r\n:9000\r\n:0\r\n:6000\r\n:6000\r\n:0\r\n$3\r\nabc\r\n:0\r\n:0\r\n:0\r\n";
        let expected = crates(bytes);
        // Every cut into two reads, and one byte per read.
        for cut in 1..bytes.len() {
            let mut src = Pieces(vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()]);
            assert_eq!(Reader::new().read(&mut src).unwrap(), expected, "cut {cut}");
        }
        let mut src = Pieces(bytes.iter().map(|b| vec![*b]).collect());
        assert_eq!(Reader::new().read(&mut src).unwrap(), expected);
    }

    #[test]
    fn replies_that_came_in_one_read_are_read_one_after_another() {
        let mut src = whole(b"+OK\r\n:5\r\n$2\r\nab\r\n");
        let mut r = Reader::new();
        assert_eq!(r.read(&mut src).unwrap(), Value::Okay);
        assert_eq!(r.read(&mut src).unwrap(), Value::Int(5));
        assert_eq!(r.read(&mut src).unwrap(), Value::BulkString(b"ab".to_vec()));
        // Nothing left: the stream's end.
        let e = r.read(&mut src).unwrap_err();
        assert_eq!(e.kind(), redis::ErrorKind::Io, "{e}");
    }

    #[test]
    fn a_stream_that_ends_inside_a_reply_is_an_unexpected_end() {
        let e = one(b"*2\r\n:1\r\n").unwrap_err();
        assert!(e.is_io_error(), "{e}");
        let e = one(b"$10\r\nabc").unwrap_err();
        assert!(e.is_io_error(), "{e}");
    }

    #[test]
    fn a_reply_larger_than_the_buffer_grows_it() {
        let payload = vec![b'x'; 3 * FIRST + 17];
        let mut bytes = format!("${}\r\n", payload.len()).into_bytes();
        bytes.extend(&payload);
        bytes.extend(b"\r\n:1\r\n");
        let chunks = bytes.chunks(1000).map(<[u8]>::to_vec).collect();
        let mut src = Pieces(chunks);
        let mut r = Reader::new();
        assert_eq!(r.read(&mut src).unwrap(), Value::BulkString(payload));
        assert_eq!(r.read(&mut src).unwrap(), Value::Int(1));
    }

    #[test]
    fn malformed_framing_is_a_parse_error() {
        for bytes in [&b"?what\r\n"[..], b"$x\r\n", b"*1a\r\n", b"$2\r\nabcd\r\n"] {
            let e = one(bytes).unwrap_err();
            assert_eq!(e.kind(), redis::ErrorKind::Parse, "{bytes:?}: {e}");
        }
    }

    #[test]
    fn numbers_are_written_as_to_string_writes_them() {
        let mut cases = vec![0, 1, 9, 10, 99, 100, 101, 999, 1000, u64::MAX, u64::MAX - 1];
        cases.extend((0..64).map(|b| 1u64 << b));
        cases.extend((1..20).map(|e| 10u64.pow(e) - 1));
        for v in cases {
            let mut out = Vec::new();
            decimal(&mut out, v);
            assert_eq!(out, v.to_string().as_bytes());
            for negative in [false, true] {
                let mut out = Vec::new();
                bulk_number(&mut out, negative, v);
                let text = format!("{}{v}", if negative { "-" } else { "" });
                let mut expected = Vec::new();
                bulk(&mut expected, text.as_bytes());
                assert_eq!(out, expected);
            }
        }
    }

    /// What `integer` reads is what the reader builds of the same bytes, and no more.
    #[test]
    fn an_integer_is_read_as_the_reader_reads_it() {
        for text in [
            ":0\r\n",
            ":-7\r\n",
            ":123456789012345678\r\n",
            ":-123456789012345678\r\n",
            ":1234567890123456789\r\n",
            ":\r\n",
            ":-\r\n",
            ":12a\r\n",
            ":12\r",
            ":12",
            "+12\r\n",
            ": 12\r\n",
            ":+12\r\n",
        ] {
            let mut b = text.as_bytes();
            let fast = integer(&mut b);
            let built = match one(text.as_bytes()) {
                Ok(Value::Int(n)) if length(&text.as_bytes()[1..text.len() - 2]).is_ok() => Some(n),
                _ => None,
            };
            assert_eq!(fast, built, "{text:?}");
            if fast.is_some() {
                assert!(b.is_empty(), "{text:?}");
            }
        }
    }

    /// A reply taken from its bytes is taken once whole, wherever the reads cut it; one it
    /// declines is built as `read` builds it; what follows either is the next reply's.
    #[test]
    fn a_reply_taken_from_its_bytes_is_taken_whole_and_alone() {
        let take = |b: &[u8]| {
            let mut rest = b;
            integer(&mut rest).map(|n| (n, b.len() - rest.len()))
        };
        let bytes: &[u8] = b":1234\r\n+OK\r\n:-5\r\n";
        for cut in 1..bytes.len() {
            let mut src = Pieces(vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()]);
            let mut r = Reader::new();
            assert_eq!(r.read_with(&mut src, take).unwrap(), Ok(1234), "cut {cut}");
            assert_eq!(
                r.read_with(&mut src, take).unwrap(),
                Err(Value::Okay),
                "cut {cut}"
            );
            assert_eq!(r.read(&mut src).unwrap(), Value::Int(-5), "cut {cut}");
        }
    }

    #[test]
    fn a_packed_command_is_the_crates_to_the_byte() {
        let args: [&[u8]; 6] = [b"RL.ACQUIRE", b"1", b"rl:{ab}b:cd", b"", b"10", b"60000"];
        let mut out = vec![b'x'; 3];
        pack(&mut out, args.len(), args);
        let mut cmd = redis::cmd("RL.ACQUIRE");
        for a in &args[1..] {
            cmd.arg(*a);
        }
        assert_eq!(out, cmd.get_packed_command());
        pack(&mut out, 1, [&[b'y'; 1234][..]]);
        assert_eq!(out, redis::cmd(&"y".repeat(1234)).get_packed_command());
    }

    /// Counts no reply could hold are never met: the reply stays incomplete (the caller's
    /// deadline ends the wait), with no overflow.
    #[test]
    fn huge_counts_leave_a_reply_incomplete() {
        // Ten maps of 10^18 - 1 pairs each: 2 * 10^19 values, past u64.
        let mut bytes = b"*10\r\n".to_vec();
        for _ in 0..10 {
            bytes.extend(b"%999999999999999999\r\n");
        }
        assert_eq!(
            frame(&bytes, MAX_REPLY, &mut Progress::START.clone()).unwrap(),
            None
        );
        let e = one(&bytes).unwrap_err();
        assert!(e.is_io_error(), "{e}");
    }

    /// A read interrupted by a signal is made again, as `read_exact` does.
    #[test]
    fn an_interrupted_read_is_made_again() {
        struct Interrupting(bool, Pieces);
        impl Read for Interrupting {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                self.0 = !self.0;
                if self.0 {
                    return Err(io::ErrorKind::Interrupted.into());
                }
                self.1.read(buf)
            }
        }
        let mut src = Interrupting(false, Pieces(vec![b":1".to_vec(), b"\r\n".to_vec()]));
        assert_eq!(Reader::new().read(&mut src).unwrap(), Value::Int(1));
    }

    /// Nesting far past the crate's limit (thousands of `*1`) is framed without recursion
    /// and refused by the crate's parser, as it always was: no stack overflow.
    #[test]
    fn nesting_past_the_crates_limit_is_refused_as_the_crate_refuses_it() {
        let mut bytes = b"*1\r\n".repeat(200_000);
        bytes.extend(b":1\r\n");
        let ours = one(&bytes).unwrap_err();
        let theirs = redis::parse_redis_value(&bytes).unwrap_err();
        assert_eq!(ours.kind(), theirs.kind(), "{ours} / {theirs}");
    }

    /// The crate builds values nested up to its limit (the reply itself counting as one) and
    /// refuses the next level: so does this reader.
    #[test]
    fn nesting_is_refused_from_the_crates_limit_exactly() {
        let nested = |arrays: usize| {
            let mut bytes = b"*1\r\n".repeat(arrays);
            bytes.extend(b":1\r\n");
            bytes
        };
        let deepest = nested(MAX_DEPTH - 1);
        assert_eq!(one(&deepest).unwrap(), crates(&deepest));
        let past = nested(MAX_DEPTH);
        assert!(redis::parse_redis_value(&past).is_err());
        let e = one(&past).unwrap_err();
        assert_eq!(e.kind(), redis::ErrorKind::Parse, "{e}");
    }

    /// Negative lengths other than -1 (no server sends them) read as the crate reads them.
    #[test]
    fn negative_lengths_other_than_minus_one_are_read_as_the_crate_reads_them() {
        for bytes in [
            &b"*-5\r\n"[..],
            b"$-5\r\n",
            b"$-9999\r\n",
            b"*2\r\n*-3\r\n$-7\r\n",
            b"~-2\r\n",
            b">-1\r\n",
        ] {
            assert_eq!(one(bytes).unwrap(), crates(bytes), "{bytes:?}");
        }
        for bytes in [&b"%-1\r\n"[..], b"|-1\r\n:1\r\n"] {
            assert!(one(bytes).is_err(), "{bytes:?}");
            assert!(redis::parse_redis_value(bytes).is_err(), "{bytes:?}");
        }
    }

    #[test]
    fn an_error_reply_split_across_reads_anywhere_keeps_its_code() {
        let bytes: &[u8] = b"-MOVED 3999 127.0.0.1:6381\r\n";
        for cut in 1..bytes.len() {
            let mut src = Pieces(vec![bytes[..cut].to_vec(), bytes[cut..].to_vec()]);
            assert_eq!(
                Reader::new().read(&mut src).unwrap(),
                crates(bytes),
                "cut {cut}"
            );
        }
    }

    /// A source that does not end (before a mebibyte past anything a test expects to be
    /// read): `head`, then `body` again and again.
    struct Endless {
        head: Vec<u8>,
        body: Vec<u8>,
        at: usize,
        given: usize,
    }

    const ENDLESS: usize = 1 << 20;

    impl Endless {
        fn new(head: &[u8], body: &[u8]) -> Self {
            Self {
                head: head.to_vec(),
                body: body.to_vec(),
                at: 0,
                given: 0,
            }
        }
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let mut n = 0;
            while n < buf.len() && self.at < ENDLESS {
                let b = if self.at < self.head.len() {
                    self.head[self.at]
                } else {
                    self.body[(self.at - self.head.len()) % self.body.len()]
                };
                buf[n] = b;
                n += 1;
                self.at += 1;
            }
            self.given += n;
            Ok(n)
        }
    }

    /// A sick or hostile server's reply that never ends while bytes keep coming (an array
    /// announcing more elements than it sends, a line without its end) is refused once the
    /// bytes waiting pass the bound, not held in an ever larger buffer until the deadline.
    #[test]
    fn a_reply_that_never_ends_is_refused_at_the_bound() {
        let max = 64 * 1024;
        for (head, body) in [(&b"*1000000000\r\n"[..], &b":1\r\n"[..]), (b"+", b"x")] {
            let mut src = Endless::new(head, body);
            let e = Reader::bounded(max).read(&mut src).unwrap_err();
            assert_eq!(e.kind(), redis::ErrorKind::Parse, "{e}");
            assert!(src.given <= max, "{} bytes read", src.given);
        }
    }

    /// A length no reply of ours comes near is refused when it is read, before its bytes.
    #[test]
    fn a_bulk_string_longer_than_the_bound_is_refused_before_its_bytes() {
        let mut src = Endless::new(b"$999999999999\r\n", b"x");
        let e = Reader::new().read(&mut src).unwrap_err();
        assert_eq!(e.kind(), redis::ErrorKind::Parse, "{e}");
        assert!(src.given <= FIRST, "{} bytes read", src.given);
        // Nested in an array too.
        let mut bytes = b"*2\r\n$3\r\nabc\r\n".to_vec();
        bytes.extend(format!("${}\r\n", MAX_REPLY).as_bytes());
        let e = one(&bytes).unwrap_err();
        assert_eq!(e.kind(), redis::ErrorKind::Parse, "{e}");
    }

    /// Up to the bound, a reply is read whole (growing the buffer as it must).
    #[test]
    fn a_reply_within_the_bound_is_read() {
        let max = 64 * 1024;
        let payload = vec![b'y'; max - 20];
        let mut bytes = format!("${}\r\n", payload.len()).into_bytes();
        bytes.extend(&payload);
        bytes.extend(b"\r\n");
        assert!(bytes.len() <= max);
        let chunks = bytes.chunks(1000).map(<[u8]>::to_vec).collect();
        let v = Reader::bounded(max).read(&mut Pieces(chunks)).unwrap();
        assert_eq!(v, Value::BulkString(payload));
    }

    /// A reply arriving in many pieces (a byte per read at worst) is framed from where the
    /// last piece left it: work in proportion to its length, not to its length squared (a
    /// sick server's 16 MiB, a byte at a time, would keep a worker framing far past the
    /// call's deadline, which is checked between reads only).
    #[test]
    fn a_reply_in_many_pieces_is_framed_once() {
        let mut array = b"*2000\r\n".to_vec();
        for i in 0..2000 {
            array.extend(format!("${}\r\n{}\r\n", i.to_string().len(), i).as_bytes());
        }
        let mut line = b"+".to_vec();
        line.extend(b"a\rb".repeat(3000));
        line.extend(b"\r\n");
        for bytes in [array, line] {
            let expected = crates(&bytes);
            let mut r = Reader::new();
            let mut src = Pieces(bytes.iter().map(|b| vec![*b]).collect());
            assert_eq!(r.read(&mut src).unwrap(), expected);
            // A piece's own bytes once, and what the value it cut holds before it.
            assert!(
                r.framed <= 20 * bytes.len(),
                "{} bytes framed for {}",
                r.framed,
                bytes.len()
            );
        }
    }

    /// Framing resumed from where a piece left it finds the same replies, wherever the two
    /// cuts of three pieces fall (inside a length, a CRLF, a payload, a line with a lone CR),
    /// with a second reply behind the first.
    #[test]
    fn replies_cut_in_three_anywhere_are_read_as_whole() {
        for bytes in [
            &b"*3\r\n$4\r\nab\r\n\r\n*2\r\n+x\ry\r\n:-12\r\n$-1\r\n:7\r\n"[..],
            b"*2\r\n-ERR a\rb\r\n%1\r\n+k\r\n*1\r\n$2\r\nzz\r\n+OK\r\n",
        ] {
            let first = frame(bytes, MAX_REPLY, &mut Progress::START.clone())
                .unwrap()
                .unwrap();
            let expected = (crates(&bytes[..first]), crates(&bytes[first..]));
            for i in 1..bytes.len() {
                for j in i + 1..bytes.len() {
                    let mut src = Pieces(vec![
                        bytes[..i].to_vec(),
                        bytes[i..j].to_vec(),
                        bytes[j..].to_vec(),
                    ]);
                    let mut r = Reader::new();
                    let got = (r.read(&mut src).unwrap(), r.read(&mut src).unwrap());
                    assert_eq!(got, expected, "cuts {i}, {j}");
                }
            }
        }
    }
}
