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

use super::TableSpec;

/// A column mask: bit `i` is column `i` of the table's declared layout (the same type as
/// `engine::Columns`).
pub type Columns = u64;

/// The word range of each declared column of one table. Built once per table.
#[derive(Clone, Debug)]
pub struct Projection {
    /// `[lo, hi)` payload words of column `i`.
    words: Box<[(u32, u32)]>,
    /// Mask of all declared columns.
    declared: Columns,
    /// Payload words per row.
    total: u32,
    /// Test mode: projected copies fill the bytes they do not copy with [`POISON`].
    poison: bool,
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
        let declared = match words.len() {
            64 => u64::MAX,
            n => (1u64 << n) - 1,
        };
        Projection { words, declared, total: spec.row_size.div_ceil(8) as u32, poison: false }
    }

    /// Turns poisoning on: a procedure that uses a column it did not declare then reads
    /// [`POISON`] bytes instead of the row's (for tests).
    pub fn set_poison(&mut self, on: bool) {
        self.poison = on;
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

    /// Calls `f(lo, hi)` for runs of payload words `[lo, hi)` that together cover the columns
    /// of `cols` (bits beyond the declared columns are ignored). Adjacent columns in mask order
    /// merge into one run; runs may overlap when columns are declared out of offset order.
    #[inline]
    pub fn runs(&self, cols: Columns, mut f: impl FnMut(usize, usize)) {
        if self.is_whole(cols) {
            f(0, self.total as usize);
            return;
        }
        let mut bits = cols & self.declared;
        let mut run: Option<(u32, u32)> = None;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let (lo, hi) = self.words[i];
            run = match run {
                Some((a, b)) if lo >= a && lo <= b => Some((a, b.max(hi))),
                Some((a, b)) => {
                    f(a as usize, b as usize);
                    Some((lo, hi))
                }
                None => Some((lo, hi)),
            };
        }
        if let Some((a, b)) = run {
            f(a as usize, b as usize);
        }
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

    #[test]
    fn a_table_without_columns_is_always_whole() {
        let p = Projection::new(&TableSpec::new("t", 13, 1));
        assert_eq!(p.total_words(), 2);
        assert!(p.is_whole(0));
        assert_eq!(runs(&p, 1), vec![(0, 2)]);
    }
}
