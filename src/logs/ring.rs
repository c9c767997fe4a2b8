//! The in-memory ring of one container's output ([`LogBuffer`]): what `vigil logs` and
//! `logs -f` read, with the previous run's tail for `--previous`.
//!
//! Owns: the bytes and their global offsets. Must not: do I/O, or interpret the output beyond
//! counting lines for `tail`.

use std::collections::VecDeque;

/// What [`LogBuffer::read_since`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadSince {
    pub bytes: Vec<u8>,
    /// Offset to pass next time.
    pub next: u64,
    /// Bytes between the requested offset and the first returned byte that are no longer held
    /// (overwritten in the ring): a follower that fell behind.
    pub skipped: u64,
}

/// A byte ring holding the current run's output, plus the tail of the previous run.
///
/// Offsets are global across runs (`total_written` never goes back), so a `logs -f` follower
/// keeps one offset and sees a restart as just more output.
#[derive(Debug, Clone)]
pub struct LogBuffer {
    capacity: usize,
    /// A capacity set by a reload, taken at the next run.
    next_capacity: Option<usize>,
    current: VecDeque<u8>,
    /// Global offset of the first byte of the current run.
    run_start: u64,
    previous: Vec<u8>,
    /// Global offset of `previous[0]`.
    previous_start: u64,
    has_previous: bool,
    total: u64,
    dropped: u64,
}

impl LogBuffer {
    /// `capacity` bytes for the current run (and as much again for the previous run's tail).
    /// A capacity of 0 is treated as 1.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        LogBuffer {
            capacity,
            next_capacity: None,
            current: VecDeque::new(),
            run_start: 0,
            previous: Vec::new(),
            previous_start: 0,
            has_previous: false,
            total: 0,
            dropped: 0,
        }
    }

    /// Appends output, overwriting the oldest bytes when full.
    pub fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        if data.len() >= self.capacity {
            self.dropped += (self.current.len() + data.len() - self.capacity) as u64;
            self.current.clear();
            self.current.extend(&data[data.len() - self.capacity..]);
            return;
        }
        let overflow = (self.current.len() + data.len()).saturating_sub(self.capacity);
        if overflow > 0 {
            self.current.drain(..overflow);
            self.dropped += overflow as u64;
        }
        self.current.extend(data);
    }

    /// Starts a new run: the current contents become the previous run (`--previous`).
    pub fn new_run(&mut self) {
        self.previous_start = self.total - self.current.len() as u64;
        self.previous = self.current.drain(..).collect();
        self.has_previous = true;
        self.run_start = self.total;
        if let Some(c) = self.next_capacity.take() {
            self.capacity = c;
        }
    }

    /// Sizes the ring anew from the next run on (a reload of `log_buffer_bytes`); the current
    /// run keeps what it holds. A capacity of 0 is treated as 1.
    pub fn set_capacity_next_run(&mut self, capacity: usize) {
        self.next_capacity = Some(capacity.max(1)).filter(|c| *c != self.capacity);
    }

    /// Bytes ever pushed (the offset one past the newest byte).
    pub fn total_written(&self) -> u64 {
        self.total
    }

    /// Bytes overwritten before anyone could read them, over the buffer's life.
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped
    }

    /// Whether a previous run exists.
    pub fn has_previous(&self) -> bool {
        self.has_previous
    }

    /// The last `n` lines (all held output when `None`) of the current or the previous run.
    /// A final line without a newline counts as a line.
    pub fn tail_lines(&self, n: Option<usize>, previous: bool) -> Vec<u8> {
        let bytes: Vec<u8> = if previous {
            self.previous.clone()
        } else {
            self.current.iter().copied().collect()
        };
        match n {
            None => bytes,
            Some(n) => tail_of(&bytes, n).to_vec(),
        }
    }

    /// Output from `offset` on (up to the newest byte). If `offset` is older than anything
    /// still held, starts at the oldest held byte and reports the gap in `skipped`. Bytes of
    /// the previous run still held are returned first (a follower that was behind at restart
    /// finishes the old run before the new one). An offset past the end returns nothing.
    pub fn read_since(&self, offset: u64) -> ReadSince {
        let offset = offset.min(self.total);
        let current_oldest = self.total - self.current.len() as u64;
        if self.has_previous && offset < self.run_start {
            let start = offset.max(self.previous_start);
            let skipped = start - offset;
            let bytes = self.previous[(start - self.previous_start) as usize..].to_vec();
            // `previous` always ends where the current run starts.
            let next = self.run_start;
            return ReadSince {
                bytes,
                next,
                skipped,
            };
        }
        let start = offset.max(current_oldest);
        let skipped = start - offset;
        let from = (start - current_oldest) as usize;
        let bytes = self.current.range(from..).copied().collect();
        ReadSince {
            bytes,
            next: self.total,
            skipped,
        }
    }
    /// The offsets `[start, end)` of what [`tail_lines`](LogBuffer::tail_lines) returns, so a
    /// reply can be streamed from the ring with [`read_range`](LogBuffer::read_range) instead
    /// of copied whole.
    pub fn tail_range(&self, n: Option<usize>, previous: bool) -> (u64, u64) {
        if previous {
            let len = self.previous.len();
            let keep = n.map_or(len, |n| tail_len(len, |i| self.previous[i], n));
            let end = self.previous_start + len as u64;
            (end - keep as u64, end)
        } else {
            let len = self.current.len();
            let keep = n.map_or(len, |n| tail_len(len, |i| self.current[i], n));
            (self.total - keep as u64, self.total)
        }
    }

    /// Like [`read_since`](LogBuffer::read_since) but at most `max` bytes: `next` is the offset
    /// after the last byte returned.
    pub fn read_range(&self, offset: u64, max: usize) -> ReadSince {
        let offset = offset.min(self.total);
        if self.has_previous && offset < self.run_start {
            let start = offset.max(self.previous_start);
            let from = ((start - self.previous_start) as usize).min(self.previous.len());
            let to = from.saturating_add(max).min(self.previous.len());
            return ReadSince {
                bytes: self.previous[from..to].to_vec(),
                next: self.previous_start + to as u64,
                skipped: start - offset,
            };
        }
        let oldest = self.total - self.current.len() as u64;
        let start = offset.max(oldest);
        let from = (start - oldest) as usize;
        let to = from.saturating_add(max).min(self.current.len());
        ReadSince {
            bytes: self.current.range(from..to).copied().collect(),
            next: oldest + to as u64,
            skipped: start - offset,
        }
    }
}

/// The length of the suffix holding the last `n` lines of `len` bytes read through `at`
/// (what [`tail_of`] keeps, without a copy).
fn tail_len(len: usize, at: impl Fn(usize) -> u8, n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let body = if len > 0 && at(len - 1) == b'\n' {
        len - 1
    } else {
        len
    };
    let mut seen = 0;
    for i in (0..body).rev() {
        if at(i) == b'\n' {
            seen += 1;
            if seen == n {
                return len - (i + 1);
            }
        }
    }
    len
}

/// The suffix of `bytes` holding its last `n` lines.
fn tail_of(bytes: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &[];
    }
    // Ignore a trailing newline: it ends the last line, it does not start a new one.
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &bytes[i + 1..];
            }
        }
    }
    bytes
}
