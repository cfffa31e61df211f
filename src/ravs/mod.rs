//! RAVS, the outcome log of routing and verification (SPEC §1.6, §4.5 `svc ravs report`): an
//! append-only JSON Lines file of typed events under the state directory
//! (`ravs/events.jsonl`), written by the proxy when it routes a request, when the witness
//! checks an answer, when a client re-sends a request, and when a routed request fails upstream
//! and is escalated to the original model. The routing gate reads its evidence from these
//! events ([`Tally`]); `svc ravs report` summarises them per task class ([`report`]).
//!
//! Layout: [`event`] (the event types and their wire names), [`log`] (locked appends, reads
//! that skip a corrupt line with a warning), [`appender`] (the proxy's background writer), [`tally`] (per-class counts), [`stats`] (the
//! Wilson interval), [`report`] (the table and its JSON), [`duration`] (`30m`, `12h`, `7d`,
//! `2w`).

pub mod appender;
pub mod duration;
pub mod event;
pub mod log;
pub mod report;
pub mod stats;
pub mod tally;

pub use appender::Appender;
pub use event::{Decision, Entry, Event, Label, Reason};
pub use log::{EVENTS_FILE, EventLog, LogError, Read, Warning};
pub use tally::{ClassStats, Tally};
