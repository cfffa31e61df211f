//! The certificate store: certificates and feedback under `<state>/witness/`, written
//! atomically.
//!
//! Layout: `certificates/<id>.json` (one certificate each) and `feedback/<id>.json` (the list of
//! feedback entries on that certificate, rewritten whole on each addition).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::certificate::{self, Certificate, CertificateStatus};
use super::profile::{Mode, Profile};
use crate::state::{self, StateError};

/// A person's judgement of a certificate.
#[derive(
    Debug,
    Clone,
    Copy,
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
#[clap(rename_all = "snake_case")]
pub enum Verdict {
    /// The witness flagged a claim the evidence does support.
    FalsePositive,
    /// The witness passed a claim that is wrong or not in the evidence.
    FalseNegative,
    /// The witness's verdicts are right.
    Correct,
    /// The verdict is right but cites the wrong evidence span.
    WrongEvidence,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [
        Verdict::FalsePositive,
        Verdict::FalseNegative,
        Verdict::Correct,
        Verdict::WrongEvidence,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::FalsePositive => "false_positive",
            Verdict::FalseNegative => "false_negative",
            Verdict::Correct => "correct",
            Verdict::WrongEvidence => "wrong_evidence",
        }
    }
}

/// One feedback entry on a certificate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Feedback {
    pub certificate_id: String,
    pub verdict: Verdict,
    /// The claim the feedback is about, when it is about one.
    pub claim_index: Option<usize>,
    pub note: Option<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
}

/// Feedback counts over the whole store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackTotals {
    pub false_positive: usize,
    pub false_negative: usize,
    pub correct: usize,
    pub wrong_evidence: usize,
    pub total: usize,
}

/// One line of a certificate listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listing {
    pub id: String,
    pub created_at: String,
    pub mode: Mode,
    pub profile: Profile,
    pub status: CertificateStatus,
    pub verifiable: usize,
    pub flagged: usize,
    pub unsupported_claim_rate: f64,
}

/// Errors of the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error("{id:?} is not a certificate id (expected wit_ and 24 hex characters)")]
    BadId { id: String },
    #[error("no certificate {id} in {dir}; `svc witness list` shows the stored ones")]
    NotFound { id: String, dir: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid {what}: {source}; move it away to continue")]
    Corrupt {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
}

/// Certificates and feedback under one directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The store under the state directory: `state::home()/witness`.
    pub fn open_default() -> Result<Self, StoreError> {
        Ok(Self::at(state::home()?.join("witness")))
    }

    pub fn at(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn certificates(&self) -> PathBuf {
        self.root.join("certificates")
    }

    fn certificate_path(&self, id: &str) -> PathBuf {
        self.certificates().join(format!("{id}.json"))
    }

    fn feedback_path(&self, id: &str) -> PathBuf {
        self.root.join("feedback").join(format!("{id}.json"))
    }

    /// Persist a certificate; returns its path.
    pub fn save(&self, certificate: &Certificate) -> Result<PathBuf, StoreError> {
        check_id(&certificate.id)?;
        let path = self.certificate_path(&certificate.id);
        // Serialising our own type cannot fail.
        let mut bytes = serde_json::to_vec_pretty(certificate).unwrap_or_default();
        bytes.push(b'\n');
        state::atomic_write(&path, &bytes)?;
        Ok(path)
    }

    /// The certificate with `id`.
    pub fn get(&self, id: &str) -> Result<Certificate, StoreError> {
        check_id(id)?;
        let path = self.certificate_path(id);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound {
                    id: id.to_string(),
                    dir: self.certificates(),
                });
            }
            Err(source) => return Err(StoreError::Read { path, source }),
        };
        serde_json::from_str(&text).map_err(|source| StoreError::Corrupt {
            path,
            what: "certificate",
            source,
        })
    }

    /// The most recent certificates, newest first, at most `limit`.
    pub fn list(&self, limit: usize) -> Result<Vec<Listing>, StoreError> {
        let dir = self.certificates();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(StoreError::Read { path: dir, source }),
        };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".json")
                    .filter(|id| certificate::is_id(id))
                    .map(str::to_string)
            })
            .collect();
        ids.sort();
        let mut listings = Vec::with_capacity(ids.len());
        for id in ids {
            let c = self.get(&id)?;
            listings.push(Listing {
                flagged: c.flagged_claims.len(),
                id: c.id,
                created_at: c.created_at,
                mode: c.mode,
                profile: c.profile,
                status: c.status,
                verifiable: c.summary.verifiable,
                unsupported_claim_rate: c.summary.unsupported_claim_rate,
            });
        }
        listings.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
        listings.truncate(limit);
        Ok(listings)
    }

    /// Record feedback on a stored certificate.
    pub fn add_feedback(
        &self,
        id: &str,
        verdict: Verdict,
        claim_index: Option<usize>,
        note: Option<String>,
    ) -> Result<Feedback, StoreError> {
        // The certificate must exist: feedback on nothing is a typo.
        self.get(id)?;
        let mut entries = self.feedback_for(id)?;
        let feedback = Feedback {
            certificate_id: id.to_string(),
            verdict,
            claim_index,
            note,
            created_at: certificate::rfc3339(SystemTime::now()),
        };
        entries.push(feedback.clone());
        let mut bytes = serde_json::to_vec_pretty(&entries).unwrap_or_default();
        bytes.push(b'\n');
        state::atomic_write(&self.feedback_path(id), &bytes)?;
        Ok(feedback)
    }

    /// Feedback entries on one certificate, oldest first.
    pub fn feedback_for(&self, id: &str) -> Result<Vec<Feedback>, StoreError> {
        check_id(id)?;
        read_feedback(&self.feedback_path(id))
    }

    /// Feedback counts by verdict over every certificate.
    pub fn feedback_totals(&self) -> Result<FeedbackTotals, StoreError> {
        let dir = self.root.join("feedback");
        let mut totals = FeedbackTotals::default();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(totals),
            Err(source) => return Err(StoreError::Read { path: dir, source }),
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for path in paths {
            for entry in read_feedback(&path)? {
                totals.total += 1;
                match entry.verdict {
                    Verdict::FalsePositive => totals.false_positive += 1,
                    Verdict::FalseNegative => totals.false_negative += 1,
                    Verdict::Correct => totals.correct += 1,
                    Verdict::WrongEvidence => totals.wrong_evidence += 1,
                }
            }
        }
        Ok(totals)
    }
}

fn check_id(id: &str) -> Result<(), StoreError> {
    if certificate::is_id(id) {
        Ok(())
    } else {
        Err(StoreError::BadId { id: id.to_string() })
    }
}

fn read_feedback(path: &Path) -> Result<Vec<Feedback>, StoreError> {
    match fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|source| StoreError::Corrupt {
            path: path.to_path_buf(),
            what: "feedback list",
            source,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(StoreError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::witness::{WitnessInput, witness};

    fn certificate(output: &str) -> Certificate {
        witness(&WitnessInput {
            context: "The Oberoi Group is a hotel company with its head office in Delhi.",
            context_source: "context.txt",
            output,
            question: None,
            mode: Mode::Audit,
            profile: Profile::Rag,
        })
        .certificate
    }

    #[test]
    fn round_trip_list_and_feedback() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::at(dir.path().join("witness"));
        assert!(store.list(10).expect("empty list").is_empty());
        let a = certificate("The head office is in Delhi.");
        let b = certificate("The head office is in Mumbai.");
        store.save(&a).expect("save a");
        store.save(&b).expect("save b");
        assert_eq!(store.get(&a.id).expect("get"), a);
        let listed = store.list(10).expect("list");
        assert_eq!(listed.len(), 2);
        assert!(listed[0].created_at >= listed[1].created_at);
        assert_eq!(store.list(1).expect("limit").len(), 1);
        let flagged = listed.iter().find(|l| l.id == b.id).expect("b listed");
        assert_eq!(flagged.flagged, 1);

        store
            .add_feedback(
                &b.id,
                Verdict::FalsePositive,
                Some(0),
                Some("Mumbai is fine".into()),
            )
            .expect("feedback");
        store
            .add_feedback(&b.id, Verdict::Correct, None, None)
            .expect("feedback");
        store
            .add_feedback(&a.id, Verdict::Correct, None, None)
            .expect("feedback");
        assert_eq!(store.feedback_for(&b.id).expect("entries").len(), 2);
        let totals = store.feedback_totals().expect("totals");
        assert_eq!(
            totals,
            FeedbackTotals {
                false_positive: 1,
                false_negative: 0,
                correct: 2,
                wrong_evidence: 0,
                total: 3
            }
        );
    }

    #[test]
    fn unknown_and_malformed_ids_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::at(dir.path());
        let missing = "wit_000000000000000000000000";
        assert!(matches!(
            store.get(missing),
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.add_feedback(missing, Verdict::Correct, None, None),
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.get("../etc/passwd"),
            Err(StoreError::BadId { .. })
        ));
    }

    #[test]
    fn verdict_wire_names() {
        for verdict in Verdict::ALL {
            assert_eq!(
                serde_json::to_value(verdict).expect("serialise"),
                verdict.as_str()
            );
        }
    }
}
