//! The MCP server: one tool, Gemini CLI's `ask_user` under the name `--tool-name` gives, whose
//! calls are asked through askbusd. Maps each way a call can end onto an MCP tool result.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use askbus::client::new_correlation_id;
use askbus::protocol::{ErrorCode, ProducerResponse};

use super::call::{self, Ended, Policy};
use super::tool;

/// How long a call waits for the client's `roots/list` answer.
const ROOTS_TIMEOUT: Duration = Duration::from_secs(2);

/// What a progress notification says while the question waits.
const PROGRESS_MESSAGE: &str = "Waiting for the user to answer";

pub struct AskUserServer {
    socket: PathBuf,
    policy: Policy,
    structured_content: bool,
    /// `None`: send no progress notifications.
    progress_every: Option<Duration>,
    /// Cancelled when the client closes stdin: its pending questions are withdrawn at once
    /// rather than when rmcp stops waiting for their handlers.
    client_gone: CancellationToken,
    tool: Tool,
}

impl AskUserServer {
    pub fn new(
        socket: PathBuf,
        policy: Policy,
        structured_content: bool,
        progress_every: Option<Duration>,
        client_gone: CancellationToken,
        tool_name: &str,
    ) -> Self {
        AskUserServer {
            socket,
            policy,
            structured_content,
            progress_every,
            client_gone,
            tool: tool::ask_user(tool_name),
        }
    }

    async fn ask_user(
        &self,
        arguments: Option<&Map<String, Value>>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let client = context
            .client_info()
            .and_then(|info| call::client_name(&info.name, &info.version));
        let id = new_correlation_id();
        let info = context.client_info();
        let who = call::context(
            |name| std::env::var(name).ok(),
            info.as_ref()
                .map(|info| (info.name.as_str(), info.version.as_str())),
            self.first_root(context)
                .await
                .as_ref()
                .map(|(u, n)| (u.as_str(), n.as_deref())),
            std::env::current_dir().ok().as_deref(),
        );
        let request = call::request_frame(&id, arguments, self.policy, Some(&who));
        let withdraw = CancellationToken::new();
        let timeout_ms = OnceLock::new();
        let asked = call::ask(
            &self.socket,
            client.as_deref(),
            request,
            &id,
            &withdraw,
            self.policy,
            &timeout_ms,
        );
        tokio::pin!(asked);
        // Progress keeps clients that reset their request timeout on progress waiting for
        // as long as the person takes; only clients that asked for it (a progressToken) get it.
        let progress_token = context.meta.get_progress_token();
        let mut ticks = match (self.progress_every, &progress_token) {
            (Some(every), Some(_)) => Some(tokio::time::interval_at(Instant::now() + every, every)),
            _ => None,
        };
        let started = Instant::now();
        let ended = loop {
            tokio::select! {
                ended = &mut asked => break ended,
                // notifications/cancelled for this call (the SDK's request timeouts send it too).
                _ = context.ct.cancelled(), if !withdraw.is_cancelled() => withdraw.cancel(),
                _ = self.client_gone.cancelled(), if !withdraw.is_cancelled() => withdraw.cancel(),
                _ = async { ticks.as_mut().expect("guarded").tick().await }, if ticks.is_some() => {
                    let token = progress_token.clone().expect("ticks only with a token");
                    // Seconds waited, to the millisecond: strictly increasing, as MCP requires;
                    // out of the seconds the question may wait, so clients draw a real bar.
                    let waited = started.elapsed().as_millis() as f64 / 1000.0;
                    let mut note = ProgressNotificationParam::new(token, waited)
                        .with_message(PROGRESS_MESSAGE);
                    if let Some(ms) = timeout_ms.get() {
                        note = note.with_total(*ms as f64 / 1000.0);
                    }
                    // A client gone or not listening is no reason to stop waiting.
                    if let Err(e) = context.peer.notify_progress(note).await {
                        tracing::debug!(error = %e, "cannot send progress");
                    }
                }
            }
        };
        match ended {
            Ok(Ended::Response(r)) => self.result(r),
            Ok(Ended::Refused(e)) if e.code == ErrorCode::InvalidRequest.as_str() => {
                // The reference's validation message, exactly as the reference tool reports it.
                CallToolResult::error(vec![ContentBlock::text(e.message)])
            }
            Ok(Ended::Refused(e)) => CallToolResult::error(vec![ContentBlock::text(format!(
                "askbusd refused the question: {}: {}",
                e.code, e.message
            ))]),
            Err(e) => {
                tracing::warn!(error = %e, "ask_user call failed");
                CallToolResult::error(vec![ContentBlock::text(e.to_string())])
            }
        }
    }

    /// The client's first root (`roots/list`), when it offers roots: where the agent works.
    /// A client that does not answer in time is treated as having none. (Roots are deprecated
    /// by a newer MCP revision, but the clients people run today offer them.)
    #[allow(deprecated)]
    async fn first_root(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Option<(String, Option<String>)> {
        let offers = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !offers {
            return None;
        }
        let listed = tokio::time::timeout(ROOTS_TIMEOUT, context.peer.list_roots()).await;
        match listed {
            Ok(Ok(list)) => list
                .roots
                .into_iter()
                .find(|r| r.uri.starts_with("file://"))
                .map(|r| (r.uri, r.name)),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "roots/list failed");
                None
            }
            Err(_) => None,
        }
    }

    /// Every outcome the daemon reports with a result is a normal tool result whose text is
    /// that result's llmContent: the model reads dismissed, timeout and no-ui as the answer.
    fn result(&self, r: ProducerResponse) -> CallToolResult {
        let structured = self.structured_content.then(|| {
            let answers: Map<String, Value> = r
                .answers
                .iter()
                .map(|(i, a)| (i.to_string(), Value::String(a.clone())))
                .collect();
            json!({
                "answers": answers,
                "cancelled": r.cancelled,
                "reason": r.reason.as_str(),
                "returnDisplay": r.result.return_display,
            })
        });
        let mut result = CallToolResult::success(vec![ContentBlock::text(r.result.llm_content)]);
        result.structured_content = structured;
        result
    }
}

impl ServerHandler for AskUserServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("askbus", env!("CARGO_PKG_VERSION")).with_title("askbus"),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != self.tool.name {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {:?}; this server has only {:?}",
                    request.name, self.tool.name
                ),
                None,
            ));
        }
        Ok(self
            .ask_user(request.arguments.as_ref(), &context)
            .await
            .into())
    }
}
