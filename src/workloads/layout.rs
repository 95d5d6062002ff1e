//! Fixed-width row layouts declared column by column: the `layout!` macro that TPC-C's and
//! TPC-E's schemas use, and the offset arithmetic behind it.
//!
//! `layout!(table { COL: width, ... })` declares a module `table` with the column enum `C`,
//! widths, offsets, names, the row size, the column masks templates use (`mask`) and typed
//! accessors (`u32`, `i64`, strings, accumulations). [`r`], [`w`] and [`acc`] build the template
//! accesses their pieces declare with those masks.

use crate::engine::{AccessMode, Columns, TableAccess};
use crate::storage::TableId;

/// A template's read of `columns` of `table`.
pub const fn r(table: TableId, columns: Columns) -> TableAccess {
    TableAccess { table, mode: AccessMode::Read, columns }
}

/// A template's write of `columns` of `table` (which covers reading them).
pub const fn w(table: TableId, columns: Columns) -> TableAccess {
    TableAccess { table, mode: AccessMode::Write, columns }
}

/// A template's commutative accumulation into `columns` of `table`.
pub const fn acc(table: TableId, columns: Columns) -> TableAccess {
    TableAccess { table, mode: AccessMode::Accumulate, columns }
}

/// Byte offsets of columns laid out one after another with `widths`.
pub const fn offsets<const N: usize>(widths: &[usize]) -> [usize; N] {
    let mut out = [0; N];
    let mut i = 1;
    while i < N {
        out[i] = out[i - 1] + widths[i - 1];
        i += 1;
    }
    out
}

/// Sum of `widths`.
pub const fn total(widths: &[usize]) -> usize {
    let mut s = 0;
    let mut i = 0;
    while i < widths.len() {
        s += widths[i];
        i += 1;
    }
    s
}

/// Declares one table's row layout: a module with the column enum `C`, widths, offsets, names,
/// the row size and typed accessors.
macro_rules! layout {
    ($(#[$doc:meta])* $m:ident { $($col:ident : $w:expr),+ $(,)? }) => {
        $(#[$doc])*
        #[allow(non_camel_case_types, clippy::upper_case_acronyms, dead_code)]
        pub mod $m {
            /// The columns, in row order.
            #[derive(Clone, Copy, Debug, PartialEq, Eq)]
            #[repr(usize)]
            pub enum C { $(#[doc = stringify!($col)] $col),+ }
            pub use C::*;
            /// Byte width of each column.
            pub const WIDTH: &[usize] = &[$($w),+];
            /// Column names.
            pub const NAMES: &[&str] = &[$(stringify!($col)),+];
            /// Byte offset of each column.
            pub const OFF: [usize; WIDTH.len()] = crate::workloads::layout::offsets::<{ WIDTH.len() }>(WIDTH);
            /// Row size in bytes.
            pub const SIZE: usize = crate::workloads::layout::total(WIDTH);
            /// `(name, offset, width)` of every column, for the table spec.
            pub fn columns() -> Vec<(&'static str, usize, usize)> {
                (0..WIDTH.len()).map(|i| (NAMES[i], OFF[i], WIDTH[i])).collect()
            }
            /// The column mask of `cols`.
            pub const fn mask(cols: &[C]) -> u64 {
                let mut m = 0;
                let mut i = 0;
                while i < cols.len() {
                    m |= 1 << cols[i] as usize;
                    i += 1;
                }
                m
            }
            /// The bytes of column `c`.
            #[inline]
            pub fn get(r: &[u8], c: C) -> &[u8] {
                &r[OFF[c as usize]..OFF[c as usize] + WIDTH[c as usize]]
            }
            /// The bytes of column `c`, writable.
            #[inline]
            pub fn get_mut(r: &mut [u8], c: C) -> &mut [u8] {
                &mut r[OFF[c as usize]..OFF[c as usize] + WIDTH[c as usize]]
            }
            /// A 4-byte integer column.
            #[inline]
            pub fn u32(r: &[u8], c: C) -> u32 {
                u32::from_le_bytes(get(r, c).try_into().expect("4-byte column"))
            }
            /// Sets a 4-byte integer column.
            #[inline]
            pub fn set_u32(r: &mut [u8], c: C, v: u32) {
                get_mut(r, c).copy_from_slice(&v.to_le_bytes());
            }
            /// A 4-byte signed integer column (TPC-E's quantities, negative for short positions).
            #[inline]
            pub fn i32(r: &[u8], c: C) -> i32 {
                i32::from_le_bytes(get(r, c).try_into().expect("4-byte column"))
            }
            /// Sets a 4-byte signed integer column.
            #[inline]
            pub fn set_i32(r: &mut [u8], c: C, v: i32) {
                get_mut(r, c).copy_from_slice(&v.to_le_bytes());
            }
            /// A 1-byte column (flags).
            #[inline]
            pub fn u8(r: &[u8], c: C) -> u8 {
                r[OFF[c as usize]]
            }
            /// Sets a 1-byte column.
            #[inline]
            pub fn set_u8(r: &mut [u8], c: C, v: u8) {
                r[OFF[c as usize]] = v;
            }
            /// An 8-byte integer column (money in cents, dates in seconds).
            #[inline]
            pub fn i64(r: &[u8], c: C) -> i64 {
                i64::from_le_bytes(get(r, c).try_into().expect("8-byte column"))
            }
            /// Sets an 8-byte integer column.
            #[inline]
            pub fn set_i64(r: &mut [u8], c: C, v: i64) {
                get_mut(r, c).copy_from_slice(&v.to_le_bytes());
            }
            /// A commutative accumulation of `delta` into integer column `c` (4 or 8 bytes
            /// wide; see `Tx::accumulate`).
            pub const fn add(c: C, delta: i64) -> crate::engine::Accumulation {
                let (i, off) = (c as usize, OFF[c as usize]);
                match WIDTH[i] {
                    8 => crate::engine::Accumulation::add_i64(i, off, delta),
                    4 => crate::engine::Accumulation::add_u32(i, off, delta),
                    _ => panic!("an accumulation needs a 4- or 8-byte integer column"),
                }
            }
            /// Copies `text` into a string column, zero-padding the rest.
            #[inline]
            pub fn set_str(r: &mut [u8], c: C, text: &[u8]) {
                let dst = get_mut(r, c);
                let n = text.len().min(dst.len());
                dst[..n].copy_from_slice(&text[..n]);
                dst[n..].fill(0);
            }
        }
    };
}
