//! Lexical normalisation shared by claim extraction and verification: word tokens with byte
//! offsets, stop words, light stemming, number folding and sentence splitting. The code lives
//! in the one text toolkit ([`crate::text`]: `facts`, `stopwords`, `sentences`); these are the
//! names the witness uses.

pub use crate::text::facts::{
    Token, TokenKind, denied, fuzzy_eq, is_month, is_negation, negated_tokens, same_word,
    strip_ordinal, synonym_key, tokenize, tokenize_answer,
};
pub use crate::text::sentences::{Span, evidence as sentences};
pub use crate::text::stopwords::is_fact_stop as is_stop;
