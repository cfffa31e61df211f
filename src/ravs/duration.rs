//! `--since` durations: a whole number and a unit, `m` (minutes), `h` (hours), `d` (days) or
//! `w` (weeks): `30m`, `12h`, `7d`, `2w`.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {given:?}: {problem}; write a whole number and a unit m, h, d or w, e.g. 30m, 12h, 7d, 2w"
)]
pub struct DurationError {
    pub given: String,
    pub problem: &'static str,
}

/// Parses `30m`, `12h`, `7d`, `2w`.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let error = |problem| DurationError {
        given: text.to_string(),
        problem,
    };
    let trimmed = text.trim();
    let Some(unit) = trimmed.chars().last() else {
        return Err(error("it is empty"));
    };
    let seconds_per_unit: u64 = match unit {
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        'w' => 7 * 86_400,
        _ => return Err(error("unknown unit")),
    };
    let number = &trimmed[..trimmed.len() - unit.len_utf8()];
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(error("the number is missing or not a whole number"));
    }
    let count: u64 = number
        .parse()
        .map_err(|_| error("the number is too large"))?;
    if count == 0 {
        return Err(error("it is zero"));
    }
    count
        .checked_mul(seconds_per_unit)
        .map(Duration::from_secs)
        .ok_or_else(|| error("the number is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_errors() {
        assert_eq!(parse("30m"), Ok(Duration::from_secs(1_800)));
        assert_eq!(parse("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse("7d"), Ok(Duration::from_secs(604_800)));
        assert_eq!(parse("2w"), Ok(Duration::from_secs(1_209_600)));
        for bad in [
            "",
            "7",
            "d",
            "7x",
            "-1d",
            "1.5h",
            "0d",
            "99999999999999999999w",
        ] {
            let error = parse(bad).expect_err(bad);
            assert!(error.to_string().contains("e.g. 30m"), "{error}");
        }
    }
}
