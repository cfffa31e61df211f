//! The witness throughput figure behind `svc bench`: claims verified per second on one core
//! against about 2 KB of evidence, including claim extraction and evidence indexing.

use std::time::Instant;

use super::profile::Profile;
use super::verify;
use crate::bench::Figure;

/// About 2 KB of evidence: encyclopedic sentences about generated entities.
pub fn synthetic_evidence(seed: usize) -> String {
    evidence_of(seed, 2000)
}

/// At least `bytes` of evidence like [`synthetic_evidence`]'s.
fn evidence_of(seed: usize, bytes: usize) -> String {
    let mut text = String::new();
    let mut i = 0;
    while text.len() < bytes {
        let n = seed * 31 + i;
        text.push_str(&format!(
            "The Station {n} observatory was founded in {} by the astronomer Ada Vell{n}, who directed it until {}. \
             Its main telescope has a {}-metre mirror and it does not operate a radio dish. ",
            1900 + n % 100,
            1950 + n % 50,
            1 + n % 9
        ));
        i += 1;
    }
    text
}

/// Answers of five claims (four verifiable) each, half of them wrong in a number, a name or a polarity.
pub fn synthetic_answers(seed: usize, count: usize) -> Vec<String> {
    (0..count)
        .map(|k| {
            let n = seed * 31 + k % 5;
            format!(
                "The Station {n} observatory was founded in {} by Ada Vell{n}.\n\
                 - Its main telescope has a {}-metre mirror.\n\
                 - It operates a radio dish.\n\
                 Ada Vell{} directed it until {}. Hope this helps!",
                1900 + n % 100 + k % 2,
                1 + n % 9,
                n + k % 3,
                1950 + n % 50
            )
        })
        .collect()
}

/// Claims verified per second, one thread.
pub fn claims_per_second(answers_per_evidence: usize, evidences: usize) -> Figure {
    let cases: Vec<(String, Vec<String>)> = (0..evidences)
        .map(|seed| {
            (
                synthetic_evidence(seed),
                synthetic_answers(seed, answers_per_evidence),
            )
        })
        .collect();
    let evidence_bytes: usize =
        cases.iter().map(|(e, _)| e.len()).sum::<usize>() / evidences.max(1);
    // Warm up allocations and lazy tables.
    let _ = verify::check(&cases[0].1[0], &cases[0].0, None, Profile::Rag);
    let start = Instant::now();
    let mut claims = 0usize;
    let mut verifiable = 0usize;
    for (evidence, answers) in &cases {
        for answer in answers {
            let v = verify::check(answer, evidence, None, Profile::Rag);
            claims += v.claims.len();
            verifiable += v.verifiable().count();
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    Figure {
        name: "witness verify".into(),
        value: verifiable as f64 / seconds,
        unit: "claims/s".into(),
        target: Some(">= 2000".into()),
        detail: format!(
            "{verifiable} verifiable of {claims} claims, {} answers, {evidence_bytes} B evidence each (indexed per answer), 1 thread, {seconds:.2} s",
            answers_per_evidence * evidences
        ),
    }
}

/// Milliseconds per answer against long evidence (`bytes` of it, indexed once per answer as
/// the proxy does): the cost that grows with the evidence. Aligning a claim scanned every
/// sentence for names shared with each candidate sentence, which made it quadratic: 8,000
/// sentences (480 KB) took 16 s for ten claims.
pub fn long_evidence(bytes: usize, answers: usize) -> Figure {
    let evidence = evidence_of(0, bytes);
    let answers = synthetic_answers(0, answers);
    let start = Instant::now();
    let mut verifiable = 0usize;
    for answer in &answers {
        verifiable += verify::check(answer, &evidence, None, Profile::Rag)
            .verifiable()
            .count();
    }
    let seconds = start.elapsed().as_secs_f64();
    Figure {
        name: "witness verify, long evidence".into(),
        value: seconds * 1000.0 / answers.len().max(1) as f64,
        unit: "ms/answer".into(),
        target: Some("<= 250".into()),
        detail: format!(
            "{} answers ({verifiable} verifiable claims) against {} KB of evidence, indexed per answer, 1 thread, {seconds:.2} s",
            answers.len(),
            evidence.len() / 1000
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_inputs_have_the_advertised_shape() {
        let evidence = synthetic_evidence(0);
        assert!((2000..2400).contains(&evidence.len()), "{}", evidence.len());
        let answers = synthetic_answers(0, 4);
        let v = verify::check(&answers[1], &evidence, None, Profile::Rag);
        assert_eq!(v.verifiable().count(), 4, "{v:#?}");
        assert!(v.has_unsupported());
    }
}
