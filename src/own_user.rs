//! svc's servers (proxy, dashboard, run viewer, MCP over HTTP) serve the user who started them.
//!
//! They bind 127.0.0.1, which every local user can reach: on a shared machine another user's
//! process could read through them what only this user may read (an MCP `select_context` of a
//! private folder, committed prompts, certificates) or stop the daemon (found by probing). On
//! Linux the kernel says who owns each end of a loopback connection (`/proc/net/tcp{,6}`: the
//! client socket's `uid`); [`OwnUserListener`] closes connections whose client belongs to
//! another user (root excepted, who can read everything anyway). Where the owner cannot be
//! found (another OS, a client already gone), the connection is served as before. Accepted
//! sockets also get `TCP_NODELAY`.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::{TcpListener, TcpStream};

/// A listener that accepts only connections from this process's user (and root).
#[derive(Debug)]
pub struct OwnUserListener {
    inner: TcpListener,
    uid: Option<u32>,
    refused: Arc<AtomicU64>,
}

impl OwnUserListener {
    pub fn new(inner: TcpListener) -> Self {
        Self {
            inner,
            uid: own_uid(),
            refused: Arc::default(),
        }
    }

    /// Connections closed because another user opened them, since start.
    pub fn refused(&self) -> Arc<AtomicU64> {
        self.refused.clone()
    }
}

impl axum::serve::Listener for OwnUserListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, remote) = axum::serve::Listener::accept(&mut self.inner).await;
            // Answers go out in several writes (headers, body chunks); with Nagle's algorithm
            // on, the last one waited for the client's delayed ACK: +40 ms per request on a
            // kept-alive connection (found by `svc bench --group proxy`).
            let _ = stream.set_nodelay(true);
            let Some(own) = self.uid else {
                return (stream, remote);
            };
            let owner = stream
                .local_addr()
                .ok()
                .and_then(|local| client_owner(remote, local));
            match owner {
                Some(uid) if uid != own && uid != 0 => {
                    self.refused.fetch_add(1, Ordering::Relaxed);
                    drop(stream);
                }
                _ => return (stream, remote),
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// The user this process runs as.
fn own_uid() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").ok().map(|m| m.uid())
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// The user owning the client end of a connection from `remote` to `local`.
fn client_owner(remote: SocketAddr, local: SocketAddr) -> Option<u32> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .into_iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .find_map(|text| owner_in_table(&text, remote, local))
}

/// In a `/proc/net/tcp{,6}` table, the `uid` of the socket whose own address is `remote` and
/// whose peer is `local` (the client's view of the connection).
pub fn owner_in_table(text: &str, remote: SocketAddr, local: SocketAddr) -> Option<u32> {
    text.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (own, peer, uid) = (fields.get(1)?, fields.get(2)?, fields.get(7)?);
        let same = |field: &str, address: SocketAddr| {
            parse_endpoint(field)
                .is_some_and(|(ip, port)| port == address.port() && same_ip(ip, address.ip()))
        };
        (same(own, remote) && same(peer, local))
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): each 32-bit word is printed in
/// the host's byte order.
fn parse_endpoint(field: &str) -> Option<(IpAddr, u16)> {
    let (address, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<[u8; 4]> = (0..address.len() / 8)
        .map(|i| u32::from_str_radix(address.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<Vec<u32>>>()?
        .into_iter()
        .map(u32::to_ne_bytes)
        .collect();
    let ip = match words.as_slice() {
        [v4] => IpAddr::V4(Ipv4Addr::from(*v4)),
        [a, b, c, d] => {
            let mut octets = [0u8; 16];
            for (i, word) in [a, b, c, d].into_iter().enumerate() {
                octets[i * 4..i * 4 + 4].copy_from_slice(word);
            }
            IpAddr::V6(Ipv6Addr::from(octets))
        }
        _ => return None,
    };
    Some((ip, port))
}

/// Equal, reading an IPv4-mapped IPv6 address as its IPv4 address.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    let plain = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    plain(a) == plain(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_end_of_a_loopback_connection_is_found_with_its_owner() {
        // Two ends of 127.0.0.1:40000 → 127.0.0.1:9377 and a listener (little-endian words,
        // as x86 and ARM print them).
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:24A1 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:9C40 0100007F:24A1 01 00000000:00000000 00:00000000 00000000  1001        0 2 1 0000000000000000 20 4 30 10 -1\n\
   2: 0100007F:24A1 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 20 4 30 10 -1\n";
        if cfg!(target_endian = "little") {
            let client: SocketAddr = "127.0.0.1:40000".parse().expect("address");
            let server: SocketAddr = "127.0.0.1:9377".parse().expect("address");
            assert_eq!(owner_in_table(table, client, server), Some(1001));
            assert_eq!(owner_in_table(table, server, client), Some(1000));
            let other: SocketAddr = "127.0.0.1:40001".parse().expect("address");
            assert_eq!(owner_in_table(table, other, server), None);
        }
        let mapped = "0000000000000000FFFF00000100007F:1F90";
        if cfg!(target_endian = "little") {
            let (ip, port) = parse_endpoint(mapped).expect("endpoint");
            assert_eq!(port, 8080);
            assert!(same_ip(ip, "127.0.0.1".parse().expect("ip")), "{ip}");
        }
    }

    /// Asks the server on `port` for a page from python3, as this user or as `nobody`; whether
    /// the answer came.
    fn served(port: u16, as_nobody: bool) -> std::io::Result<bool> {
        use std::os::unix::process::CommandExt;
        let client = format!(
            "import socket\ns = socket.create_connection(('127.0.0.1', {port}))\ns.sendall(b'GET / HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n')\nprint(b'served' in s.recv(4096))"
        );
        let mut command = std::process::Command::new("python3");
        command.args(["-c", &client]);
        if as_nobody {
            command.uid(65534).gid(65534);
        }
        let output = command.output()?;
        // A closed connection is an empty read, or an error before it (no "True" either way).
        Ok(String::from_utf8_lossy(&output.stdout).trim() == "True")
    }

    /// A client of another user is closed at accept; one of this user is served. Needs root
    /// (to start the other user's client) and python3; skipped, saying why, otherwise.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_of_another_user_is_closed_and_one_of_this_user_is_served() {
        if own_uid() != Some(0) {
            eprintln!("skipped: not root, cannot start a client as another user");
            return;
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let listener = OwnUserListener::new(listener);
        let refused = listener.refused();
        let router = axum::Router::new().fallback(|| async { "served" });
        tokio::spawn(async move { axum::serve(listener, router).await });
        let ask = |as_nobody| tokio::task::spawn_blocking(move || served(port, as_nobody));
        let Ok(own) = ask(false).await.expect("join") else {
            eprintln!("skipped: python3 is not on PATH");
            return;
        };
        assert!(own, "this user is served");
        assert!(
            !ask(true).await.expect("join").expect("python3 runs"),
            "nobody is not"
        );
        assert_eq!(refused.load(Ordering::Relaxed), 1);
    }

    /// On this machine, a connection this process opens is its own user's, and is served.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_connection_of_this_user_is_accepted_and_its_owner_is_this_user() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let mut own = OwnUserListener::new(listener);
        let client = tokio::spawn(async move { TcpStream::connect(address).await });
        let (stream, remote) = axum::serve::Listener::accept(&mut own).await;
        let local = stream.local_addr().expect("local");
        assert_eq!(client_owner(remote, local), own_uid());
        assert_eq!(own.refused().load(Ordering::Relaxed), 0);
        drop(client.await.expect("join"));
    }
}
