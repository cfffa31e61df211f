use super::*;

const EVIDENCE: &str = "The Oberoi family is an Indian family famous for its hotels, \
        namely through The Oberoi Group. The Oberoi Group is a hotel company with its head office \
        in Delhi. It was founded in 1934 and runs 31 hotels. The group did not open a hotel in \
        Pakistan. Rai Bahadur Mohan Singh Oberoi was older than his partner Ernest Grose.";

fn one(answer: &str, question: Option<&str>) -> ClaimVerdict {
    let v = check(answer, EVIDENCE, question, Profile::Qa);
    assert_eq!(v.claims.len(), 1, "{:?}", v.claims);
    v.claims.into_iter().next().expect("one claim")
}

fn has(verdict: &ClaimVerdict, kind: ReasonKind) -> bool {
    verdict.reasons.iter().any(|r| r.kind == kind)
}

#[test]
fn supported_paraphrase() {
    let v = one("The head office of the Oberoi Group is in Delhi.", None);
    assert_eq!(v.label, Label::Supported, "{v:?}");
    assert!(v.score > 0.8);
    assert!(v.evidence[0].text.contains("head office"));
    let pronoun = check(
        "The Oberoi Group was founded in 1934.",
        EVIDENCE,
        None,
        Profile::Qa,
    );
    // The sentence opening with "It" continues the one naming the group, which counts in
    // full: the claim is covered as well as a single sentence would cover it.
    assert_eq!(pronoun.claims[0].label, Label::Supported, "{pronoun:?}");
    assert!(pronoun.claims[0].score > 0.95, "{pronoun:?}");
    let synonym = check(
        "The company was established in 1934 in Delhi.",
        "The company was founded in 1934 in Delhi.",
        None,
        Profile::Qa,
    );
    assert_eq!(synonym.claims[0].label, Label::Supported, "{synonym:?}");
}

#[test]
fn short_answer_in_the_context_of_the_question() {
    let q =
        Some("The Oberoi family is part of a hotel company that has a head office in what city?");
    let right = one("Delhi", q);
    assert_eq!(right.label, Label::Supported, "{right:?}");
    assert_eq!(right.claim.kind, ClaimKind::ShortAnswer);
    let wrong = one("Mumbai", q);
    assert_ne!(wrong.label, Label::Supported);
    assert!(wrong.score < right.score);
}

#[test]
fn entity_substitution_is_contradicted() {
    let v = one("The Oberoi Group has its head office in Mumbai.", None);
    assert_eq!(v.label, Label::Contradicted, "{v:?}");
    assert!(has(&v, ReasonKind::EntitySubstitution));
    assert_eq!(v.missing, ["Mumbai"]);
}

#[test]
fn another_agent_is_a_substitution() {
    let evidence = "\"Louie Louie\" is a song written by Richard Berry in 1955, best known \
            for the 1963 version by The Kingsmen.";
    for claim in [
        "The Kingsmen wrote the song.",
        "The song was written by The Kingsmen.",
    ] {
        let v = check(claim, evidence, None, Profile::Rag);
        assert_eq!(v.claims[0].label, Label::Contradicted, "{v:?}");
        assert!(has(&v.claims[0], ReasonKind::EntitySubstitution));
    }
    let right = check(
        "Richard Berry wrote the song.",
        evidence,
        None,
        Profile::Rag,
    );
    assert_eq!(right.claims[0].label, Label::Supported, "{right:?}");
    let no_agent = check(
        "Louie Louie was written in 1955.",
        evidence,
        None,
        Profile::Rag,
    );
    assert_eq!(no_agent.claims[0].label, Label::Supported, "{no_agent:?}");
}

#[test]
fn number_and_date_mismatch() {
    let year = one("The Oberoi Group was founded in 1943.", None);
    assert_eq!(year.label, Label::Contradicted);
    assert!(has(&year, ReasonKind::DateMismatch), "{year:?}");
    let count = one("The Oberoi Group runs 13 hotels.", None);
    assert_eq!(count.label, Label::Contradicted);
    assert!(has(&count, ReasonKind::NumberMismatch), "{count:?}");
}

#[test]
fn negation_flip() {
    let v = one("The Oberoi Group opened a hotel in Pakistan.", None);
    assert_eq!(v.label, Label::Contradicted, "{v:?}");
    assert!(has(&v, ReasonKind::NegationFlip));
    let v = one(
        "The Oberoi Group does not have a head office in Delhi.",
        None,
    );
    assert_eq!(v.label, Label::Contradicted, "{v:?}");
}

#[test]
fn antonym_flip() {
    let v = one(
        "Mohan Singh Oberoi was younger than his partner Ernest Grose.",
        None,
    );
    assert_eq!(v.label, Label::Contradicted, "{v:?}");
    assert!(has(&v, ReasonKind::AntonymFlip));
}

#[test]
fn arguments_exchanged_across_a_relation_are_contradicted() {
    let evidence = "Parameters can be set on a session. The method-level parameters override \
        session parameters. Cookies are kept between requests.";
    let reversed = check(
        "Session parameters override method-level parameters.",
        evidence,
        None,
        Profile::Qa,
    );
    let v = &reversed.claims[0];
    assert_eq!(v.label, Label::Contradicted, "{v:?}");
    assert!(has(v, ReasonKind::RelationReversed), "{v:?}");
    let right = check(
        "Method-level parameters override session parameters.",
        evidence,
        None,
        Profile::Qa,
    );
    assert!(
        !has(&right.claims[0], ReasonKind::RelationReversed),
        "{right:?}"
    );
    assert!(right.claims[0].score > v.score, "{right:?}");
}

#[test]
fn swapped_relation_from_words_of_the_same_passage() {
    // Every word occurs in the evidence, but not together: Pakistan is not where the head
    // office is, and Ernest Grose did not found the group.
    let q = Some("Where does the Oberoi Group have its head office?");
    let v = one("The Oberoi Group has its head office in Pakistan.", q);
    assert_ne!(v.label, Label::Supported, "{v:?}");
    let right = one("The Oberoi Group has its head office in Delhi.", q);
    assert_eq!(right.label, Label::Supported, "{right:?}");
    let swapped = one("Ernest Grose runs 31 hotels in Delhi.", None);
    assert_ne!(swapped.label, Label::Supported, "{swapped:?}");
}

#[test]
fn comparison_questions_follow_the_evidence_dates() {
    let evidence = "Arthur's Magazine (1844–1846) was an American literary periodical.\
            First for Women is a woman's magazine published by Bauer Media Group since 1989.";
    let q = Some("Which magazine was started first, Arthur's Magazine or First for Women?");
    let right = check("Arthur's Magazine", evidence, q, Profile::Qa);
    assert_eq!(right.claims[0].label, Label::Supported, "{right:?}");
    let wrong = check(
        "First for Women was started first.",
        evidence,
        q,
        Profile::Qa,
    );
    assert_eq!(wrong.claims[0].label, Label::Contradicted, "{wrong:?}");
}

#[test]
fn unsupported_claim_rate_counts_verifiable_claims_only() {
    let v = check(
        "The Oberoi Group is based in Delhi. It owns airlines in Peru. Thanks!",
        EVIDENCE,
        None,
        Profile::Rag,
    );
    assert_eq!(v.verifiable().count(), 2);
    assert!((v.unsupported_claim_rate() - 0.5).abs() < 1e-9, "{v:?}");
    let none = check("Thanks!", EVIDENCE, None, Profile::Rag);
    assert_eq!(none.unsupported_claim_rate(), 0.0);
}

#[test]
fn code_identifiers_must_match_exactly() {
    let evidence = "The function `parse_config` reads the file and returns a map. \
            The helper `load_defaults` fills missing keys.";
    let right = check(
        "`parse_config` returns a map.",
        evidence,
        None,
        Profile::Code,
    );
    assert_eq!(right.claims[0].label, Label::Supported, "{right:?}");
    let wrong = check(
        "`parse_settings` returns a map.",
        evidence,
        None,
        Profile::Code,
    );
    assert_ne!(wrong.claims[0].label, Label::Supported, "{wrong:?}");
}

#[test]
fn odd_inputs_do_not_panic() {
    for (answer, evidence) in [
        ("", ""),
        ("Delhi", ""),
        ("", "Some evidence."),
        ("....", "...."),
        ("- \n| |\n```\nunclosed", "x"),
        ("No.", "Is it? No."),
        ("Yes, é’s 1,2,3.", "é’s 1,2,3 are here."),
    ] {
        for question in [
            None,
            Some("Are A and B both C?"),
            Some("Which is older, A or B?"),
        ] {
            let v = check(answer, evidence, question, Profile::Qa);
            assert!((0.0..=1.0).contains(&v.unsupported_claim_rate()));
            for c in &v.claims {
                assert!((0.0..=1.0).contains(&c.score), "{c:?}");
            }
        }
    }
}

#[test]
fn deterministic_bytes() {
    let a = serde_json::to_string(&check("Mumbai", EVIDENCE, Some("Where?"), Profile::Qa));
    let b = serde_json::to_string(&check("Mumbai", EVIDENCE, Some("Where?"), Profile::Qa));
    assert_eq!(a.expect("json"), b.expect("json"));
}

#[test]
fn a_scattered_name_is_named_in_the_certificate() {
    let evidence = "The phrase \"Lest we forget\" is used on Remembrance Day and ANZAC Day.";
    let v = check(
        "The Day of Remembrance",
        evidence,
        Some("What is the phrase used on ANZAC Day?"),
        Profile::Qa,
    );
    let claim = &v.claims[0];
    assert_ne!(claim.label, Label::Supported, "{claim:?}");
    let reason = claim
        .reasons
        .iter()
        .find(|r| r.kind == ReasonKind::NameScattered)
        .expect("a name_scattered reason");
    assert!(reason.detail.contains("Day of Remembrance"), "{reason:?}");
    assert_eq!(
        serde_json::to_value(ReasonKind::NameScattered).expect("serialises"),
        "name_scattered"
    );
}

/// A yes/no question whose statement the evidence denies is answered "no" by it: a "yes" is
/// contradicted and a "no" supported. Before, the sentence counted as holding the statement,
/// so "yes" passed and "no" went unconfirmed.
#[test]
fn a_denied_statement_answers_a_yes_no_question_with_no() {
    let cases = [
        (
            "By default, fd does not follow symbolic links. Use -L to follow them.",
            "Does fd follow symbolic links by default?",
        ),
        (
            "The development server is not meant for production use. Use a WSGI server instead.",
            "Is the development server meant for production use?",
        ),
        (
            "Requests never retries a failed connection on its own.",
            "Does Requests retry a failed connection on its own?",
        ),
    ];
    for (evidence, question) in cases {
        let yes = check("yes", evidence, Some(question), Profile::Qa);
        let no = check("no", evidence, Some(question), Profile::Qa);
        assert_eq!(
            yes.claims[0].label,
            Label::Contradicted,
            "{question} {yes:?}"
        );
        assert!(has(&yes.claims[0], ReasonKind::PolarityMismatch), "{yes:?}");
        assert!(
            no.claims[0].score > yes.claims[0].score,
            "{question} {no:?}"
        );
        assert!(has(&no.claims[0], ReasonKind::PolarityAgrees), "{no:?}");
    }
    // Not a denial: the statement stands outside the negation too, the negation is elsewhere
    // in the sentence, or the question is itself negated.
    for (evidence, question) in [
        (
            "Sessions persist cookies across requests, and they do not persist method-level parameters.",
            "Do sessions persist cookies across requests?",
        ),
        (
            "fd respects your .gitignore files and does not search hidden directories.",
            "Does fd respect your .gitignore files?",
        ),
        (
            "By default, fd does not follow symbolic links.",
            "Doesn't fd follow symbolic links by default?",
        ),
    ] {
        let yes = check("yes", evidence, Some(question), Profile::Qa);
        assert!(
            !has(&yes.claims[0], ReasonKind::PolarityMismatch),
            "{question} {yes:?}"
        );
    }
}

/// The partners found through the name postings are exactly those of a scan of every
/// sentence (the scan made alignment quadratic in the evidence; found by probing).
#[test]
fn partners_from_the_name_postings_equal_a_scan_of_every_sentence() {
    let names = ["Ada", "Borg", "Cleve", "Dana", "Eske"];
    let mut text = String::new();
    for i in 0..300 {
        let a = names[i % 5];
        let b = names[(i * 7 + 3) % 5];
        let c = if i % 11 == 0 { "\n\n" } else { " " };
        text.push_str(&format!(
            "{a} met {b} at Station{} in {}.{c}",
            i % 13,
            1900 + i
        ));
    }
    let evidence = Evidence::new(&text);
    let scan = |s: usize| {
        let mut out = Vec::new();
        if s > 0 && !evidence.breaks[s] {
            out.push(s - 1);
        }
        if s + 1 < evidence.sentences.len() && !evidence.breaks[s + 1] {
            out.push(s + 1);
        }
        let own: HashSet<&str> = evidence.tokens[s]
            .iter()
            .filter(|t| t.kind == TokenKind::Entity && t.is_content())
            .map(|t| t.norm.as_str())
            .collect();
        if own.is_empty() {
            return out;
        }
        for (t, tokens) in evidence.tokens.iter().enumerate() {
            if out.len() >= MAX_PARTNERS {
                break;
            }
            if t == s || out.contains(&t) {
                continue;
            }
            if tokens
                .iter()
                .any(|x| x.kind == TokenKind::Entity && own.contains(x.norm.as_str()))
            {
                out.push(t);
            }
        }
        out
    };
    assert!(evidence.sentences.len() > 250);
    for s in 0..evidence.sentences.len() {
        assert_eq!(partners(&evidence, s), scan(s), "sentence {s}");
    }
}
