//! `svc demo`: the tour of svc on the built-in sample, printed as it goes (see
//! [`svc::demo`]). Exit 0 when every step ran.

use std::process::ExitCode;

use clap::Args;
use svc::demo::{self, DemoReport};
use svc::state;

use super::Format;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// `text` tells the story; `json` prints every measured figure.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let home = state::home()?;
    let report = demo::run(&home)?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!("{}", render(&report)),
    }
    Ok(ExitCode::SUCCESS)
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "NO" }
}

/// The story, step by step, with each figure and the command that shows more.
pub fn render(report: &DemoReport) -> String {
    let mut out = String::new();
    let s = &report.selection;
    out.push_str(&format!(
        "svc demo: a tour on the built-in sample \"tinyshop\" ({} files, {} tokens; no network, no model)\n\n",
        s.sample_files, s.sample_tokens
    ));
    out.push_str(&format!(
        "1. Selection — {:?} within {} tokens\n   sent {} tokens of {} ({:.1}% fewer), {} fragments, {} left out; commit {}\n",
        s.query,
        s.budget,
        s.tokens,
        s.sample_tokens,
        s.reduction_percent,
        s.sent.len(),
        s.omitted,
        s.ctx_id
    ));
    for fragment in &s.sent {
        out.push_str(&format!(
            "     {:<9} {:>4} tokens  {}\n",
            fragment.resolution.as_str(),
            fragment.tokens,
            fragment.chunk_id
        ));
    }
    out.push_str(&format!(
        "   recovered the omitted {} ({} bytes): byte-exact {}\n   try: svc context recover {} {}\n\n",
        s.recovered_chunk,
        s.recovered_bytes,
        yes_no(s.byte_exact),
        s.ctx_id,
        s.recovered_chunk
    ));
    let c = &report.compression;
    out.push_str(&format!(
        "2. Compression — {} ({}) to {} tokens\n   {} → {} tokens ({:.1}x), {} elisions, the declined-card error kept: {}; commit {}\n   recovered elision {}: byte-exact {}\n   try: svc context recover {} {}\n\n",
        c.source,
        c.kind,
        c.budget,
        c.original_tokens,
        c.tokens,
        c.ratio,
        c.elisions,
        yes_no(c.kept_error_line),
        c.ctx_id,
        c.recovered_chunk,
        yes_no(c.byte_exact),
        c.ctx_id,
        c.recovered_chunk
    ));
    let w = &report.witness;
    out.push_str("3. Witness — two answers checked against the history's evidence\n");
    for check in &w.checks {
        out.push_str(&format!(
            "   {:<9} {}/{} claims supported, {} contradicted, {} unsupported  {}\n     answer: {}\n     strict: {}\n",
            check.status,
            check.supported,
            check.verifiable,
            check.contradicted,
            check.unsupported,
            check.certificate_id,
            check.answer,
            check.strict_output.trim_end()
        ));
    }
    out.push_str(&format!(
        "   same verdicts on a second run: {}\n   try: svc witness show {}\n\n",
        yes_no(w.deterministic),
        w.checks.last().map_or("", |c| c.certificate_id.as_str())
    ));
    let f = &report.fixed_point;
    out.push_str(&format!(
        "4. Proof-guided fixed point — {:?} on docs/history.md, {} committed tokens (budget {}), recovery budget {}; model: the deterministic fixture reader\n",
        f.query, f.context_tokens, f.budget, f.recovery_token_budget
    ));
    for round in &f.rounds {
        out.push_str(&format!(
            "   round {}: draft {:?}: {}/{} claims supported; {}\n",
            round.round,
            round.draft,
            round.supported_claims,
            round.verifiable_claims,
            round.decision
        ));
    }
    out.push_str(&format!(
        "   status {} after {} model call(s), {} tokens recovered; final output {:?}; commit {}\n",
        f.status,
        f.rounds.len(),
        f.recovery_tokens_used,
        f.final_output,
        f.ctx_id
    ));
    out
}
