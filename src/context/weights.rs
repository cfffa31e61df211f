//! The selector's ranking weights: the named, bounded numbers that turn a fragment's evidence
//! (its BM25 match, the symbols it defines, the files the query names, its neighbours in the
//! reference graph, what kind of file it is) into a score, and a score into knapsack value.
//!
//! BM25 itself is the anchor (weight 1, not learned): every other weight is relative to it, so
//! scaling all of them together cannot masquerade as learning. The defaults are the values the
//! selector was tuned with by hand (see the comments in `terms` and `select`); learning moves
//! them inside [`Feature::bounds`], never outside, so a learned file can make ranking different
//! but never degenerate (e.g. a graph neighbour can never outrank the fragment that lent to it).

use serde::{Deserialize, Serialize};

/// One learnable weight. The closed set of names is the wire format of weight files and of
/// federation payloads: nothing but these names and numbers ever leaves the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// Multiplies the boost of a definition whose name is made of queried words.
    Definition,
    /// Added (times the query's largest IDF) when the query names a defined symbol verbatim.
    NamedSymbol,
    /// Multiplies the boost of every fragment of a file the query names.
    NamedFile,
    /// Weight of a synonym of a query word relative to the word itself.
    Synonym,
    /// Share of a top fragment's score lent to fragments that use what it defines.
    Caller,
    /// Share lent to the definitions of identifiers a top fragment mentions.
    Callee,
    /// Share lent to the other fragments of a top fragment's file.
    SameFile,
    /// Factor applied to matches in changelogs, licences and contributor lists.
    RecordPrior,
    /// Knapsack value of a skeleton relative to sending the fragment in full.
    SkeletonValue,
    /// Value of showing a file at all, carried by its best fragment.
    PresenceValue,
}

impl Feature {
    pub const ALL: [Feature; 10] = [
        Feature::Definition,
        Feature::NamedSymbol,
        Feature::NamedFile,
        Feature::Synonym,
        Feature::Caller,
        Feature::Callee,
        Feature::SameFile,
        Feature::RecordPrior,
        Feature::SkeletonValue,
        Feature::PresenceValue,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Feature::Definition => "definition",
            Feature::NamedSymbol => "named_symbol",
            Feature::NamedFile => "named_file",
            Feature::Synonym => "synonym",
            Feature::Caller => "caller",
            Feature::Callee => "callee",
            Feature::SameFile => "same_file",
            Feature::RecordPrior => "record_prior",
            Feature::SkeletonValue => "skeleton_value",
            Feature::PresenceValue => "presence_value",
        }
    }

    pub fn from_name(name: &str) -> Option<Feature> {
        Feature::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The hand-tuned value.
    pub fn default_value(self) -> f64 {
        match self {
            Feature::Definition => 1.0,
            Feature::NamedSymbol => 2.0,
            Feature::NamedFile => 1.0,
            Feature::Synonym => 0.5,
            Feature::Caller => 0.15,
            Feature::Callee => 0.25,
            Feature::SameFile => 0.05,
            Feature::RecordPrior => 0.5,
            Feature::SkeletonValue => 0.4,
            Feature::PresenceValue => 0.1,
        }
    }

    /// Inclusive bounds. Lent shares stay below 1 (a neighbour never outranks its lender), a
    /// synonym never outweighs the word asked for, a skeleton is never worth the full text.
    pub fn bounds(self) -> (f64, f64) {
        match self {
            Feature::Definition => (0.0, 3.0),
            Feature::NamedSymbol => (0.0, 6.0),
            Feature::NamedFile => (0.0, 3.0),
            Feature::Synonym => (0.0, 1.0),
            Feature::Caller => (0.0, 0.6),
            Feature::Callee => (0.0, 0.8),
            Feature::SameFile => (0.0, 0.3),
            Feature::RecordPrior => (0.1, 1.0),
            Feature::SkeletonValue => (0.1, 0.9),
            Feature::PresenceValue => (0.0, 0.5),
        }
    }

    /// Whether the weight acts on the score (learnable from ranking feedback) rather than on
    /// the knapsack's value of a resolution.
    pub fn is_ranking(self) -> bool {
        !matches!(self, Feature::SkeletonValue | Feature::PresenceValue)
    }
}

/// A value for every [`Feature`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankingWeights {
    values: [f64; Feature::ALL.len()],
}

impl Default for RankingWeights {
    fn default() -> Self {
        let mut values = [0.0; Feature::ALL.len()];
        for (slot, feature) in values.iter_mut().zip(Feature::ALL) {
            *slot = feature.default_value();
        }
        Self { values }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WeightsError {
    #[error("unknown ranking weight `{name}`; known weights: {}", known_names())]
    Unknown { name: String },
    #[error("ranking weight `{name}` = {value} is outside its bounds [{low}, {high}]")]
    OutOfBounds {
        name: &'static str,
        value: f64,
        low: f64,
        high: f64,
    },
    #[error("ranking weight `{name}` is not a finite number")]
    NotFinite { name: &'static str },
}

fn known_names() -> String {
    Feature::ALL
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl RankingWeights {
    pub fn get(&self, feature: Feature) -> f64 {
        self.values[feature as usize]
    }

    /// Sets a weight, refusing values outside its bounds.
    pub fn set(&mut self, feature: Feature, value: f64) -> Result<(), WeightsError> {
        if !value.is_finite() {
            return Err(WeightsError::NotFinite {
                name: feature.name(),
            });
        }
        let (low, high) = feature.bounds();
        if value < low || value > high {
            return Err(WeightsError::OutOfBounds {
                name: feature.name(),
                value,
                low,
                high,
            });
        }
        self.values[feature as usize] = value;
        Ok(())
    }

    /// Sets a weight, moving it to the nearest bound when outside (learning steps use this).
    pub fn set_clamped(&mut self, feature: Feature, value: f64) {
        let (low, high) = feature.bounds();
        let value = if value.is_finite() {
            value
        } else {
            feature.default_value()
        };
        self.values[feature as usize] = value.clamp(low, high);
    }

    /// `(name, value)` in the fixed order of [`Feature::ALL`].
    pub fn entries(&self) -> Vec<(&'static str, f64)> {
        Feature::ALL
            .iter()
            .map(|f| (f.name(), self.get(*f)))
            .collect()
    }

    /// Builds weights from named values; missing names keep their defaults.
    pub fn from_entries<'a>(
        entries: impl IntoIterator<Item = (&'a str, f64)>,
    ) -> Result<Self, WeightsError> {
        let mut weights = Self::default();
        for (name, value) in entries {
            let feature = Feature::from_name(name).ok_or_else(|| WeightsError::Unknown {
                name: name.to_string(),
            })?;
            weights.set(feature, value)?;
        }
        Ok(weights)
    }

    /// Largest absolute difference to `other` relative to each weight's range.
    pub fn distance(&self, other: &RankingWeights) -> f64 {
        Feature::ALL
            .iter()
            .map(|f| {
                let (low, high) = f.bounds();
                (self.get(*f) - other.get(*f)).abs() / (high - low)
            })
            .fold(0.0, f64::max)
    }
}

impl Serialize for RankingWeights {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(Feature::ALL.len()))?;
        for (name, value) in self.entries() {
            map.serialize_entry(name, &value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for RankingWeights {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<String, f64>::deserialize(deserializer)?;
        RankingWeights::from_entries(map.iter().map(|(k, v)| (k.as_str(), *v)))
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_lie_inside_their_bounds_and_names_round_trip() {
        for feature in Feature::ALL {
            let (low, high) = feature.bounds();
            let value = feature.default_value();
            assert!(low <= value && value <= high, "{}", feature.name());
            assert_eq!(Feature::from_name(feature.name()), Some(feature));
            assert_eq!(
                serde_json::to_value(feature).expect("json"),
                feature.name(),
                "serde name equals the wire name"
            );
        }
        let json = serde_json::to_string(&RankingWeights::default()).expect("json");
        let back: RankingWeights = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, RankingWeights::default());
    }

    #[test]
    fn out_of_bounds_and_unknown_names_are_refused_with_the_name() {
        let error = serde_json::from_str::<RankingWeights>(r#"{"caller": 1.5}"#)
            .expect_err("1.5 is above the caller bound");
        assert!(error.to_string().contains("`caller` = 1.5"), "{error}");
        let error =
            serde_json::from_str::<RankingWeights>(r#"{"calller": 0.1}"#).expect_err("typo");
        assert!(
            error
                .to_string()
                .contains("unknown ranking weight `calller`")
        );
        let mut weights = RankingWeights::default();
        weights.set_clamped(Feature::SameFile, 9.0);
        assert_eq!(weights.get(Feature::SameFile), 0.3);
        weights.set_clamped(Feature::SameFile, f64::NAN);
        assert_eq!(weights.get(Feature::SameFile), 0.05);
    }
}
