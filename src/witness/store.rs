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
    #[error(
        "certificate {id} has {claims} claim(s), numbered 0 to {last}; there is no claim {index}",
        last = .claims.saturating_sub(1)
    )]
    NoSuchClaim {
        id: String,
        index: usize,
        claims: usize,
    },
    #[error(
        "claim {index} of certificate {id} is {label}, so it cannot be a {verdict}: a false_positive is a flagged claim (unsupported or contradicted) the evidence supports, a false_negative a claim that was not flagged"
    )]
    VerdictDoesNotFit {
        id: String,
        index: usize,
        label: &'static str,
        verdict: &'static str,
    },
    #[error("cannot lock {path} to record feedback: {source}")]
    Lock {
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

/// A page of [`Store::list`]: the certificates, and why any file was left out.
#[derive(Debug, Clone, Default)]
pub struct Listings {
    pub items: Vec<Listing>,
    /// One message per certificate file that could not be read (naming it).
    pub skipped: Vec<String>,
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
        // Bytes, not text: a file that is not UTF-8 is damage to move away, like bad JSON.
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound {
                    id: id.to_string(),
                    dir: self.certificates(),
                });
            }
            Err(source) => return Err(StoreError::Read { path, source }),
        };
        serde_json::from_slice(&bytes).map_err(|source| StoreError::Corrupt {
            path,
            what: "certificate",
            source,
        })
    }

    /// The most recent certificates, newest first, at most `limit`. A certificate file that
    /// cannot be read is left out and named in [`Listings::skipped`]: one damaged file must
    /// not hide every other certificate.
    pub fn list(&self, limit: usize) -> Result<Listings, StoreError> {
        let dir = self.certificates();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listings::default()),
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
        let mut skipped = Vec::new();
        for id in ids {
            let c = match self.get(&id) {
                Ok(c) => c,
                // Removed between the listing and the read: it is simply gone.
                Err(StoreError::NotFound { .. }) => continue,
                Err(problem) => {
                    skipped.push(problem.to_string());
                    continue;
                }
            };
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
        Ok(Listings {
            items: listings,
            skipped,
        })
    }

    /// Record feedback on a stored certificate.
    pub fn add_feedback(
        &self,
        id: &str,
        verdict: Verdict,
        claim_index: Option<usize>,
        note: Option<String>,
    ) -> Result<Feedback, StoreError> {
        // The certificate must exist, and the claim be one of its own: feedback on nothing is
        // a typo, and would count in the totals.
        let certificate = self.get(id)?;
        if let Some(index) = claim_index {
            let Some(claim) = certificate.claims.get(index) else {
                return Err(StoreError::NoSuchClaim {
                    id: id.to_string(),
                    index,
                    claims: certificate.claims.len(),
                });
            };
            // A verdict that contradicts what the witness did to the claim is a slip (the wrong
            // claim number) and would skew the totals learning reads.
            let flagged = matches!(
                claim.label,
                super::verify::Label::Unsupported | super::verify::Label::Contradicted
            );
            let fits = match verdict {
                Verdict::FalsePositive => flagged,
                Verdict::FalseNegative => !flagged,
                Verdict::Correct | Verdict::WrongEvidence => true,
            };
            if !fits {
                return Err(StoreError::VerdictDoesNotFit {
                    id: id.to_string(),
                    index,
                    label: claim.label.as_str(),
                    verdict: verdict.as_str(),
                });
            }
        }
        // A read-modify-write of one file: an OS lock beside it serialises writers of every
        // process (two proxies on one state directory, a CLI call), so none is lost.
        let path = self.feedback_path(id);
        let _held = state::append::lock(&path).map_err(|source| StoreError::Lock {
            path: path.with_extension("lock"),
            source,
        })?;
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
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| StoreError::Corrupt {
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
        assert!(store.list(10).expect("empty list").items.is_empty());
        let a = certificate("The head office is in Delhi.");
        let b = certificate("The head office is in Mumbai.");
        store.save(&a).expect("save a");
        store.save(&b).expect("save b");
        assert_eq!(store.get(&a.id).expect("get"), a);
        let listed = store.list(10).expect("list").items;
        assert_eq!(listed.len(), 2);
        assert!(listed[0].created_at >= listed[1].created_at);
        assert_eq!(store.list(1).expect("limit").items.len(), 1);
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

    /// Found by probing: two processes recording feedback at once lost entries (each read the
    /// list, added one and wrote it back); a claim index past the certificate's claims was
    /// accepted into the totals.
    #[test]
    fn concurrent_feedback_is_never_lost_and_claims_must_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("witness");
        let c = certificate("The head office is in Mumbai.");
        Store::at(&root).save(&c).expect("save");
        std::thread::scope(|scope| {
            for _ in 0..8 {
                // A store of its own per writer, as separate processes have.
                let store = Store::at(&root);
                let id = c.id.clone();
                scope.spawn(move || {
                    for _ in 0..10 {
                        store
                            .add_feedback(&id, Verdict::Correct, None, None)
                            .expect("feedback");
                    }
                });
            }
        });
        let store = Store::at(&root);
        assert_eq!(store.feedback_for(&c.id).expect("entries").len(), 80);
        let past = store.add_feedback(&c.id, Verdict::Correct, Some(c.claims.len()), None);
        let message = past.expect_err("no such claim").to_string();
        assert!(message.contains("there is no claim"), "{message}");
        assert_eq!(store.feedback_totals().expect("totals").total, 80);
    }

    /// Found by probing: one damaged certificate file made every listing fail.
    #[test]
    fn a_damaged_certificate_is_left_out_of_the_listing_and_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::at(dir.path().join("witness"));
        let c = certificate("The head office is in Delhi.");
        store.save(&c).expect("save");
        let damaged = "wit_0123456789abcdef01234567";
        std::fs::write(
            store.certificates().join(format!("{damaged}.json")),
            "{\"broken",
        )
        .expect("write");
        let page = store.list(10).expect("a listing");
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.skipped.len(), 1);
        assert!(page.skipped[0].contains(damaged), "{:?}", page.skipped);
        // Found by probing: bytes that are not UTF-8 were "cannot read" with no remedy.
        std::fs::write(
            store.certificates().join(format!("{damaged}.json")),
            b"{\"id\": \"\xff\"}",
        )
        .expect("write");
        let message = store.get(damaged).expect_err("damaged").to_string();
        assert!(
            message.contains("is not a valid certificate") && message.contains("move it away"),
            "{message}"
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
