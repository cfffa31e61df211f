//! Learning (SPEC §1.6): the selector's ranking weights ([`crate::context::weights`]) are
//! updated from local feedback and persisted under the state home.
//!
//! - [`store`]: the versioned weights file, written atomically, with history and reset.
//! - [`feedback`]: online pairwise steps from chunks the fixed-point loop had to recover.
//! - [`autotune`]: a bounded offline search on mined tasks that adopts new weights only when a
//!   paired comparison on tasks it did not tune on shows a non-inferior win.

pub mod autotune;
pub mod feedback;
pub mod store;

pub use store::{WeightsFile, WeightsSource, active_weights};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::dashboard::DashboardState;

/// How often the daemon's learning task looks for new fixed-point outcomes.
pub const POLL: Duration = Duration::from_secs(30);

/// The daemon's learning task: whenever the world-model ledger or the sessions changed, learn
/// from the new runs. Errors are logged and retried at the next change; it ends when the daemon
/// stops.
pub async fn run(state: Arc<DashboardState>, home: PathBuf) -> Result<(), String> {
    let ledger = home.join(crate::proof::ledger::LEDGER_FILE);
    let sessions = home.join(crate::proof::session::SESSION_DIR);
    let modified = |path: &std::path::Path| {
        std::fs::metadata(path)
            .ok()
            .and_then(|m| Some((m.len(), m.modified().ok()?)))
    };
    type Stamp = Option<(u64, SystemTime)>;
    let mut seen: (Stamp, Stamp) = (None, None);
    loop {
        // A session is replaced by a rename into its folder, which changes the folder's mtime.
        let stamp = (modified(&ledger), modified(&sessions));
        if (stamp.0.is_some() || stamp.1.is_some()) && stamp != seen {
            seen = stamp;
            let worker = home.clone();
            let outcome =
                tokio::task::spawn_blocking(move || feedback::learn_from_runs(&worker)).await;
            match outcome {
                Ok(Ok(report)) if report.outcomes_read > 0 => state.log(
                    "learning",
                    format!(
                        "read {} new outcomes, {} recovered chunks used; weights v{} → v{}",
                        report.outcomes_read,
                        report.recovered_chunks_used,
                        report.version_before,
                        report.version_after
                    ),
                ),
                Ok(Ok(_)) => {}
                Ok(Err(error)) => state.log("learning", format!("learning failed: {error}")),
                Err(join) => state.log("learning", format!("learning failed: {join}")),
            }
        }
        tokio::select! {
            _ = state.stopped() => return Ok(()),
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}
