//! TPC-C's random inputs (clauses 2.1.6, 4.3.2): uniform ranges, NURand with its run-time
//! constants, a-strings, n-strings, last names from syllables and "ORIGINAL" data.

use rand::{RngExt, SeedableRng};

/// Syllables of generated last names (clause 4.3.2.3).
const SYLLABLES: [&[u8]; 10] =
    [b"BAR", b"OUGHT", b"ABLE", b"PRI", b"PRES", b"ESE", b"ANTI", b"CALLY", b"ATION", b"EING"];

/// Characters of a-strings: the spec asks for at least 26 lower-case letters, 26 upper-case
/// letters and 10 digits.
const ALNUM: &[u8; 62] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// The constant C of NURand for each of its three uses (clause 2.1.6.1).
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct NuConstants {
    /// C for C_LAST at load time.
    pub c_last_load: u32,
    /// C for C_LAST at run time (|run - load| in 65..=119, not 96 or 112).
    pub c_last_run: u32,
    /// C for C_ID.
    pub c_id: u32,
    /// C for OL_I_ID.
    pub ol_i_id: u32,
}

impl NuConstants {
    /// Draws the constants from `seed`, meeting clause 2.1.6.1's rule for C_LAST.
    pub fn draw(seed: u64) -> Self {
        let mut r = TpccRand::new(seed ^ 0xC0DE_C0DE);
        let c_last_load = r.uniform(0, 255);
        let c_last_run = loop {
            let run = r.uniform(0, 255);
            let delta = run.abs_diff(c_last_load);
            if (65..=119).contains(&delta) && delta != 96 && delta != 112 {
                break run;
            }
        };
        NuConstants {
            c_last_load,
            c_last_run,
            c_id: r.uniform(0, 1023),
            ol_i_id: r.uniform(0, 8191),
        }
    }
}

/// A TPC-C random stream.
pub struct TpccRand {
    rng: rand::rngs::Xoshiro256PlusPlus,
}

impl TpccRand {
    /// A stream seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        TpccRand { rng: rand::rngs::Xoshiro256PlusPlus::seed_from_u64(seed) }
    }

    /// Uniform in `[lo, hi]`.
    #[inline]
    pub fn uniform(&mut self, lo: u32, hi: u32) -> u32 {
        self.rng.random_range(lo..=hi)
    }

    /// Uniform in `[lo, hi]`, 64-bit.
    #[inline]
    pub fn uniform64(&mut self, lo: i64, hi: i64) -> i64 {
        self.rng.random_range(lo..=hi)
    }

    /// NURand(A, x, y) with constant `c` (clause 2.1.6).
    #[inline]
    pub fn nurand(&mut self, a: u32, x: u32, y: u32, c: u32) -> u32 {
        (((self.uniform(0, a) | self.uniform(x, y)) + c) % (y - x + 1)) + x
    }

    /// Fills `buf[..len]` with an a-string of random length in `[min, max]` (clamped to the
    /// buffer) and zeroes the rest; returns the length.
    pub fn astring(&mut self, buf: &mut [u8], min: usize, max: usize) -> usize {
        let len = self.rng.random_range(min..=max).min(buf.len());
        for b in &mut buf[..len] {
            *b = ALNUM[self.rng.random_range(0..ALNUM.len())];
        }
        buf[len..].fill(0);
        len
    }

    /// Fills `buf` with `len` random digits (an n-string) and zeroes the rest.
    pub fn nstring(&mut self, buf: &mut [u8], len: usize) {
        for b in &mut buf[..len] {
            *b = b'0' + self.rng.random_range(0..10u8);
        }
        buf[len..].fill(0);
    }

    /// I_DATA / S_DATA: an a-string of 26 to 50 characters, 10 % of them holding "ORIGINAL" at
    /// a random position (clause 4.3.3.1).
    pub fn data_with_original(&mut self, buf: &mut [u8]) {
        let len = self.astring(buf, 26, 50);
        if self.uniform(1, 10) == 1 {
            let at = self.rng.random_range(0..=len - 8);
            buf[at..at + 8].copy_from_slice(b"ORIGINAL");
        }
    }

    /// A zip code: four random digits then "11111" (clause 4.3.2.7).
    pub fn zip(&mut self, buf: &mut [u8]) {
        self.nstring(&mut buf[..4], 4);
        buf[4..9].copy_from_slice(b"11111");
    }

    /// A uniformly chosen index below `n`.
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        self.rng.random_range(0..n)
    }
}

/// Writes the last name for `num` (0 to 999) into `buf` (zero-padded); returns its length.
pub fn last_name(num: u32, buf: &mut [u8; 16]) -> usize {
    let mut len = 0;
    for s in [num / 100, (num / 10) % 10, num % 10] {
        let syl = SYLLABLES[s as usize];
        buf[len..len + syl.len()].copy_from_slice(syl);
        len += syl.len();
    }
    buf[len..].fill(0);
    len
}

/// Whether `haystack` contains "ORIGINAL".
///
/// NewOrder asks this of 20 strings of 26 to 50 bytes each (I_DATA and S_DATA). On x86-64 it
/// tests 16 start positions at once for an 'O' with an 'L' seven bytes on (two SSE2 compares) and
/// checks only those candidates whole: ~35 instructions a string, where comparing every 8-byte
/// window costs ~80 and `memchr::memmem` does no better on strings this short.
#[inline]
pub fn has_original(haystack: &[u8]) -> bool {
    const NEEDLE: [u8; 8] = *b"ORIGINAL";
    #[cfg(target_arch = "x86_64")]
    if haystack.len() >= 23 {
        use std::arch::x86_64::{
            _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
        };
        // Blocks of 16 start positions; a block reads 23 bytes (the 'L' of its last one).
        let last = haystack.len() - 23;
        let mut i = 0;
        loop {
            // The final block may overlap the one before it: it ends at the last start position.
            let s = i.min(last);
            // SAFETY: SSE2 is part of the x86-64 baseline, so the intrinsics exist; `s + 23 <=
            // len`, so both unaligned 16-byte loads (bytes s..s+16 and s+7..s+23) lie inside
            // `haystack`.
            let mut candidates = unsafe {
                let p = haystack.as_ptr();
                let o = _mm_cmpeq_epi8(_mm_loadu_si128(p.add(s).cast()), _mm_set1_epi8(b'O' as i8));
                let l =
                    _mm_cmpeq_epi8(_mm_loadu_si128(p.add(s + 7).cast()), _mm_set1_epi8(b'L' as i8));
                _mm_movemask_epi8(_mm_and_si128(o, l)) as u32
            };
            while candidates != 0 {
                let k = s + candidates.trailing_zeros() as usize;
                if haystack[k..k + 8] == NEEDLE {
                    return true;
                }
                candidates &= candidates - 1;
            }
            if s == last {
                return false;
            }
            i += 16;
        }
    }
    haystack.windows(8).any(|w| w == NEEDLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_are_built_from_three_syllables() {
        let mut b = [0u8; 16];
        assert_eq!(last_name(0, &mut b), 9);
        assert_eq!(&b[..9], b"BARBARBAR");
        let n = last_name(371, &mut b);
        assert_eq!(&b[..n], b"PRICALLYOUGHT");
        let n = last_name(999, &mut b);
        assert_eq!(&b[..n], b"EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_range_and_constants_obey_the_delta_rule() {
        for seed in 0..200 {
            let c = NuConstants::draw(seed);
            let d = c.c_last_run.abs_diff(c.c_last_load);
            assert!((65..=119).contains(&d) && d != 96 && d != 112, "{c:?}");
            assert!(c.c_id <= 1023 && c.ol_i_id <= 8191);
        }
        let mut r = TpccRand::new(7);
        for _ in 0..10_000 {
            let v = r.nurand(8191, 1, 100_000, 4242);
            assert!((1..=100_000).contains(&v));
            let v = r.nurand(255, 0, 999, 200);
            assert!(v <= 999);
        }
    }

    #[test]
    fn strings_have_the_requested_lengths_and_original_marks_a_tenth() {
        let mut r = TpccRand::new(3);
        let mut buf = [0u8; 50];
        let mut original = 0;
        for _ in 0..10_000 {
            let n = r.astring(&mut buf, 26, 50);
            assert!((26..=50).contains(&n));
            assert!(buf[..n].iter().all(|b| b.is_ascii_alphanumeric()));
            assert!(buf[n..].iter().all(|&b| b == 0));
            r.data_with_original(&mut buf);
            original += usize::from(has_original(&buf));
        }
        assert!((800..1200).contains(&original), "{original} of 10000 hold ORIGINAL");
    }

    #[test]
    fn original_search_agrees_with_a_window_scan_at_every_length_and_place() {
        let naive = |h: &[u8]| h.windows(8).any(|w| w == b"ORIGINAL");
        let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(7);
        for len in 0..80 {
            for _ in 0..20 {
                // Random letters from a small alphabet heavy in 'O' and 'L', so that candidate
                // positions (an 'O' with an 'L' seven bytes on) are common.
                let mut h: Vec<u8> =
                    (0..len).map(|_| b"OLRIGNAx"[rng.random_range(0..8)]).collect();
                assert_eq!(has_original(&h), naive(&h), "{:?}", String::from_utf8_lossy(&h));
                if len >= 8 {
                    let at = rng.random_range(0..=len - 8);
                    h[at..at + 8].copy_from_slice(b"ORIGINAL");
                    assert!(has_original(&h), "at {at} of {len}");
                    // A near miss in the same place: one byte off.
                    h[at + rng.random_range(1..7)] = b'x';
                    assert_eq!(has_original(&h), naive(&h), "near miss at {at} of {len}");
                }
            }
        }
    }

    #[test]
    fn original_is_found_anywhere_and_only_whole() {
        assert!(has_original(b"ORIGINAL"));
        assert!(has_original(b"abcORIGINAL"));
        assert!(has_original(b"ORIGINALxyz"));
        assert!(has_original(b"aORIGINALORIGINAb"));
        assert!(!has_original(b"ORIGINA"));
        assert!(!has_original(b"ORIGINAxL ORIGINAl RIGINAL"));
        assert!(!has_original(b""));
    }
}
