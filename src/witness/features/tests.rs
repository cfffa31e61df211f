use super::polarity::prefix_opposites;
use super::*;
use crate::witness::verify::claim_features;

const EVIDENCE: &str = "The Oberoi family is an Indian family famous for its hotels, namely \
    through The Oberoi Group. The Oberoi Group is a hotel company with its head office in \
    Delhi. It was founded in 1934 and runs 31 hotels. The group did not open a hotel in \
    Pakistan. Rai Bahadur Mohan Singh Oberoi was older than his partner Ernest Grose.";

fn features(answer: &str, question: Option<&str>) -> Features {
    features_in(EVIDENCE, answer, question)
}

fn features_in(evidence: &str, answer: &str, question: Option<&str>) -> Features {
    let evidence = Evidence::new(evidence);
    let all = claim_features(&evidence, answer, question);
    assert_eq!(all.len(), 1, "{all:?}");
    all[0]
}

#[test]
fn coverage_of_a_faithful_claim_is_full() {
    let f = features("The Oberoi Group has its head office in Delhi.", None);
    assert_eq!(f.focus_coverage, 1.0, "{f:?}");
    assert_eq!(f.name_coverage, 1.0);
    assert_eq!(f.missing_words + f.missing_names + f.unaligned_words, 0.0);
    assert!(!f.contradicts());
}

#[test]
fn words_found_nowhere_are_counted_by_kind() {
    let f = features("The Oberoi Group has its head office in Mumbai.", None);
    assert_eq!(f.missing_names, 1.0, "{f:?}");
    assert!(f.name_coverage < 1.0);
    let f = features("The Oberoi Group keeps its head office in Delhi.", None);
    assert_eq!(f.missing_words, 1.0, "{f:?}");
    assert_eq!(f.missing_names, 0.0);
}

#[test]
fn numbers_disagreeing_with_the_span_are_a_mismatch() {
    let f = features("The Oberoi Group was founded in 1943.", None);
    assert_eq!(f.number_mismatch, 1.0, "{f:?}");
    assert!(f.contradicts());
    let f = features("The Oberoi Group runs 13 hotels.", None);
    assert_eq!(f.number_mismatch, 1.0, "{f:?}");
    let agree = features("The Oberoi Group runs 31 hotels.", None);
    assert_eq!(agree.number_mismatch, 0.0, "{agree:?}");
}

#[test]
fn a_number_with_nothing_to_compare_is_missing() {
    let f = features_in(
        "The library decodes gzip responses.",
        "The library decodes 40 gzip responses.",
        None,
    );
    assert_eq!(f.missing_numbers, 1.0, "{f:?}");
    assert_eq!(f.number_mismatch, 0.0);
}

#[test]
fn negation_on_one_side_flips() {
    let f = features("The Oberoi Group opened a hotel in Pakistan.", None);
    assert_eq!(f.negation_flip, 1.0, "{f:?}");
    let same = features("The group did not open a hotel in Pakistan.", None);
    assert_eq!(same.negation_flip, 0.0, "{same:?}");
}

#[test]
fn antonyms_and_negating_prefixes_flip() {
    let f = features(
        "Mohan Singh Oberoi was younger than his partner Ernest Grose.",
        None,
    );
    assert_eq!(f.antonym_flip, 1.0, "{f:?}");
    let evidence = "The search is case-insensitive by default.";
    let f = features_in(evidence, "The search is case-sensitive by default.", None);
    assert_eq!(f.antonym_flip, 1.0, "{f:?}");
    let f = features_in(evidence, "The search is case-insensitive by default.", None);
    assert_eq!(f.antonym_flip, 0.0, "{f:?}");
    assert!(prefix_opposites("insensitiv", "sensitiv"));
    assert!(!prefix_opposites("into", "to"));
}

/// A negation flips a claim only where a claim word stands under it alone: the evidence's
/// "doesn't know … the host" negates knowing, while its next clause states the claim.
#[test]
fn a_negation_elsewhere_in_the_sentence_does_not_flip_the_claim() {
    let evidence = "By default the server doesn't know which host it is reached through, and \
        treats every host as valid. Flask itself does not provide caching.";
    let f = features_in(
        evidence,
        "By default the server treats every host as valid.",
        None,
    );
    assert_eq!(f.negation_flip, 0.0, "{f:?}");
    let f = features_in(
        evidence,
        "By default the server treats no host as valid.",
        None,
    );
    assert_eq!(f.negation_flip, 1.0, "{f:?}");
    let f = features_in(evidence, "Flask itself provides caching.", None);
    assert_eq!(f.negation_flip, 1.0, "{f:?}");
}

#[test]
fn an_opposite_under_a_negation_agrees() {
    let evidence = "Your feature request will most likely not be accepted by the maintainers.";
    let f = features_in(
        evidence,
        "Your feature request will most likely be rejected.",
        None,
    );
    assert_eq!(f.antonym_flip, 0.0, "{f:?}");
    let evidence = "Your feature request will most likely be accepted by the maintainers.";
    let f = features_in(
        evidence,
        "Your feature request will most likely be rejected.",
        None,
    );
    assert_eq!(f.antonym_flip, 1.0, "{f:?}");
}

/// A negation in capitals is stressed, not a name (regression: reading capitalised negation
/// words as names took "NOT" for one too).
#[test]
fn a_negation_in_capitals_still_negates() {
    let evidence = "The reloader does not work on Windows.";
    let f = features_in(evidence, "The reloader does NOT work on Windows.", None);
    assert_eq!(f.negation_flip, 0.0, "{f:?}");
    let f = features_in(
        "The reloader works on Windows.",
        "The reloader does NOT work on Windows.",
        None,
    );
    assert_eq!(f.negation_flip, 1.0, "{f:?}");
}

/// Python's `None`, capitalised inside a sentence, negates nothing.
#[test]
fn a_capitalised_none_inside_a_sentence_is_a_value() {
    let evidence = "Set stream=True on the request to iterate over the body in chunks.";
    let f = features_in(
        evidence,
        "Set stream=True on the request to iterate in chunks of size None.",
        None,
    );
    assert_eq!(f.negation_flip, 0.0, "{f:?}");
}

#[test]
fn another_name_in_the_span_is_a_substitution() {
    let q = Some("Where does the Oberoi Group have its head office?");
    let f = features("The Oberoi Group has its head office in Mumbai.", q);
    assert_eq!(f.name_substitution, 1.0, "{f:?}");
}

#[test]
fn another_agent_of_the_same_verb_is_a_mismatch() {
    let evidence = "\"Louie Louie\" is a song written by Richard Berry in 1955, best known for \
        the 1963 version by The Kingsmen.";
    let f = features_in(evidence, "The Kingsmen wrote the song.", None);
    assert_eq!(f.agent_mismatch, 1.0, "{f:?}");
    let f = features_in(evidence, "Richard Berry wrote the song.", None);
    assert_eq!(f.agent_mismatch, 0.0, "{f:?}");
}

#[test]
fn a_short_answer_outside_the_answering_sentence_is_a_slot_mismatch() {
    let evidence = "The Halden Observatory was founded in 1921 by Ingrid Solberg. Per Anker \
        succeeded Solberg as director in 1950.";
    let q = Some("Who founded the Halden Observatory?");
    let f = features_in(evidence, "Per Anker", q);
    assert_eq!(f.slot_mismatch, 1.0, "{f:?}");
    let f = features_in(evidence, "Ingrid Solberg", q);
    assert_eq!(f.slot_mismatch, 0.0, "{f:?}");
}

#[test]
fn a_question_for_a_number_needs_one() {
    let q = Some("In what year was the Oberoi Group founded?");
    assert_eq!(features("Delhi", q).answer_type_mismatch, 1.0);
    assert_eq!(features("1934", q).answer_type_mismatch, 0.0);
}

#[test]
fn the_other_side_of_a_comparison_is_a_mismatch() {
    let evidence = "Arthur's Magazine (1844–1846) was an American literary periodical. First \
        for Women is a woman's magazine published by Bauer Media Group since 1989.";
    let q = Some("Which magazine was started first, Arthur's Magazine or First for Women?");
    assert_eq!(
        features_in(evidence, "First for Women", q).comparison_mismatch,
        1.0
    );
    assert_eq!(
        features_in(evidence, "Arthur's Magazine", q).comparison_mismatch,
        0.0
    );
}

#[test]
fn a_bare_no_is_unconfirmed_by_overlap() {
    let evidence = "Cadmium Chloride is slightly soluble in alcohol.";
    let q = Some("Is Cadmium Chloride soluble in alcohol?");
    let yes = features_in(evidence, "yes", q);
    let no = features_in(evidence, "no", q);
    assert_eq!(yes.polarity_unconfirmed, 0.0, "{yes:?}");
    assert_eq!(no.polarity_unconfirmed, 1.0, "{no:?}");
    assert_eq!(yes.focus_coverage, 1.0, "{yes:?}");
}

#[test]
fn verbatim_quotes_are_marked() {
    let f = features(
        "The Oberoi Group is a hotel company with its head office in Delhi.",
        None,
    );
    assert_eq!(f.verbatim, 1.0, "{f:?}");
    assert_eq!(features("Delhi is the head office.", None).verbatim, 0.0);
}

#[test]
fn a_partner_sentence_marks_a_joined_span() {
    let f = features("The Oberoi Group was founded in 1934 in Delhi.", None);
    assert_eq!(f.joined_span, 1.0, "{f:?}");
    let f = features("The group did not open a hotel in Pakistan.", None);
    assert_eq!(f.joined_span, 0.0, "{f:?}");
}

#[test]
fn swapped_order_lowers_order_agreement() {
    let evidence = "Method-level parameters override session parameters.";
    let right = features_in(
        evidence,
        "Method-level parameters override session parameters.",
        None,
    );
    let swapped = features_in(
        evidence,
        "Session parameters override method-level parameters.",
        None,
    );
    assert_eq!(right.order_agreement, 1.0, "{right:?}");
    assert!(swapped.order_agreement < 1.0, "{swapped:?}");
}

#[test]
fn words_from_another_sentence_are_unaligned() {
    let f = features("The Oberoi Group runs 31 hotels in Pakistan.", None);
    assert!(f.unaligned_words >= 1.0, "{f:?}");
}

#[test]
fn names_follow_the_values_order() {
    let f = Features {
        order_agreement: 0.25,
        focus_coverage: 0.5,
        ..Features::default()
    };
    let values = f.values();
    let at = |name: &str| NAMES.iter().position(|n| *n == name).expect("named");
    assert_eq!(values[at("order_agreement")], 0.25);
    assert_eq!(values[at("focus_coverage")], 0.5);
}

/// Badr Hari's sentence (after HaluEval dev item 5, shortened): the question's words sit in
/// the second sentence, the gym in the first.
const KICKBOXER: &str = "Badr Hari is a Moroccan-Dutch kickboxer from Amsterdam, fighting out \
    of Mike's Gym in Oostzaan. Hari was once considered the best kickboxer in the world, \
    however he has been involved in controversies relating to his unsportsmanlike conduct.";
const KICKBOXER_QUESTION: &str =
    "Who was once considered the best kickboxer in the world, however involved in controversies?";

#[test]
fn an_answer_from_another_fact_sits_away_from_the_question() {
    let right = features_in(KICKBOXER, "Badr Hari", Some(KICKBOXER_QUESTION));
    let wrong = features_in(
        KICKBOXER,
        "Mike's Gym in Oostzaan",
        Some(KICKBOXER_QUESTION),
    );
    assert!(right.answer_at_question > 0.0, "{right:?}");
    assert_eq!(wrong.answer_at_question, 0.0, "{wrong:?}");
    assert!(
        right.window_alignment > wrong.window_alignment,
        "{right:?} {wrong:?}"
    );
    assert!(right.window_alignment <= 1.0 && wrong.window_alignment >= 0.0);
}

#[test]
fn proximity_features_are_neutral_without_a_question() {
    let f = features_in(
        KICKBOXER,
        "Badr Hari fights out of Mike's Gym in Oostzaan.",
        None,
    );
    assert_eq!(f.answer_at_question, 1.0, "{f:?}");
    assert_eq!(f.window_alignment, 1.0, "{f:?}");
}

/// Two members of a pair in one sentence, one of them described by a sentence of its own that
/// holds the rest of the question: that one fills the question's slot.
const PAIR: &str = "The Harbour Quartet was a jazz group that consisted of Miller (Tom Ash) and \
    Okafor (Ben Reyes).\n\nTom Ash (born 3 May 1950) is a Welsh pianist and composer.";

#[test]
fn a_rival_name_the_question_describes_elsewhere_is_better_linked() {
    let q = "The Harbour Quartet consisted of what musician born 3 May 1950?";
    let wrong = features_in(PAIR, "Okafor", Some(q));
    assert!(wrong.better_linked_name > 0.3, "{wrong:?}");
    let right = features_in(PAIR, "Tom Ash", Some(q));
    assert_eq!(right.better_linked_name, 0.0, "{right:?}");
    // Without a question there is no slot to fill.
    let free = features_in(PAIR, "Okafor was in the Harbour Quartet.", None);
    assert_eq!(free.better_linked_name, 0.0, "{free:?}");
}

#[test]
fn a_do_support_question_describes_its_subject_not_a_rival() {
    let q = "Who did the Welsh pianist born 3 May 1950 play beside in the Harbour Quartet?";
    let f = features_in(PAIR, "Okafor", Some(q));
    assert_eq!(f.better_linked_name, 0.0, "{f:?}");
}

/// Members of a list are names of their own: the answer's list neighbour, described by a
/// sentence of its own that holds the rest of the question, is the better-linked rival.
#[test]
fn each_member_of_a_list_is_a_name_of_its_own() {
    let evidence = "The film starred Ann Lee, Bo Park, Cy Ray and Di Fox.\n\nBo Park (born 1970) \
        is a Welsh actress who also starred in Harbour Lights.";
    let q = "Which Welsh actress of the film also starred in Harbour Lights?";
    let wrong = features_in(evidence, "Cy Ray", Some(q));
    assert!(wrong.better_linked_name > 0.3, "{wrong:?}");
    let right = features_in(evidence, "Bo Park", Some(q));
    assert_eq!(right.better_linked_name, 0.0, "{right:?}");
}

/// A rival name's sentence continued by a definite description of its head word ("the
/// college") is about it too: the question's rest, found there, links the rival.
#[test]
fn a_definite_description_by_the_head_word_continues_the_sentence_about_a_name() {
    let evidence = "Ann Lee helped found the Harbour Museum and Kestrel College.\n\nKestrel \
        College is a school in Tenby. Originally run by the Baptist Union, the college became \
        public in 1950.";
    let q = "Which institution founded by Ann Lee was originally run by the Baptist Union?";
    let wrong = features_in(evidence, "The Harbour Museum", Some(q));
    assert!(wrong.better_linked_name > 0.3, "{wrong:?}");
    let right = features_in(evidence, "Kestrel College", Some(q));
    assert_eq!(right.better_linked_name, 0.0, "{right:?}");
    // Without the reference back, the sentence after is about something else.
    let unrelated = evidence.replace("the college became", "a new owner made it");
    let f = features_in(&unrelated, "The Harbour Museum", Some(q));
    assert!(f.better_linked_name < wrong.better_linked_name, "{f:?}");
}

#[test]
fn a_name_made_of_the_passages_words_in_another_order_is_scattered() {
    let evidence = "The phrase \"Lest we forget\" is used on Remembrance Day and ANZAC Day. \
        Observed on 25 April each year, Anzac Day honours the corps.";
    let q = "What is the phrase commonly used on the day observed on 25 April each year?";
    let wrong = features_in(evidence, "The Day of Remembrance", Some(q));
    assert_eq!(wrong.scattered_name, 1.0, "{wrong:?}");
    let right = features_in(evidence, "Remembrance Day", Some(q));
    assert_eq!(right.scattered_name, 0.0, "{right:?}");
    let quoted = features_in(evidence, "\"Lest we forget\"", Some(q));
    assert_eq!(quoted.scattered_name, 0.0, "{quoted:?}");
}

#[test]
fn a_dropped_ordinal_is_a_number_mismatch() {
    let evidence = "Columbus is the third-most populous state capital in the United States, \
        and the second-largest city in the Midwestern United States.";
    let wrong = features_in(
        evidence,
        "Columbus is the largest city in the Midwest.",
        None,
    );
    assert_eq!(wrong.number_mismatch, 1.0, "{wrong:?}");
    assert!(wrong.contradicts());
    let right = features_in(
        evidence,
        "Columbus is the second largest city in the Midwest.",
        None,
    );
    assert_eq!(right.number_mismatch, 0.0, "{right:?}");
}

/// The rank and name-order detectors slice the claim and evidence texts between neighbouring
/// tokens: odd spacing, options and non-ASCII text must not make them panic.
#[test]
fn rank_and_name_detectors_take_odd_input() {
    let evidences = [
        "",
        "The 2nd largest. Second-largest-city. Élodie Ødegård of the Ærø Ferry Co. --Opt -J",
        "Day of Remembrance Day of. The the University. 11th most 3rd-best",
    ];
    let claims = [
        "The 2nd-largest Ærø Ferry",
        "Élodie of the Ødegård",
        "--Opt -J Remembrance of Day",
        "third-most populous",
        "St. Louis Day 1st",
    ];
    for evidence in evidences {
        for claim in claims {
            let evidence = Evidence::new(evidence);
            for question in [None, Some("Which is the second-largest?")] {
                let _ = claim_features(&evidence, claim, question);
            }
        }
    }
}
