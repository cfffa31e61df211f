//! Localhost only, same origin only.
//!
//! The app binds 127.0.0.1, but a web page in the user's browser can still reach it: through
//! DNS rebinding (a foreign name resolving to 127.0.0.1, caught by the Host check) or by posting
//! a form or a `fetch` cross-origin (caught by the Origin and `Sec-Fetch-Site` checks on every
//! state-changing request). Clients that send neither header (curl, scripts) are local
//! processes of the user and are allowed.

use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::control::error;

/// Whether `host` (a Host header value or an origin's authority, with or without port) names
/// the loopback interface.
pub fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                name
            } else {
                host
            }
        })
    };
    matches!(
        name.to_ascii_lowercase().as_str(),
        "127.0.0.1" | "localhost" | "::1"
    )
}

/// Why a request is refused, if it is.
pub fn refusal(method: &Method, headers: &HeaderMap) -> Option<String> {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if let Some(host) = host
        && !is_loopback_host(host)
    {
        return Some(format!(
            "Host {host:?} is not this machine's loopback address; the dashboard answers only http://127.0.0.1 or http://localhost"
        ));
    }
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        let same = match (authority, host) {
            (Some(authority), Some(host)) => authority.eq_ignore_ascii_case(host),
            _ => false,
        };
        if !same {
            return Some(format!(
                "cross-origin request refused: Origin {origin:?} is not this dashboard ({}); state-changing routes accept only the dashboard's own pages or clients without an Origin header",
                host.unwrap_or("no Host header")
            ));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && !matches!(site, "same-origin" | "none")
    {
        return Some(format!(
            "cross-origin request refused: Sec-Fetch-Site is {site:?}; state-changing routes accept only same-origin requests"
        ));
    }
    None
}

/// The middleware: 403 in the API's error shape for refused requests.
pub async fn guard(request: Request, next: Next) -> Response {
    if let Some(reason) = refusal(request.method(), request.headers()) {
        return error(StatusCode::FORBIDDEN, "forbidden", reason);
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn loopback_hosts_are_recognised_with_and_without_ports() {
        for host in [
            "127.0.0.1",
            "127.0.0.1:9378",
            "localhost:1",
            "LOCALHOST",
            "[::1]:9378",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "evil.example:9378",
            "127.0.0.2:9378",
            "10.0.0.1",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn foreign_hosts_are_refused_even_for_reads() {
        let h = headers(&[("host", "rebind.example:9378")]);
        assert!(refusal(&Method::GET, &h).is_some());
        let h = headers(&[("host", "127.0.0.1:9378")]);
        assert!(refusal(&Method::GET, &h).is_none());
    }

    #[test]
    fn state_changes_need_the_same_origin() {
        let same = headers(&[
            ("host", "127.0.0.1:9378"),
            ("origin", "http://127.0.0.1:9378"),
        ]);
        assert!(refusal(&Method::POST, &same).is_none());
        let other_port = headers(&[
            ("host", "127.0.0.1:9378"),
            ("origin", "http://127.0.0.1:3000"),
        ]);
        assert!(refusal(&Method::POST, &other_port).is_some());
        let foreign = headers(&[
            ("host", "127.0.0.1:9378"),
            ("origin", "https://evil.example"),
        ]);
        assert!(refusal(&Method::POST, &foreign).is_some());
        let null = headers(&[("host", "127.0.0.1:9378"), ("origin", "null")]);
        assert!(refusal(&Method::POST, &null).is_some());
        let cross_site = headers(&[("host", "127.0.0.1:9378"), ("sec-fetch-site", "cross-site")]);
        assert!(refusal(&Method::POST, &cross_site).is_some());
        let script = headers(&[("host", "127.0.0.1:9378")]);
        assert!(refusal(&Method::POST, &script).is_none());
        // Reads may come from anywhere on this machine (a page cannot read the answer anyway).
        assert!(refusal(&Method::GET, &foreign).is_none());
    }
}
