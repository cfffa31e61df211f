//! Claim tokens: words with byte offsets, a kind (word, name, number) and a normalised form
//! (lower-cased, diacritics folded, numbers and months folded, stemmed with
//! [`stem::facts`]), for claim extraction and verification (`witness`). A separate tokenizer
//! because verification needs what plain word lists drop: where each word is, whether it is a
//! name or a number, and negations kept visible.
//!
//! Everything here is deliberately simple and deterministic: the verifier's decisions must be
//! explainable from the tokens it saw, and the same input must give the same bytes out.

use std::sync::LazyLock;

use super::stem;
use super::stopwords::{NEGATIONS, is_fact_stop as is_stop};

/// What a token is, which decides how strictly it must match evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// A lower-case or sentence-initial word.
    Word,
    /// A capitalised word not at the start of a sentence, or an all-caps word: likely a name.
    Entity,
    /// Digits (commas removed), or a number word folded to digits.
    Number,
}

/// One normalised token of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Lower-case, stemmed form used for matching.
    pub norm: String,
    pub kind: TokenKind,
    /// Byte offsets of the surface form in the text it came from.
    pub start: usize,
    pub end: usize,
    /// Whether the token is a stop word (kept so negations and antonyms can be seen).
    pub stop: bool,
}

impl Token {
    /// Whether the token carries content worth verifying.
    pub fn is_content(&self) -> bool {
        !self.stop
    }

    /// Weight in coverage sums: names and numbers carry the facts that hallucinations change.
    pub fn weight(&self) -> f64 {
        match self.kind {
            TokenKind::Word => 1.0,
            TokenKind::Entity | TokenKind::Number => 2.0,
        }
    }
}

/// Fold common Latin diacritics to ASCII so "Sørensen" matches "Sorensen" and "Gödel" "Godel".
fn fold_diacritics(word: &str) -> String {
    if word.is_ascii() {
        return word.to_string();
    }
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        match c {
            'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ą' | 'ă' => out.push('a'),
            'ç' | 'ć' | 'č' => out.push('c'),
            'ď' | 'đ' => out.push('d'),
            'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ę' | 'ě' => out.push('e'),
            'ğ' => out.push('g'),
            'ì' | 'í' | 'î' | 'ï' | 'ī' | 'ı' => out.push('i'),
            'ł' => out.push('l'),
            'ñ' | 'ń' | 'ň' => out.push('n'),
            'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ő' => out.push('o'),
            'ř' => out.push('r'),
            'ś' | 'š' | 'ş' => out.push('s'),
            'ť' | 'ţ' => out.push('t'),
            'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' | 'ű' => out.push('u'),
            'ý' | 'ÿ' => out.push('y'),
            'ź' | 'ż' | 'ž' => out.push('z'),
            'ß' => out.push_str("ss"),
            'æ' => out.push_str("ae"),
            'œ' => out.push_str("oe"),
            other => out.push(other),
        }
    }
    out
}

const NUMBER_WORDS: &[(&str, &str)] = &[
    ("zero", "0"),
    ("two", "2"),
    ("three", "3"),
    ("four", "4"),
    ("five", "5"),
    ("six", "6"),
    ("seven", "7"),
    ("eight", "8"),
    ("nine", "9"),
    ("ten", "10"),
    ("eleven", "11"),
    ("twelve", "12"),
    ("thirteen", "13"),
    ("fourteen", "14"),
    ("fifteen", "15"),
    ("sixteen", "16"),
    ("seventeen", "17"),
    ("eighteen", "18"),
    ("nineteen", "19"),
    ("twenty", "20"),
    ("thirty", "30"),
    ("forty", "40"),
    ("fifty", "50"),
    ("hundred", "100"),
    ("thousand", "1000"),
    ("million", "1000000"),
    ("billion", "1000000000"),
    ("first", "1st"),
    ("second", "2nd"),
    ("third", "3rd"),
    ("fourth", "4th"),
    ("fifth", "5th"),
];

const MONTHS: &[(&str, &str)] = &[
    ("january", "month01"),
    ("jan", "month01"),
    ("february", "month02"),
    ("feb", "month02"),
    ("march", "month03"),
    ("mar", "month03"),
    ("april", "month04"),
    ("apr", "month04"),
    ("may", "month05"),
    ("june", "month06"),
    ("jun", "month06"),
    ("july", "month07"),
    ("jul", "month07"),
    ("august", "month08"),
    ("aug", "month08"),
    ("september", "month09"),
    ("sep", "month09"),
    ("sept", "month09"),
    ("october", "month10"),
    ("oct", "month10"),
    ("november", "month11"),
    ("nov", "month11"),
    ("december", "month12"),
    ("dec", "month12"),
];

/// Words that state the same relation in encyclopedic text, so a paraphrase ("established"
/// for "founded") is not taken for a missing fact. Kept small: each group is a plain synonym
/// set, never a relation and its opposite.
const SYNONYMS: &[&[&str]] = &[
    &[
        "founded",
        "established",
        "created",
        "formed",
        "started",
        "launched",
        "began",
        "opened",
    ],
    &["wrote", "written", "authored", "penned"],
    &["won", "received", "awarded", "earned"],
    &["starred", "appeared", "featured"],
    &["located", "situated", "headquartered", "lies"],
    &["built", "constructed", "erected"],
    &["bought", "acquired", "purchased"],
    &["film", "movie", "picture"],
    &["firm", "company", "corporation"],
    &["famous", "renowned", "notable", "noted", "celebrated"],
    &["large", "big", "huge"],
    &["job", "occupation", "profession", "career"],
    &["nationality", "citizenship"],
];

static SYNONYM_GROUPS: LazyLock<std::collections::HashMap<String, &'static str>> =
    LazyLock::new(|| {
        let mut map = std::collections::HashMap::new();
        for group in SYNONYMS {
            for word in *group {
                if let Some(token) = tokenize(word).first() {
                    map.insert(token.norm.clone(), group[0]);
                }
            }
        }
        map
    });

/// The synonym group of a normalised word, as a key that cannot clash with a word.
pub fn synonym_key(norm: &str) -> Option<String> {
    SYNONYM_GROUPS.get(norm).map(|group| format!("~{group}"))
}

/// Whether a normalised token is a code name: an option (`-j`) or an identifier holding a
/// digit or `_`, whose every character counts.
fn is_code_name(norm: &str) -> bool {
    norm.starts_with('-') || norm.contains(|c: char| c.is_ascii_digit() || c == '_')
}

/// Whether a normalised token names a month (dates are compared field by field).
pub fn is_month(norm: &str) -> bool {
    norm.starts_with("month") && norm.len() == 7
}

/// Letters, digits and `_`, so code identifiers (`parse_config`) stay one token.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `snake_case`, `camelCase` or `PascalCase` with an inner capital: a code identifier, matched
/// exactly and weighted like a name.
fn is_identifier(surface: &str) -> bool {
    surface.contains('_') && surface.chars().any(char::is_alphanumeric)
        || surface
            .char_indices()
            .skip(1)
            .any(|(i, c)| c.is_uppercase() && surface[..i].chars().any(char::is_lowercase))
}

/// Where a command-line option (`-j`, `--threads`, the `--exclude` of `-E/--exclude`) starts,
/// when the word at `start` is one: one or two dashes right before a letter, at the start of
/// the text or after a space, bracket, quote, `/`, `,` or `=`. A dash after a letter joins a
/// compound (`non-blocking`) and a dash before a digit makes a negative number.
fn option_start(text: &str, start: usize) -> Option<usize> {
    if !text[start..]
        .chars()
        .next()
        .is_some_and(char::is_alphabetic)
    {
        return None;
    }
    let before = &text[..start];
    let dashes = before.len() - before.trim_end_matches('-').len();
    if !(1..=2).contains(&dashes) {
        return None;
    }
    let boundary = before[..start - dashes].chars().next_back();
    boundary
        .is_none_or(|c| c.is_whitespace() || "([{/\"'`,=\u{2018}\u{201c}".contains(c))
        .then_some(start - dashes)
}

/// A capitalised word quoted on its own (`such as "Doom" and "Quake"`): a title, so a name,
/// though the opening quote otherwise starts a sentence (a quoted sentence's first word).
fn is_quoted_title(text: &str, start: usize, end: usize) -> bool {
    text[..start].ends_with(['"', '\u{201c}']) && text[end..].starts_with(['"', '\u{201d}'])
}

/// Tokenise `text`. `sentence_initial` tracking marks the first word of each sentence so a
/// capitalised first word is not mistaken for a name.
pub fn tokenize(text: &str) -> Vec<Token> {
    tokenize_with(text, false)
}

/// Tokenise a short answer: its capitalised first word is a name ("Delhi"), not a sentence
/// opener.
pub fn tokenize_answer(text: &str) -> Vec<Token> {
    tokenize_with(text, true)
}

/// Han ideographs, kana and Hangul: scripts written without spaces between words.
fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{30FF}'   // hiragana, katakana
        | '\u{3400}'..='\u{4DBF}' // CJK extension A
        | '\u{4E00}'..='\u{9FFF}' // CJK unified ideographs
        | '\u{AC00}'..='\u{D7AF}' // Hangul syllables
        | '\u{FF66}'..='\u{FF9F}' // half-width katakana
        | '\u{20000}'..='\u{2A6DF}' // CJK extension B
    )
}

fn tokenize_with(text: &str, initial_is_entity: bool) -> Vec<Token> {
    let mut tokens: Vec<Token> = Vec::new();
    let mut initial_caps: Vec<bool> = Vec::new();
    let bytes = text.as_bytes();
    let mut iter = text.char_indices().peekable();
    let mut at_sentence_start = true;
    while let Some((start, c)) = iter.next() {
        if !is_word_char(c) {
            if matches!(c, '.' | '!' | '?' | ':' | '\n' | '"' | '(' | '[') {
                at_sentence_start = true;
            }
            continue;
        }
        let mut end = start + c.len_utf8();
        let mut last = c;
        // A word: letters/digits, with inner apostrophes, hyphens kept apart, and digit groups
        // joined by ',' or '.' when a digit follows.
        while let Some(&(i, d)) = iter.peek() {
            if is_word_char(d) {
                // Chinese and Japanese write numbers inside runs of words without spaces
                // ("1958年に"): a number is a word of its own there, so it can be compared.
                if (last.is_ascii_digit() && is_cjk(d)) || (is_cjk(last) && d.is_ascii_digit()) {
                    break;
                }
                end = i + d.len_utf8();
                last = d;
                iter.next();
                continue;
            }
            let next_is =
                |pred: fn(char) -> bool| text[i + d.len_utf8()..].chars().next().is_some_and(pred);
            if (d == ',' || d == '.')
                && bytes[start].is_ascii_digit()
                && next_is(|n| n.is_ascii_digit())
            {
                end = i + 1;
                iter.next();
                continue;
            }
            if (d == '\'' || d == '\u{2019}') && next_is(char::is_alphabetic) {
                end = i + d.len_utf8();
                iter.next();
                continue;
            }
            break;
        }
        let option_start = option_start(text, start);
        let surface = &text[start..end];
        let lower = fold_diacritics(&surface.to_lowercase());
        let first_upper = surface.chars().next().is_some_and(char::is_uppercase);
        let (norm, kind, start) = if let Some(dashes) = option_start {
            // Options are case-sensitive (`-j` and `-J` are different options): the surface
            // with its dashes is the norm. A plain word by kind: an option is not a name, and
            // weighing it as one moved the name features' weights for prose.
            (text[dashes..end].to_string(), TokenKind::Word, dashes)
        } else if surface.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            let digits: String = surface.chars().filter(|c| *c != ',').collect();
            let digits = strip_ordinal(&digits);
            (digits, TokenKind::Number, start)
        } else if is_roman_numeral(surface) {
            (lower.clone(), TokenKind::Number, start)
        } else if let Some((_, digits)) = NUMBER_WORDS.iter().find(|(w, _)| *w == lower) {
            ((*digits).to_string(), TokenKind::Number, start)
        } else if let Some((_, month)) = MONTHS
            .iter()
            .find(|(w, _)| *w == lower && (first_upper || w.len() > 3))
            .filter(|(w, _)| *w != "may" || first_upper)
        {
            ((*month).to_string(), TokenKind::Number, start)
        } else if is_identifier(surface) {
            (lower.clone(), TokenKind::Entity, start)
        } else {
            // A word with a digit is a code name (`socks5h`, `utf8`): every character counts.
            let norm = if is_code_name(&lower) {
                lower.clone()
            } else {
                stem::facts(&lower)
            };
            let kind = if first_upper
                && (!at_sentence_start
                    || is_all_caps(surface)
                    || initial_is_entity
                    || is_quoted_title(text, start, end))
            {
                TokenKind::Entity
            } else {
                TokenKind::Word
            };
            (norm, kind, start)
        };
        let norm = if let Some(base) = lower
            .strip_suffix("n't")
            .filter(|_| kind == TokenKind::Word)
        {
            // "didn't" carries a negation; keep it visible as one.
            let _ = base;
            "n't".to_string()
        } else {
            norm
        };
        let stop = kind != TokenKind::Number && is_stop(&norm);
        initial_caps.push(first_upper && at_sentence_start && kind == TokenKind::Word);
        tokens.push(Token {
            norm,
            kind,
            start,
            end,
            stop,
        });
        at_sentence_start = false;
    }
    // A capitalised sentence opener followed by a name is part of that name ("Bobby Darin").
    for i in 0..tokens.len().saturating_sub(1) {
        if initial_caps[i]
            && tokens[i + 1].kind == TokenKind::Entity
            && text[tokens[i].end..tokens[i + 1].start].trim().is_empty()
            && !tokens[i].stop
        {
            tokens[i].kind = TokenKind::Entity;
        }
    }
    tokens
}

/// "2nd" → "2": the digits of a numeric ordinal; anything else is returned as it is.
pub fn strip_ordinal(digits: &str) -> String {
    for suffix in ["st", "nd", "rd", "th"] {
        if let Some(base) = digits.strip_suffix(suffix)
            && base.chars().all(|c| c.is_ascii_digit())
            && !base.is_empty()
        {
            return base.to_string();
        }
    }
    digits.to_string()
}

/// "II", "XIV": upper-case Roman numerals of two or more letters ("I" is a pronoun).
fn is_roman_numeral(surface: &str) -> bool {
    (2..=6).contains(&surface.len()) && surface.bytes().all(|b| b"IVXLCDM".contains(&b))
}

fn is_all_caps(surface: &str) -> bool {
    surface.chars().count() > 1 && surface.chars().all(|c| !c.is_lowercase())
}

/// Whether a token negates: a negation word ([`NEGATIONS`]) that is not a name. Capitalised
/// inside a sentence, "None" is Python's value ("a chunk_size of None") and "No" part of a
/// title; in capitals throughout ("does NOT work", "NEVER") it is a negation stressed.
/// `source` is the text the token's offsets point into.
pub fn is_negation(source: &str, token: &Token) -> bool {
    NEGATIONS.contains(&token.norm.as_str())
        && (token.kind != TokenKind::Entity
            || source.get(token.start..token.end).is_some_and(is_all_caps))
}

/// Words that open a new clause, ending the reach of a negation before them ("Flask does not
/// know the host, and assumes any host is valid": "assumes" is not negated).
const CLAUSE_OPENERS: &[&str] = &[
    "and",
    "but",
    "or",
    "which",
    "while",
    "because",
    "so",
    "although",
    "though",
    "whereas",
    "if",
    "when",
    "unless",
    "otherwise",
];

/// Per token, whether it is a content word a negation governs: one after a negation
/// ([`is_negation`]) up to the end of its clause, which a comma, semicolon, colon, round bracket
/// or dash between two tokens ends, or a word opening a new clause ("The app doesn't *know*
/// the *host*, and assumes any host is valid"). `source` is the text the tokens' offsets point
/// into.
pub fn negated_tokens(source: &str, tokens: &[Token]) -> Vec<bool> {
    let mut out = vec![false; tokens.len()];
    let mut inside = false;
    for (i, token) in tokens.iter().enumerate() {
        if inside && i > 0 {
            let gap = source.get(tokens[i - 1].end..token.start).unwrap_or("");
            if gap.contains([',', ';', ':', '(', ')', '\u{2014}', '\u{2013}'])
                || CLAUSE_OPENERS.contains(&token.norm.as_str())
            {
                inside = false;
            }
        }
        if is_negation(source, token) {
            inside = true;
        } else if inside && token.is_content() {
            out[i] = true;
        }
    }
    out
}

/// Whether a text denies a word: some content token that `matches` stands under a negation and
/// none outside one. `tokens` pairs each token with its [`negated_tokens`] flag; they may span
/// one sentence or several. "The app doesn't know the host, and assumes any host is valid"
/// denies "know" but not "host".
pub fn denied<'a>(
    tokens: impl IntoIterator<Item = (&'a Token, &'a bool)>,
    matches: impl Fn(&Token) -> bool,
) -> bool {
    let mut under = false;
    for (token, &negated) in tokens {
        if token.is_content() && matches(token) {
            if !negated {
                return false;
            }
            under = true;
        }
    }
    under
}

/// Whether two normalised words are one word for the witness: [`fuzzy_eq`] (the same word or
/// an inflection), or members of one synonym group ([`synonym_key`]), as the evidence index
/// matches them.
pub fn same_word(a: &str, b: &str) -> bool {
    fuzzy_eq(a, b) || synonym_key(a).is_some_and(|k| synonym_key(b) == Some(k))
}

/// Whether two normalised tokens match: exactly, or as inflections of one another (a shared
/// stem of at least six characters, at most three characters of suffix each), e.g. "directed"
/// and "director", "America" and "American". Numbers, months and code names (options,
/// identifiers with a digit or `_`) only match exactly: `socks5` is not `socks5h`, nor
/// `--reload` the word "reloader".
pub fn fuzzy_eq(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if a.as_bytes().first().is_some_and(u8::is_ascii_digit)
        || is_month(a)
        || is_month(b)
        || is_code_name(a)
        || is_code_name(b)
    {
        return false;
    }
    let prefix = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let (la, lb) = (a.chars().count(), b.chars().count());
    prefix >= 6 && la - prefix <= 3 && lb - prefix <= 3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norms(text: &str) -> Vec<String> {
        tokenize(text).into_iter().map(|t| t.norm).collect()
    }

    /// Regression (found by probing): "東京タワーは1958年に完成した" was one word, so its year
    /// could not disagree with another.
    #[test]
    fn numbers_inside_words_without_spaces_are_words_of_their_own() {
        let tokens = tokenize("東京タワーは1958年に完成した。高さは333メートル");
        let words: Vec<(&str, TokenKind)> =
            tokens.iter().map(|t| (t.norm.as_str(), t.kind)).collect();
        assert_eq!(words[1], ("1958", TokenKind::Number), "{words:?}");
        assert_eq!(words[0].0, "東京タワーは");
        assert!(words.iter().any(|w| w.0 == "333"), "{words:?}");
        // Latin code names keep their digits.
        assert_eq!(norms("socks5h utf8"), ["socks5h", "utf8"]);
    }

    #[test]
    fn a_negation_reaches_to_the_end_of_its_clause() {
        let scoped = |text: &str| {
            let tokens = tokenize(text);
            tokens
                .iter()
                .zip(negated_tokens(text, &tokens))
                .filter(|(_, negated)| *negated)
                .map(|(t, _)| t.norm.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            scoped("The app doesn't know the host, and assumes any host is valid."),
            ["know", "host"]
        );
        assert_eq!(
            scoped("It will not be accepted, nor will it be merged (yet)."),
            ["accept", "merg"]
        );
        assert_eq!(
            scoped("If none, the default is used."),
            Vec::<String>::new()
        );
        assert!(scoped("It operates a radio telescope.").is_empty());
        assert!(scoped("It iterates with a chunk_size of None by default.").is_empty());
        assert_eq!(scoped("This does NOT work on Windows."), ["work", "window"]);
    }

    #[test]
    fn numbers_and_possessives_normalise() {
        assert_eq!(
            norms("Arthur's 56,551 tons, two titles in the 3rd year"),
            [
                "arthur", "56551", "ton", "2", "titl", "in", "the", "3", "year"
            ]
        );
        assert_eq!(
            norms("starred starring stars located locates"),
            ["star", "star", "star", "locat", "locat"]
        );
        assert_eq!(
            norms("born 25 June 1961"),
            ["born", "25", "month06", "1961"]
        );
        assert_eq!(norms("He didn't win"), ["he", "n't", "win"]);
    }

    #[test]
    fn entities_are_capitalised_words_inside_sentences() {
        let tokens = tokenize("The band Halestorm played in Boston.");
        let kinds: Vec<_> = tokens.iter().map(|t| t.kind).collect();
        assert_eq!(
            kinds,
            [
                TokenKind::Word,
                TokenKind::Word,
                TokenKind::Entity,
                TokenKind::Word,
                TokenKind::Word,
                TokenKind::Entity
            ]
        );
    }

    /// HaluEval's evidence quotes titles (`such as "Doom" and "Quake"`); the opening quote
    /// used to make each a sentence opener, so neither was a name.
    #[test]
    fn a_capitalised_word_quoted_on_its_own_is_a_title() {
        let kind = |text: &str, word: &str| {
            tokenize(text)
                .into_iter()
                .find(|t| t.norm == word)
                .map(|t| t.kind)
        };
        let text = "Shooters such as \"Doom\" and \u{201c}Quake\u{201d} use it.";
        assert_eq!(kind(text, "doom"), Some(TokenKind::Entity));
        assert_eq!(kind(text, "quak"), Some(TokenKind::Entity));
        // A quoted sentence's capitalised first word is still a sentence opener.
        assert_eq!(
            kind("He said \"Leave now\" twice.", "leav"),
            Some(TokenKind::Word)
        );
    }

    #[test]
    fn options_keep_their_dashes_and_case_and_code_names_match_only_exactly() {
        assert_eq!(
            norms("set it with -J, -u/--unrestricted or (-HI)"),
            [
                "set",
                "it",
                "with",
                "-J",
                "-u",
                "--unrestricted",
                "or",
                "-HI"
            ]
        );
        // A dash after a letter joins a compound; one before a digit is a minus sign.
        assert_eq!(norms("non-blocking at -5"), ["non", "block", "at", "5"]);
        assert!(!fuzzy_eq("-J", "-j"));
        assert!(!fuzzy_eq("--reload", "reloader"));
        assert!(!fuzzy_eq("socks5", "socks5h"));
        assert_eq!(norms("use socks5h"), ["use", "socks5h"]);
        // Words still match their inflections.
        assert!(fuzzy_eq("director", "directed"));
    }

    #[test]
    fn code_identifiers_are_single_name_tokens() {
        let tokens = tokenize("call parse_config or loadConfig, then McDonald");
        let got: Vec<(&str, TokenKind)> =
            tokens.iter().map(|t| (t.norm.as_str(), t.kind)).collect();
        assert_eq!(
            got,
            [
                ("call", TokenKind::Word),
                ("parse_config", TokenKind::Entity),
                ("or", TokenKind::Word),
                ("loadconfig", TokenKind::Entity),
                ("then", TokenKind::Word),
                ("mcdonald", TokenKind::Entity)
            ]
        );
    }

    #[test]
    fn diacritics_fold_and_initials_are_not_content() {
        assert_eq!(norms("Sørensen Gödel"), ["sorensen", "godel"]);
        let tokens = tokenize("J. R. Tolkien in the U.S.");
        let content: Vec<&str> = tokens
            .iter()
            .filter(|t| t.is_content())
            .map(|t| t.norm.as_str())
            .collect();
        assert_eq!(content, ["tolkien"]);
    }

    #[test]
    fn synonyms_share_a_key() {
        let key = |w: &str| synonym_key(&tokenize(w)[0].norm);
        assert_eq!(key("founded"), key("established"));
        assert_eq!(key("movie"), key("films"));
        assert_ne!(key("founded"), key("wrote"));
        assert_eq!(key("closed"), None);
    }

    #[test]
    fn odd_input_does_not_panic() {
        for text in [
            "",
            "....",
            "'s",
            "1,2,3.",
            "___",
            "é’s",
            "A. B. C.",
            "\n\n\n",
            "“Quoted”.",
            "50%",
        ] {
            let _ = tokenize(text);
            let _ = tokenize_answer(text);
            for span in super::super::sentences::evidence(text) {
                assert!(span.start < span.end && span.end <= text.len());
            }
        }
    }

    #[test]
    fn fuzzy_matching_allows_inflection_only() {
        assert!(fuzzy_eq("directed", "director"));
        assert!(fuzzy_eq("american", "america"));
        assert!(!fuzzy_eq("johnson", "johnston"));
        assert!(!fuzzy_eq("1998", "1999"));
    }
}
