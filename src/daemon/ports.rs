//! Binding the daemon's ports, and naming the process that holds a port already in use
//! (Linux: `/proc/net/tcp{,6}` gives the listening socket's inode, `/proc/<pid>/fd` the process
//! holding it; elsewhere, or without permission, the owner is unknown).

use std::net::TcpListener;
use std::path::Path;

use super::DaemonError;

/// A process holding a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub pid: u32,
    pub name: String,
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (pid {})", self.name, self.pid)
    }
}

fn listening_inodes(port: u16) -> Vec<String> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let local_port = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            // 0A is TCP_LISTEN.
            if local_port == Some(port) && *state == "0A" {
                out.push((*inode).to_string());
            }
        }
    }
    out
}

/// The process listening on `port` on this machine, when it can be found.
pub fn owner(port: u16) -> Option<Owner> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return None;
    }
    let targets: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(link) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if targets.iter().any(|t| Path::new(t) == link) {
                let name = std::fs::read_to_string(entry.path().join("comm"))
                    .map(|n| n.trim().to_string())
                    .unwrap_or_else(|_| "unknown".into());
                return Some(Owner { pid, name });
            }
        }
    }
    None
}

/// Binds `127.0.0.1:port` for `what` (`proxy`, `dashboard`, …); a port in use names its holder.
pub fn bind(what: &'static str, port: u16) -> Result<TcpListener, DaemonError> {
    match TcpListener::bind(("127.0.0.1", port)) {
        Ok(listener) => {
            listener
                .set_nonblocking(true)
                .map_err(|source| DaemonError::Bind { what, port, source })?;
            Ok(listener)
        }
        Err(source) if source.kind() == std::io::ErrorKind::AddrInUse => {
            Err(DaemonError::PortInUse {
                what,
                port,
                owner: owner(port),
            })
        }
        Err(source) => Err(DaemonError::Bind { what, port, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_in_use_names_this_process() {
        let holder = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = holder.local_addr().expect("addr").port();
        match bind("dashboard", port) {
            Err(DaemonError::PortInUse { port: p, owner, .. }) => {
                assert_eq!(p, port);
                if Path::new("/proc/net/tcp").exists() {
                    let owner = owner.expect("found on Linux");
                    assert_eq!(owner.pid, std::process::id());
                }
            }
            other => panic!("expected PortInUse, got {other:?}"),
        }
    }
}
