//! Who may call the proxy's own routes, the proof sidecar (SPEC §4.4: "only trusted same-origin
//! localhost clients"), the witness sidecar and the optimisation switch:
//! a caller on the loopback interface, naming the proxy by a loopback host and the proxy's own
//! port, and, when it is a browser, from the proxy's own origin.
//!
//! Each check closes a different hole. The peer address stops other machines (the proxy binds
//! 127.0.0.1, but a port forward or a future bind flag must not open the sidecar). The Host
//! check stops DNS rebinding: a page on `evil.example` whose name is re-pointed at 127.0.0.1
//! reaches the socket with `Host: evil.example:9377`. The Origin check stops a page on another
//! origin (even another localhost port) from posting to the sidecar: browsers send `Origin` on
//! cross-origin POSTs and on every `fetch`; tools such as curl and SDKs send none.

use std::net::{IpAddr, SocketAddr};

use axum::extract::connect_info::Connected;
use axum::http::{HeaderMap, header};
use axum::serve::IncomingStream;
use tokio::net::TcpListener;

use crate::own_user::OwnUserListener;

/// The two ends of an accepted connection, recorded by the server for every request (serve the
/// app with [`super::server::make_service`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The caller's address.
    pub remote: SocketAddr,
    /// The proxy's own address on that connection (its port is the one Host must name).
    pub local: Option<SocketAddr>,
}

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Peer {
            remote: *stream.remote_addr(),
            local: stream.io().local_addr().ok(),
        }
    }
}

impl Connected<IncomingStream<'_, OwnUserListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, OwnUserListener>) -> Self {
        Peer {
            remote: *stream.remote_addr(),
            local: stream.io().local_addr().ok(),
        }
    }
}

/// Why a caller was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "the caller's address is unknown (the app was served without connection info); the proxy's own routes only answer loopback callers"
    )]
    UnknownPeer,
    #[error(
        "the caller {0} is not on the loopback interface; the proxy's own routes only answer 127.0.0.1 and ::1"
    )]
    RemotePeer(IpAddr),
    #[error("the request has no Host header; send Host: 127.0.0.1:{port}")]
    MissingHost { port: u16 },
    #[error(
        "Host {host:?} is not this proxy (localhost, 127.0.0.1 or [::1] with port {port}); a different name is how DNS rebinding reaches a local port, so it is refused"
    )]
    ForeignHost { host: String, port: u16 },
    #[error(
        "Origin {origin:?} is not this proxy's origin (http://localhost:{port}, http://127.0.0.1:{port} or http://[::1]:{port}); cross-origin pages may not call the proxy's own routes"
    )]
    ForeignOrigin { origin: String, port: u16 },
    #[error("Sec-Fetch-Site is {0:?}: a browser says the request comes from another site")]
    CrossSiteFetch(String),
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether `authority` (a Host value or the host:port of an origin) names this proxy: a
/// loopback name with `port` (no port only when the proxy listens on 80, as clients omit it).
fn is_local_authority(authority: &str, port: u16) -> bool {
    let authority = authority.to_ascii_lowercase();
    ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .any(|name| authority == format!("{name}:{port}") || (port == 80 && authority == *name))
}

/// Checks the peer, Host, Origin and Sec-Fetch-Site of a request to the proof sidecar.
pub fn check(peer: Option<&Peer>, headers: &HeaderMap) -> Result<(), Refusal> {
    let peer = peer.ok_or(Refusal::UnknownPeer)?;
    if !is_loopback(peer.remote.ip()) {
        return Err(Refusal::RemotePeer(peer.remote.ip()));
    }
    // Without the local address the port cannot be checked: refuse rather than guess.
    let port = peer.local.ok_or(Refusal::UnknownPeer)?.port();
    let host = headers
        .get(header::HOST)
        .ok_or(Refusal::MissingHost { port })?;
    let host = host.to_str().unwrap_or_default();
    if !is_local_authority(host, port) {
        return Err(Refusal::ForeignHost {
            host: host.to_string(),
            port,
        });
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let same = origin
            .strip_prefix("http://")
            .is_some_and(|authority| is_local_authority(authority, port));
        if !same {
            return Err(Refusal::ForeignOrigin {
                origin: origin.to_string(),
                port,
            });
        }
    }
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or_default();
        if !matches!(site, "same-origin" | "none") {
            return Err(Refusal::CrossSiteFetch(site.to_string()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(remote: &str) -> Peer {
        Peer {
            remote: remote.parse().expect("test address"),
            local: Some("127.0.0.1:9377".parse().expect("test address")),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("test header"));
        }
        map
    }

    #[test]
    fn loopback_callers_naming_this_proxy_pass() {
        for host in [
            "127.0.0.1:9377",
            "localhost:9377",
            "LOCALHOST:9377",
            "[::1]:9377",
        ] {
            assert_eq!(
                check(Some(&peer("127.0.0.1:5000")), &headers(&[("host", host)])),
                Ok(())
            );
        }
        assert_eq!(
            check(
                Some(&peer("[::ffff:127.0.0.1]:5000")),
                &headers(&[
                    ("host", "127.0.0.1:9377"),
                    ("origin", "http://localhost:9377"),
                    ("sec-fetch-site", "same-origin")
                ])
            ),
            Ok(())
        );
    }

    #[test]
    fn every_hole_is_refused_by_name() {
        let local = peer("127.0.0.1:5000");
        let ok_host = ("host", "127.0.0.1:9377");
        assert_eq!(check(None, &headers(&[ok_host])), Err(Refusal::UnknownPeer));
        assert!(matches!(
            check(Some(&peer("10.0.0.7:5000")), &headers(&[ok_host])),
            Err(Refusal::RemotePeer(_))
        ));
        assert!(matches!(
            check(Some(&local), &headers(&[])),
            Err(Refusal::MissingHost { port: 9377 })
        ));
        for host in [
            "evil.example:9377",
            "127.0.0.1:9378",
            "127.0.0.1",
            "127.0.0.1.evil.example:9377",
        ] {
            assert!(
                matches!(
                    check(Some(&local), &headers(&[("host", host)])),
                    Err(Refusal::ForeignHost { .. })
                ),
                "{host}"
            );
        }
        for origin in [
            "http://evil.example",
            "http://localhost:3000",
            "null",
            "https://127.0.0.1:9377",
        ] {
            assert!(
                matches!(
                    check(Some(&local), &headers(&[ok_host, ("origin", origin)])),
                    Err(Refusal::ForeignOrigin { .. })
                ),
                "{origin}"
            );
        }
        assert!(matches!(
            check(
                Some(&local),
                &headers(&[ok_host, ("sec-fetch-site", "cross-site")])
            ),
            Err(Refusal::CrossSiteFetch(_))
        ));
    }
}
