//! Finding or starting the local proxy for a launch agent: a running `svc proxy` is recognised
//! by its status route, and a new one is started as a detached child that outlives the agent
//! (the next `svc wrap` reuses it).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::WrapError;

/// What listens on the proxy port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// An svc proxy answered `/svc/status`.
    Svc,
    /// Something accepted the connection but is not an svc proxy.
    Other(String),
    /// Nothing accepts connections there.
    Closed,
}

fn address(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Asks 127.0.0.1:`port` for `/svc/status`.
pub fn probe(port: u16) -> Probe {
    let timeout = Duration::from_millis(500);
    let Ok(mut stream) = TcpStream::connect_timeout(&address(port), timeout) else {
        return Probe::Closed;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(timeout));
    let request =
        format!("GET /svc/status HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return Probe::Other("it closed the connection".into());
    }
    let mut response = Vec::new();
    // The status body is small; a stray service that streams forever is cut at 64 KiB.
    let _ = stream.take(64 * 1024).read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response);
    let status_line = response.lines().next().unwrap_or("").to_string();
    if status_line.contains(" 200") && response.contains("\"optimization\"") {
        Probe::Svc
    } else if status_line.is_empty() {
        Probe::Other("it sent no HTTP answer".into())
    } else {
        Probe::Other(format!("it answered `{status_line}` to GET /svc/status"))
    }
}

/// A proxy started by [`spawn`].
#[derive(Debug)]
pub struct Started {
    pub pid: u32,
    pub log: PathBuf,
}

/// Starts `exe proxy --port PORT ARGS…` detached (own process group, stdin closed, output to
/// `log`) and waits until it answers `/svc/status`, at most `wait`.
pub fn spawn(
    exe: &Path,
    port: u16,
    extra: &[String],
    log: &Path,
    wait: Duration,
) -> Result<Started, WrapError> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| {
            WrapError::Proxy(format!(
                "cannot create the log folder {}: {e}",
                dir.display()
            ))
        })?;
    }
    let log_file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| {
            WrapError::Proxy(format!("cannot open the proxy log {}: {e}", log.display()))
        })?;
    let log_err = log_file.try_clone().map_err(|e| {
        WrapError::Proxy(format!("cannot open the proxy log {}: {e}", log.display()))
    })?;
    let mut command = Command::new(exe);
    command
        .arg("proxy")
        .arg("--port")
        .arg(port.to_string())
        .args(extra)
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err);
    #[cfg(unix)]
    {
        // Its own process group: Ctrl-C in the agent's terminal does not stop the proxy.
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .map_err(|e| WrapError::Proxy(format!("cannot start `{} proxy`: {e}", exe.display())))?;
    let pid = child.id();
    wait_ready(&mut child, port, log, wait)?;
    Ok(Started {
        pid,
        log: log.to_path_buf(),
    })
}

fn wait_ready(child: &mut Child, port: u16, log: &Path, wait: Duration) -> Result<(), WrapError> {
    let deadline = Instant::now() + wait;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(5).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(WrapError::Proxy(format!(
                "the proxy exited ({status}) before listening on 127.0.0.1:{port}: {}",
                tail.join(" / ")
            )));
        }
        if probe(port) == Probe::Svc {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(WrapError::Proxy(format!(
                "the proxy did not answer on 127.0.0.1:{port} within {} s (log: {}); it was stopped",
                wait.as_secs(),
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
