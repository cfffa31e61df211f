//! The three provider styles: which request parts are text, what a response says, and each
//! provider's own error shape (so a client SDK raises its usual error type on a proxy error).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use super::optimize::Unit;
use super::spans::Path;
use super::{anthropic, gemini, openai};

/// A provider style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    Anthropic,
    Openai,
    Gemini,
}

/// A route the proxy understands (anything else under `/v1` or `/v1beta` is passed through).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// `POST /v1/messages`
    AnthropicMessages,
    /// `POST /v1/chat/completions`
    OpenaiChat,
    /// `POST /v1/responses`
    OpenaiResponses,
    /// `POST /v1beta/models/{model}:generateContent` or `:streamGenerateContent`
    GeminiGenerate,
    /// Any other path of a provider: forwarded unchanged.
    Passthrough(Provider),
}

impl Route {
    pub fn provider(self) -> Provider {
        match self {
            Route::AnthropicMessages => Provider::Anthropic,
            Route::OpenaiChat | Route::OpenaiResponses => Provider::Openai,
            Route::GeminiGenerate => Provider::Gemini,
            Route::Passthrough(provider) => provider,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Route::AnthropicMessages => "anthropic.messages",
            Route::OpenaiChat => "openai.chat_completions",
            Route::OpenaiResponses => "openai.responses",
            Route::GeminiGenerate => "gemini.generate_content",
            Route::Passthrough(Provider::Anthropic) => "anthropic.passthrough",
            Route::Passthrough(Provider::Openai) => "openai.passthrough",
            Route::Passthrough(Provider::Gemini) => "gemini.passthrough",
        }
    }

    /// The text parts of a request body, or why it cannot be rewritten safely.
    pub fn units(self, request: &Value) -> Result<Vec<Unit>, String> {
        match self {
            Route::AnthropicMessages => anthropic::units(request),
            Route::OpenaiChat => openai::chat_units(request),
            Route::OpenaiResponses => openai::responses_units(request),
            Route::GeminiGenerate => gemini::units(request),
            Route::Passthrough(_) => Ok(Vec::new()),
        }
    }

    /// The answer in a non-streaming response body.
    pub fn answer(self, response: &Value) -> Answer {
        match self {
            Route::AnthropicMessages => anthropic::answer(response),
            Route::OpenaiChat => openai::chat_answer(response),
            Route::OpenaiResponses => openai::responses_answer(response),
            Route::GeminiGenerate => gemini::answer(response),
            Route::Passthrough(_) => Answer::default(),
        }
    }

    /// The answer carried by the `data:` payloads of a streamed response.
    pub fn stream_answer(self, events: &[Value]) -> Answer {
        match self {
            Route::AnthropicMessages => anthropic::stream_answer(events),
            Route::OpenaiChat => openai::chat_stream_answer(events),
            Route::OpenaiResponses => openai::responses_stream_answer(events),
            Route::GeminiGenerate => gemini::stream_answer(events),
            Route::Passthrough(_) => Answer::default(),
        }
    }
}

/// What a response says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// All answer text, in order.
    pub text: String,
    /// Where the text sits, when it is one string the proxy may rewrite.
    pub single_part: Option<Path>,
    /// Tool calls, JSON mode or structured output: audited only, never rewritten.
    pub structured: bool,
    /// A streamed answer whose text spans several choices, candidates or content blocks:
    /// which one a removed claim came from is not knowable, so it is audited only.
    pub several: bool,
}

impl Answer {
    /// A streamed answer from the text of each choice, candidate or block, in order.
    pub fn from_streamed(texts: Vec<String>, structured: bool) -> Answer {
        Answer {
            several: texts.len() > 1,
            text: texts.join("\n"),
            single_part: None,
            structured,
        }
    }

    /// Collects text parts: one part is rewritable, several are audited only.
    pub fn from_parts(parts: Vec<(Path, String)>, structured: bool) -> Answer {
        let single_part = (parts.len() == 1).then(|| parts[0].0.clone());
        Answer {
            text: parts
                .into_iter()
                .map(|(_, text)| text)
                .collect::<Vec<_>>()
                .join("\n"),
            single_part,
            structured,
            several: false,
        }
    }
}

/// A proxy-side failure, answered in the provider's error shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Malformed JSON or a body that is not a request of this route.
    InvalidRequest,
    /// Content type other than JSON.
    UnsupportedMediaType,
    /// Body over the documented limit.
    TooLarge,
    /// No such route.
    NotFound,
    /// A route that exists, asked with a method it does not serve.
    MethodNotAllowed,
    /// The upstream could not be reached or broke the connection.
    BadGateway,
    /// The upstream answered, but its body broke off before its end.
    IncompleteAnswer,
    /// The upstream did not answer within the timeout.
    GatewayTimeout,
    /// The upstream answered encoded (gzip, …) though asked for no encoding, and strict mode
    /// cannot check what it cannot read.
    EncodedAnswer,
}

impl ErrorKind {
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::InvalidRequest => StatusCode::BAD_REQUEST,
            ErrorKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorKind::BadGateway | ErrorKind::IncompleteAnswer | ErrorKind::EncodedAnswer => {
                StatusCode::BAD_GATEWAY
            }
            ErrorKind::GatewayTimeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    fn anthropic_type(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest
            | ErrorKind::UnsupportedMediaType
            | ErrorKind::MethodNotAllowed => "invalid_request_error",
            ErrorKind::TooLarge => "request_too_large",
            ErrorKind::NotFound => "not_found_error",
            ErrorKind::BadGateway
            | ErrorKind::IncompleteAnswer
            | ErrorKind::GatewayTimeout
            | ErrorKind::EncodedAnswer => "api_error",
        }
    }

    fn openai_type(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest
            | ErrorKind::UnsupportedMediaType
            | ErrorKind::TooLarge
            | ErrorKind::MethodNotAllowed => "invalid_request_error",
            ErrorKind::NotFound => "not_found_error",
            ErrorKind::BadGateway
            | ErrorKind::IncompleteAnswer
            | ErrorKind::GatewayTimeout
            | ErrorKind::EncodedAnswer => "server_error",
        }
    }

    fn gemini_status(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest
            | ErrorKind::UnsupportedMediaType
            | ErrorKind::TooLarge
            | ErrorKind::MethodNotAllowed => "INVALID_ARGUMENT",
            ErrorKind::NotFound => "NOT_FOUND",
            ErrorKind::BadGateway | ErrorKind::IncompleteAnswer | ErrorKind::EncodedAnswer => {
                "UNAVAILABLE"
            }
            ErrorKind::GatewayTimeout => "DEADLINE_EXCEEDED",
        }
    }
}

/// A proxy-side error for one provider.
#[derive(Debug, Clone)]
pub struct ProxyError {
    pub provider: Provider,
    pub kind: ErrorKind,
    pub message: String,
}

impl ProxyError {
    pub fn new(provider: Provider, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            provider,
            kind,
            message: format!("svc proxy: {}", message.into()),
        }
    }

    /// The provider-shaped JSON body.
    pub fn body(&self) -> Value {
        match self.provider {
            Provider::Anthropic => json!({
                "type": "error",
                "error": {"type": self.kind.anthropic_type(), "message": self.message},
            }),
            Provider::Openai => json!({
                "error": {
                    "message": self.message,
                    "type": self.kind.openai_type(),
                    "param": null,
                    "code": null,
                },
            }),
            Provider::Gemini => json!({
                "error": {
                    "code": self.kind.status().as_u16(),
                    "message": self.message,
                    "status": self.kind.gemini_status(),
                },
            }),
        }
    }
}

/// Marks an answer the proxy wrote itself (never one passed through from the upstream), so a
/// client can tell "the provider said 502" from "svc could not reach the provider".
pub const HEADER_ERROR: &str = "x-svc-error";

impl ErrorKind {
    /// The `X-Svc-Error` value.
    pub fn wire(self) -> &'static str {
        match self {
            ErrorKind::InvalidRequest => "invalid_request",
            ErrorKind::UnsupportedMediaType => "unsupported_media_type",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::NotFound => "not_found",
            ErrorKind::MethodNotAllowed => "method_not_allowed",
            ErrorKind::BadGateway => "upstream_unreachable",
            ErrorKind::IncompleteAnswer => "upstream_incomplete",
            ErrorKind::EncodedAnswer => "upstream_encoded",
            ErrorKind::GatewayTimeout => "upstream_timeout",
        }
    }
}

impl IntoResponse for ProxyError {
    fn into_response(self) -> Response {
        (
            self.kind.status(),
            [(HEADER_ERROR, self.kind.wire())],
            axum::Json(self.body()),
        )
            .into_response()
    }
}
