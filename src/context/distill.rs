//! Response distillation: strip filler from a model's prose answer (pleasantries, hedges,
//! filler phrases, restating lead-ins; at `ultra` also articles and wordy connectives) while
//! leaving code byte-identical.
//!
//! Code is never touched: fenced blocks (``` and ~~~, CommonMark rules for fence length and
//! closing), indented code lines, inline code spans and URLs are masked with placeholders before
//! any rule runs and restored verbatim afterwards. Text that already contains the placeholder
//! characters is left as it is rather than risk a wrong restore.

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};

use crate::tokens::Tokenizer;

/// How hard to distill.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Pleasantries and sign-offs only.
    Lite,
    /// Also hedges, filler words and phrases, restating lead-ins.
    #[default]
    Full,
    /// Also articles and wordy connectives: terse, telegraphic prose.
    Ultra,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::Lite, Level::Full, Level::Ultra];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Lite => "lite",
            Level::Full => "full",
            Level::Ultra => "ultra",
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A distilled text with exact token counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distilled {
    pub text: String,
    pub level: Level,
    pub tokens_before: usize,
    pub tokens_after: usize,
}

/// Marks where a phrase was removed, so a sentence start left behind gets its capital back.
const CUT: char = '\u{E000}';
const MASK_OPEN: char = '\u{E001}';
const MASK_CLOSE: char = '\u{E002}';

/// Distills `text` at `level`.
pub fn distill(text: &str, level: Level, tokenizer: &Tokenizer) -> Distilled {
    let tokens_before = tokenizer.count(text);
    // A byte-order mark is the file's signature, not its first line's text: read behind it (a
    // fence or an indented block on the first line was taken for prose), and keep it.
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(body) => ("\u{feff}", body),
        None => ("", text),
    };
    let out = if text.contains([CUT, MASK_OPEN, MASK_CLOSE]) {
        text.to_string()
    } else {
        let mut out = String::with_capacity(text.len());
        out.push_str(bom);
        for segment in segments(body) {
            match segment {
                Segment::Code(code) => out.push_str(code),
                Segment::Prose(prose) => out.push_str(&distill_prose(prose, level)),
            }
        }
        out
    };
    let tokens_after = tokenizer.count(&out);
    Distilled {
        text: out,
        level,
        tokens_before,
        tokens_after,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Segment<'a> {
    Code(&'a str),
    Prose(&'a str),
}

/// An opening fence: up to three spaces, then three or more backticks or tildes.
fn fence_open(line: &str) -> Option<(u8, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line.as_bytes()[indent..];
    let marker = *rest.first()?;
    if marker != b'`' && marker != b'~' {
        return None;
    }
    let count = rest.iter().take_while(|&&b| b == marker).count();
    if count < 3 {
        return None;
    }
    // A backtick fence's info string may not contain backticks.
    if marker == b'`' && rest[count..].contains(&b'`') {
        return None;
    }
    Some((marker, count))
}

fn fence_closes(line: &str, marker: u8, count: usize) -> bool {
    let trimmed = line.trim_end_matches(['\n', '\r']);
    let indent = trimmed.len() - trimmed.trim_start_matches(' ').len();
    if indent > 3 {
        return false;
    }
    let rest = &trimmed.as_bytes()[indent..];
    let run = rest.iter().take_while(|&&b| b == marker).count();
    run >= count && rest[run..].iter().all(|b| *b == b' ' || *b == b'\t')
}

/// Code blocks found line by line at the top level: a fence opening at column 0–3 runs to its
/// closing fence (or the end), an indented block after a blank line over indented and blank lines.
/// This reads a fence the way its writer meant it even where CommonMark would end it early (a
/// fence after a list item whose body is not indented).
fn line_code_blocks(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut previous_blank = true;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let start = at;
        at += line.len();
        if let Some((marker, count)) = fence_open(line) {
            let mut end = at;
            for next in lines.by_ref() {
                end += next.len();
                if fence_closes(next, marker, count) {
                    break;
                }
            }
            out.push((start, end));
            at = end;
            previous_blank = false;
            continue;
        }
        let indented = line.starts_with("    ") || line.starts_with('\t');
        if indented && previous_blank && !line.trim().is_empty() {
            // An indented code block runs over indented and blank lines.
            let mut end = at;
            while let Some(next) = lines.peek() {
                if next.starts_with("    ") || next.starts_with('\t') || next.trim().is_empty() {
                    end += next.len();
                    lines.next();
                } else {
                    break;
                }
            }
            out.push((start, end));
            at = end;
            previous_blank = true;
            continue;
        }
        previous_blank = line.trim().is_empty();
    }
    out
}

/// Splits into code (verbatim) and prose (inline code is masked later). Code is what either
/// reading finds: [`line_code_blocks`], and the code blocks of CommonMark — fenced and indented,
/// also inside list items and block quotes — as pulldown-cmark parses them. A block takes its
/// whole lines: the indentation or quote marks before its first line, and the line ending after
/// its last.
fn segments(text: &str) -> Vec<Segment<'_>> {
    use pulldown_cmark::{Event, Parser, Tag};
    let mut found = line_code_blocks(text);
    for (event, range) in Parser::new(text).into_offset_iter() {
        if !matches!(event, Event::Start(Tag::CodeBlock(_))) {
            continue;
        }
        let line_start = text[..range.start].rfind('\n').map_or(0, |i| i + 1);
        let start = if text[line_start..range.start]
            .chars()
            .all(|c| matches!(c, ' ' | '\t' | '>'))
        {
            line_start
        } else {
            range.start
        };
        let rest = &text[range.end..];
        let line_end = rest.find('\n').map_or(text.len(), |i| range.end + i + 1);
        let end = if text[range.end..line_end].trim().is_empty() {
            line_end
        } else {
            range.end
        };
        found.push((start, end));
    }
    found.sort_unstable();
    let mut blocks: Vec<(usize, usize)> = Vec::new();
    for (start, end) in found {
        match blocks.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => blocks.push((start, end)),
        }
    }
    let mut out = Vec::new();
    let mut at = 0;
    for (start, end) in blocks {
        if start > at {
            out.push(Segment::Prose(&text[at..start]));
        }
        out.push(Segment::Code(&text[start.max(at)..end]));
        at = end;
    }
    if at < text.len() {
        out.push(Segment::Prose(&text[at..]));
    }
    out
}

/// Inline code spans (CommonMark backtick runs) and URLs in a prose segment, as byte ranges.
fn protected_spans(prose: &str) -> Vec<(usize, usize)> {
    let bytes = prose.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            let run = bytes[i..].iter().take_while(|&&b| b == b'`').count();
            // Find a closing run of exactly the same length.
            let mut j = i + run;
            let mut closed = None;
            while j < bytes.len() {
                if bytes[j] == b'`' {
                    let other = bytes[j..].iter().take_while(|&&b| b == b'`').count();
                    if other == run {
                        closed = Some(j + other);
                        break;
                    }
                    j += other;
                } else {
                    j += 1;
                }
            }
            match closed {
                Some(end) => {
                    spans.push((i, end));
                    i = end;
                }
                // An unmatched run is literal text; protect it so it stays as it is.
                None => {
                    spans.push((i, i + run));
                    i += run;
                }
            }
            continue;
        }
        i += 1;
    }
    let paths = PATH_LIKE.find_iter(prose).map(|m| {
        // Closing punctuation ends the sentence, not the path (sign-offs are found by sentence).
        let kept = m
            .as_str()
            .trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '"', '\'']);
        (m.start(), m.start() + kept.len())
    });
    for (start, end) in URL
        .find_iter(prose)
        .map(|m| (m.start(), m.end()))
        .chain(paths)
    {
        if start < end && !spans.iter().any(|&(s, e)| start < e && s < end) {
            spans.push((start, end));
        }
    }
    spans.sort_unstable();
    spans
}

static URL: LazyLock<Regex> = LazyLock::new(|| regex(r"(?:https?|ftp|file)://[^\s)>\]]+"));

/// A word with a slash or backslash in it: a file path (`/tmp/a`), a URL without its scheme
/// (`example.com/the`), a fraction. No rule may cut a piece of it (`/tmp/a before` lost its
/// `a` to the article rule).
static PATH_LIKE: LazyLock<Regex> =
    LazyLock::new(|| regex(r"[^\s`\x{E000}-\x{E002}]*[/\\][^\s`\x{E000}-\x{E002}]*"));

/// Compiles one of this module's fixed patterns.
fn regex(pattern: &str) -> Regex {
    // The patterns are constants exercised by the tests: compiling them cannot fail.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("valid distill pattern")
}

enum Replace {
    /// Remove the match, leaving a cut mark (the start of a sentence regains its capital).
    Cut,
    /// Keep capture group 1 (a sentence boundary) and cut the rest.
    KeepFirst,
    /// Replace by fixed text, keeping the match's leading capital.
    With(&'static str),
    /// As `Cut`, except after a negation earlier in the sentence or before a number: there the
    /// word carries the meaning (`not just slow` is not `not slow`; `don't restart, just
    /// reload`; `just 1 retry` is `only 1`).
    CutUnlessNegated,
    /// An article, cut unless it belongs to a quantifier (`a few` is not `few`; `not a lot`).
    Article,
}

struct Rule {
    pattern: Regex,
    replace: Replace,
}

fn rules(level: Level) -> &'static [Rule] {
    static LITE: LazyLock<Vec<Rule>> = LazyLock::new(|| lite_rules().into_iter().collect());
    static FULL: LazyLock<Vec<Rule>> =
        LazyLock::new(|| lite_rules().into_iter().chain(full_rules()).collect());
    static ULTRA: LazyLock<Vec<Rule>> = LazyLock::new(|| {
        lite_rules()
            .into_iter()
            .chain(full_rules())
            .chain(ultra_rules())
            .collect()
    });
    match level {
        Level::Lite => &LITE,
        Level::Full => &FULL,
        Level::Ultra => &ULTRA,
    }
}

fn rule(pattern: &str, replace: Replace) -> Rule {
    Rule {
        pattern: regex(pattern),
        replace,
    }
}

/// Sentence boundary prefix used by rules that only apply at the start of a sentence.
const START: &str = r"(^[ \t]*(?:[-*+>][ \t]+)?|[.!?:][ \t]+)";

fn lite_rules() -> Vec<Rule> {
    vec![
        rule(
            &format!(
                r"(?im){START}(?:sure|certainly|absolutely|of course|okay|ok|alright|great|definitely|no problem)(?:[!.,][ \t]*|[ \t]+thing[!.][ \t]*)"
            ),
            Replace::KeepFirst,
        ),
        rule(
            r"(?i)\b(?:what a |that's a |that is a )?(?:great|good|excellent|interesting|fantastic) question[!.]?[ \t]*",
            Replace::Cut,
        ),
        rule(
            r"(?i)\bthanks?(?: you)? (?:so much )?for (?:asking|your question|reaching out|the question)[^.!?\n\x{E001}\x{E002}]*[.!?]?[ \t]*",
            Replace::Cut,
        ),
        rule(
            r"(?i)\bI(?:'d| would) be (?:happy|glad|delighted) to [^.!?\n\x{E001}\x{E002}]*[.!?]?[ \t]*",
            Replace::Cut,
        ),
        rule(
            r"(?i)\bI(?:'m| am) (?:happy|glad|here) to help[^.!?\n\x{E001}\x{E002}]*[.!?]?[ \t]*",
            Replace::Cut,
        ),
    ]
}

fn full_rules() -> Vec<Rule> {
    vec![
        rule(
            &format!(
                r"(?im){START}(?:let me|I'll|I will|allow me to) (?:explain|walk you through|break (?:it|this|that) down|clarify|help)[^.!?:\n\x{{E001}}\x{{E002}}]*[.!?:][ \t]*"
            ),
            Replace::KeepFirst,
        ),
        rule(
            &format!(
                r"(?im){START}(?:to (?:summarize|summarise|sum up|recap|put it simply)|simply put|in (?:summary|conclusion|short|a nutshell)|overall|all in all|as (?:mentioned|noted|discussed|stated) (?:above|earlier|before|previously)|as you can see),[ \t]*"
            ),
            Replace::KeepFirst,
        ),
        rule(
            r"(?i)\b(?:(?:I think|I believe|I guess|I feel|I would say|I'd say)(?: that)?|I feel like|it seems(?: like| that)?|it appears(?: that)?|in my (?:opinion|view|experience)|arguably|to be honest|honestly|frankly),?[ \t]+",
            Replace::Cut,
        ),
        rule(
            r"(?i)\b(?:it(?:'s| is) (?:important|worth|crucial|interesting) (?:to note|noting|mentioning|to mention|to remember|to point out) that|(?:please )?(?:note|keep in mind|remember|bear in mind) that|it should be noted that)[ \t]+",
            Replace::Cut,
        ),
        rule(
            r"(?i)\b(?:basically|essentially|actually|really|simply|just|quite|very|totally|literally|obviously|clearly|sort of|kind of|pretty much|a bit|somewhat|fairly),?[ \t]+",
            Replace::CutUnlessNegated,
        ),
        rule(r"(?i)\bin order to\b", Replace::With("to")),
        rule(r"(?i)\bdue to the fact that\b", Replace::With("because")),
        rule(r"(?i)\bat this point in time\b", Replace::With("now")),
        rule(r"(?i)\bin the event that\b", Replace::With("if")),
        rule(r"(?i)\bfor the purpose of\b", Replace::With("for")),
        rule(
            r"(?i)\ba (?:large|great|significant) number of\b",
            Replace::With("many"),
        ),
        rule(r"(?i)\b(?:has|have) the ability to\b", Replace::With("can")),
        rule(r"(?i)\bis able to\b", Replace::With("can")),
        rule(r"(?i)\bare able to\b", Replace::With("can")),
        rule(
            r"(?i)\bin spite of the fact that\b",
            Replace::With("although"),
        ),
    ]
}

fn ultra_rules() -> Vec<Rule> {
    vec![
        rule(
            r"(?i)\b(?:additionally|furthermore|moreover|also|in addition|besides),[ \t]*",
            Replace::Cut,
        ),
        rule(r"(?i)\bhowever,", Replace::With("but")),
        rule(
            r"(?i)\b(?:therefore|thus|hence|consequently|as a result|accordingly),",
            Replace::With("so"),
        ),
        rule(r"(?i)\bfor example\b", Replace::With("e.g.")),
        rule(r"(?i)\bfor instance\b", Replace::With("e.g.")),
        rule(r"(?i)\bthat is to say\b", Replace::With("i.e.")),
        rule(r"(?i)\bwhich means(?: that)?\b", Replace::With("so")),
        rule(r"(?i)\bmake sure(?: that)?\b", Replace::With("ensure")),
        rule(r"(?i)\b(?:in order )?to be able to\b", Replace::With("to")),
        rule(
            r"(?i)\byou (?:will need to|need to|have to|should|must|can|may want to|might want to|want to)[ \t]+",
            Replace::CutUnlessNegated,
        ),
        rule(r"\b(?:the|a|an|The|An)[ \t]+", Replace::Article),
    ]
}

/// One clause of a sign-off: well-wishing, an offer of more help, thanks. Anchored, so a clause
/// is filler only when all of it is (`Good luck numbers are unused` is content).
static SIGN_OFF_CLAUSE: LazyLock<Regex> = LazyLock::new(|| {
    let clauses = [
        r"(?:i )?hope(?:fully)?(?: that)? (?:this|that|it|these|the above|you|everything)\b.*",
        // An offer (`… if it works`, `how it goes`); `let me know the exit code` asks for data.
        r"(?:please )?let me know(?: (?:if|whether|how|when|which|what you think)\b.*)?",
        r"(?:please )?(?:feel free|don't hesitate|do not hesitate) to (?:ask|reach out|let me know|get in touch|contact|comment|follow up|ping)\b.*",
        r"if you have (?:any )?(?:other |more |further |additional |follow-up )?(?:questions?|issues?|problems?|trouble)\b.*",
        r"happy [a-z]+ing",
        r"(?:good|best of) luck(?: with .*)?",
        r"all the best|best wishes|cheers",
        r"(?:thanks?|thank you)(?: so much| again)?(?: for (?:asking|reading|your question|reaching out|the question))?",
        r"(?:i'm|i am|i'd be|i would be) (?:happy|glad|here) to help\b.*",
    ];
    regex(&format!("(?i)^(?:{})$", clauses.join("|")))
});

/// Clause separators inside one sentence: a comma or semicolon, optionally with `and`.
static CLAUSE_BREAK: LazyLock<Regex> = LazyLock::new(|| regex(r"[,;][ \t]*(?:and[ \t]+)?"));

/// Removes whole sentences made only of sign-off clauses (see [`SIGN_OFF_CLAUSE`]), with a
/// trailing run of symbols (an emoji) that only decorated them. A sentence holding inline code
/// (a mask) is content. Works on a masked line.
fn strip_sign_offs(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut previous_cut = false;
    for sentence in crate::text::sentences::in_line(line) {
        let body = sentence.trim().trim_end_matches(['.', '!', '?', '…']);
        let decoration = !sentence.contains([MASK_OPEN, MASK_CLOSE])
            && !sentence.chars().any(char::is_alphanumeric);
        let filler = !body.is_empty()
            && !body.contains([MASK_OPEN, MASK_CLOSE])
            && CLAUSE_BREAK
                .split(body)
                .map(str::trim)
                .filter(|clause| !clause.is_empty())
                .all(|clause| SIGN_OFF_CLAUSE.is_match(clause));
        if filler || (decoration && previous_cut && !sentence.trim().is_empty()) {
            out.push(CUT);
            previous_cut = true;
        } else {
            out.push_str(sentence);
            previous_cut = previous_cut && sentence.trim().is_empty();
        }
    }
    out
}

/// The marker of a list item: a bullet or a number, then a space.
static LIST_ITEM: LazyLock<Regex> =
    LazyLock::new(|| regex(r"^[ \t]*(?:[-*+]|[0-9]{1,9}[.)])(?:[ \t]+|$)"));

/// A negation word: `not`, `no`, `never`, `n't`, … .
static NEGATION: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)\b(?:not|no|never|nothing|none|nobody|neither|nor|cannot|without)\b|n['’]t\b")
});

/// Words after `a` that make it part of a quantifier.
static QUANTIFIER: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)^(?:few|little|lot|lots|couple|bit|while)\b"));

/// Whether the sentence holding `at` has a negation before it.
fn negated_before(text: &str, at: usize) -> bool {
    let sentence_start = text[..at].rfind(['.', '!', '?']).map_or(0, |i| i + 1);
    NEGATION.is_match(&text[sentence_start..at])
}

fn apply(rule: &Rule, text: &str) -> String {
    rule.pattern
        .replace_all(text, |caps: &Captures| match rule.replace {
            Replace::Cut => CUT.to_string(),
            Replace::CutUnlessNegated => match caps.get(0) {
                Some(m)
                    if negated_before(text, m.start())
                        || text[m.end()..].starts_with(|c: char| c.is_ascii_digit()) =>
                {
                    m.as_str().to_string()
                }
                _ => CUT.to_string(),
            },
            Replace::Article => match caps.get(0) {
                Some(m) if QUANTIFIER.is_match(&text[m.end()..]) => m.as_str().to_string(),
                _ => CUT.to_string(),
            },
            Replace::KeepFirst => {
                format!("{}{CUT}", caps.get(1).map_or("", |m| m.as_str()))
            }
            Replace::With(word) => {
                let matched = caps.get(0).map_or("", |m| m.as_str());
                if matched.starts_with(|c: char| c.is_uppercase()) {
                    let mut chars = word.chars();
                    chars
                        .next()
                        .map(|c| c.to_uppercase().chain(chars).collect())
                        .unwrap_or_default()
                } else {
                    word.to_string()
                }
            }
        })
        .into_owned()
}

static SPACES: LazyLock<Regex> = LazyLock::new(|| regex(r"([^ \t\n])[ \t]{2,}"));
static SPACE_BEFORE_PUNCT: LazyLock<Regex> = LazyLock::new(|| regex(r"[ \t]+([,.;:!?])"));
static DOUBLE_COMMA: LazyLock<Regex> = LazyLock::new(|| regex(r",[ \t]*([,.;:!?])"));

/// Removes cut marks, capitalising a letter that now starts a sentence, and tidies spacing.
fn finish_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut capitalise = false;
    for c in line.chars() {
        if c == CUT {
            let before = out.trim_end_matches([' ', '\t']);
            let at_start = before.is_empty()
                || before.ends_with(['.', '!', '?', ':'])
                || before
                    .trim_start()
                    .chars()
                    .all(|c| matches!(c, '-' | '*' | '+' | '>' | ' '));
            capitalise = at_start;
            continue;
        }
        if capitalise && c.is_alphabetic() {
            out.extend(c.to_uppercase());
            capitalise = false;
            continue;
        }
        if capitalise && !c.is_whitespace() && !matches!(c, ',' | '"' | '\'' | '(') {
            capitalise = false;
        }
        if capitalise && c == ',' {
            // A comma left at a sentence start by a cut lead-in.
            continue;
        }
        out.push(c);
    }
    let indent_len = out.len() - out.trim_start_matches([' ', '\t']).len();
    let (indent, body) = out.split_at(indent_len);
    let body = SPACES.replace_all(body, "$1 ");
    let body = SPACE_BEFORE_PUNCT.replace_all(&body, "$1");
    let body = DOUBLE_COMMA.replace_all(&body, "$1");
    format!("{indent}{}", body.trim_end_matches([' ', '\t']))
}

fn distill_prose(prose: &str, level: Level) -> String {
    // Mask inline code and URLs so no rule can reach them.
    let spans = protected_spans(prose);
    let mut masked = String::with_capacity(prose.len());
    let mut last = 0;
    for (i, &(start, end)) in spans.iter().enumerate() {
        masked.push_str(&prose[last..start]);
        masked.push(MASK_OPEN);
        masked.push_str(&i.to_string());
        masked.push(MASK_CLOSE);
        last = end;
    }
    masked.push_str(&prose[last..]);
    let mut out = String::with_capacity(masked.len());
    for line in masked.split_inclusive('\n') {
        let (body, ending) = match line.strip_suffix("\r\n") {
            Some(body) => (body, "\r\n"),
            None => match line.strip_suffix('\n') {
                Some(body) => (body, "\n"),
                None => (line, ""),
            },
        };
        if body.trim().is_empty() {
            out.push_str(line);
            continue;
        }
        // A list item is structure: its sign-off sentences stay (`2. Let me know if it fails.`
        // is a step), and no rule may empty it.
        let list_item = LIST_ITEM.find(body);
        let mut text = match list_item {
            Some(_) => body.to_string(),
            None => strip_sign_offs(body),
        };
        for rule in rules(level) {
            text = apply(rule, &text);
        }
        let mut finished = finish_line(&text);
        if let Some(marker) = list_item
            && finished.trim().len() <= marker.as_str().trim().len()
        {
            finished = body.trim_end_matches([' ', '\t']).to_string();
        }
        if finished.trim().is_empty() {
            // The whole line was filler: drop it with its line break.
            continue;
        }
        out.push_str(&finished);
        // Two trailing spaces before a line break are a Markdown hard break.
        let trailing = &body[body.trim_end_matches([' ', '\t']).len()..];
        if !ending.is_empty() && trailing.len() >= 2 {
            out.push_str(trailing);
        }
        out.push_str(ending);
    }
    // Collapse blank runs left by dropped lines, and blank lines left at the start.
    while out.contains("\n\n\n") {
        out = out.replace("\n\n\n", "\n\n");
    }
    if !masked.starts_with(['\n', '\r']) {
        let trimmed = out.trim_start_matches(['\n', '\r']).len();
        out.drain(..out.len() - trimmed);
    }
    // Every protected span must come back exactly once, in order; if a rule ever disturbed a
    // placeholder, keep the prose as it was rather than risk changing code.
    unmask(&out, prose, &spans).unwrap_or_else(|| prose.to_string())
}

fn unmask(masked: &str, prose: &str, spans: &[(usize, usize)]) -> Option<String> {
    let mut out = String::with_capacity(masked.len() + prose.len() / 8);
    let mut rest = masked;
    let mut expected = 0usize;
    while let Some(open) = rest.find(MASK_OPEN) {
        out.push_str(&rest[..open]);
        let after = &rest[open + MASK_OPEN.len_utf8()..];
        let close = after.find(MASK_CLOSE)?;
        let index = after[..close].parse::<usize>().ok()?;
        if index != expected {
            return None;
        }
        let &(start, end) = spans.get(index)?;
        out.push_str(&prose[start..end]);
        expected += 1;
        rest = &after[close + MASK_CLOSE.len_utf8()..];
    }
    if expected != spans.len() || rest.contains(MASK_CLOSE) {
        return None;
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests;

pub mod endings;
