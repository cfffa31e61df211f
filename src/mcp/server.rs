//! The MCP server handler: `tools/list` from [`ToolName::ALL`], `tools/call` dispatched to the
//! [`Toolbox`] on the blocking pool.
//!
//! Errors: a call whose arguments are wrong, or whose tool fails (budget too small, unknown
//! session, tampered commit…), returns a tool result with `isError: true` and the message, so
//! the calling model can read it and correct itself; the server keeps serving. Only an unknown
//! tool name is a JSON-RPC error (invalid params), since there is no tool to report it.

use std::path::Path;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use super::tools::{ToolName, Toolbox};

const INSTRUCTIONS: &str = "svc keeps prompts small without losing evidence. select_context picks what to send from a repository for a query within a token budget; compress and compress_messages shrink one text or a conversation; every omitted or elided chunk stays exactly recoverable with recover_chunk(ctx_id, chunk_id). verify_answer checks an answer against its evidence. The proof-guided tools run the fixed-point loop one model call at a time: prepare_proof_guided_context, then advance_proof_guided_context with each draft until the state is finished. Everything runs locally; no tool calls a model or the network.";

/// The svc tool server over one state directory. Clones share the toolbox (and its indexes).
#[derive(Clone)]
pub struct SvcServer {
    toolbox: Arc<Toolbox>,
    tools: Arc<Vec<Tool>>,
}

impl SvcServer {
    /// A server keeping commits, sessions, certificates and indexes under `home`.
    pub fn new(home: &Path) -> Self {
        Self {
            toolbox: Arc::new(Toolbox::new(home)),
            tools: Arc::new(tool_list()),
        }
    }

    /// The state directory.
    pub fn home(&self) -> &Path {
        self.toolbox.home()
    }
}

/// Every tool with its description and input schema.
pub fn tool_list() -> Vec<Tool> {
    ToolName::ALL
        .iter()
        .map(|tool| {
            // The schemas are derived from this crate's argument types; a type that did not
            // describe an object would fail the unit tests, so it never reaches a client.
            let schema = tool.input_schema().unwrap_or_default();
            Tool::new(tool.as_str(), tool.description(), schema)
        })
        .collect()
}

fn unknown_tool(name: &str) -> ErrorData {
    let names: Vec<&str> = ToolName::ALL.iter().map(|t| t.as_str()).collect();
    ErrorData::invalid_params(
        format!(
            "unknown tool {name:?}; svc serves {} (tools/list gives their schemas)",
            names.join(", ")
        ),
        None,
    )
}

/// Methods of the protocol this server answers: one that reaches the custom-request handler
/// did so because its params did not fit the method.
const SERVED_METHODS: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

/// The JSON-RPC error for a request rmcp could not read as one of its methods: invalid params
/// naming what the method takes when the method is one this server serves (rmcp answered
/// "method not found: tools/call" for a call whose `arguments` was a list), else method not
/// found listing them.
fn unreadable_request(request: &CustomRequest) -> ErrorData {
    let method = request.method.as_str();
    if !SERVED_METHODS.contains(&method) {
        return ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!(
                "unknown method {method:?}; svc serves {}",
                SERVED_METHODS.join(", ")
            ),
            None,
        );
    }
    let shape = match method {
        "tools/call" => {
            r#"{"name": "<tool>", "arguments": {…}} (an object; arguments, when given, an object)"#
        }
        "tools/list" => r#"{"cursor"?: "<string>"} or nothing"#,
        "initialize" => r#"{"protocolVersion", "capabilities", "clientInfo": {"name", "version"}}"#,
        _ => "an object or nothing",
    };
    let got = match &request.params {
        None => "none".to_string(),
        Some(params) => {
            let text = params.to_string();
            let shown: String = text.chars().take(120).collect();
            if shown.len() < text.len() {
                format!("{shown}…")
            } else {
                shown
            }
        }
    };
    ErrorData::invalid_params(format!("{method} takes params {shape}; got {got}"), None)
}

impl ServerHandler for SvcServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("svc", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(unreadable_request(&request))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = ToolName::from_name(&request.name).ok_or_else(|| unknown_tool(&request.name))?;
        let arguments = request.arguments.unwrap_or_default();
        let toolbox = self.toolbox.clone();
        let outcome = tokio::task::spawn_blocking(move || toolbox.call(tool, arguments)).await;
        let result = match outcome {
            Ok(Ok(value)) => CallToolResult::structured(value),
            Ok(Err(error)) => CallToolResult::error(vec![ContentBlock::text(format!(
                "{tool}: {}",
                error_chain(&error)
            ))]),
            // A panic in a tool is a bug; the caller hears of it and the server goes on.
            Err(join) => CallToolResult::error(vec![ContentBlock::text(format!(
                "{tool}: internal error ({join}); please report it"
            ))]),
        };
        Ok(result.into())
    }
}

/// The error and its causes, `: `-joined (as the CLI prints them).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // Transparent wrappers repeat their cause's message.
        if !message.ends_with(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}
