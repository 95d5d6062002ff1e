//! `txlab sweep --emit slurm DIR`: a Slurm job array with one task per point. Each task runs
//! `txlab sweep` with the same flags and `--point $SLURM_ARRAY_TASK_ID`, writing its own
//! results file, so tasks never share a file; `txlab merge` joins them afterwards.

use super::run::{usage, Failure};
use super::sweep::Sweep;
use std::path::Path;

/// Quotes `s` for a POSIX shell.
fn quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The job script for `sweep`, whose tasks write into `dir`; `txlab` is the binary to call
/// unless `$TXLAB` names another.
pub(super) fn script(sweep: &Sweep, dir: &Path, txlab: &Path) -> String {
    let points = sweep.plans.len();
    let mut flags: Vec<String> = sweep.def.base.iter().map(|a| quote(a)).collect();
    for axis in &sweep.def.grid {
        let sep = if axis.values.iter().any(|v| v.contains(',')) { ";" } else { "," };
        flags.push("--vary".into());
        flags.push(quote(&format!("{}={}", axis.name, axis.values.join(sep))));
    }
    let dir_q = quote(&dir.display().to_string());
    format!(
        r#"#!/usr/bin/env bash
# A txlab sweep as a Slurm job array: {points} points, one array task each.
#   submit:   sbatch {dir}/sweep.sbatch
#   then:     txlab merge {dir}/results/point-*.jsonl --out results.jsonl
# A task that fails or is cancelled can be resubmitted alone (sbatch --array=I ...): it
# resumes its own results file.
#SBATCH --job-name=txlab-sweep
#SBATCH --array=0-{last}
#SBATCH --nodes=1
#SBATCH --exclusive
#SBATCH --output={dir}/logs/point-%a.log
set -euo pipefail
txlab="${{TXLAB:-{txlab}}}"
task="${{SLURM_ARRAY_TASK_ID:?run this script with sbatch, or set SLURM_ARRAY_TASK_ID}}"
mkdir -p {dir_q}/results {dir_q}/logs
exec "$txlab" sweep {flags} --point "$task" --resume --out {dir_q}/results/point-"$task".jsonl
"#,
        dir = dir.display(),
        last = points - 1,
        txlab = quote(&txlab.display().to_string()),
        flags = flags.join(" "),
    )
}

/// Writes the job script for `sweep` into the directory `emit[1]`.
pub(super) fn emit(sweep: &Sweep, emit: &[String], out: Option<&Path>) -> Result<(), Failure> {
    let (kind, dir) = (&emit[0], Path::new(&emit[1]));
    if kind != "slurm" {
        return Err(usage(format!("--emit {kind}: unknown scheduler (expected: slurm)")));
    }
    if let Some(out) = out {
        eprintln!(
            "note: with --emit, each task writes {}/results/point-I.jsonl; --out {} is not used",
            dir.display(),
            out.display()
        );
    }
    std::fs::create_dir_all(dir.join("logs"))
        .and_then(|()| std::fs::create_dir_all(dir.join("results")))
        .map_err(|e| usage(format!("--emit slurm {}: {e}", dir.display())))?;
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let txlab = std::env::current_exe().unwrap_or_else(|_| "txlab".into());
    let path = dir.join("sweep.sbatch");
    std::fs::write(&path, script(sweep, &dir, &txlab))
        .map_err(|e| Failure::Run(format!("{}: {e}", path.display())))?;
    println!(
        "wrote {} ({} array tasks); submit it with `sbatch {}`, then join the results with \
         `txlab merge {}/results/point-*.jsonl --out results.jsonl`",
        path.display(),
        sweep.plans.len(),
        path.display(),
        dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quoting() {
        assert_eq!(quote("--theta"), "--theta");
        assert_eq!(quote("mix=1,2;3"), "'mix=1,2;3'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
