//! The in-memory ring of one container's output ([`LogBuffer`]): what `vigil logs` and
//! `logs -f` read, with the previous run's tail for `--previous`.
//!
//! Owns: the bytes, their global offsets and when they were read: a side index of
//! `(offset, wall-clock time)` per chunk pushed, for `--timestamps` and `--since`. A line's
//! time is that of the chunk its first byte came in (kubelet/CRI stamp a line when the runtime
//! reads it; vigil stamps each read of the pipe). Chunks read within [`STAMP_COALESCE_NS`] of
//! the last stamp share it, and at most one stamp is kept per [`STAMP_BYTES`] bytes of ring
//! (the oldest go first; their bytes then take the oldest stamp kept), so the index stays
//! within a quarter of the ring's size and a push costs a comparison, not an allocation.
//! Must not: do I/O, read the clock (the caller passes the time), or interpret the output
//! beyond counting lines for `tail` and finding line starts.

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

/// Chunks pushed within this many nanoseconds of the last stamp share it.
pub const STAMP_COALESCE_NS: i64 = 1_000_000;
/// At most one stamp per this many bytes of ring capacity (16 bytes a stamp: a quarter).
pub const STAMP_BYTES: usize = 64;

/// `(global offset of a chunk's first byte, Unix time in nanoseconds)`, oldest first, times
/// never decreasing.
type Stamps = VecDeque<(u64, i64)>;

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
    /// A run ended before the current one (the first `new_run` of a fresh buffer starts the
    /// first run, unless output came before it).
    has_previous: bool,
    /// Runs started with [`LogBuffer::new_run`].
    runs: u64,
    total: u64,
    dropped: u64,
    /// The current run has lost its first bytes and the held output starts mid-line (the
    /// last byte overwritten was not a newline).
    partial_first: bool,
    /// The same for `previous`.
    previous_partial_first: bool,
    /// When the current run's held bytes were read.
    stamps: Stamps,
    /// The same for `previous`.
    previous_stamps: Stamps,
    /// Which ring this is: an offset means one byte only within one ring (a `logs -f`
    /// follower resumes by both). Given at creation; kept across an upgrade.
    id: u64,
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
            runs: 0,
            total: 0,
            dropped: 0,
            partial_first: false,
            previous_partial_first: false,
            stamps: VecDeque::new(),
            previous_stamps: VecDeque::new(),
            id: 0,
        }
    }

    /// This ring is named `id` (unique among the rings of this host's vigils: see
    /// `logs::next_ring_id`).
    pub fn with_id(mut self, id: u64) -> Self {
        self.id = id;
        self
    }

    /// The ring's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether the byte just before `offset` is held and is not a newline (a read from
    /// `offset` begins within a line).
    pub fn mid_line_at(&self, offset: u64) -> bool {
        let Some(before) = offset.checked_sub(1) else {
            return false;
        };
        let r = self.read_range(before, 1);
        r.skipped == 0 && r.bytes.first().is_some_and(|&b| b != b'\n')
    }

    /// Appends output, overwriting the oldest bytes when full.
    pub fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        if data.len() >= self.capacity {
            let cut = data.len() - self.capacity;
            self.dropped += (self.current.len() + cut) as u64;
            self.partial_first = match cut {
                0 => self.current.back().is_some_and(|&b| b != b'\n'),
                _ => data[cut - 1] != b'\n',
            };
            self.current.clear();
            self.current.extend(&data[data.len() - self.capacity..]);
            return;
        }
        let overflow = (self.current.len() + data.len()).saturating_sub(self.capacity);
        if overflow > 0 {
            self.partial_first = self.current[overflow - 1] != b'\n';
            self.current.drain(..overflow);
            self.dropped += overflow as u64;
        }
        self.current.extend(data);
    }

    /// [`push`](LogBuffer::push) of a chunk read at `unix_nanos` (see the module doc for
    /// how chunks share stamps and how many are kept).
    pub fn push_at(&mut self, data: &[u8], unix_nanos: i64) {
        let offset = self.total;
        self.push(data);
        match self.stamps.back() {
            Some(&(_, last)) if unix_nanos < last + STAMP_COALESCE_NS => {}
            _ => {
                let oldest = self.total - self.current.len() as u64;
                // A stamp whose bytes are all gone is of no use once the next one exists.
                while self.stamps.len() >= 2 && self.stamps[1].0 <= oldest {
                    self.stamps.pop_front();
                }
                if self.stamps.len() >= (self.capacity / STAMP_BYTES).max(16) {
                    self.stamps.pop_front();
                }
                let last = self.stamps.back().map_or(i64::MIN, |s| s.1);
                self.stamps
                    .push_back((offset.max(oldest), unix_nanos.max(last)));
            }
        }
    }

    /// When the byte at `offset` was read (of the previous run when `offset` lies before the
    /// current one), or `None` when nothing held was stamped.
    pub fn stamp_at(&self, offset: u64) -> Option<i64> {
        let stamps = self.stamps_of(offset < self.run_start && self.has_previous);
        let i = stamps.partition_point(|s| s.0 <= offset);
        stamps.get(i.saturating_sub(1)).map(|s| s.1)
    }

    fn stamps_of(&self, previous: bool) -> &Stamps {
        if previous {
            &self.previous_stamps
        } else {
            &self.stamps
        }
    }

    /// The offset of the first line of the current or previous run read at or after
    /// `unix_nanos` (kubectl `--since`/`--since-time`): the first chunk stamped then or later,
    /// moved on to the next line start when a line older than it continues into it. The end
    /// of the run when nothing is that recent.
    pub fn since_offset(&self, unix_nanos: i64, previous: bool) -> u64 {
        let (held, end) = if previous {
            (
                self.previous_start,
                self.previous_start + self.previous.len() as u64,
            )
        } else {
            (self.total - self.current.len() as u64, self.total)
        };
        let stamps = self.stamps_of(previous);
        let i = stamps.partition_point(|s| s.1 < unix_nanos);
        let Some(&(at, _)) = stamps.get(i) else {
            return end;
        };
        let at = at.max(held);
        if at == held {
            return at;
        }
        let byte = |o: u64| -> u8 {
            if previous {
                self.previous[(o - self.previous_start) as usize]
            } else {
                self.current[(o - held) as usize]
            }
        };
        if byte(at - 1) == b'\n' {
            return at;
        }
        (at..end).find(|&o| byte(o) == b'\n').map_or(end, |o| o + 1)
    }

    /// Starts a new run: the current contents become the previous run (`--previous`).
    pub fn new_run(&mut self) {
        self.previous_start = self.total - self.current.len() as u64;
        self.previous = self.current.drain(..).collect();
        self.previous_partial_first = std::mem::take(&mut self.partial_first);
        self.previous_stamps = std::mem::take(&mut self.stamps);
        self.has_previous |= self.runs > 0 || self.total > 0;
        self.runs += 1;
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

    /// Runs started so far ([`LogBuffer::new_run`] calls).
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// Whether a previous run exists (`logs --previous` is an error otherwise).
    pub fn has_previous(&self) -> bool {
        self.has_previous
    }

    /// The last `n` lines (all held output when `None`) of the current or the previous run,
    /// as [`tail_range`](LogBuffer::tail_range) delimits them.
    pub fn tail_lines(&self, n: Option<usize>, previous: bool) -> Vec<u8> {
        let (start, end) = self.tail_range(n, previous);
        let r = self.read_range(start, (end - start) as usize);
        r.bytes
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
    /// The offsets `[start, end)` of the last `n` lines (all held output when `None`) of the
    /// current or the previous run; a final line without a newline counts as a line. When the
    /// run has wrapped mid-line (the last byte overwritten was not a newline), the held output
    /// begins with the rest of a line: that partial first line is left out, unless it is the
    /// only line held. A reply is
    /// streamed from the ring with [`read_range`](LogBuffer::read_range), never copied whole.
    pub fn tail_range(&self, n: Option<usize>, previous: bool) -> (u64, u64) {
        if previous {
            let at = |i: usize| self.previous[i];
            let end = self.previous_start + self.previous.len() as u64;
            let keep = keep_len(self.previous.len(), at, n, self.previous_partial_first);
            (end - keep as u64, end)
        } else {
            let at = |i: usize| self.current[i];
            let keep = keep_len(self.current.len(), at, n, self.partial_first);
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

/// How many of the `len` held bytes (read through `at`) [`LogBuffer::tail_range`] returns:
/// the last `n` lines, without the first line when it is `partial` (its start overwritten).
fn keep_len(len: usize, at: impl Fn(usize) -> u8, n: Option<usize>, partial: bool) -> usize {
    let keep = n.map_or(len, |n| tail_len(len, &at, n));
    if keep < len || !partial {
        return keep;
    }
    match (0..len).find(|&i| at(i) == b'\n') {
        Some(i) if i + 1 < len => len - (i + 1),
        _ => keep,
    }
}

/// The length of the suffix holding the last `n` lines of `len` bytes read through `at`
/// (without a copy).
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

/// A [`LogBuffer`]'s bookkeeping without its bytes, for a handoff across `vigil upgrade`
/// (the bytes travel separately, raw).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RingMeta {
    pub capacity: usize,
    pub next_capacity: Option<usize>,
    pub run_start: u64,
    pub previous_start: u64,
    pub has_previous: bool,
    pub runs: u64,
    pub total: u64,
    pub dropped: u64,
    pub partial_first: bool,
    pub previous_partial_first: bool,
    /// When the held bytes were read (`--timestamps`, `--since`), oldest first.
    #[serde(default)]
    pub stamps: Vec<(u64, i64)>,
    #[serde(default)]
    pub previous_stamps: Vec<(u64, i64)>,
    /// [`LogBuffer::id`] (0 from a vigil before ring ids).
    #[serde(default)]
    pub id: u64,
}

impl LogBuffer {
    /// The bookkeeping, the current run's bytes and the previous run's tail.
    pub fn parts(&self) -> (RingMeta, (&[u8], &[u8]), &[u8]) {
        let meta = RingMeta {
            capacity: self.capacity,
            next_capacity: self.next_capacity,
            run_start: self.run_start,
            previous_start: self.previous_start,
            has_previous: self.has_previous,
            runs: self.runs,
            total: self.total,
            dropped: self.dropped,
            partial_first: self.partial_first,
            previous_partial_first: self.previous_partial_first,
            stamps: self.stamps.iter().copied().collect(),
            previous_stamps: self.previous_stamps.iter().copied().collect(),
            id: self.id,
        };
        (meta, self.current.as_slices(), &self.previous)
    }

    /// A ring rebuilt from [`LogBuffer::parts`]; `None` when they do not fit together (the
    /// current bytes must end at `total`, within the capacity).
    pub fn from_parts(meta: RingMeta, current: Vec<u8>, previous: Vec<u8>) -> Option<LogBuffer> {
        let fits = meta.capacity >= 1
            && current.len() <= meta.capacity
            && (current.len() as u64) <= meta.total
            && meta.run_start <= meta.total
            && meta.previous_start.checked_add(previous.len() as u64)? <= meta.total;
        fits.then(|| LogBuffer {
            capacity: meta.capacity,
            next_capacity: meta.next_capacity,
            current: current.into(),
            run_start: meta.run_start,
            previous,
            previous_start: meta.previous_start,
            has_previous: meta.has_previous,
            runs: meta.runs,
            total: meta.total,
            dropped: meta.dropped,
            partial_first: meta.partial_first,
            previous_partial_first: meta.previous_partial_first,
            stamps: meta.stamps.into(),
            previous_stamps: meta.previous_stamps.into(),
            id: meta.id,
        })
    }
}
