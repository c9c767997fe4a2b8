//! The HTTP/2 framing a probe needs (RFC 9113), pure: frame headers, building the few
//! frames a client sends, splitting a byte stream into frames, and the small HPACK encoder
//! for request headers. Header blocks are decoded with `loona-hpack` (RFC 7541) behind
//! [`HeaderDecoder`], which caps what a block may expand to.
//!
//! Must not: do I/O or decide what a response means (that is [`super::grpc`]).

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame header length.
pub const HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE we advertise (the default): larger frames are an error.
pub const MAX_FRAME: usize = 16_384;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY: u8 = 0x20;

/// SETTINGS_ENABLE_PUSH.
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;

/// One frame's header (RFC 9113 §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

/// A complete frame split off the front of the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    pub header: FrameHeader,
    pub payload: &'a [u8],
}

/// Why the byte stream cannot be framed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes exceeds the {MAX_FRAME}-byte maximum")]
    TooLarge { len: usize },
    #[error("frame padding longer than its payload")]
    BadPadding,
}

/// Parses a frame header.
pub fn parse_header(b: &[u8; HEADER_LEN]) -> FrameHeader {
    FrameHeader {
        len: (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]),
        kind: b[3],
        flags: b[4],
        stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
    }
}

/// The next complete frame at the front of `input` and how many bytes it used; `Ok(None)`
/// when more bytes are needed.
pub fn next_frame(input: &[u8]) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let Some(head) = input.first_chunk::<HEADER_LEN>() else {
        return Ok(None);
    };
    let header = parse_header(head);
    if header.len > MAX_FRAME {
        return Err(FrameError::TooLarge { len: header.len });
    }
    let total = HEADER_LEN + header.len;
    if input.len() < total {
        return Ok(None);
    }
    Ok(Some((
        Frame {
            header,
            payload: &input[HEADER_LEN..total],
        },
        total,
    )))
}

/// The payload of a DATA or HEADERS frame without padding and (HEADERS) priority fields
/// (RFC 9113 §6.1, §6.2).
pub fn strip_padding<'a>(frame: &Frame<'a>) -> Result<&'a [u8], FrameError> {
    let mut p = frame.payload;
    let flags = frame.header.flags;
    let mut pad = 0usize;
    if flags & PADDED != 0 {
        let (&n, rest) = p.split_first().ok_or(FrameError::BadPadding)?;
        pad = usize::from(n);
        p = rest;
    }
    if frame.header.kind == HEADERS && flags & PRIORITY != 0 {
        p = p.get(5..).ok_or(FrameError::BadPadding)?;
    }
    if pad > p.len() {
        return Err(FrameError::BadPadding);
    }
    Ok(&p[..p.len() - pad])
}

/// Appends one frame to `out`. `payload` must be at most [`MAX_FRAME`] bytes (the frames a
/// probe sends are tiny).
pub fn push_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len().min(MAX_FRAME);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&payload[..len]);
}

/// An HPACK integer with an `n`-bit prefix whose high bits are `first` (RFC 7541 §5.1).
pub fn push_hpack_int(out: &mut Vec<u8>, first: u8, n: u32, value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

/// A string literal without Huffman coding (RFC 7541 §5.2).
fn push_hpack_str(out: &mut Vec<u8>, s: &[u8]) {
    push_hpack_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// A header field in the static table, by index (RFC 7541 §6.1).
pub fn push_indexed(out: &mut Vec<u8>, index: usize) {
    push_hpack_int(out, 0x80, 7, index);
}

/// A literal header field without indexing whose name is static-table entry `name_index`,
/// or a literal name when `name_index` is 0 (RFC 7541 §6.2.2).
pub fn push_literal(out: &mut Vec<u8>, name_index: usize, name: &[u8], value: &[u8]) {
    push_hpack_int(out, 0x00, 4, name_index);
    if name_index == 0 {
        push_hpack_str(out, name);
    }
    push_hpack_str(out, value);
}

/// Why a header block could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    #[error("bad header block: {0}")]
    Malformed(String),
    #[error("response headers too large")]
    TooLarge,
}

/// HPACK decoding of response header blocks (RFC 7541) with a size cap; keeps the dynamic
/// table between the blocks of one connection.
pub struct HeaderDecoder {
    inner: loona_hpack::Decoder<'static>,
}

impl Default for HeaderDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl HeaderDecoder {
    pub fn new() -> HeaderDecoder {
        HeaderDecoder {
            inner: loona_hpack::Decoder::new(),
        }
    }

    /// The fields of one complete block, in order, and their size (counted as RFC 9113
    /// §6.5.2 does: name, value and 32 per field). Fails when the block is malformed or its
    /// fields add up to more than `max` bytes; nothing past `max` is kept meanwhile.
    #[allow(clippy::type_complexity)]
    pub fn decode(
        &mut self,
        block: &[u8],
        max: usize,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, usize), HpackError> {
        let mut fields = Vec::new();
        let mut size = 0usize;
        self.inner
            .decode_with_cb(block, |name, value| {
                size = size.saturating_add(name.len() + value.len() + 32);
                if size <= max {
                    fields.push((name.into_owned(), value.into_owned()));
                }
            })
            .map_err(|e| HpackError::Malformed(lower_first(&e.to_string())))?;
        if size > max {
            return Err(HpackError::TooLarge);
        }
        Ok((fields, size))
    }
}

/// `text` with its first letter in lower case, as the rest of a probe message is.
fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_split_at_every_byte() {
        let mut out = Vec::new();
        push_frame(&mut out, SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 0]);
        push_frame(&mut out, DATA, END_STREAM, 1, b"hello");
        let (f, used) = next_frame(&out).unwrap().unwrap();
        assert_eq!(
            f.header,
            FrameHeader {
                len: 6,
                kind: SETTINGS,
                flags: 0,
                stream: 0
            }
        );
        assert_eq!(used, 15);
        let (g, _) = next_frame(&out[used..]).unwrap().unwrap();
        assert_eq!((g.header.stream, g.payload), (1, &b"hello"[..]));
        for cut in 0..used {
            assert_eq!(next_frame(&out[..cut]), Ok(None));
        }
    }

    #[test]
    fn oversized_frames_are_refused_from_the_header_alone() {
        let head = [0x01, 0x00, 0x00, DATA, 0, 0, 0, 0, 1];
        assert_eq!(
            next_frame(&head),
            Err(FrameError::TooLarge { len: 0x10000 })
        );
    }

    #[test]
    fn padding_and_priority_are_stripped() {
        let payload = [2u8, 0, 0, 0, 1, 16, b'h', b'i', 0, 0];
        let frame = Frame {
            header: FrameHeader {
                len: payload.len(),
                kind: HEADERS,
                flags: PADDED | PRIORITY,
                stream: 1,
            },
            payload: &payload,
        };
        assert_eq!(strip_padding(&frame), Ok(&b"hi"[..]));
        let bad = Frame {
            header: FrameHeader {
                len: 2,
                kind: DATA,
                flags: PADDED,
                stream: 1,
            },
            payload: &[9, 0],
        };
        assert_eq!(strip_padding(&bad), Err(FrameError::BadPadding));
    }

    #[test]
    fn hpack_integers_follow_rfc7541_examples() {
        // C.1.1: 10 with a 5-bit prefix; C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        push_hpack_int(&mut out, 0, 5, 10);
        assert_eq!(out, [0x0a]);
        out.clear();
        push_hpack_int(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
    }

    #[test]
    fn encoded_request_headers_decode_with_the_decoder() {
        let mut block = Vec::new();
        push_indexed(&mut block, 3);
        push_literal(&mut block, 4, b"", b"/grpc.health.v1.Health/Check");
        push_literal(&mut block, 0, b"te", b"trailers");
        let headers = loona_hpack::Decoder::new().decode(&block).unwrap();
        assert_eq!(
            headers,
            vec![
                (b":method".to_vec(), b"POST".to_vec()),
                (b":path".to_vec(), b"/grpc.health.v1.Health/Check".to_vec()),
                (b"te".to_vec(), b"trailers".to_vec()),
            ]
        );
    }
}
