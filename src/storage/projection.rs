//! Column projection: which payload words a column mask covers.
//!
//! Rows are stored as 8-byte words (see [`super::row_store`]). A transaction that declares the
//! columns it uses (`Tx::read_cols`, `Tx::update_cols`) lets a protocol copy only the words those
//! columns occupy instead of the whole row: TPC-C's NewOrder reads three small columns of a
//! 679-byte customer row and updates four of a 318-byte stock row. Copies are word-granular, so
//! the bytes of an undeclared column that shares a word with a declared one are copied too; a
//! write-back of those words writes back what was read, which is correct whenever the protocol
//! guarantees the row did not change in between (a lock held, or a version validated under the
//! commit-time lock).
//!
//! ## Plans
//!
//! Turning a mask into word runs walks its bits, and a transaction copies the same few masks
//! over and over (NewOrder's stock columns: a prefetch, a read and a write-back per line). So
//! each table memoises the runs of the masks it sees: a small table of write-once slots, each
//! holding a mask and its runs packed into one word (at most [`PLAN_RUNS`] runs, in rows of at
//! most 255 words). A copy looks its mask up (a hash and a compare) and loops over the packed
//! runs; only a mask with more runs, a row too long to pack, or a full table walks the bits
//! each time.

use super::TableSpec;
use std::sync::atomic::{AtomicU64, Ordering};

/// A column mask: bit `i` is column `i` of the table's declared layout (the same type as
/// `engine::Columns`).
pub type Columns = u64;

/// The word range of each declared column of one table. Built once per table.
#[derive(Debug)]
pub struct Projection {
    /// `[lo, hi)` payload words of column `i`.
    words: Box<[(u32, u32)]>,
    /// `[lo, hi)` payload bytes of column `i` (for [`Projection::changed_outside`]).
    bytes: Box<[(u32, u32)]>,
    /// Mask of all declared columns.
    declared: Columns,
    /// Payload words per row.
    total: u32,
    /// Whether each column starts no later than the word after the previous one's last word
    /// (`lo[i+1] <= hi[i]`) and ends no earlier (`hi[i+1] >= hi[i]`), as in a layout declared
    /// in offset order without gaps of a word or more. Then consecutive columns `a..=b` cover
    /// exactly the words `lo[a]..hi[b]`, and [`Projection::runs`] walks runs of set mask bits
    /// instead of single bits.
    monotone: bool,
    /// Test mode: projected copies fill the bytes they do not copy with [`POISON`], and
    /// updates check that they change only the columns they declare as written.
    poison: bool,
    /// Memoised runs of the masks seen so far (see the module docs).
    plans: Box<[PlanSlot]>,
}

/// Most runs a packed plan holds: four `(lo, hi)` pairs of bytes in one word.
pub const PLAN_RUNS: usize = 4;
/// Plan slots per table, and how many a lookup probes from a mask's home slot.
const PLAN_SLOTS: usize = 64;
const PLAN_PROBES: usize = 8;
/// A slot's key while its writer fills it (never a planned mask: `u64::MAX` is whole).
const SLOT_BUSY: u64 = u64::MAX;

/// One write-once memo slot: `key` 0 (empty), [`SLOT_BUSY`], or the mask whose plan `runs` is.
#[derive(Debug, Default)]
struct PlanSlot {
    key: AtomicU64,
    runs: AtomicU64,
}

/// The runs of one mask packed into a word: run `i` is `lo` in byte `2i` and `hi` in byte
/// `2i + 1`; an all-zero pair ends the list (a run always has `hi > lo`). 0 means no plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan(u64);

impl Plan {
    /// Whether the plan holds runs (a mask without one walks its bits instead).
    #[inline(always)]
    pub fn is_some(self) -> bool {
        self.0 != 0
    }
}

impl Iterator for Plan {
    type Item = (usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<(usize, usize)> {
        if self.0 == 0 {
            return None;
        }
        let (lo, hi) = ((self.0 & 0xFF) as usize, ((self.0 >> 8) & 0xFF) as usize);
        self.0 >>= 16;
        Some((lo, hi))
    }
}

/// What the uncopied bytes of a projected copy hold when poisoning is on (see
/// `DbOptions::poison_unprojected`).
pub const POISON: u8 = 0xA5;

impl Projection {
    /// The projection of `spec`'s columns (validated: at most 64, each inside the row).
    pub fn new(spec: &TableSpec) -> Self {
        let words: Box<[(u32, u32)]> = spec
            .columns
            .iter()
            .map(|c| ((c.offset / 8) as u32, (c.offset + c.len).div_ceil(8) as u32))
            .collect();
        let bytes =
            spec.columns.iter().map(|c| (c.offset as u32, (c.offset + c.len) as u32)).collect();
        let declared = match words.len() {
            64 => u64::MAX,
            n => (1u64 << n) - 1,
        };
        let monotone = words.windows(2).all(|p| p[1].0 <= p[0].1 && p[1].1 >= p[0].1);
        let total = spec.row_size.div_ceil(8) as u32;
        let plans = (0..PLAN_SLOTS).map(|_| PlanSlot::default()).collect();
        Projection { words, bytes, declared, total, monotone, poison: false, plans }
    }

    /// Turns poisoning on: a procedure that uses a column it did not declare then reads
    /// [`POISON`] bytes instead of the row's, and an update that changes a column it did not
    /// declare as written is caught (for tests).
    pub fn set_poison(&mut self, on: bool) {
        self.poison = on;
    }

    /// Whether updates are checked against their written columns (test mode, see
    /// [`Projection::set_poison`]).
    #[inline(always)]
    pub fn checks_writes(&self) -> bool {
        self.poison
    }

    /// Whether `after` differs from `before` in a byte outside the columns `writes` (both are
    /// whole-row buffers). Byte-exact, unlike the word runs: a change to a column that shares a
    /// word with a written one is found too. A table that declares no columns has no masks:
    /// every update writes the whole row (see [`Projection::is_whole`]).
    pub fn changed_outside(&self, before: &[u8], after: &[u8], writes: Columns) -> bool {
        assert_eq!(before.len(), after.len());
        if self.is_whole(writes) {
            return false;
        }
        // Test mode only, so a fresh map per check is fine.
        let mut writable = vec![false; before.len()];
        for (i, &(lo, hi)) in self.bytes.iter().enumerate() {
            if writes & (1 << i) != 0 {
                writable[lo as usize..hi as usize].fill(true);
            }
        }
        (0..before.len()).any(|b| !writable[b] && before[b] != after[b])
    }

    /// Prepares `dst` for a copy of `cols`: fills it with [`POISON`] when poisoning is on and
    /// the copy is partial.
    #[inline]
    pub fn prepare(&self, dst: &mut [u8], cols: Columns) {
        if self.poison && !self.is_whole(cols) {
            dst.fill(POISON);
        }
    }

    /// Payload words per row.
    #[inline]
    pub fn total_words(&self) -> usize {
        self.total as usize
    }

    /// Whether `cols` covers the whole row (every declared column, or a table that declares
    /// none).
    #[inline]
    pub fn is_whole(&self, cols: Columns) -> bool {
        self.words.is_empty() || cols & self.declared == self.declared
    }

    /// Whether a buffer holding the columns `have` holds every column of `want`.
    #[inline]
    pub fn contains(&self, have: Columns, want: Columns) -> bool {
        self.is_whole(have) || want & self.declared & !have == 0
    }

    /// The packed runs of `cols` (see [`Plan`]), memoised per table; `Plan(0)` when the mask
    /// has more than [`PLAN_RUNS`] runs or the row is longer than 255 words, and the caller
    /// walks [`Projection::runs`] instead. `cols` must not be whole (see `is_whole`).
    #[inline(always)]
    pub fn plan(&self, cols: Columns) -> Plan {
        let key = cols & self.declared;
        let home = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize;
        for i in 0..PLAN_PROBES {
            let slot = &self.plans[(home + i) % PLAN_SLOTS];
            // Acquire: pairs with the Release that published the slot, so `runs` is complete.
            let k = slot.key.load(Ordering::Acquire);
            if k == key {
                return Plan(slot.runs.load(Ordering::Relaxed));
            }
            if k == 0 {
                break;
            }
        }
        self.make_plan(key, home)
    }

    /// Computes the plan of `key` and publishes it in the first empty slot of its probe
    /// sequence, if any (a full sequence only means it is recomputed next time).
    #[cold]
    #[inline(never)]
    fn make_plan(&self, key: Columns, home: usize) -> Plan {
        let mut packed = 0u64;
        let mut n = 0;
        let fits = self.total <= 0xFF;
        self.runs(key, |lo, hi| {
            // An empty run (a zero-length column) copies nothing, and packed as (0, 0) it
            // would end the list early.
            if hi > lo {
                if fits && n < PLAN_RUNS {
                    packed |= (lo as u64 | (hi as u64) << 8) << (16 * n);
                }
                n += 1;
            }
        });
        let plan = if fits && n <= PLAN_RUNS { Plan(packed) } else { Plan(0) };
        if key == 0 {
            return plan;
        }
        for i in 0..PLAN_PROBES {
            let slot = &self.plans[(home + i) % PLAN_SLOTS];
            // Acquire: claims the empty slot (no data to read yet); the Release store of the key
            // below publishes the runs stored first.
            match slot.key.compare_exchange(0, SLOT_BUSY, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    slot.runs.store(plan.0, Ordering::Relaxed);
                    // Release: a reader that sees the key sees the runs stored above.
                    slot.key.store(key, Ordering::Release);
                    break;
                }
                // Another thread published (or is publishing) this very mask: done.
                Err(k) if k == key => break,
                Err(_) => {}
            }
        }
        plan
    }

    /// Calls `f(lo, hi)` for runs of payload words `[lo, hi)` that together cover the columns
    /// of `cols` (bits beyond the declared columns are ignored). Adjacent columns in mask order
    /// merge into one run; runs may overlap when columns are declared out of offset order.
    #[inline]
    pub fn runs(&self, cols: Columns, mut f: impl FnMut(usize, usize)) {
        for (lo, hi) in self.iter_runs(cols) {
            f(lo, hi);
        }
    }

    /// Bytes the words of `cols` occupy in a row of `len` bytes when packed run after run
    /// ([`super::row_store::RowRef::read_cols_packed`]; the row's last word may be partial).
    pub fn packed_len(&self, cols: Columns, len: usize) -> usize {
        let mut n = 0;
        self.runs(cols, |lo, hi| n += (hi * 8).min(len) - lo * 8);
        n
    }

    /// Writes the words of `cols`, packed run after run in `packed` (exactly
    /// [`Projection::packed_len`] bytes), into their places in the row image `row`.
    pub fn unpack(&self, cols: Columns, packed: &[u8], row: &mut [u8]) {
        let mut at = 0;
        self.runs(cols, |lo, hi| {
            let (a, b) = (lo * 8, (hi * 8).min(row.len()));
            row[a..b].copy_from_slice(&packed[at..at + b - a]);
            at += b - a;
        });
        debug_assert_eq!(at, packed.len(), "packed bytes of another mask");
    }

    /// The runs of [`Projection::runs`] as an iterator. A loop over it has one call site for
    /// its body, so the copy loops of the row store inline there instead of being called per
    /// run through a closure.
    #[inline(always)]
    pub fn iter_runs(&self, cols: Columns) -> Runs<'_> {
        if self.is_whole(cols) {
            return Runs { p: self, bits: 0, pending: Some((0, self.total)) };
        }
        Runs { p: self, bits: cols & self.declared, pending: None }
    }
}

/// Iterator over the word runs of a column mask; see [`Projection::iter_runs`].
pub struct Runs<'a> {
    p: &'a Projection,
    /// Mask bits not yet walked (declared columns only).
    bits: Columns,
    /// The run being extended, returned when the next one does not touch it.
    pending: Option<(u32, u32)>,
}

impl Runs<'_> {
    /// Removes the next step's columns from `bits` and returns their word range. In a
    /// monotone layout the step is a run of consecutive set bits, so a mask of fifteen
    /// adjacent columns (TPC-C Payment's customer) costs one step, not fifteen; otherwise it is
    /// one column.
    #[inline(always)]
    fn step(&mut self) -> (u32, u32) {
        let a = self.bits.trailing_zeros();
        if !self.p.monotone {
            self.bits &= self.bits - 1;
            return self.p.words[a as usize];
        }
        // The run of ones starting at bit `a` ends at the first zero of `bits` above it; the
        // shift brings in zeros at the top, so a run reaching bit 63 is cut at 64 - a.
        let len = (!self.bits >> a).trailing_zeros().min(64 - a);
        let b = a + len - 1;
        self.bits &= if b == 63 { 0 } else { !0u64 << (b + 1) };
        // Consecutive columns `a..=b` of a monotone layout cover exactly `lo[a]..hi[b]`.
        (self.p.words[a as usize].0, self.p.words[b as usize].1)
    }
}

impl Iterator for Runs<'_> {
    type Item = (usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<(usize, usize)> {
        while self.bits != 0 {
            let (lo, hi) = self.step();
            match self.pending {
                // Monotone steps never start below the pending run; column steps may, and then
                // start a new (overlapping) run.
                Some((x, y)) if lo >= x && lo <= y => self.pending = Some((x, y.max(hi))),
                Some((x, y)) => {
                    self.pending = Some((lo, hi));
                    return Some((x as usize, y as usize));
                }
                None => self.pending = Some((lo, hi)),
            }
        }
        self.pending.take().map(|(x, y)| (x as usize, y as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TableSpec {
        // Words: a 0, b 0..2 (bytes 4..12), c 2, d 3..5 (bytes 24..34), row of 40 bytes = 5 words.
        TableSpec::new("t", 40, 1).with_columns(&[
            ("a", 0, 4),
            ("b", 4, 8),
            ("c", 16, 8),
            ("d", 24, 10),
        ])
    }

    fn runs(p: &Projection, cols: Columns) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        p.runs(cols, |lo, hi| v.push((lo, hi)));
        v
    }

    #[test]
    fn masks_map_to_merged_word_runs() {
        let p = Projection::new(&spec());
        assert_eq!(p.total_words(), 5);
        assert_eq!(runs(&p, 0b0001), vec![(0, 1)]);
        assert_eq!(runs(&p, 0b0011), vec![(0, 2)]);
        assert_eq!(runs(&p, 0b0101), vec![(0, 1), (2, 3)]);
        assert_eq!(runs(&p, 0b1000), vec![(3, 5)]);
        assert_eq!(runs(&p, 0b1100), vec![(2, 5)]);
        assert_eq!(runs(&p, 0), Vec::<(usize, usize)>::new());
        // Every declared column, or any superset, is the whole row.
        assert_eq!(runs(&p, 0b1111), vec![(0, 5)]);
        assert_eq!(runs(&p, u64::MAX), vec![(0, 5)]);
        assert!(p.contains(0b0011, 0b0010) && p.contains(0b1111, u64::MAX));
        assert!(!p.contains(0b0011, 0b0100) && !p.contains(0b0111, u64::MAX));
    }

    /// The runs of `mask` computed one column at a time.
    fn by_column(p: &Projection, mask: Columns, out: &mut Vec<(usize, usize)>) {
        let mut run: Option<(usize, usize)> = None;
        for i in (0..64).filter(|i| mask & p.declared & (1 << i) != 0) {
            let (lo, hi) = (p.words[i].0 as usize, p.words[i].1 as usize);
            run = match run {
                Some((a, b)) if lo >= a && lo <= b => Some((a, b.max(hi))),
                Some(r) => {
                    out.push(r);
                    Some((lo, hi))
                }
                None => Some((lo, hi)),
            };
        }
        out.extend(run);
    }

    /// The run-of-bits walk (monotone layouts) gives the same runs as the per-column walk, on
    /// random layouts and masks, including 64-column tables whose runs reach bit 63.
    #[test]
    fn runs_of_bits_match_runs_by_column() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(0x5EED_0001);
        let mut monotone = 0;
        for case in 0..2000 {
            let n = if case % 10 == 0 { 64 } else { rng.random_range(1..=64usize) };
            // Columns in offset order; a gap of up to 12 bytes before some of them, which
            // may skip a word and make the layout not monotone.
            let (mut cols, mut off) = (Vec::new(), 0usize);
            for i in 0..n {
                if rng.random_range(0..8) == 0 {
                    off += rng.random_range(1..=12usize);
                }
                let len = rng.random_range(1..=20usize);
                cols.push((format!("c{i}"), off, len));
                off += len;
            }
            let named: Vec<(&str, usize, usize)> =
                cols.iter().map(|(name, o, l)| (name.as_str(), *o, *l)).collect();
            let p = Projection::new(&TableSpec::new("t", off, 1).with_columns(&named));
            monotone += usize::from(p.monotone);
            for _ in 0..20 {
                let mask: Columns = match rng.random_range(0..4) {
                    0 => !(1u64 << rng.random_range(0..64)),
                    1 => u64::MAX << rng.random_range(0..64),
                    _ => rng.random(),
                };
                if p.is_whole(mask) {
                    continue;
                }
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                p.runs(mask, |lo, hi| fast.push((lo, hi)));
                by_column(&p, mask, &mut slow);
                assert_eq!(fast, slow, "case {case}, mask {mask:#x}, layout {cols:?}");
            }
        }
        // Both walks were exercised.
        assert!(monotone > 200 && monotone < 1900, "{monotone} monotone layouts of 2000");
    }

    /// A random layout of `n` columns in offset order, some after a gap (so some layouts are
    /// not monotone); row sizes range past 255 words.
    fn random_layout(rng: &mut impl rand::Rng, n: usize) -> Vec<(String, usize, usize)> {
        use rand::RngExt;
        let (mut cols, mut off) = (Vec::new(), 0usize);
        for i in 0..n {
            if rng.random_range(0..8) == 0 {
                off += rng.random_range(1..=12usize);
            }
            // Some zero-length columns: their runs are empty and plans leave them out.
            let len = if rng.random_range(0..16) == 0 { 0 } else { rng.random_range(1..=60usize) };
            cols.push((format!("c{i}"), off, len));
            off += len;
        }
        cols
    }

    fn projection(cols: &[(String, usize, usize)]) -> Projection {
        let named: Vec<(&str, usize, usize)> =
            cols.iter().map(|(name, o, l)| (name.as_str(), *o, *l)).collect();
        let row = cols.last().map_or(8, |c| (c.1 + c.2).max(1));
        Projection::new(&TableSpec::new("t", row, 1).with_columns(&named))
    }

    /// A plan lists exactly the runs of its mask, and is absent only when the mask has more
    /// than four runs or the row more than 255 words. More masks than slots: the later ones
    /// find no free slot, and must still be right.
    #[test]
    fn plans_hold_the_runs_of_their_mask() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(0x5EED_0002);
        let (mut planned, mut unplanned) = (0, 0);
        for case in 0..300 {
            let n = rng.random_range(1..=64usize);
            let cols = random_layout(&mut rng, n);
            let p = projection(&cols);
            for _ in 0..100 {
                let mask: Columns = match rng.random_range(0..3) {
                    0 => 1 << rng.random_range(0..n),
                    1 => rng.random::<u64>() & rng.random::<u64>(),
                    _ => rng.random(),
                };
                if p.is_whole(mask) {
                    continue;
                }
                let mut want = Vec::new();
                p.runs(mask, |lo, hi| {
                    if hi > lo {
                        want.push((lo, hi));
                    }
                });
                for _ in 0..2 {
                    let plan = p.plan(mask);
                    if plan.is_some() {
                        planned += 1;
                        assert_eq!(plan.collect::<Vec<_>>(), want, "case {case}, mask {mask:#x}");
                    } else {
                        unplanned += 1;
                        assert!(
                            want.len() > PLAN_RUNS || p.total_words() > 255 || want.is_empty(),
                            "case {case}, mask {mask:#x}: {want:?} has no plan"
                        );
                    }
                }
            }
        }
        assert!(planned > 1000 && unplanned > 1000, "{planned} planned, {unplanned} not");
    }

    /// Threads (more than cores) race to publish plans into a fresh table, each checking
    /// every plan it gets against the runs it computes itself.
    #[test]
    fn plans_stay_right_when_threads_publish_them_concurrently() {
        use rand::{RngExt, SeedableRng};
        use std::sync::Barrier;
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(0x5EED_0003);
        for round in 0..40u64 {
            // Short columns, so most masks pack, on one table that every thread shares.
            let cols: Vec<_> = (0..40).map(|i| (format!("c{i}"), i * 3, 3)).collect();
            let p = projection(&cols);
            let masks: Vec<Columns> = (0..120)
                .map(|_| {
                    let a = rng.random_range(0..40u32);
                    let b = rng.random_range(a..40u32);
                    let c = rng.random_range(0..40u32);
                    ((1u64 << (b + 1)) - (1u64 << a)) | 1 << c
                })
                .collect();
            let threads = 8;
            let barrier = Barrier::new(threads);
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (p, masks, barrier) = (&p, &masks, &barrier);
                    s.spawn(move || {
                        let mut rng =
                            rand::rngs::Xoshiro256PlusPlus::seed_from_u64(round * 64 + t as u64);
                        barrier.wait();
                        for _ in 0..2000 {
                            let mask = masks[rng.random_range(0..masks.len())];
                            let mut want = Vec::new();
                            p.runs(mask, |lo, hi| want.push((lo, hi)));
                            let plan = p.plan(mask);
                            if plan.is_some() {
                                assert_eq!(
                                    plan.collect::<Vec<_>>(),
                                    want,
                                    "round {round}, {mask:#x}"
                                );
                            } else {
                                assert!(want.len() > PLAN_RUNS, "round {round}, {mask:#x}");
                            }
                        }
                    });
                }
            });
        }
    }

    #[test]
    fn a_table_without_columns_is_always_whole() {
        let p = Projection::new(&TableSpec::new("t", 13, 1));
        assert_eq!(p.total_words(), 2);
        assert!(p.is_whole(0));
        assert_eq!(runs(&p, 1), vec![(0, 2)]);
    }
}
