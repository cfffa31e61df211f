//! The one text toolkit: word and identifier splitting, stopwords, stemming, sentence
//! splitting and claim tokens, shared by the witness, the harness's fixture model and scorers,
//! BM25 over code (`context::terms`) and prose compression.
//!
//! Where users need different behaviour there is one named variant per purpose, and each
//! submodule says why its variants exist. Behaviour is frozen where figures were measured with
//! it: changing a variant moves the figures of its users (witness flags, localisation, the
//! benchmark gate), so a change is measured first.

pub mod facts;
pub mod sentences;
pub mod stem;
pub mod stopwords;
pub mod words;
