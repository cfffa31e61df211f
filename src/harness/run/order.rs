//! The order trials run in.
//!
//! Default: the whole matrix shuffled by the seed, so no condition is systematically first.
//! Cache-neutral (`--cache-neutral`): the trials of one task (every condition and budget of one
//! replicate) run back to back, tasks in a seeded order and conditions within a task in a
//! seeded order per task; then, greedily, no trial follows one of its own condition when
//! another condition is left (within a task and across the boundary to the next). A
//! prefix-caching server then sees each condition after each other condition about equally
//! often, rather than `raw` after `raw` — whose shared prefix a server answers many times
//! faster — in a long run of its own.

use super::Cell;
use crate::harness::text::SplitMix64;

/// Puts `cells` in run order (see the module docs).
pub(super) fn arrange(cells: &mut Vec<Cell>, seed: u64, interleave: bool) {
    let mut rng = SplitMix64::new(seed);
    if !interleave {
        rng.shuffle(cells);
        return;
    }
    // Tasks in order of first appearance, so the grouping does not depend on a hash map.
    let mut groups: Vec<((usize, u64), Vec<Cell>)> = Vec::new();
    for cell in cells.drain(..) {
        let key = (cell.task, cell.replicate);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, group)) => group.push(cell),
            None => groups.push((key, vec![cell])),
        }
    }
    rng.shuffle(&mut groups);
    let mut last = None;
    for (_, mut group) in groups {
        rng.shuffle(&mut group);
        while !group.is_empty() {
            let at = group
                .iter()
                .position(|c| Some(c.condition) != last)
                .unwrap_or(0);
            let cell = group.remove(at);
            last = Some(cell.condition);
            cells.push(cell);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::condition::Condition;

    fn matrix(tasks: usize, budgets: &[usize]) -> Vec<Cell> {
        let mut cells = Vec::new();
        for &budget in budgets {
            for task in 0..tasks {
                for condition in Condition::ALL {
                    if condition == Condition::Raw && budget != budgets[0] {
                        continue;
                    }
                    cells.push(Cell {
                        task,
                        condition,
                        budget,
                        replicate: 0,
                    });
                }
            }
        }
        cells
    }

    #[test]
    fn interleaved_runs_each_task_back_to_back_and_never_repeats_a_condition() {
        let mut cells = matrix(30, &[512, 1024]);
        let all = cells.len();
        arrange(&mut cells, 7, true);
        assert_eq!(cells.len(), all);
        // Each task's seven trials are contiguous.
        for chunk in cells.chunks(7) {
            assert!(chunk.iter().all(|c| c.task == chunk[0].task), "{chunk:?}");
        }
        // No trial follows one of its own condition: within a task there is always another
        // condition left until the last two, and raw appears once.
        let repeats = cells
            .windows(2)
            .filter(|w| w[0].condition == w[1].condition)
            .count();
        assert!(repeats <= 30, "{repeats}");
        let raw_after_raw = cells
            .windows(2)
            .filter(|w| w[0].condition == Condition::Raw && w[1].condition == Condition::Raw)
            .count();
        assert_eq!(raw_after_raw, 0);
        // Seeded: the same seed gives the same order, another seed another.
        let mut again = matrix(30, &[512, 1024]);
        arrange(&mut again, 7, true);
        let key = |c: &Cell| (c.task, c.condition, c.budget);
        assert_eq!(
            cells.iter().map(key).collect::<Vec<_>>(),
            again.iter().map(key).collect::<Vec<_>>()
        );
        let mut other = matrix(30, &[512, 1024]);
        arrange(&mut other, 8, true);
        assert_ne!(
            cells.iter().map(key).collect::<Vec<_>>(),
            other.iter().map(key).collect::<Vec<_>>()
        );
        // Every condition comes first in some task: the order within a task is not fixed.
        let firsts: std::collections::HashSet<Condition> =
            cells.chunks(7).map(|chunk| chunk[0].condition).collect();
        assert_eq!(firsts.len(), Condition::ALL.len());
    }

    #[test]
    fn one_budget_never_repeats_a_condition_back_to_back() {
        let mut cells = matrix(40, &[512]);
        arrange(&mut cells, 3, true);
        assert!(
            cells.windows(2).all(|w| w[0].condition != w[1].condition),
            "four conditions per task, one each: the greedy order never repeats"
        );
    }

    #[test]
    fn the_default_shuffles_the_whole_matrix() {
        let mut cells = matrix(30, &[512]);
        arrange(&mut cells, 7, false);
        let contiguous = cells
            .chunks(4)
            .filter(|chunk| chunk.iter().all(|c| c.task == chunk[0].task))
            .count();
        assert!(contiguous < 5, "{contiguous}");
    }
}
