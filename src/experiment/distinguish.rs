//! Which measured contenders can be told apart: protocols whose repeats' ranges overlap are not
//! distinguishable at this machine's noise, whatever order their medians fall in.
//!
//! Each contender's repeats give a range [min, max]. Its *rank* is an interval: it is behind
//! every contender whose minimum is above its maximum and ahead of every one whose maximum is
//! below its minimum; the others, whose ranges overlap its own, could be on either side. For an
//! overlapping pair, the repeats that would separate them are estimated from their pooled
//! relative standard deviation `s` and the relative difference `d` of their medians: the median
//! of `n` runs has a standard error of about `1.25 s / sqrt(n)`, so the difference of two
//! medians stands out at two standard errors when `n >= 2 (2.5 s / d)^2`.

/// A contender's standing among the others.
#[derive(Clone, Debug, PartialEq)]
pub struct Standing {
    /// The best and worst rank it could hold (1 = fastest).
    pub rank: (usize, usize),
    /// The contenders its range overlaps, each with the repeats (of both) estimated to
    /// separate them; `None` when their medians are equal or more than
    /// [`MAX_REPEATS`] would be needed.
    pub ties: Vec<(usize, Option<u32>)>,
}

/// Beyond this many repeats a difference is not worth separating (and the estimate says so).
pub const MAX_REPEATS: u32 = 100;

/// The median of `xs` (not empty): the middle value, or the mean of the two middle ones.
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Relative sample variance of `xs` (variance over the squared mean); 0 for fewer than two.
fn rel_var(xs: &[f64]) -> f64 {
    let n = xs.len();
    if n < 2 {
        return 0.0;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    if mean == 0.0 {
        return 0.0;
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    var / (mean * mean)
}

/// The repeats that would separate two contenders measured as `a` and `b`.
pub fn repeats_to_separate(a: &[f64], b: &[f64]) -> Option<u32> {
    let (ma, mb) = (median(a), median(b));
    let d = (ma - mb).abs() / ma.max(mb);
    if d == 0.0 || !d.is_finite() {
        return None;
    }
    let s = ((rel_var(a) + rel_var(b)) / 2.0).sqrt();
    let n = (2.0 * (2.5 * s / d).powi(2)).ceil().max(2.0);
    (n <= MAX_REPEATS as f64).then_some(n as u32)
}

/// The standing of each contender, given each one's measurements (one value per repeat, higher
/// is better); `None` for a contender with fewer than two repeats, whose spread is unknown.
pub fn standings(samples: &[Vec<f64>]) -> Vec<Option<Standing>> {
    let range =
        |xs: &[f64]| xs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let ranges: Vec<(f64, f64)> = samples.iter().map(|s| range(s)).collect();
    samples
        .iter()
        .enumerate()
        .map(|(i, mine)| {
            if mine.len() < 2 {
                return None;
            }
            let (lo, hi) = ranges[i];
            let mut ahead = 0;
            let mut behind = 0;
            let mut ties = Vec::new();
            for (j, theirs) in samples.iter().enumerate() {
                if j == i || theirs.is_empty() {
                    continue;
                }
                let (tlo, thi) = ranges[j];
                if tlo > hi {
                    ahead += 1;
                } else if thi < lo {
                    behind += 1;
                } else {
                    ties.push((j, repeats_to_separate(mine, theirs)));
                }
            }
            let others = samples.iter().filter(|s| !s.is_empty()).count();
            Some(Standing { rank: (ahead + 1, others - behind), ties })
        })
        .collect()
}

impl Standing {
    /// The rank as text: `2`, or `2-4` when it could hold any of those.
    pub fn rank_text(&self) -> String {
        if self.rank.0 == self.rank.1 {
            self.rank.0.to_string()
        } else {
            format!("{}-{}", self.rank.0, self.rank.1)
        }
    }
}

/// The estimate in words: "about 12 repeats", or "more than 100 repeats".
pub fn repeats_text(n: Option<u32>) -> String {
    match n {
        Some(n) => format!("about {n} repeats"),
        None => format!("more than {MAX_REPEATS} repeats"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_ranges_share_ranks_and_separate_ones_do_not() {
        let s = standings(&[
            vec![100.0, 110.0, 105.0], // 100-110
            vec![108.0, 120.0, 115.0], // 108-120: overlaps the first
            vec![200.0, 210.0, 205.0], // clear winner
            vec![10.0],                // one run: no standing
            vec![],                    // did not run
        ]);
        let rank = |i: usize| s[i].as_ref().unwrap().rank;
        assert_eq!(rank(2), (1, 1));
        assert_eq!(rank(1), (2, 3));
        assert_eq!(rank(0), (2, 3));
        assert!(s[3].is_none() && s[4].is_none());
        assert_eq!(s[0].as_ref().unwrap().ties.iter().map(|t| t.0).collect::<Vec<_>>(), [1]);
        assert!(s[2].as_ref().unwrap().ties.is_empty());
        assert_eq!(s[1].as_ref().unwrap().rank_text(), "2-3");
        // The one-run contender still counts as ahead of or behind the others.
        assert_eq!(rank(2).1, 1);
    }

    #[test]
    fn the_repeats_needed_grow_with_the_noise_and_shrink_with_the_gap() {
        // 5 % apart, noise of about 4 %: a handful of repeats.
        let a = [100.0, 96.0, 104.0];
        let b = [95.0, 91.0, 99.0];
        let n = repeats_to_separate(&a, &b).unwrap();
        // s = 0.04 / ~0.98 ≈ 0.041 (pooled), d = 0.05: 2 (2.5 s / d)^2 ≈ 8.5.
        assert_eq!(n, 9);
        // Twice the noise: four times the repeats.
        let a2 = [100.0, 92.0, 108.0];
        let b2 = [95.0, 87.0, 103.0];
        let n2 = repeats_to_separate(&a2, &b2).unwrap();
        assert!((4 * n - 4..=4 * n + 4).contains(&n2), "{n} then {n2}");
        // Equal medians never separate; a tiny gap in large noise is not worth it.
        assert_eq!(repeats_to_separate(&a, &a), None);
        assert_eq!(repeats_to_separate(&[100.0, 80.0, 120.0], &[99.0, 79.0, 119.0]), None);
        assert_eq!(repeats_text(Some(9)), "about 9 repeats");
        assert_eq!(repeats_text(None), "more than 100 repeats");
    }
}
