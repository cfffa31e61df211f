use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::proof::layer::ContextRiskMode;

fn docs() -> Vec<(String, String)> {
    vec![
        (
            "harbour.md".to_string(),
            "# Harbour\n\nThe harbour has two ferry wharves.\n\n## Bridge\n\nThe bridge across the harbour opened to traffic in 1932 after eight years of work.\n".to_string(),
        ),
        (
            "city.md".to_string(),
            "# City\n\nThe city lies on the eastern coast.\n\n## Parks\n\nThe botanic garden was founded in 1816 beside the harbour.\n".to_string(),
        ),
    ]
}

const QUERY: &str = "When did the bridge open to traffic?";
const NEEDS_PARK: &str =
    "The bridge opened to traffic in 1932. The botanic garden was founded in 1816.";

fn protocol(dir: &std::path::Path) -> Protocol {
    Protocol::new(VerifiedEfficiencyLayer::new(dir, ContextRiskMode::Strict))
}

fn prepare(protocol: &Protocol, key: Option<&str>) -> PrepareResponse {
    let text = protocol
        .prepare(&docs(), QUERY, 30, Bounds::default(), key)
        .expect("prepare");
    serde_json::from_str(&text).expect("prepare response")
}

#[test]
fn prepare_advance_until_supported_with_a_private_hash_checked_session() {
    let dir = tempfile::tempdir().expect("tempdir");
    let protocol = protocol(dir.path());
    let prepared = prepare(&protocol, None);
    assert!(prepared.session_id.starts_with("pgs_"));
    assert_eq!(prepared.state, SessionState::AwaitingDraft);
    let path = session::path_of(dir.path(), &prepared.session_id).expect("path");
    let mode = std::fs::metadata(&path).expect("file").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "session files are private");

    // A new protocol object (as after a restart) resumes from the file alone.
    let resumed = self::protocol(dir.path());
    let first: AdvanceResponse = serde_json::from_str(
        &resumed
            .advance(&prepared.session_id, NEEDS_PARK, None)
            .expect("advance"),
    )
    .expect("advance response");
    assert_eq!(first.state, SessionState::AwaitingDraft);
    assert_eq!(first.revision, 1);
    let request = first.request.expect("next request");
    assert_eq!(
        request.stable_context_prefix,
        prepared.request.stable_context_prefix
    );
    assert_eq!(request.appended_evidence.len(), 1);
    assert_eq!(request.previous_output.as_deref(), Some(NEEDS_PARK));

    let second: AdvanceResponse = serde_json::from_str(
        &resumed
            .advance(&prepared.session_id, NEEDS_PARK, None)
            .expect("advance"),
    )
    .expect("advance response");
    assert_eq!(second.state, SessionState::Finished);
    assert_eq!(second.status, Some(FixedPointStatus::Supported));
    let view = resumed.inspect(&prepared.session_id).expect("inspect");
    assert_eq!(view.state, SessionState::Finished);
    assert_eq!(view.rounds, 2);
    assert!(view.pending_request.is_none());
    assert!(matches!(
        resumed.advance(&prepared.session_id, NEEDS_PARK, None),
        Err(ProofError::Session(SessionError::Closed { .. }))
    ));
}

#[test]
fn an_idempotency_key_replays_its_response_and_rejects_other_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let protocol = protocol(dir.path());
    let prepared = prepare(&protocol, None);
    let id = &prepared.session_id;
    let original = protocol
        .advance(id, NEEDS_PARK, Some("k1"))
        .expect("advance");
    // A later revision, then the same key again: the same bytes.
    protocol
        .advance(id, NEEDS_PARK, Some("k2"))
        .expect("advance");
    assert_eq!(
        protocol
            .advance(id, NEEDS_PARK, Some("k1"))
            .expect("replay"),
        original
    );
    assert!(matches!(
        protocol.advance(id, "Something else entirely.", Some("k1")),
        Err(ProofError::Session(
            SessionError::IdempotencyConflict { .. }
        ))
    ));
    // Prepare keys too.
    let first = protocol
        .prepare(&docs(), QUERY, 30, Bounds::default(), Some("p1"))
        .expect("prepare");
    let again = protocol
        .prepare(&docs(), QUERY, 30, Bounds::default(), Some("p1"))
        .expect("replay");
    assert_eq!(first, again);
    assert!(matches!(
        protocol.prepare(&docs(), "another query", 30, Bounds::default(), Some("p1")),
        Err(ProofError::Session(
            SessionError::IdempotencyConflict { .. }
        ))
    ));
    // Found by probing: a damaged prepare-key record was "not a valid session file".
    for entry in std::fs::read_dir(dir.path().join(IDEMPOTENCY_DIR)).expect("keys") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            std::fs::write(&path, "{").expect("damage");
        }
    }
    let message = protocol
        .prepare(&docs(), QUERY, 30, Bounds::default(), Some("p1"))
        .expect_err("damaged")
        .to_string();
    assert!(
        message.contains("is not a valid idempotency record") && message.contains("move it away"),
        "{message}"
    );
}

#[test]
fn corrupted_unknown_and_malformed_sessions_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let protocol = protocol(dir.path());
    let prepared = prepare(&protocol, None);
    let path = session::path_of(dir.path(), &prepared.session_id).expect("path");
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, text.replace("\"revision\": 0", "\"revision\": 7")).expect("edit");
    assert!(matches!(
        protocol.inspect(&prepared.session_id),
        Err(ProofError::Session(SessionError::HashMismatch { .. }))
    ));
    std::fs::write(&path, &text[..text.len() / 2]).expect("truncate");
    assert!(matches!(
        protocol.advance(&prepared.session_id, NEEDS_PARK, None),
        Err(ProofError::Session(SessionError::Parse { .. }))
    ));
    assert!(matches!(
        protocol.inspect("pgs_0123"),
        Err(ProofError::Session(SessionError::Unknown { .. }))
    ));
    assert!(matches!(
        protocol.inspect("../etc/passwd"),
        Err(ProofError::Session(SessionError::BadId { .. }))
    ));
    // Found by probing: a 300-digit id reached the file system ("File name too long") on
    // inspect and was "unknown" on advance.
    let long = format!("pgs_{}", "a".repeat(300));
    assert!(matches!(
        protocol.inspect(&long),
        Err(ProofError::Session(SessionError::BadId { .. }))
    ));
    assert!(matches!(
        protocol.advance(&long, NEEDS_PARK, None),
        Err(ProofError::Session(SessionError::BadId { .. }))
    ));
}

#[test]
fn a_recovery_failure_marks_the_session_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let protocol = protocol(dir.path());
    let prepared = prepare(&protocol, None);
    // Tamper with every blob: whichever chunk is recovered fails its content hash.
    for entry in std::fs::read_dir(dir.path().join("blobs"))
        .expect("blobs")
        .flatten()
    {
        for blob in std::fs::read_dir(entry.path()).expect("dir").flatten() {
            std::fs::remove_file(blob.path()).expect("remove");
            std::fs::write(blob.path(), "tampered").expect("write");
        }
    }
    let error = protocol
        .advance(&prepared.session_id, NEEDS_PARK, None)
        .expect_err("recovery fails");
    assert!(matches!(error, ProofError::Recovery(_)), "{error}");
    let view = protocol.inspect(&prepared.session_id).expect("inspect");
    assert_eq!(view.state, SessionState::Failed);
    let failure = view.failure.expect("failure recorded");
    assert!(failure.artifact_path.is_some());
}
