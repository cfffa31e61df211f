//! The tour's figures hold on the built-in sample.

use super::*;

#[test]
fn the_tour_measures_reduction_recovery_witness_and_a_converging_fixed_point() {
    let state = tempfile::tempdir().expect("state");
    let report = run(state.path()).expect("demo");
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    let s = &report.selection;
    assert!(s.tokens <= SELECT_BUDGET);
    assert!(s.reduction_percent > 50.0, "{}", s.reduction_percent);
    assert!(s.byte_exact && s.recovered_bytes > 0);
    assert!(
        s.sent
            .iter()
            .any(|f| f.chunk_id.starts_with("src/discount.rs")),
        "{:?}",
        s.sent
    );
    let c = &report.compression;
    assert_eq!(c.kind, ContentKind::Logs);
    assert!(c.tokens <= COMPRESS_BUDGET && c.ratio > 5.0, "{c:?}");
    assert!(c.kept_error_line && c.byte_exact && c.elisions > 0);
    let w = &report.witness;
    assert!(w.deterministic);
    assert_eq!(w.checks[0].status, "supported");
    assert_eq!(w.checks[1].status, "flagged");
    assert!(w.checks[1].contradicted + w.checks[1].unsupported >= 1);
    assert!(!w.checks[1].strict_output.contains("2015"));
    let f = &report.fixed_point;
    assert_eq!(f.status, FixedPointStatus::Supported, "{f:?}");
    assert_eq!(f.rounds.len(), 2, "a draft and a revision: {f:?}");
    assert!(!f.rounds[0].recovered.is_empty());
    assert!(f.final_output.contains("2021"), "{}", f.final_output);
}
