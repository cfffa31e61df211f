//! The command runner: an external program (no shell) gets the request as JSON on stdin and
//! writes `{"text": …, "usage": {"input_tokens": n, "output_tokens": n}, "id": …}` on stdout.

use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::AsyncWriteExt;

use super::spec::{RunnerSpec, RunnerSpecError};
use super::{ModelReply, ModelRequest, RunnerError};
use crate::digest;
use crate::trial::UsageSource;

pub struct CommandBackend {
    program: String,
    args: Vec<String>,
    timeout_ms: u64,
}

#[derive(Debug, Deserialize)]
struct CommandOutput {
    text: String,
    usage: Option<CommandUsage>,
    id: Option<String>,
}

#[derive(Debug, Deserialize)]
struct CommandUsage {
    input_tokens: u64,
    output_tokens: u64,
    #[serde(default)]
    reasoning_tokens: u64,
}

impl CommandBackend {
    pub fn new(spec: &RunnerSpec) -> Result<Self, RunnerSpecError> {
        let command = spec.command.clone().unwrap_or_default();
        let Some((program, args)) = command.split_first() else {
            return Err(RunnerSpecError::Setup {
                runner: spec.name.clone(),
                message: "command is empty".into(),
            });
        };
        Ok(Self {
            program: program.clone(),
            args: args.to_vec(),
            timeout_ms: spec.timeout_ms,
        })
    }

    pub async fn call(&self, request: &ModelRequest) -> Result<ModelReply, RunnerError> {
        let fail = |message: String| RunnerError::Command {
            program: self.program.clone(),
            message,
        };
        let input = serde_json::to_vec(request).map_err(|e| fail(e.to_string()))?;
        let mut child = tokio::process::Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // A group of its own, so a timeout also ends what the command started.
            .process_group(0)
            .spawn()
            .map_err(|e| fail(format!("cannot start: {e}")))?;
        // Killed with svc if svc is interrupted while the command runs, and on the timeout.
        let group = child.id().and_then(crate::child_groups::register);
        let mut stdin = child.stdin.take().ok_or_else(|| fail("no stdin".into()))?;
        let work = async move {
            // A program that exits without reading its input is its own error, reported below.
            let _ = stdin.write_all(&input).await;
            drop(stdin);
            child.wait_with_output().await
        };
        let output = tokio::time::timeout(Duration::from_millis(self.timeout_ms), work)
            .await
            .map_err(|_| {
                if let Some(group) = &group {
                    group.kill();
                }
                RunnerError::Timeout {
                    url: self.program.clone(),
                    after_ms: self.timeout_ms,
                }
            })?
            .map_err(|e| fail(e.to_string()))?;
        if !output.status.success() {
            let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
            stderr.truncate(300);
            return Err(fail(format!("exited with {}: {stderr}", output.status)));
        }
        let parsed: CommandOutput =
            serde_json::from_slice(&output.stdout).map_err(|e| RunnerError::InvalidResponse {
                url: self.program.clone(),
                message: format!("stdout is not {{\"text\", \"usage\"}} JSON: {e}"),
            })?;
        let usage = parsed.usage.ok_or_else(|| RunnerError::MissingUsage {
            url: self.program.clone(),
        })?;
        Ok(ModelReply {
            provider_request_id: parsed
                .id
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("sha256:{}", digest::sha256_hex(&output.stdout))),
            text: parsed.text,
            input_tokens: Some(usage.input_tokens),
            cached_input_tokens: None,
            cache_write_tokens: None,
            output_tokens: usage.output_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            usage_source: UsageSource::ProviderResponse,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::harness::runner::{Runner, RunnerKind, RunnerSpec};
    use crate::harness::workload::AnswerKind;
    use crate::trial::CostSource;

    fn runner(script: &str) -> Runner {
        let mut spec = RunnerSpec::fixture();
        spec.kind = RunnerKind::Command;
        spec.command = Some(vec!["sh".into(), "-c".into(), script.into()]);
        spec.timeout_ms = 2000;
        spec.cost.source = CostSource::SelfHostedNoApiFee;
        Runner::from_spec(spec, "sha".into()).expect("runner")
    }

    #[tokio::test]
    async fn command_gets_json_and_answers() {
        let runner = runner(
            "cat >/dev/null; echo '{\"text\":\"green\",\"usage\":{\"input_tokens\":9,\"output_tokens\":1},\"id\":\"c1\"}'",
        );
        let request = runner.request("ctx", "q", AnswerKind::Span);
        let reply = runner.call(&request).await.expect("reply");
        assert_eq!(
            (reply.text.as_str(), reply.provider_request_id.as_str()),
            ("green", "c1")
        );
    }

    #[tokio::test]
    async fn command_failures_are_typed() {
        let request = runner("true").request("ctx", "q", AnswerKind::Span);
        let error = runner("cat >/dev/null; echo oops >&2; exit 3")
            .call(&request)
            .await
            .expect_err("exit");
        assert_eq!(error.error_type(), "command_failed");
        assert!(error.to_string().contains("oops"), "{error}");
        let error = runner("cat >/dev/null; echo not-json")
            .call(&request)
            .await
            .expect_err("json");
        assert_eq!(error.error_type(), "invalid_response");
        let error = runner("cat >/dev/null; sleep 5")
            .call(&request)
            .await
            .expect_err("slow");
        assert_eq!(error.error_type(), "timeout");
    }
}
