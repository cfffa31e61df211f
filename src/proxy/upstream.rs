//! Forwarding to the providers: one pooled reqwest client, the request path appended to the
//! provider's root URL as received, headers passed through (auth included) except hop-by-hop
//! ones, bodies streamed back.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, Method, header};

use super::provider::{ErrorKind, Provider, ProxyError};

/// Environment variables naming the upstream roots.
pub const ENV_ANTHROPIC: &str = "SVC_UPSTREAM_ANTHROPIC";
pub const ENV_OPENAI: &str = "SVC_UPSTREAM_OPENAI";
pub const ENV_GEMINI: &str = "SVC_UPSTREAM_GEMINI";

/// The providers' public API roots.
pub const DEFAULT_ANTHROPIC: &str = "https://api.anthropic.com";
pub const DEFAULT_OPENAI: &str = "https://api.openai.com";
pub const DEFAULT_GEMINI: &str = "https://generativelanguage.googleapis.com";

/// Time to open a connection to an upstream.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest silence between two reads of an upstream response (headers or body) before the
/// proxy gives up: long enough for a slow first token of a large model, short enough that no
/// client hangs forever on a dead upstream.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// The root URL of each provider (`http://127.0.0.1:8000`, no trailing path needed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstreams {
    pub anthropic: String,
    pub openai: String,
    pub gemini: String,
}

impl Default for Upstreams {
    fn default() -> Self {
        Self {
            anthropic: DEFAULT_ANTHROPIC.to_string(),
            openai: DEFAULT_OPENAI.to_string(),
            gemini: DEFAULT_GEMINI.to_string(),
        }
    }
}

impl Upstreams {
    pub fn root(&self, provider: Provider) -> &str {
        match provider {
            Provider::Anthropic => &self.anthropic,
            Provider::Openai => &self.openai,
            Provider::Gemini => &self.gemini,
        }
    }

    /// The upstream URL for a request path (with its query string) as received.
    pub fn url(&self, provider: Provider, path_and_query: &str) -> String {
        format!(
            "{}{}",
            self.root(provider).trim_end_matches('/'),
            path_and_query
        )
    }
}

/// Errors building the client.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the upstream HTTP client: {0}")]
pub struct ClientError(#[from] reqwest::Error);

/// The pooled client every request shares.
pub fn client(read_timeout: Duration) -> Result<reqwest::Client, ClientError> {
    crate::witness::nli::install_crypto_provider();
    Ok(reqwest::Client::builder()
        // A redirect goes back to the client as it came: following it would turn a POST into
        // a body-less GET answered as if it had worked, and send the API key to another host.
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(read_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(64)
        .build()?)
}

/// Headers that belong to one connection, not to the request (RFC 9110 §7.6.1), plus the ones
/// the proxy sets itself: `host` and `content-length` follow the forwarded body, and
/// `accept-encoding` is dropped so the upstream answers uncompressed and the witness can read it.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
            | "accept-encoding"
    )
}

/// The header names a `Connection` header lists: hop-by-hop for this one connection too
/// (RFC 9110 §7.6.1), so not forwarded.
fn connection_listed(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect()
}

/// Request headers to forward.
pub fn request_headers(headers: &HeaderMap) -> HeaderMap {
    let listed = connection_listed(headers);
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !is_hop_by_hop(name) && !listed.iter().any(|l| l == name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Response headers to return to the client.
pub fn response_headers(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !is_hop_by_hop(name) || name == header::CONTENT_LENGTH {
            out.append(name.clone(), value.clone());
        }
    }
    out.remove(header::CONTENT_LENGTH);
    out
}

/// Sends one request upstream; errors come back in the provider's shape.
pub async fn send(
    client: &reqwest::Client,
    provider: Provider,
    url: &str,
    method: Method,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<reqwest::Response, ProxyError> {
    client
        .request(method, url)
        .headers(request_headers(headers))
        .body(body)
        .send()
        .await
        .map_err(|error| describe(provider, url, &error))
}

/// `url` fit for a log line or an error message: credentials in it (`user:password@`) and the
/// values of query parameters that carry secrets (Gemini's `?key=`, `token`, `sig`, …) are
/// replaced by `REDACTED`. The proxy's stderr and its error bodies named them in full.
pub fn redact(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(at) => rest.split_at(at),
                None => (rest, ""),
            };
            match authority.rsplit_once('@') {
                Some((_, host)) => format!("{scheme}://REDACTED@{host}{path}"),
                None => base.to_string(),
            }
        }
        None => base.to_string(),
    };
    if let Some(query) = query {
        let secret = |name: &str| {
            let name = name.to_ascii_lowercase();
            ["key", "token", "secret", "sig", "password", "auth"]
                .iter()
                .any(|word| name.contains(word))
        };
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if secret(name) => format!("{name}=REDACTED"),
                _ => pair.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

/// The error and its causes, `: `-joined, with its URL redacted.
fn chain(error: &reqwest::Error) -> String {
    let mut chain = match error.url() {
        Some(url) => error
            .to_string()
            .replace(url.as_str(), &redact(url.as_str())),
        None => error.to_string(),
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        chain.push_str(": ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    chain
}

/// A provider-shaped error for an answer whose body failed after the upstream sent its status
/// `status`: the upstream was reached, so the message must not send the user to the
/// configuration.
pub fn describe_body(
    provider: Provider,
    url: &str,
    status: reqwest::StatusCode,
    error: &reqwest::Error,
) -> ProxyError {
    let chain = chain(error);
    if error.is_timeout() {
        return ProxyError::new(
            provider,
            ErrorKind::GatewayTimeout,
            format!(
                "the upstream {} answered {status} but its body stalled ({chain})",
                redact(url)
            ),
        );
    }
    ProxyError::new(
        provider,
        ErrorKind::IncompleteAnswer,
        format!(
            "the upstream {} answered {status} but its body broke off before its end ({chain}); retry the request",
            redact(url)
        ),
    )
}

/// A provider-shaped error for a failed upstream exchange.
pub fn describe(provider: Provider, url: &str, error: &reqwest::Error) -> ProxyError {
    let chain = chain(error);
    if error.is_timeout() {
        ProxyError::new(
            provider,
            ErrorKind::GatewayTimeout,
            format!(
                "the upstream {} did not answer in time ({chain})",
                redact(url)
            ),
        )
    } else {
        ProxyError::new(
            provider,
            ErrorKind::BadGateway,
            format!(
                "cannot reach the upstream {} ({chain}); check --upstream-* or the SVC_UPSTREAM_* variables",
                redact(url)
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (found by probing): Gemini's `?key=` and an upstream URL's `user:password@`
    /// were printed in full on stderr and in error bodies.
    /// Regression (found by probing): a header a `Connection` header lists was forwarded.
    #[test]
    fn headers_the_connection_header_lists_are_not_forwarded() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            "keep-alive, X-Drop-Me".parse().expect("value"),
        );
        headers.insert("x-drop-me", "1".parse().expect("value"));
        headers.insert("authorization", "Bearer K".parse().expect("value"));
        let forwarded = request_headers(&headers);
        assert!(forwarded.get("x-drop-me").is_none());
        assert!(forwarded.get(header::CONNECTION).is_none());
        assert_eq!(forwarded["authorization"], "Bearer K");
    }

    #[test]
    fn secrets_in_urls_are_redacted() {
        assert_eq!(
            redact("http://127.0.0.1:9/v1beta/models/g:generateContent?key=AIzaSECRET&alt=sse"),
            "http://127.0.0.1:9/v1beta/models/g:generateContent?key=REDACTED&alt=sse"
        );
        assert_eq!(
            redact("https://user:pass@gateway.example/openai?access_token=x"),
            "https://REDACTED@gateway.example/openai?access_token=REDACTED"
        );
        assert_eq!(
            redact("http://127.0.0.1:8080/v1/chat/completions"),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
    }
}
