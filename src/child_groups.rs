//! Process groups of the model commands svc runs, ended with svc. Each command runs as a group
//! of its own (so a deadline reaches whatever it started), which also keeps it out of the
//! terminal's foreground group: Ctrl-C, or a SIGTERM from `timeout`, ended svc and left the
//! command running. While a group is registered here, SIGINT, SIGTERM and SIGHUP first kill the
//! registered groups, then end svc as the signal's default action would (same exit status).
//!
//! The handler thread is installed on the first registration only, so processes that never run
//! a command (the daemon, the proxy) keep their own signal handling untouched.
//!
//! Temporary directories can be registered the same way ([`register_temp_dir`]): a signal
//! removes them before svc ends (a bundle's bare clone, 14 MB, was left in the temporary
//! folder by every interrupted `svc bench --localize-repo` and `svc learning autotune`).

use std::collections::BTreeSet;
use std::sync::{Mutex, Once};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

static GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
static TEMP_DIRS: Mutex<BTreeSet<std::path::PathBuf>> = Mutex::new(BTreeSet::new());
static INSTALL: Once = Once::new();

/// Registered while it lives; dropping it unregisters the group.
#[derive(Debug)]
pub struct Registered {
    pid: i32,
}

impl Registered {
    /// Kills the group (the command and everything it started); false when that failed (the
    /// group is gone already).
    pub fn kill(&self) -> bool {
        kill_group(self.pid)
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        groups().remove(&self.pid);
    }
}

fn groups() -> std::sync::MutexGuard<'static, BTreeSet<i32>> {
    // A panic while holding the set leaves it usable: it is a set of integers.
    GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Registers the process group led by `pid` (a child spawned with `process_group(0)`).
pub fn register(pid: u32) -> Option<Registered> {
    let pid = i32::try_from(pid).ok()?;
    INSTALL.call_once(install);
    groups().insert(pid);
    Some(Registered { pid })
}

fn kill_group(pid: i32) -> bool {
    rustix::process::Pid::from_raw(pid).is_some_and(|pid| {
        rustix::process::kill_process_group(pid, rustix::process::Signal::KILL).is_ok()
    })
}

/// Registered while it lives; dropping it unregisters the directory (the owner removes it).
#[derive(Debug)]
pub struct RegisteredDir {
    path: std::path::PathBuf,
}

impl Drop for RegisteredDir {
    fn drop(&mut self) {
        temp_dirs().remove(&self.path);
    }
}

fn temp_dirs() -> std::sync::MutexGuard<'static, BTreeSet<std::path::PathBuf>> {
    // A set of paths stays usable after a panic while it was held.
    TEMP_DIRS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Registers a temporary directory to remove if SIGINT, SIGTERM or SIGHUP ends svc.
pub fn register_temp_dir(path: &std::path::Path) -> RegisteredDir {
    INSTALL.call_once(install);
    temp_dirs().insert(path.to_path_buf());
    RegisteredDir {
        path: path.to_path_buf(),
    }
}

/// Kills every registered group and removes every registered directory.
fn kill_all() {
    for &pid in groups().iter() {
        kill_group(pid);
    }
    for dir in temp_dirs().iter() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn install() {
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
        // Without the handler, svc behaves as before: the signal's default action.
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("svc-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                kill_all();
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                // Not reached for these signals (their default action ends the process).
                std::process::exit(128 + signal);
            }
        });
    drop(spawned);
}
