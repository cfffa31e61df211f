//! High-risk detection: a request whose text mentions one of these topics is never routed to a
//! cheaper model, whatever its class's record says (SPEC §7: high-risk tasks fail closed).
//!
//! The built-in list, matched case-insensitively on word boundaries over every text part of the
//! request (system prompt, every turn, tool output) and over its tools: the declared tools'
//! names, descriptions and parameters and every tool call's name and arguments, with `_` read
//! as a space (`reset_password`):
//! - security: security, vulnerability, vulnerabilities, exploit, cve, xss, csrf, sql injection,
//!   malware, sandbox escape, privilege escalation, penetration test;
//! - authentication and authorisation: auth, authentication, authorization, authorisation,
//!   oauth, saml, sso, login, password, passwords, passwd, permission, permissions, iam, rbac,
//!   mfa, 2fa;
//! - secrets and keys: secret, secrets, credential, credentials, api key, api_key, apikey,
//!   access token, bearer token, private key, ssh key, encryption, decrypt, keystore, vault;
//! - payments: payment, payments, billing, invoice, credit card, stripe, pci, refund, iban;
//! - migrations and destructive data changes: migration, migrations, migrate, schema change,
//!   alter table, drop table, drop database, truncate table, delete from, rm -rf;
//! - regulated personal data: pii, gdpr, hipaa, ssn.
//!
//! `high_risk_keywords` in the routing config adds more. A false positive costs only the
//! saving; a false negative could send a risky task to a weaker model, so the list is broad.

use regex::Regex;

/// The built-in keywords (documented above).
pub const BUILTIN_KEYWORDS: &[&str] = &[
    "security",
    "vulnerability",
    "vulnerabilities",
    "exploit",
    "cve",
    "xss",
    "csrf",
    "sql injection",
    "malware",
    "sandbox escape",
    "privilege escalation",
    "penetration test",
    "auth",
    "authentication",
    "authorization",
    "authorisation",
    "oauth",
    "saml",
    "sso",
    "login",
    "password",
    "passwords",
    "passwd",
    "permission",
    "permissions",
    "iam",
    "rbac",
    "mfa",
    "2fa",
    "secret",
    "secrets",
    "credential",
    "credentials",
    "api key",
    "api_key",
    "apikey",
    "access token",
    "bearer token",
    "private key",
    "ssh key",
    "encryption",
    "decrypt",
    "keystore",
    "vault",
    "payment",
    "payments",
    "billing",
    "invoice",
    "credit card",
    "stripe",
    "pci",
    "refund",
    "iban",
    "migration",
    "migrations",
    "migrate",
    "schema change",
    "alter table",
    "drop table",
    "drop database",
    "truncate table",
    "delete from",
    "rm -rf",
    "pii",
    "gdpr",
    "hipaa",
    "ssn",
];

/// A compiled keyword matcher.
#[derive(Debug, Clone)]
pub struct RiskMatcher {
    pattern: Regex,
    keywords: Vec<String>,
}

impl RiskMatcher {
    /// The built-in keywords plus `extra` (blank entries ignored).
    pub fn new(extra: &[String]) -> RiskMatcher {
        let mut keywords: Vec<String> = BUILTIN_KEYWORDS.iter().map(|k| k.to_string()).collect();
        for keyword in extra {
            let keyword = keyword.trim().to_lowercase();
            if !keyword.is_empty() && !keywords.contains(&keyword) {
                keywords.push(keyword);
            }
        }
        // Longest first, so "api key" wins over a shorter overlapping keyword.
        let mut ordered = keywords.clone();
        ordered.sort_by_key(|k| std::cmp::Reverse(k.len()));
        let alternation = ordered
            .iter()
            .map(|k| {
                // Spaces match any run of whitespace, `_` or `-` ("api-key", "API_KEY").
                k.split(' ')
                    .map(regex::escape)
                    .collect::<Vec<_>>()
                    .join(r"[\s_-]+")
            })
            .collect::<Vec<_>>()
            .join("|");
        // Word boundaries by hand: `\b` does not hold around "rm -rf" or "2fa" edges the way
        // we need; a keyword must not touch a letter or digit on either side.
        let source = format!(r"(?i)(?:^|[^\p{{L}}\p{{N}}])({alternation})(?:$|[^\p{{L}}\p{{N}}])");
        // Escaped literals joined by `|` always compile.
        let pattern = Regex::new(&source).unwrap_or_else(|_| Regex::new("$^").expect("valid"));
        RiskMatcher { pattern, keywords }
    }

    /// The first high-risk keyword found in any of `texts`.
    pub fn find<'a>(&self, texts: impl IntoIterator<Item = &'a str>) -> Option<String> {
        texts.into_iter().find_map(|text| {
            self.pattern
                .captures(text)
                .and_then(|c| c.get(1))
                .map(|m| m.as_str().to_lowercase())
        })
    }

    pub fn keywords(&self) -> &[String] {
        &self.keywords
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keywords_on_word_boundaries_only() {
        let matcher = RiskMatcher::new(&["Ledger Close".to_string()]);
        assert_eq!(
            matcher.find(["Please rotate the API-Key in prod"]),
            Some("api-key".to_string())
        );
        assert_eq!(
            matcher.find(["fix the OAuth callback"]),
            Some("oauth".into())
        );
        assert_eq!(
            matcher.find(["run the ledger  close job"]),
            Some("ledger  close".into())
        );
        assert_eq!(
            matcher.find(["ALTER TABLE users ADD x"]),
            Some("alter table".into())
        );
        // Not inside other words: "author", "migrated" is not "migrate", "assessment".
        assert_eq!(
            matcher.find(["the author assessed the secretary's migrated notes"]),
            None
        );
        assert_eq!(matcher.find(["rename a variable in parser.rs"]), None);
    }
}
