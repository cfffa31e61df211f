//! Small, deterministic text helpers shared by the fixture model, the scorers and the coverage
//! claim checker: word splitting, normalisation, stop words and sentence splitting. Keeping them
//! in one place means "a word" means the same thing to the model that answers and to the scorer
//! that grades it. The code lives in the one text toolkit ([`crate::text`]); these are the names
//! the harness uses.

pub use crate::text::sentences::per_line as sentences;
pub use crate::text::stem::crude as stem;
pub use crate::text::stopwords::is_english as is_stop_word;
pub use crate::text::words::{
    collapse_whitespace, content_words, normalize_answer, plain as words,
};

pub use crate::rng::SplitMix64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_deterministic() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut items: Vec<u32> = (0..10).collect();
        SplitMix64::new(1).shuffle(&mut items);
        let mut sorted = items.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    }
}
