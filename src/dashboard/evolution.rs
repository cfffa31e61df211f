//! The dashboard's "Skills and dream cycle" section: the skill store and the last dream
//! cycle's summary (`learning/skills.json`, `learning/dream.json`), read as they are; the
//! evolution loop itself lives in `crate::events::evolution`.

use std::fmt::Write;
use std::path::Path;

use super::html::escape;
use crate::events::evolution::{self, skills::SkillStore};

/// The section's HTML.
pub fn section(home: &Path) -> String {
    let mut out = String::from("<section><h2>Skills and dream cycle</h2>");
    match evolution::last_dream(home) {
        Ok(Some(dream)) => {
            let _ = write!(
                out,
                "<p>Last dream cycle <code>{}</code> at {}: {} recorded run(s), {} gap(s), {} synthesized, {} promoted; learning spend {} of {} tokens saved (limit 5&nbsp;%).</p>",
                escape(&dream.cycle_id),
                escape(&dream.finished_at),
                dream.observations,
                dream.gaps.len(),
                dream.synthesized,
                dream.promoted,
                dream.lifetime_spend,
                dream.lifetime_savings.tokens_saved
            );
        }
        Ok(None) => out.push_str(
            "<p class=\"empty\">No dream cycle yet (the daemon runs one every hour; <code>svc dream</code> runs one now).</p>",
        ),
        Err(e) => {
            let _ = write!(out, "<p class=\"empty\">{}</p>", escape(&e.to_string()));
        }
    }
    match SkillStore::load(home) {
        Ok(store) if store.all().next().is_some() => {
            out.push_str("<div class=\"scroll\"><table><thead><tr><th>skill</th><th>status</th><th>includes</th><th>trigger</th><th>misses without → with</th></tr></thead><tbody>");
            for skill in store.all() {
                let bench = skill
                    .benchmark
                    .as_ref()
                    .map_or("not benchmarked".to_string(), |b| {
                        format!(
                            "{} → {} ({} {} quer{})",
                            b.misses_without,
                            b.misses_with,
                            b.queries,
                            if b.held_out { "held-out" } else { "recorded" },
                            if b.queries == 1 { "y" } else { "ies" }
                        )
                    });
                let _ = write!(
                    out,
                    "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{} of {}</td><td>{}</td></tr>",
                    escape(&skill.skill_id),
                    skill.status.as_str(),
                    escape(&skill.include.join(", ")),
                    skill.trigger.min_matches,
                    escape(&skill.trigger.terms.join(", ")),
                    escape(&bench)
                );
            }
            out.push_str("</tbody></table></div>");
        }
        Ok(_) => out.push_str("<p class=\"empty\">No skills yet.</p>"),
        Err(e) => {
            let _ = write!(out, "<p class=\"empty\">{}</p>", escape(&e.to_string()));
        }
    }
    out.push_str("</section>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::evolution::tests::{BRIDGE_QUERIES, BUDGET, record_run};

    #[test]
    fn the_section_shows_the_last_cycle_and_each_skill() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(section(dir.path()).contains("No dream cycle yet"));
        for query in BRIDGE_QUERIES {
            record_run(dir.path(), query, BUDGET);
        }
        let report =
            evolution::dream(dir.path(), evolution::DreamSettings::default()).expect("dream");
        let html = section(dir.path());
        assert!(html.contains(&report.cycle_id), "{html}");
        assert!(html.contains("1 synthesized, 1 promoted"), "{html}");
        assert!(
            html.contains("<td>promoted</td><td>city.md#L5-7</td>"),
            "{html}"
        );
        assert!(html.contains("2 → 0 (2 held-out queries)"), "{html}");
    }
}
