//! `--shard auto/N`: the shard index from the job engine that started this process.
//!
//! - Kubernetes Indexed Job: `JOB_COMPLETION_INDEX`, 0-based (`0..completions`).
//! - Slurm job array: `SLURM_ARRAY_TASK_ID`, made 0-based by subtracting `SLURM_ARRAY_TASK_MIN`
//!   (Slurm sets it for every array task; `--array=1-4` gives 1..4, `--array=0-3` gives 0..3).
//!   When `SLURM_ARRAY_TASK_COUNT` is set it must equal N.
//!
//! A CI matrix has no such variable: pass `--shard K/N` from the matrix value instead.

use std::str::FromStr;

use super::Shard;

/// Kubernetes Indexed Job completion index (0-based).
pub const JOB_COMPLETION_INDEX: &str = "JOB_COMPLETION_INDEX";
/// Slurm array task id.
pub const SLURM_ARRAY_TASK_ID: &str = "SLURM_ARRAY_TASK_ID";
/// Slurm array's smallest task id.
pub const SLURM_ARRAY_TASK_MIN: &str = "SLURM_ARRAY_TASK_MIN";
/// Slurm array's task count.
pub const SLURM_ARRAY_TASK_COUNT: &str = "SLURM_ARRAY_TASK_COUNT";

/// `--shard`: a fixed `K/N`, or `auto/N` resolved from the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardSpec {
    Fixed(Shard),
    Auto { count: usize },
}

impl Default for ShardSpec {
    fn default() -> Self {
        Self::Fixed(Shard::default())
    }
}

impl FromStr for ShardSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().strip_prefix("auto/") {
            Some(count) => match count.trim().parse::<usize>() {
                Ok(count) if count > 0 => Ok(Self::Auto { count }),
                _ => Err(format!(
                    "shard `{text}`: auto/N needs a shard count N >= 1 (e.g. auto/4)"
                )),
            },
            None => Shard::from_str(text).map(Self::Fixed),
        }
    }
}

/// Why `auto/N` could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardEnvError {
    #[error(
        "--shard auto/{count}: neither {JOB_COMPLETION_INDEX} (Kubernetes Indexed Job) nor {SLURM_ARRAY_TASK_ID} (Slurm array) is set; run under one of them or pass --shard K/{count}"
    )]
    NotSet { count: usize },
    #[error("--shard auto/{count}: {variable}={value:?} is not a whole number")]
    NotANumber {
        count: usize,
        variable: &'static str,
        value: String,
    },
    #[error(
        "--shard auto/{count}: {variable} gives the 0-based index {index}, outside 0..{count}; the job's completions (or array size) must equal N"
    )]
    OutOfRange {
        count: usize,
        variable: &'static str,
        index: i64,
    },
    #[error(
        "--shard auto/{count}: {SLURM_ARRAY_TASK_COUNT}={tasks} but N is {count}; make the array size and N equal"
    )]
    CountMismatch { count: usize, tasks: usize },
}

impl ShardSpec {
    /// The shard, reading the engine's variables through `env` when `auto`.
    pub fn resolve(self, env: impl Fn(&str) -> Option<String>) -> Result<Shard, ShardEnvError> {
        let count = match self {
            Self::Fixed(shard) => return Ok(shard),
            Self::Auto { count } => count,
        };
        let number = |variable: &'static str, value: String| {
            value
                .trim()
                .parse::<i64>()
                .map_err(|_| ShardEnvError::NotANumber {
                    count,
                    variable,
                    value,
                })
        };
        let set = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let (variable, index) = if let Some(value) = set(JOB_COMPLETION_INDEX) {
            (JOB_COMPLETION_INDEX, number(JOB_COMPLETION_INDEX, value)?)
        } else if let Some(value) = set(SLURM_ARRAY_TASK_ID) {
            if let Some(tasks) = set(SLURM_ARRAY_TASK_COUNT) {
                let tasks = number(SLURM_ARRAY_TASK_COUNT, tasks)?;
                if tasks != count as i64 {
                    return Err(ShardEnvError::CountMismatch {
                        count,
                        tasks: tasks.max(0) as usize,
                    });
                }
            }
            let min = match set(SLURM_ARRAY_TASK_MIN) {
                Some(min) => number(SLURM_ARRAY_TASK_MIN, min)?,
                None => 0,
            };
            (
                SLURM_ARRAY_TASK_ID,
                number(SLURM_ARRAY_TASK_ID, value)? - min,
            )
        } else {
            return Err(ShardEnvError::NotSet { count });
        };
        if index < 0 || index >= count as i64 {
            return Err(ShardEnvError::OutOfRange {
                count,
                variable,
                index,
            });
        }
        Ok(Shard {
            index: index as usize + 1,
            count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(spec: &str, vars: &[(&str, &str)]) -> Result<Shard, ShardEnvError> {
        let spec: ShardSpec = spec.parse().expect("spec");
        spec.resolve(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn kubernetes_index_is_zero_based() {
        assert_eq!(
            resolve("auto/4", &[(JOB_COMPLETION_INDEX, "0")]),
            Ok(Shard { index: 1, count: 4 })
        );
        assert_eq!(
            resolve("auto/4", &[(JOB_COMPLETION_INDEX, "3")]),
            Ok(Shard { index: 4, count: 4 })
        );
        assert!(matches!(
            resolve("auto/4", &[(JOB_COMPLETION_INDEX, "4")]),
            Err(ShardEnvError::OutOfRange { index: 4, .. })
        ));
    }

    #[test]
    fn slurm_ids_start_at_the_arrays_minimum() {
        let one_based = [(SLURM_ARRAY_TASK_ID, "1"), (SLURM_ARRAY_TASK_MIN, "1")];
        assert_eq!(
            resolve("auto/2", &one_based),
            Ok(Shard { index: 1, count: 2 })
        );
        assert_eq!(
            resolve("auto/2", &[(SLURM_ARRAY_TASK_ID, "1")]),
            Ok(Shard { index: 2, count: 2 }),
            "without a minimum the id is taken as 0-based"
        );
        assert!(matches!(
            resolve(
                "auto/2",
                &[(SLURM_ARRAY_TASK_ID, "1"), (SLURM_ARRAY_TASK_COUNT, "3")]
            ),
            Err(ShardEnvError::CountMismatch { tasks: 3, .. })
        ));
    }

    #[test]
    fn fixed_shards_and_clear_errors() {
        assert_eq!(resolve("2/3", &[]), Ok(Shard { index: 2, count: 3 }));
        let error = resolve("auto/3", &[]).expect_err("unset");
        assert!(
            error.to_string().contains("JOB_COMPLETION_INDEX"),
            "{error}"
        );
        assert!(matches!(
            resolve("auto/3", &[(JOB_COMPLETION_INDEX, "x")]),
            Err(ShardEnvError::NotANumber { .. })
        ));
        assert!("auto/0".parse::<ShardSpec>().is_err());
        assert!("auto/x".parse::<ShardSpec>().is_err());
    }
}
