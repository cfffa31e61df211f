//! The Wilson score interval of a success rate: unlike the normal approximation it stays inside
//! [0, 1] and is honest at small n and at rates near 0 or 1, which is where a routing gate must
//! be careful.

use statrs::distribution::{Beta, ContinuousCDF, Normal};

/// Two-sided z of a confidence level (0.95 → 1.959964).
pub fn z_of(confidence: f64) -> f64 {
    // The standard normal exists for these parameters.
    Normal::new(0.0, 1.0)
        .map(|normal| normal.inverse_cdf(0.5 + confidence / 2.0))
        .unwrap_or(1.959_963_984_540_054)
}

/// The Wilson interval of `successes` out of `n` at `z`; `None` when `n` is 0.
pub fn wilson(successes: u64, n: u64, z: f64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let n = n as f64;
    let p = successes as f64 / n;
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// The 95% Wilson interval.
pub fn wilson95(successes: u64, n: u64) -> Option<(f64, f64)> {
    wilson(successes, n, Z95)
}

/// The exact (Clopper–Pearson) one-sided upper confidence bound of a success rate at level
/// `1 - alpha`; `None` when `n` is 0. Unlike Wilson's it never claims more than the data
/// shows at tiny n (0 of 1 gives 0.95 at 95%, not 0.79), which matters for a decision that,
/// once taken, is not revisited.
pub fn upper_bound_exact(successes: u64, n: u64, alpha: f64) -> Option<f64> {
    if n == 0 {
        return None;
    }
    if successes >= n {
        return Some(1.0);
    }
    let a = successes as f64 + 1.0;
    let b = (n - successes) as f64;
    // Shape parameters are positive here, so the distribution exists.
    Beta::new(a, b)
        .ok()
        .map(|beta| beta.inverse_cdf(1.0 - alpha))
}

/// z of a two-sided 95% interval.
pub const Z95: f64 = 1.959_963_984_540_054;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_reference_values() {
        // statsmodels proportion_confint(8, 10, method="wilson") = (0.4902, 0.9433).
        let (low, high) = wilson95(8, 10).expect("n > 0");
        assert!((low - 0.490_16).abs() < 1e-4, "{low}");
        assert!((high - 0.943_32).abs() < 1e-4, "{high}");
        let (low, high) = wilson95(0, 5).expect("n > 0");
        assert_eq!(low, 0.0);
        assert!((high - 0.434_48).abs() < 1e-4, "{high}");
        assert!(wilson95(0, 0).is_none());
        assert!((z_of(0.95) - Z95).abs() < 1e-9);
        // scipy.stats.beta.ppf(0.95, s + 1, n - s).
        let upper = |s, n| upper_bound_exact(s, n, 0.05).expect("n > 0");
        assert!((upper(0, 1) - 0.95).abs() < 1e-6);
        assert!((upper(0, 2) - 0.776_393).abs() < 1e-5);
        assert!((upper(1, 4) - 0.751_395).abs() < 1e-5);
        assert_eq!(upper(3, 3), 1.0);
    }
}
