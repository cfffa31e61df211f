//! Numerical building blocks of the paired analysis: quantiles, the seeded percentile
//! bootstrap, the Wilcoxon signed-rank test, the exact McNemar test and the Pareto frontier.
//!
//! Every function here is pure and deterministic (the bootstrap takes its seed), so results can
//! be checked against known answers and against scipy (`fixtures/report/scipy_expected.py`).
//! Conventions follow numpy/scipy so the two agree: quantiles interpolate linearly between order
//! statistics (numpy's default), and the Wilcoxon test is scipy's default (`zero_method =
//! "wilcox"`, no continuity correction, `method="auto"`).

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};

/// Largest number of differences (zeros included) for which the exact Wilcoxon distribution is
/// used when there are no ties and no zeros; scipy uses the same cut-off.
pub const WILCOXON_EXACT_MAX_N: usize = 50;

/// Bootstrap resamples computed together in one pass over the rows (memory traffic, not
/// arithmetic, bounds the bootstrap on large inputs).
const BOOTSTRAP_BLOCK: usize = 8;

pub use crate::rng::SplitMix64;

/// The generator for bootstrap resample `index`: independent of thread scheduling, so the
/// result does not depend on how resamples are spread over cores.
pub fn resample_rng(seed: u64, index: usize) -> SplitMix64 {
    let mut mixer = SplitMix64::new(seed ^ (index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    SplitMix64::new(mixer.next_u64())
}

/// Linear-interpolation quantile of already sorted values (numpy's default method).
/// `None` for an empty slice.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lower = position.floor() as usize;
    let upper = position.ceil() as usize;
    let fraction = position - lower as f64;
    Some(sorted[lower] + (sorted[upper] - sorted[lower]) * fraction)
}

/// Quantile of unsorted values (copies and sorts).
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    quantile_sorted(&sorted, q)
}

pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// A point estimate with its percentile-bootstrap confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub estimate: f64,
    pub ci_low: f64,
    pub ci_high: f64,
}

/// Percentile bootstrap over paired rows.
///
/// `rows` holds one fixed-width row of values per pair (`width` values each). Each resample draws
/// `rows.len()` row indices with replacement and computes the column means; `statistic` turns a
/// column-mean vector into the statistics of interest. Returns, per statistic, the estimate on
/// the full sample and the `(1 - confidence)/2` and `(1 + confidence)/2` quantiles of the
/// resampled values. Resamples whose statistic is not finite are left out of that statistic's
/// interval (e.g. a ratio whose denominator resampled to zero).
///
/// Draws are turned into per-row counts first so the accumulation is one sequential pass: the
/// random accesses then hit a small count array instead of the wide rows. The result does not
/// depend on the number of threads: resample `i` always uses [`resample_rng`]`(seed, i)`.
pub fn bootstrap_means<F>(
    rows: &[f64],
    width: usize,
    resamples: usize,
    confidence: f64,
    seed: u64,
    statistic: F,
) -> Vec<Option<Estimate>>
where
    F: Fn(&[f64]) -> Vec<f64> + Sync,
{
    let n = rows.len().checked_div(width).unwrap_or(0);
    if n == 0 {
        return statistic(&vec![f64::NAN; width])
            .into_iter()
            .map(|_| None)
            .collect();
    }
    let mut point_sums = vec![0.0; width];
    for row in rows.chunks_exact(width) {
        for (sum, value) in point_sums.iter_mut().zip(row) {
            *sum += value;
        }
    }
    let point = statistic(&point_sums.iter().map(|s| s / n as f64).collect::<Vec<_>>());
    let blocks = resamples.div_ceil(BOOTSTRAP_BLOCK);
    let replicates: Vec<Vec<f64>> = (0..blocks)
        .into_par_iter()
        .map_init(
            || vec![vec![0u32; n]; BOOTSTRAP_BLOCK],
            |counts, block| {
                let first = block * BOOTSTRAP_BLOCK;
                let lanes = BOOTSTRAP_BLOCK.min(resamples - first);
                for (lane, lane_counts) in counts.iter_mut().enumerate().take(lanes) {
                    lane_counts.iter_mut().for_each(|c| *c = 0);
                    let mut rng = resample_rng(seed, first + lane);
                    for _ in 0..n {
                        lane_counts[rng.below(n)] += 1;
                    }
                }
                // One pass over the rows serves the whole block. Zero weights are multiplied
                // in rather than skipped: a data-dependent branch costs more than the
                // multiply, and adding +0.0 leaves every sum unchanged.
                let mut sums = vec![0.0; lanes * width];
                for (i, row) in rows.chunks_exact(width).enumerate() {
                    for (lane_sums, lane_counts) in sums.chunks_exact_mut(width).zip(counts.iter())
                    {
                        let weight = f64::from(lane_counts[i]);
                        for (sum, value) in lane_sums.iter_mut().zip(row) {
                            *sum += weight * value;
                        }
                    }
                }
                sums.chunks_exact(width)
                    .map(|lane_sums| {
                        statistic(&lane_sums.iter().map(|s| s / n as f64).collect::<Vec<_>>())
                    })
                    .collect::<Vec<_>>()
            },
        )
        .flatten()
        .collect();
    percentile_intervals(&point, &replicates, confidence)
}

/// Percentile intervals of each statistic `k` from its bootstrap `replicates[..][k]`; `None`
/// where the point estimate or the interval is not finite.
fn percentile_intervals(
    point: &[f64],
    replicates: &[Vec<f64>],
    confidence: f64,
) -> Vec<Option<Estimate>> {
    let alpha = (1.0 - confidence) / 2.0;
    point
        .iter()
        .enumerate()
        .map(|(k, &estimate)| {
            if !estimate.is_finite() {
                return None;
            }
            let mut values: Vec<f64> = replicates
                .iter()
                .map(|r| r[k])
                .filter(|v| v.is_finite())
                .collect();
            values.sort_by(f64::total_cmp);
            Some(Estimate {
                estimate,
                ci_low: quantile_sorted(&values, alpha)?,
                ci_high: quantile_sorted(&values, 1.0 - alpha)?,
            })
        })
        .collect()
}

/// Cluster bootstrap over `clusters` clusters whose values are spread over `segments` sums:
/// `entries[k] = (cluster, segment)` adds row `k` of `values` (`width` values, entries sorted
/// by cluster) to that segment. Each resample draws `clusters` clusters with replacement
/// ([`resample_rng`]`(seed, i)`, as [`bootstrap_means`]) and `statistic` gets every segment's
/// sums divided by `clusters` (segment-major). One pass serves every segment, so statistics of
/// sub-groups and of their union come from the same resamples. With one segment holding one
/// row per cluster this is exactly [`bootstrap_means`].
#[allow(clippy::too_many_arguments)]
pub fn bootstrap_segments<F>(
    clusters: usize,
    entries: &[(u32, u32)],
    values: &[f64],
    width: usize,
    segments: usize,
    resamples: usize,
    confidence: f64,
    seed: u64,
    statistic: F,
) -> Vec<Option<Estimate>>
where
    F: Fn(&[f64]) -> Vec<f64> + Sync,
{
    let total = width * segments;
    let means = |sums: &[f64]| sums.iter().map(|s| s / clusters as f64).collect::<Vec<_>>();
    if clusters == 0 || total == 0 {
        return statistic(&vec![f64::NAN; total])
            .into_iter()
            .map(|_| None)
            .collect();
    }
    let mut point_sums = vec![0.0; total];
    for (&(_, segment), row) in entries.iter().zip(values.chunks_exact(width)) {
        let at = segment as usize * width;
        for (sum, value) in point_sums[at..at + width].iter_mut().zip(row) {
            *sum += value;
        }
    }
    let point = statistic(&means(&point_sums));
    let blocks = resamples.div_ceil(BOOTSTRAP_BLOCK);
    let replicates: Vec<Vec<f64>> = (0..blocks)
        .into_par_iter()
        .map_init(
            || vec![vec![0u32; clusters]; BOOTSTRAP_BLOCK],
            |counts, block| {
                let first = block * BOOTSTRAP_BLOCK;
                let lanes = BOOTSTRAP_BLOCK.min(resamples - first);
                for (lane, lane_counts) in counts.iter_mut().enumerate().take(lanes) {
                    lane_counts.iter_mut().for_each(|c| *c = 0);
                    let mut rng = resample_rng(seed, first + lane);
                    for _ in 0..clusters {
                        lane_counts[rng.below(clusters)] += 1;
                    }
                }
                let mut sums = vec![0.0; lanes * total];
                for (&(cluster, segment), row) in entries.iter().zip(values.chunks_exact(width)) {
                    let at = segment as usize * width;
                    for (lane_sums, lane_counts) in sums.chunks_exact_mut(total).zip(counts.iter())
                    {
                        let weight = f64::from(lane_counts[cluster as usize]);
                        for (sum, value) in lane_sums[at..at + width].iter_mut().zip(row) {
                            *sum += weight * value;
                        }
                    }
                }
                sums.chunks_exact(total)
                    .map(|lane_sums| statistic(&means(lane_sums)))
                    .collect::<Vec<_>>()
            },
        )
        .flatten()
        .collect();
    percentile_intervals(&point, &replicates, confidence)
}

/// Which test produced a p-value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// Wilcoxon signed-rank, exact null distribution (no ties, no zeros, n <= 50).
    WilcoxonExact,
    /// Wilcoxon signed-rank, exact sign-flip permutation distribution (n <= 13 with ties or
    /// zeros), as scipy's `method="auto"` does.
    WilcoxonPermutation,
    /// Wilcoxon signed-rank, normal approximation with the tie correction (no continuity
    /// correction).
    WilcoxonNormal,
    /// Exact McNemar (two-sided binomial test on the discordant pairs).
    McnemarExact,
    /// No test: every paired difference is zero.
    NoDifference,
}

impl TestKind {
    pub fn label(self) -> &'static str {
        match self {
            TestKind::WilcoxonExact => "Wilcoxon (exact)",
            TestKind::WilcoxonPermutation => "Wilcoxon (exact sign-flip)",
            TestKind::WilcoxonNormal => "Wilcoxon (normal approx.)",
            TestKind::McnemarExact => "McNemar (exact)",
            TestKind::NoDifference => "none (all differences zero)",
        }
    }

    /// The wire name, as in `summary.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            TestKind::WilcoxonExact => "wilcoxon_exact",
            TestKind::WilcoxonPermutation => "wilcoxon_permutation",
            TestKind::WilcoxonNormal => "wilcoxon_normal",
            TestKind::McnemarExact => "mcnemar_exact",
            TestKind::NoDifference => "no_difference",
        }
    }
}

/// Result of a paired significance test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub test: TestKind,
    /// Wilcoxon: min(W+, W-); McNemar: the smaller discordant count.
    pub statistic: f64,
    pub p_value: f64,
    /// Differences used: non-zero differences (Wilcoxon) or discordant pairs (McNemar).
    pub n_used: usize,
}

/// Two-sided Wilcoxon signed-rank test on paired differences, matching
/// `scipy.stats.wilcoxon(d)` with its defaults (`zero_method="wilcox"`, `correction=False`,
/// `method="auto"`; checked against `fixtures/report/wilcoxon_vectors.json`).
///
/// Zero differences are dropped from the ranking; absolute differences get average ranks. The
/// method follows scipy's "auto", where `n` counts the zeros too: more than 50 differences use
/// the normal approximation with the tie correction of the variance; otherwise no ties and no
/// zeros use the exact null distribution; ties or zeros with n <= 13 use the exact sign-flip
/// distribution (what scipy's permutation test enumerates); the rest the normal approximation.
/// All differences zero gives "no difference" with p = 1 (scipy returns NaN there).
pub fn wilcoxon_signed_rank(differences: &[f64]) -> TestResult {
    let finite: Vec<f64> = differences
        .iter()
        .copied()
        .filter(|d| !d.is_nan())
        .collect();
    let total = finite.len();
    let mut nonzero: Vec<f64> = finite.iter().copied().filter(|d| *d != 0.0).collect();
    let zeros = total - nonzero.len();
    let n = nonzero.len();
    if n == 0 {
        return TestResult {
            test: TestKind::NoDifference,
            statistic: 0.0,
            p_value: 1.0,
            n_used: 0,
        };
    }
    nonzero.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    // Ranks are kept doubled so average ranks (multiples of 1/2) stay integers.
    let mut doubled_ranks = Vec::with_capacity(n);
    let mut doubled_plus: u64 = 0;
    let mut tie_term = 0.0;
    let mut ties = false;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && nonzero[j + 1].abs() == nonzero[i].abs() {
            j += 1;
        }
        // Ranks i+1 ..= j+1 share their average; doubled: i + j + 2.
        let doubled = (i + j + 2) as u64;
        let t = (j - i + 1) as f64;
        if t > 1.0 {
            ties = true;
            tie_term += t * t * t - t;
        }
        for d in &nonzero[i..=j] {
            doubled_ranks.push(doubled);
            if *d > 0.0 {
                doubled_plus += doubled;
            }
        }
        i = j + 1;
    }
    let r_plus = doubled_plus as f64 / 2.0;
    let nf = n as f64;
    let r_minus = nf * (nf + 1.0) / 2.0 - r_plus;
    let statistic = f64::min(r_plus, r_minus);
    let exact = total <= WILCOXON_EXACT_MAX_N && !ties && zeros == 0;
    let permutation = !exact && total <= WILCOXON_PERMUTATION_MAX_N;
    if exact || permutation {
        return TestResult {
            test: if exact {
                TestKind::WilcoxonExact
            } else {
                TestKind::WilcoxonPermutation
            },
            statistic,
            p_value: sign_flip_p_value(&doubled_ranks, doubled_plus),
            n_used: n,
        };
    }
    let mean = nf * (nf + 1.0) / 4.0;
    let variance = (nf * (nf + 1.0) * (2.0 * nf + 1.0) - tie_term / 2.0) / 24.0;
    let z = (r_plus - mean) / variance.sqrt();
    TestResult {
        test: TestKind::WilcoxonNormal,
        statistic,
        p_value: (2.0 * standard_normal_sf(z.abs())).min(1.0),
        n_used: n,
    }
}

/// Largest number of differences (zeros included) for which ties or zeros use the exact
/// sign-flip distribution; scipy's cut-off (2^13 flips fit its default 9,999 resamples).
pub const WILCOXON_PERMUTATION_MAX_N: usize = 13;

/// Two-sided p-value of W+ under random signs: 2 · min(P(W+ <= observed), P(W+ >= observed)),
/// capped at 1. Zero differences double every count alike, so they are left out. Without ties
/// this is the exact Wilcoxon distribution.
fn sign_flip_p_value(doubled_ranks: &[u64], doubled_plus: u64) -> f64 {
    let max: u64 = doubled_ranks.iter().sum();
    let mut counts = vec![0.0f64; max as usize + 1];
    counts[0] = 1.0;
    let mut reach = 0usize;
    for &rank in doubled_ranks {
        let rank = rank as usize;
        reach += rank;
        for s in (rank..=reach).rev() {
            counts[s] += counts[s - rank];
        }
    }
    let total: f64 = counts.iter().sum();
    let observed = doubled_plus as usize;
    let less: f64 = counts[..=observed].iter().sum::<f64>() / total;
    let greater: f64 = counts[observed..].iter().sum::<f64>() / total;
    (2.0 * less.min(greater)).min(1.0)
}

/// Holm's step-down adjustment of a family of p-values (same order as given): the i-th
/// smallest is multiplied by (m − i + 1), made monotone, capped at 1.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|a, b| p_values[*a].total_cmp(&p_values[*b]));
    let mut adjusted = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (rank, &index) in order.iter().enumerate() {
        let value = ((m - rank) as f64 * p_values[index]).min(1.0);
        running = running.max(value);
        adjusted[index] = running;
    }
    adjusted
}

fn standard_normal_sf(z: f64) -> f64 {
    // musl's erfc (libm) agrees with scipy's ndtr to the last bits; statrs' erfc is off by ~1e-9 relative.
    0.5 * libm::erfc(z / std::f64::consts::SQRT_2)
}

/// Exact McNemar test on paired 0/1 outcomes: `b` pairs went 1 → 0, `c` went 0 → 1.
/// Two-sided binomial test of min(b, c) in b + c trials at p = 1/2.
pub fn mcnemar_exact(b: u64, c: u64) -> TestResult {
    let discordant = b + c;
    let smaller = b.min(c);
    let p_value = if discordant == 0 {
        1.0
    } else {
        match Binomial::new(0.5, discordant) {
            Ok(binomial) => (2.0 * binomial.cdf(smaller)).min(1.0),
            Err(_) => f64::NAN,
        }
    };
    TestResult {
        test: TestKind::McnemarExact,
        statistic: smaller as f64,
        p_value,
        n_used: discordant as usize,
    }
}

/// Direction in which a Pareto objective is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Maximise,
    Minimise,
}

/// Indices of the points not dominated by any other point. A point dominates another when it
/// is at least as good in every objective and strictly better in one. Points with a missing
/// (NaN) objective are never on the frontier.
pub fn pareto_frontier(points: &[Vec<f64>], directions: &[Direction]) -> Vec<usize> {
    let better_or_equal = |a: f64, b: f64, d: Direction| match d {
        Direction::Maximise => a >= b,
        Direction::Minimise => a <= b,
    };
    let dominates = |a: &[f64], b: &[f64]| {
        let all = a
            .iter()
            .zip(b)
            .zip(directions)
            .all(|((x, y), d)| better_or_equal(*x, *y, *d));
        let strict = a
            .iter()
            .zip(b)
            .zip(directions)
            .any(|((x, y), d)| better_or_equal(*x, *y, *d) && x != y);
        all && strict
    };
    (0..points.len())
        .filter(|&i| points[i].iter().all(|v| !v.is_nan()))
        .filter(|&i| {
            !points.iter().enumerate().any(|(j, other)| {
                j != i && other.iter().all(|v| !v.is_nan()) && dominates(other, &points[i])
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn quantiles_match_numpy_linear() {
        let values = [1.0, 2.0, 3.0, 4.0, 10.0];
        assert_eq!(quantile(&values, 0.5), Some(3.0));
        // numpy.percentile([1,2,3,4,10], 90) == 7.6
        assert!(close(quantile(&values, 0.9).expect("q"), 7.6, 1e-12));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile(&[5.0], 0.9), Some(5.0));
    }

    #[test]
    fn splitmix_known_first_outputs() {
        // Reference values of SplitMix64 seeded with 0 (Vigna's reference implementation).
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn wilcoxon_exact_textbook_example() {
        // scipy.stats.wilcoxon([6,8,14,16,23,24,28,29,41,-48,49,56,60,-67,75]) -> statistic 24,
        // p = 0.04126 (Fisher's Zea mays differences, exact).
        let d = [
            6.0, 8.0, 14.0, 16.0, 23.0, 24.0, 28.0, 29.0, 41.0, -48.0, 49.0, 56.0, 60.0, -67.0,
            75.0,
        ];
        let result = wilcoxon_signed_rank(&d);
        assert_eq!(result.test, TestKind::WilcoxonExact);
        assert_eq!(result.statistic, 24.0);
        assert!(close(result.p_value, 0.041259765625, 1e-12), "{result:?}");
    }

    /// scipy.stats.wilcoxon on every branch of method="auto" (vectors written by
    /// fixtures/report/wilcoxon_vectors.py with scipy; the version is in the file).
    #[test]
    fn wilcoxon_matches_scipy_in_every_tie_and_zero_case() {
        let text = include_str!("../../fixtures/report/wilcoxon_vectors.json");
        let vectors: serde_json::Value = serde_json::from_str(text).expect("json");
        let cases = vectors["cases"].as_array().expect("cases");
        assert!(cases.len() >= 20);
        let mut kinds = std::collections::BTreeSet::new();
        for case in cases {
            let name = case["name"].as_str().expect("name");
            let d: Vec<f64> = case["d"]
                .as_array()
                .expect("d")
                .iter()
                .map(|v| v.as_f64().expect("number"))
                .collect();
            let got = wilcoxon_signed_rank(&d);
            kinds.insert(got.test.as_str());
            match case["p_value"].as_f64() {
                Some(p) => {
                    assert!(
                        close(got.p_value, p, 1e-12 * p.max(1e-3)),
                        "{name}: scipy p {p}, svc {got:?}"
                    );
                    let statistic = case["statistic"].as_f64().expect("statistic");
                    assert_eq!(got.statistic, statistic, "{name}: {got:?}");
                }
                // scipy gives NaN when every difference is zero; svc says "no difference".
                None => assert_eq!(got.test, TestKind::NoDifference, "{name}"),
            }
        }
        assert_eq!(
            kinds.into_iter().collect::<Vec<_>>(),
            vec![
                "no_difference",
                "wilcoxon_exact",
                "wilcoxon_normal",
                "wilcoxon_permutation"
            ]
        );
    }

    /// Found in issue 11: with W+ = W- the continuity correction took signum(0) = +1, giving
    /// p = 0.9978 where scipy gives 1.
    #[test]
    fn issue_11_balanced_ranks_give_p_one() {
        let d: Vec<f64> = [0.25, -0.25, 0.5, -0.5].repeat(20);
        let result = wilcoxon_signed_rank(&d);
        assert_eq!(result.test, TestKind::WilcoxonNormal);
        assert_eq!(result.p_value, 1.0);
    }

    #[test]
    fn holm_adjusts_step_down_and_stays_monotone() {
        // statsmodels multipletests([0.01, 0.04, 0.03, 0.5], method="holm")
        // -> [0.04, 0.09, 0.09, 0.5]
        let adjusted = holm(&[0.01, 0.04, 0.03, 0.5]);
        let expected = [0.04, 0.09, 0.09, 0.5];
        for (got, want) in adjusted.iter().zip(expected) {
            assert!(close(*got, want, 1e-12), "{adjusted:?}");
        }
        assert_eq!(holm(&[0.6, 0.9]), vec![1.0, 1.0]);
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn wilcoxon_all_zero_is_no_difference() {
        let result = wilcoxon_signed_rank(&[0.0, 0.0]);
        assert_eq!(result.test, TestKind::NoDifference);
        assert_eq!(result.p_value, 1.0);
    }

    #[test]
    fn mcnemar_exact_known_answers() {
        // binomtest(1, 10, 0.5).pvalue == 0.021484375
        assert!(close(mcnemar_exact(1, 9).p_value, 0.021484375, 1e-12));
        assert!(close(mcnemar_exact(9, 1).p_value, 0.021484375, 1e-12));
        assert_eq!(mcnemar_exact(4, 4).p_value, 1.0);
        assert_eq!(mcnemar_exact(0, 0).p_value, 1.0);
    }

    #[test]
    fn bootstrap_is_deterministic_and_covers_the_mean() {
        let mut rng = SplitMix64::new(7);
        let rows: Vec<f64> = (0..2000).map(|_| rng.unit()).collect();
        let run = |seed| bootstrap_means(&rows, 1, 500, 0.95, seed, |m| vec![m[0]]);
        let a = run(1)[0].expect("estimate");
        assert_eq!(Some(a), run(1)[0]);
        assert_ne!(Some(a), run(2)[0]);
        // Uniform(0,1): sd 0.2887, se of the mean with n=2000 is 0.00645; the 95% interval is
        // about +-0.0126 around the sample mean.
        let width = a.ci_high - a.ci_low;
        assert!(width > 0.018 && width < 0.033, "{a:?}");
        assert!(a.ci_low < a.estimate && a.estimate < a.ci_high);
    }

    #[test]
    fn segments_with_one_row_per_cluster_equal_the_plain_bootstrap() {
        let mut rng = SplitMix64::new(3);
        let rows: Vec<f64> = (0..300).map(|_| rng.unit()).collect();
        let plain = bootstrap_means(&rows, 3, 200, 0.9, 5, |m| vec![m[0] - m[1], m[2]]);
        let entries: Vec<(u32, u32)> = (0..100).map(|i| (i, 0)).collect();
        let joint = bootstrap_segments(100, &entries, &rows, 3, 1, 200, 0.9, 5, |m| {
            vec![m[0] - m[1], m[2]]
        });
        assert_eq!(plain, joint);
        // Two segments splitting the clusters: their sums add up to the whole.
        let split: Vec<(u32, u32)> = (0..100).map(|i| (i, i % 2)).collect();
        let union = bootstrap_segments(100, &split, &rows, 3, 2, 200, 0.9, 5, |m| {
            vec![m[0] + m[3] - m[1] - m[4], m[2] + m[5]]
        });
        for (a, b) in plain.iter().zip(&union) {
            let (a, b) = (a.expect("a"), b.expect("b"));
            assert!((a.estimate - b.estimate).abs() < 1e-12);
            assert!((a.ci_low - b.ci_low).abs() < 1e-12);
            assert!((a.ci_high - b.ci_high).abs() < 1e-12);
        }
    }

    #[test]
    fn bootstrap_of_empty_input_is_none() {
        let out = bootstrap_means(&[], 2, 10, 0.95, 1, |m| vec![m[0], m[1]]);
        assert_eq!(out, vec![None, None]);
    }

    #[test]
    fn pareto_frontier_drops_dominated_points() {
        use Direction::*;
        let directions = [Maximise, Minimise];
        let points = vec![
            vec![0.9, 100.0],
            vec![0.8, 50.0],
            vec![0.8, 60.0],  // dominated by the second point
            vec![0.9, 100.0], // equal to the first: neither dominates
            vec![f64::NAN, 1.0],
        ];
        assert_eq!(pareto_frontier(&points, &directions), vec![0, 1, 3]);
    }
}
