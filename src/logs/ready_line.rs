//! `ready_log_line` (docs/behaviour.md §4.5): one output stream of a run, split into lines and
//! each line matched once against the container's pattern, until one matches.
//!
//! Owns the part of a line that has not ended yet (at most [`READY_LINE_MAX`] bytes). Must not
//! hold more than that, match a line twice, or match anything after the first match (the
//! capture drops the matcher then).
//!
//! A line longer than [`READY_LINE_MAX`] is matched on its first [`READY_LINE_MAX`] bytes; the
//! rest of it is skipped up to its newline. So every byte is looked at once for its newline
//! (memchr) and at most once by the pattern, whatever the output.

use crate::config::spec::LinePattern;

/// The longest line matched whole: the forwarder's line cap (`FORWARD_MAX_LINE`, 16 KiB).
pub const READY_LINE_MAX: usize = super::FORWARD_MAX_LINE;

/// One stream's matcher (stdout or stderr of one run).
#[derive(Debug)]
pub struct ReadyLine {
    pattern: LinePattern,
    /// The start of the line being read, when a chunk ended inside it.
    held: Vec<u8>,
    /// The line being read was already matched on its first [`READY_LINE_MAX`] bytes: the rest
    /// up to its newline is skipped.
    skipping: bool,
}

impl ReadyLine {
    pub fn new(pattern: LinePattern) -> ReadyLine {
        ReadyLine {
            pattern,
            held: Vec::new(),
            skipping: false,
        }
    }

    /// Takes the next chunk of the stream; true when a line in it (or the line it ends)
    /// matched. After a match the rest of the chunk is not looked at.
    pub fn feed(&mut self, mut chunk: &[u8]) -> bool {
        while !chunk.is_empty() {
            let (line, ended, rest) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (&chunk[..i], true, &chunk[i + 1..]),
                None => (chunk, false, &chunk[chunk.len()..]),
            };
            chunk = rest;
            if self.skipping {
                self.skipping = !ended;
                continue;
            }
            if self.held.is_empty() && ended {
                // A whole line within the chunk: matched where it lies, no copy.
                if self
                    .pattern
                    .is_match(&line[..line.len().min(READY_LINE_MAX)])
                {
                    return true;
                }
                continue;
            }
            let room = READY_LINE_MAX - self.held.len();
            self.held.extend_from_slice(&line[..line.len().min(room)]);
            let full = self.held.len() >= READY_LINE_MAX;
            if ended || full {
                let matched = self.pattern.is_match(&self.held);
                self.held.clear();
                // A line cut at the cap is skipped up to its newline.
                self.skipping = !ended;
                if matched {
                    return true;
                }
            }
        }
        false
    }

    /// The stream ended: its last line, unfinished, is matched as it is.
    pub fn finish(&mut self) -> bool {
        let held = std::mem::take(&mut self.held);
        !self.skipping && !held.is_empty() && self.pattern.is_match(&held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(p: &str) -> ReadyLine {
        ReadyLine::new(LinePattern::new(p).expect("pattern"))
    }

    #[test]
    fn a_line_split_across_chunks_is_matched_whole() {
        let mut m = matcher("^server listening on port [0-9]+$");
        assert!(!m.feed(b"booting\nserver list"));
        assert!(!m.feed(b"ening on por"));
        assert!(m.feed(b"t 8080\nmore\n"));
    }

    #[test]
    fn anchors_are_per_line_and_the_newline_is_not_part_of_the_line() {
        let mut m = matcher("^ready$");
        assert!(!m.feed(b"not ready\nready now\n"));
        assert!(m.feed(b"ready\n"));
    }

    #[test]
    fn an_unfinished_last_line_is_matched_when_the_stream_ends() {
        let mut m = matcher("^ready$");
        assert!(!m.feed(b"ready"));
        assert!(m.finish());
    }

    #[test]
    fn a_line_over_the_cap_is_matched_on_its_first_part_once_and_its_rest_is_skipped() {
        let mut m = matcher("ready");
        let mut long = vec![b'x'; READY_LINE_MAX];
        long.extend_from_slice(b"ready");
        // The match text lies past the cap, in the skipped rest of the line.
        assert!(!m.feed(&long));
        assert!(!m.feed(b" ready still the same line"));
        assert!(!m.finish(), "the rest of a capped line is never matched");
        let mut m = matcher("ready");
        assert!(!m.feed(&long));
        assert!(m.feed(b"\nready\n"), "the next line is matched again");
        let mut m = matcher("^x+$");
        assert!(
            m.feed(&vec![b'x'; READY_LINE_MAX * 3]),
            "the first part of a long line is matched as soon as the cap is reached"
        );
    }

    #[test]
    fn a_line_of_exactly_the_cap_is_matched_whole_and_the_next_line_too() {
        let mut m = matcher("^y$");
        let mut chunk = vec![b'x'; READY_LINE_MAX];
        chunk.push(b'\n');
        chunk.extend_from_slice(b"y\n");
        assert!(m.feed(&chunk));
        let mut m = matcher("^y$");
        assert!(!m.feed(&vec![b'x'; READY_LINE_MAX - 1]));
        assert!(!m.feed(b"x"));
        assert!(
            m.feed(b"\ny\n"),
            "a line ending right at the cap skips nothing after it"
        );
    }

    #[test]
    fn a_match_anywhere_in_a_line_counts_and_invalid_utf8_does_not_stop_matching() {
        let mut m = matcher("accepting connections");
        assert!(!m.feed(b"\xff\xfe garbage\n"));
        assert!(!m.feed(b"LOG: database system is ready to accept connections\n"));
        assert!(m.feed(b"LOG: \xffaccepting connections\n"));
    }
}
