//! `svc wrap`: the grouped list, unknown slugs, every MCP-config agent's merge against a
//! temporary HOME (other entries kept, backup, idempotent, dry run, malformed files refused),
//! `--print-env` for every launch agent, and real launches of fake agents on a temporary PATH
//! against a proxy that wrap starts (and the test stops).

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Run, run, svc};

/// A temporary HOME and state directory, and `svc` commands that see only them.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn command(&self) -> Command {
        let mut command = svc(&self.dir.path().join("state"));
        command
            .env("HOME", self.home())
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("APPDATA")
            .env_remove("OPENCODE_CONFIG_CONTENT")
            .env_remove("OLLAMA_HOST")
            .env_remove("PI_CODING_AGENT_DIR");
        command
    }

    fn wrap(&self, args: &[&str]) -> Run {
        run(self.command().arg("wrap").args(args))
    }
}

fn exe() -> String {
    env!("CARGO_BIN_EXE_svc").to_string()
}

#[test]
fn wrap_alone_lists_every_agent_in_its_group() {
    let sandbox = Sandbox::new();
    let out = sandbox.wrap(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let launch = out.stdout.find("launch agents").expect("launch group");
    let mcp = out.stdout.find("MCP-config agents").expect("mcp group");
    let snippet = out.stdout.find("snippet agents").expect("snippet group");
    assert!(launch < mcp && mcp < snippet, "{}", out.stdout);
    let groups = [
        (
            launch,
            mcp,
            "claude codex aider gemini qwen opencode crush hermes pi ollama",
        ),
        (
            mcp,
            snippet,
            "cursor windsurf vscode claude-desktop claude-code zed",
        ),
        (
            snippet,
            out.stdout.len(),
            "cline roo continue cody amp kiro qoder trae antigravity amazonq verdent jetbrains helix tabby twinny sublime emacs neovim fittencode tabnine supermaven",
        ),
    ];
    for (start, end, slugs) in groups {
        let section = &out.stdout[start..end];
        for slug in slugs.split(' ') {
            assert!(
                section
                    .lines()
                    .any(|line| line.trim_start().starts_with(&format!("{slug} "))),
                "{slug} is not listed in its group:\n{section}"
            );
        }
    }
}

#[test]
fn wrap_unknown_agent_names_near_matches_and_exits_2() {
    let sandbox = Sandbox::new();
    let out = sandbox.wrap(&["cluade"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("unknown agent `cluade`"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("did you mean claude"), "{}", out.stderr);
    let out = sandbox.wrap(&["vscodium-insiders"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("`svc wrap` lists every agent"),
        "{}",
        out.stderr
    );
}

/// One MCP-config agent: where its file is under HOME, the path to the svc entry, the entry,
/// a config holding other user entries, and a malformed one.
struct McpCase {
    slug: &'static str,
    file: &'static str,
    container: &'static str,
    entry: Value,
    existing: &'static str,
    malformed: &'static str,
}

fn mcp_cases() -> Vec<McpCase> {
    let plain = json!({"command": exe(), "args": ["serve"]});
    let typed = json!({"type": "stdio", "command": exe(), "args": ["serve"]});
    let with_env = json!({"type": "stdio", "command": exe(), "args": ["serve"], "env": {}});
    let zed = json!({"command": exe(), "args": ["serve"], "env": {}});
    let strict = r#"{
  "mcpServers": {
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"]}
  },
  "theme": "dark"
}
"#;
    let broken = "{\n  \"mcpServers\": {\n    \"github\": {\"command\": \"npx\"}\n  \n";
    vec![
        McpCase {
            slug: "cursor",
            file: ".cursor/mcp.json",
            container: "mcpServers",
            entry: plain.clone(),
            existing: strict,
            malformed: broken,
        },
        McpCase {
            slug: "windsurf",
            file: ".codeium/windsurf/mcp_config.json",
            container: "mcpServers",
            entry: plain.clone(),
            existing: strict,
            malformed: broken,
        },
        McpCase {
            slug: "vscode",
            file: ".config/Code/User/mcp.json",
            container: "servers",
            entry: typed,
            existing: "{\n\t// my servers\n\t\"servers\": {\n\t\t\"fetch\": {\"type\": \"stdio\", \"command\": \"uvx\", \"args\": [\"mcp-server-fetch\"]},\n\t},\n\t\"inputs\": []\n}\n",
            malformed: "{\n\t\"servers\": {\"fetch\": {\"command\": uvx}}\n}\n",
        },
        McpCase {
            slug: "claude-desktop",
            file: ".config/Claude/claude_desktop_config.json",
            container: "mcpServers",
            entry: plain,
            existing: strict,
            malformed: broken,
        },
        McpCase {
            slug: "claude-code",
            file: ".claude.json",
            container: "mcpServers",
            entry: with_env,
            existing: "{\"numStartups\":42,\"projects\":{\"~/project\":{\"allowedTools\":[]}},\"mcpServers\":{\"github\":{\"type\":\"stdio\",\"command\":\"npx\",\"args\":[],\"env\":{}}}}",
            malformed: "{\"numStartups\":42,}",
        },
        McpCase {
            slug: "zed",
            file: ".config/zed/settings.json",
            container: "context_servers",
            entry: zed,
            existing: "// Zed settings\n{\n  \"theme\": \"One Dark\", // the best\n  /* fonts */\n  \"buffer_font_size\": 15,\n  \"context_servers\": {\n    \"github\": {\"command\": \"npx\", \"args\": []},\n  },\n}\n",
            malformed: "{\n  \"theme\": \"One Dark\",\n  /* unclosed comment\n}\n",
        },
    ]
}

fn backup_of(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.svc-backup", path.display()))
}

/// The file's value (comments and trailing commas stripped by svc's own reader).
fn value_of(text: &str) -> Value {
    svc::wrap::jsonc::parse(text, svc::wrap::jsonc::Syntax::Jsonc)
        .expect("parses")
        .expect("not empty")
}

#[test]
fn wrap_mcp_config_agents_merge_keep_entries_back_up_and_are_idempotent() {
    for case in mcp_cases() {
        let sandbox = Sandbox::new();
        let path = sandbox.home().join(case.file);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, case.existing).expect("write config");

        // Dry run: a diff adding the entry, nothing written.
        let dry = sandbox.wrap(&[case.slug, "--dry-run"]);
        assert_eq!(dry.code, 0, "{}: {}", case.slug, dry.stderr);
        assert!(
            dry.stdout
                .starts_with(&format!("--- {}\n+++ {}\n", path.display(), path.display())),
            "{}: {}",
            case.slug,
            dry.stdout
        );
        assert!(
            dry.stdout.contains("+") && dry.stdout.contains("\"svc\""),
            "{}: {}",
            case.slug,
            dry.stdout
        );
        assert_eq!(
            fs::read_to_string(&path).expect("read"),
            case.existing,
            "{}",
            case.slug
        );
        assert!(
            !backup_of(&path).exists(),
            "{}: dry run wrote a backup",
            case.slug
        );

        // The merge: the user's entries stay, svc is added, the previous file is kept.
        let out = sandbox.wrap(&[case.slug]);
        assert_eq!(out.code, 0, "{}: {}", case.slug, out.stderr);
        assert!(
            out.stdout.contains("merged the svc tool server"),
            "{}: {}",
            case.slug,
            out.stdout
        );
        let after = fs::read_to_string(&path).expect("read");
        let mut expected = value_of(case.existing);
        expected[case.container]["svc"] = case.entry.clone();
        assert_eq!(value_of(&after), expected, "{}:\n{after}", case.slug);
        assert_eq!(
            fs::read_to_string(backup_of(&path)).expect("backup"),
            case.existing,
            "{}",
            case.slug
        );
        if case.slug == "zed" || case.slug == "vscode" {
            for comment in [
                "// Zed settings",
                "// the best",
                "/* fonts */",
                "// my servers",
            ] {
                assert_eq!(
                    case.existing.contains(comment),
                    after.contains(comment),
                    "{}: {comment} lost",
                    case.slug
                );
            }
        } else {
            // Strict JSON files stay strict JSON.
            serde_json::from_str::<Value>(&after)
                .unwrap_or_else(|e| panic!("{}: {e}\n{after}", case.slug));
        }
        // Only the svc entry was added: every original line is still there, in order.
        let mut rest = after.as_str();
        for line in case
            .existing
            .lines()
            .filter(|l| !l.trim().is_empty() && l.trim() != "}" && l.trim() != "},")
        {
            let line = line.trim_end_matches(',').trim();
            match rest.find(line) {
                Some(at) => rest = &rest[at + line.len()..],
                None if case.slug == "claude-code" => {} // one line; checked through values above
                None => panic!("{}: `{line}` moved or changed:\n{after}", case.slug),
            }
        }

        // A second run changes nothing and says so.
        let again = sandbox.wrap(&[case.slug]);
        assert_eq!(again.code, 0, "{}: {}", case.slug, again.stderr);
        assert!(
            again.stdout.contains("nothing changed"),
            "{}: {}",
            case.slug,
            again.stdout
        );
        assert_eq!(
            fs::read_to_string(&path).expect("read"),
            after,
            "{}",
            case.slug
        );
        assert_eq!(
            fs::read_to_string(backup_of(&path)).expect("backup"),
            case.existing,
            "{}",
            case.slug
        );
        let dry = sandbox.wrap(&[case.slug, "--dry-run"]);
        assert!(
            dry.stdout.contains("nothing changed"),
            "{}: {}",
            case.slug,
            dry.stdout
        );
    }
}

#[test]
fn wrap_mcp_config_agents_create_a_missing_file() {
    for case in mcp_cases() {
        let sandbox = Sandbox::new();
        let out = sandbox.wrap(&[case.slug]);
        assert_eq!(out.code, 0, "{}: {}", case.slug, out.stderr);
        let path = sandbox.home().join(case.file);
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", case.slug));
        let value: Value = serde_json::from_str(&text).expect("a new file is strict JSON");
        assert!(text.ends_with("}\n"), "{}: ends with a newline", case.slug);
        let again = sandbox.wrap(&[case.slug]);
        assert!(
            again.stdout.contains("nothing changed"),
            "{}: {}",
            case.slug,
            again.stdout
        );
        let mut expected = json!({});
        expected[case.container]["svc"] = case.entry.clone();
        assert_eq!(value, expected, "{}", case.slug);
        assert!(
            !backup_of(&path).exists(),
            "{}: no previous file, no backup",
            case.slug
        );
    }
}

#[test]
fn wrap_mcp_config_agents_refuse_malformed_configs_and_leave_them_untouched() {
    for case in mcp_cases() {
        let sandbox = Sandbox::new();
        let path = sandbox.home().join(case.file);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, case.malformed).expect("write");
        for args in [vec![case.slug], vec![case.slug, "--dry-run"]] {
            let out = sandbox.wrap(&args);
            assert_eq!(out.code, 2, "{}: {}", case.slug, out.stdout);
            assert!(
                out.stderr.contains(&path.display().to_string()),
                "{}: {}",
                case.slug,
                out.stderr
            );
            assert!(
                out.stderr.contains("line "),
                "{}: {}",
                case.slug,
                out.stderr
            );
            assert!(
                out.stderr.contains("never rewrites a file it cannot parse"),
                "{}: {}",
                case.slug,
                out.stderr
            );
            assert_eq!(
                fs::read_to_string(&path).expect("read"),
                case.malformed,
                "{}",
                case.slug
            );
            assert!(!backup_of(&path).exists(), "{}", case.slug);
        }
    }
    // Comments are refused where the tool reads strict JSON.
    let sandbox = Sandbox::new();
    let path = sandbox.home().join(".cursor/mcp.json");
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(&path, "{\n  // mine\n  \"mcpServers\": {}\n}\n").expect("write");
    let out = sandbox.wrap(&["cursor"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("line 2, column 3: comments are not allowed"),
        "{}",
        out.stderr
    );
    // A container of the wrong type is refused too.
    fs::write(&path, "{\"mcpServers\": []}").expect("write");
    let out = sandbox.wrap(&["cursor"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("`mcpServers` is an array, not an object"),
        "{}",
        out.stderr
    );
}

#[test]
fn wrap_zed_follows_xdg_config_home() {
    let sandbox = Sandbox::new();
    let xdg = sandbox.dir.path().join("xdg");
    let out = run(sandbox
        .command()
        .env("XDG_CONFIG_HOME", &xdg)
        .args(["wrap", "zed"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(xdg.join("zed/settings.json").is_file());
    assert!(!sandbox.home().join(".config/zed/settings.json").exists());
}

#[test]
fn wrap_print_env_for_every_launch_agent() {
    let sandbox = Sandbox::new();
    let root = "http://127.0.0.1:9411";
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("claude", vec![format!("export ANTHROPIC_BASE_URL={root}")]),
        ("codex", vec![format!("export OPENAI_BASE_URL={root}/v1")]),
        (
            "aider",
            vec![
                format!("export OPENAI_API_BASE={root}/v1"),
                format!("export ANTHROPIC_BASE_URL={root}"),
            ],
        ),
        (
            "gemini",
            vec![format!("export GOOGLE_GEMINI_BASE_URL={root}")],
        ),
        ("qwen", vec![format!("export OPENAI_BASE_URL={root}/v1")]),
        (
            "opencode",
            vec![format!(
                "export OPENCODE_CONFIG_CONTENT='{{\"provider\":{{\"anthropic\":{{\"options\":{{\"baseURL\":\"{root}/v1\"}}}},\"openai\":{{\"options\":{{\"baseURL\":\"{root}/v1\"}}}}}}}}'"
            )],
        ),
        (
            "crush",
            vec![
                format!("export ANTHROPIC_API_ENDPOINT={root}/v1"),
                format!("export OPENAI_API_ENDPOINT={root}/v1"),
            ],
        ),
        ("hermes", vec![format!("export OPENAI_BASE_URL={root}/v1")]),
        ("pi", vec![]),
        (
            "ollama",
            vec![
                "export SVC_UPSTREAM_OPENAI=http://127.0.0.1:11434".into(),
                "export SVC_UPSTREAM_ANTHROPIC=http://127.0.0.1:11434".into(),
            ],
        ),
    ];
    for (slug, expected) in cases {
        let out = sandbox.wrap(&[slug, "--port", "9411", "--print-env"]);
        assert_eq!(out.code, 0, "{slug}: {}", out.stderr);
        let exports: Vec<&str> = out
            .stdout
            .lines()
            .filter(|l| l.starts_with("export "))
            .collect();
        assert_eq!(exports, expected, "{slug}:\n{}", out.stdout);
    }
    // pi: the models.json change is shown, not made.
    let out = sandbox.wrap(&["pi", "--port", "9411", "--print-env"]);
    assert!(
        out.stdout.contains("# +")
            && out
                .stdout
                .contains(&format!("\"baseUrl\": \"{root}/v1beta\"")),
        "{}",
        out.stdout
    );
    assert!(!sandbox.home().join(".pi").exists());
    // ollama: OLLAMA_HOST names the server the proxy forwards to.
    let out = run(sandbox.command().env("OLLAMA_HOST", "0.0.0.0:11500").args([
        "wrap",
        "ollama",
        "--print-env",
    ]));
    assert!(
        out.stdout
            .contains("svc proxy --port 9377 --upstream-openai http://127.0.0.1:11500"),
        "{}",
        out.stdout
    );
    // opencode: the user's inline config is kept.
    let out = run(sandbox
        .command()
        .env("OPENCODE_CONFIG_CONTENT", r#"{"lsp":true}"#)
        .args(["wrap", "opencode", "--print-env"]));
    assert!(
        out.stdout.contains(r#"{"lsp":true,"provider""#),
        "{}",
        out.stdout
    );
}

/// Regressions (found by probing): `--print-env` replaced an existing endpoint without the note
/// launch prints, and `--port 0` was accepted (an unusable URL; launch timed out).
#[test]
fn wrap_print_env_notes_a_replaced_endpoint_and_port_zero_is_refused() {
    let sandbox = Sandbox::new();
    let out = run(sandbox
        .command()
        .env("ANTHROPIC_BASE_URL", "https://gateway.example/anthropic")
        .args(["wrap", "claude", "--port", "9411", "--print-env"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(
            "# note: ANTHROPIC_BASE_URL was https://gateway.example/anthropic; claude now talks to the proxy"
        ),
        "{}",
        out.stdout
    );
    let out = sandbox.wrap(&["claude", "--port", "0", "--print-env"]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr.contains("--port") && out.stderr.contains("not in 1..=65535"),
        "{}",
        out.stderr
    );
}

#[test]
fn wrap_snippet_agents_print_file_field_and_snippet() {
    let sandbox = Sandbox::new();
    let out = sandbox.wrap(&["cline"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("file:  <VS Code user folder: ~/.config/Code/User on Linux"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("field: mcpServers.svc"),
        "{}",
        out.stdout
    );
    let json_start = out.stdout.find("\n{").expect("a JSON snippet");
    let snippet: Value =
        serde_json::from_str(out.stdout[json_start..].trim()).expect("the snippet is JSON");
    assert_eq!(
        snippet,
        json!({"mcpServers": {"svc": {"command": exe(), "args": ["serve"]}}})
    );
    let out = sandbox.wrap(&["supermaven"]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("see the tool's docs"), "{}", out.stdout);
    let out = sandbox.wrap(&["tabby", "--port", "9500"]);
    assert!(
        out.stdout
            .contains("api_endpoint = \"http://127.0.0.1:9500/v1\""),
        "{}",
        out.stdout
    );
    let out = sandbox.wrap(&["cline", "--dry-run"]);
    assert_eq!(out.code, 2);
}

#[test]
fn wrap_launch_agent_missing_from_path_is_a_clear_error() {
    let sandbox = Sandbox::new();
    let empty = sandbox.dir.path().join("empty-bin");
    fs::create_dir_all(&empty).expect("mkdir");
    let port = free_port();
    let out = run(sandbox.command().env("PATH", &empty).args([
        "wrap",
        "claude",
        "--port",
        &port.to_string(),
    ]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(
            "claude is not on PATH; install it (npm install -g @anthropic-ai/claude-code)"
        ),
        "{}",
        out.stderr
    );
    assert!(
        TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err(),
        "no proxy is started for a missing tool"
    );
}

fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    listener.local_addr().expect("address").port()
}

/// Stops the proxy that wrap started when the test ends, even when an assertion failed.
struct ProxyGuard {
    pid: Option<String>,
    port: u16,
}

impl Drop for ProxyGuard {
    fn drop(&mut self) {
        let Some(pid) = self.pid.take() else { return };
        let _ = Command::new("kill").arg(&pid).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok()
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn started_pid(stderr: &str) -> Option<String> {
    let at = stderr.find("(pid ")? + "(pid ".len();
    Some(
        stderr[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect(),
    )
}

fn status(port: u16) -> String {
    let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("proxy listens");
    stream
        .write_all(format!("GET /svc/status HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n").as_bytes())
        .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
}

/// A fake agent: prints the endpoint it was given (`endpoint` is a bash expression) and its
/// arguments, then asks that endpoint (bash's /dev/tcp) for the proxy's status, as the real tool
/// would send its requests there.
fn fake_agent(bin: &Path, name: &str, endpoint: &str) {
    fs::create_dir_all(bin).expect("mkdir");
    let script = format!(
        "#!/bin/bash\nurl={endpoint}\necho \"ENDPOINT=$url\"\necho \"ARGS=$*\"\nhostport=${{url#http://}}\nhostport=${{hostport%%/*}}\nexec 3<>/dev/tcp/${{hostport%:*}}/${{hostport#*:}}\nprintf 'GET /svc/status HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n' \"$hostport\" >&3\ncat <&3\n"
    );
    let path = bin.join(name);
    fs::write(&path, script).expect("write script");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
}

fn path_with(bin: &Path) -> std::ffi::OsString {
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).expect("PATH")
}

#[test]
fn wrap_claude_starts_the_proxy_and_execs_the_agent_through_it() {
    if !Path::new("/bin/bash").exists() {
        eprintln!("skipped: the fake agent needs /bin/bash");
        return;
    }
    let sandbox = Sandbox::new();
    let bin = sandbox.dir.path().join("bin");
    fake_agent(&bin, "claude", "\"$ANTHROPIC_BASE_URL\"");
    let port = free_port();
    let mut guard = ProxyGuard { pid: None, port };
    let out = run(sandbox.command().env("PATH", path_with(&bin)).args([
        "wrap",
        "claude",
        "--port",
        &port.to_string(),
        "--",
        "--model",
        "opus",
        "-p",
    ]));
    guard.pid = started_pid(&out.stderr);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(&format!("started the svc proxy at http://127.0.0.1:{port}")),
        "{}",
        out.stderr
    );
    assert!(
        guard.pid.as_deref().is_some_and(|p| !p.is_empty()),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout
            .contains(&format!("ENDPOINT=http://127.0.0.1:{port}\n")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("ARGS=--model opus -p\n"),
        "{}",
        out.stdout
    );
    // The agent reached the svc proxy at the address it was given.
    assert!(out.stdout.contains("\"optimization\""), "{}", out.stdout);
    // The proxy outlives the agent; a second wrap reuses it.
    assert!(status(port).contains("\"optimization\""));
    let again = run(sandbox.command().env("PATH", path_with(&bin)).args([
        "wrap",
        "claude",
        "--port",
        &port.to_string(),
    ]));
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again.stderr.contains("using the svc proxy already running"),
        "{}",
        again.stderr
    );
    assert!(again.stdout.contains("ARGS=\n"), "{}", again.stdout);
    drop(guard);
    assert!(
        TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err(),
        "the proxy was stopped"
    );
}

#[test]
fn wrap_pi_merges_its_models_json_then_runs_it() {
    if !Path::new("/bin/bash").exists() {
        eprintln!("skipped: the fake agent needs /bin/bash");
        return;
    }
    let sandbox = Sandbox::new();
    let bin = sandbox.dir.path().join("bin");
    // pi reads its endpoint from models.json: the fake reads the anthropic baseUrl there.
    fake_agent(
        &bin,
        "pi",
        r#"$(grep -o '"anthropic": {[^}]*' "$HOME/.pi/agent/models.json" | grep -o 'http://127.0.0.1:[0-9]*')"#,
    );
    let models = sandbox.home().join(".pi/agent/models.json");
    fs::create_dir_all(models.parent().expect("parent")).expect("mkdir");
    let existing = r#"{"providers": {"ollama": {"baseUrl": "http://localhost:11434/v1", "api": "openai-completions", "apiKey": "ollama", "models": [{"id": "llama3.1:8b"}]}, "anthropic": {"apiKey": "ANTHROPIC_API_KEY"}}}"#;
    fs::write(&models, existing).expect("write");
    let port = free_port();
    let mut guard = ProxyGuard { pid: None, port };
    let out = run(sandbox.command().env("PATH", path_with(&bin)).args([
        "wrap",
        "pi",
        "--port",
        &port.to_string(),
    ]));
    guard.pid = started_pid(&out.stderr);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("set the proxy as pi coding agent's endpoint in"),
        "{}",
        out.stderr
    );
    let after: Value =
        serde_json::from_str(&fs::read_to_string(&models).expect("read")).expect("json");
    let root = format!("http://127.0.0.1:{port}");
    let mut expected: Value = serde_json::from_str(existing).expect("json");
    expected["providers"]["anthropic"]["baseUrl"] = json!(root);
    expected["providers"]["openai"] = json!({"baseUrl": format!("{root}/v1")});
    expected["providers"]["google"] = json!({"baseUrl": format!("{root}/v1beta")});
    assert_eq!(after, expected);
    assert_eq!(
        fs::read_to_string(backup_of(&models)).expect("backup"),
        existing
    );
    assert!(
        out.stdout.contains(&format!("ENDPOINT={root}\n")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("\"optimization\""), "{}", out.stdout);
    assert!(status(port).contains("\"optimization\""));
    drop(guard);
}

#[test]
fn wrap_refuses_a_port_held_by_something_else() {
    let sandbox = Sandbox::new();
    let bin = sandbox.dir.path().join("bin");
    fake_agent(&bin, "codex", "\"$OPENAI_BASE_URL\"");
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let port = listener.local_addr().expect("address").port();
    // Answer one connection with a non-svc HTTP response.
    let server = std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut buffer = [0u8; 1024];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let out = run(sandbox.command().env("PATH", path_with(&bin)).args([
        "wrap",
        "codex",
        "--port",
        &port.to_string(),
    ]));
    server.join().expect("server thread");
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "is held by something that is not an svc proxy (it answered `HTTP/1.1 404 Not Found`"
        ),
        "{}",
        out.stderr
    );
    assert!(
        !out.stdout.contains("ENDPOINT="),
        "the agent must not run: {}",
        out.stdout
    );
}

/// A fake Ollama server (axum on 127.0.0.1:0) that answers chat completions and records them.
struct FakeOllama {
    port: u16,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    _runtime: tokio::runtime::Runtime,
}

fn fake_ollama() -> FakeOllama {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let seen: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = std::sync::Arc::default();
    let recorded = seen.clone();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let recorded = recorded.clone();
            async move {
                recorded.lock().expect("lock").push(body.clone());
                axum::Json(json!({
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 1,
                    "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "hello from ollama"}}]
                }))
            }
        }),
    );
    runtime.spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    FakeOllama {
        port,
        seen,
        _runtime: runtime,
    }
}

#[test]
fn wrap_ollama_puts_the_proxy_in_front_of_the_ollama_server() {
    if !Path::new("/bin/bash").exists() {
        eprintln!("skipped: the fake client needs /bin/bash");
        return;
    }
    let ollama = fake_ollama();
    let sandbox = Sandbox::new();
    let bin = sandbox.dir.path().join("bin");
    fs::create_dir_all(&bin).expect("mkdir");
    // A fake `ollama` that, as a client of Ollama's OpenAI API would, posts a chat completion to
    // the proxy address it is given as its argument.
    let script = "#!/bin/bash\nbody='{\"model\":\"llama3.2\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}'\nexec 3<>/dev/tcp/127.0.0.1/$1\nprintf 'POST /v1/chat/completions HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\n\\r\\n%s' ${#body} \"$body\" >&3\ncat <&3\n";
    let path = bin.join("ollama");
    fs::write(&path, script).expect("write script");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let port = free_port();
    let mut guard = ProxyGuard { pid: None, port };
    let out = run(sandbox
        .command()
        .env("PATH", path_with(&bin))
        .env("OLLAMA_HOST", format!("127.0.0.1:{}", ollama.port))
        .args([
            "wrap",
            "ollama",
            "--port",
            &port.to_string(),
            "--",
            &port.to_string(),
        ]));
    guard.pid = started_pid(&out.stderr);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(&format!("instead of http://127.0.0.1:{}/v1", ollama.port)),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("hello from ollama"), "{}", out.stdout);
    let seen = ollama.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["model"], "llama3.2");
    drop(guard);
}
