//! Output files written whole or not at all.
//!
//! Every file a command writes as its result (`run --json`/`--csv`, `report --out`, `plot --out`,
//! `merge --out`, `reproduce`'s report and figures, `check --json`, `recover --json`, `analyze
//! --dot`) goes to a temporary file beside its destination, which
//! replaces the destination by a rename only once the command has succeeded. A command that
//! fails (bad or corrupt input, a failed load, a protocol that refuses the run) leaves an
//! existing file as it was, and a reader never sees a half-written one. The temporary file is
//! created when the command starts, so a path that cannot be written fails before anything is
//! loaded; it is removed if the command fails. (`sweep --out` is the exception: its results
//! file is appended to run by run, so that a killed sweep keeps what it measured and
//! `--resume` finishes it; it refuses to open an existing file without `--resume`.)
//!
//! `tempfile` makes the temporary file (a unique name, removed on drop, persisted by rename).

use super::run::{usage, Failure};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A result file being written; [`Output::finish`] puts it in place.
pub(super) struct Output {
    flag: &'static str,
    path: PathBuf,
    tmp: tempfile::NamedTempFile,
}

impl Output {
    /// Starts writing `path` (given by `flag`): a usage error if it is a directory or its
    /// directory cannot be written.
    pub fn create(flag: &'static str, path: &Path) -> Result<Output, Failure> {
        let fail = |e: std::io::Error| {
            // tempfile's errors name the temporary path; the user named `path`.
            let e = e.raw_os_error().map_or(e, std::io::Error::from_raw_os_error);
            usage(format!("{flag} {}: {e}", path.display()))
        };
        if path.is_dir() {
            return Err(usage(format!("{flag} {}: is a directory", path.display())));
        }
        let Some(name) = path.file_name() else {
            return Err(usage(format!("{flag} {}: names no file", path.display())));
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::metadata(dir).map_err(fail)?;
        // The destination's extension stays last: writers that choose the format by the
        // extension (PNG) see the destination's.
        let suffix = path.extension().map(|e| format!(".{}", e.to_string_lossy()));
        let prefix = format!(".{}.", name.to_string_lossy());
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix);
        builder.suffix(suffix.as_deref().unwrap_or(".tmp"));
        // The file gets the mode `File::create` would give it (tempfile's default, 0600, would
        // hide a report from the other users of a shared results folder): the replaced file's
        // mode, or 0666 less the umask.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).map_or(0o666, |m| m.permissions().mode() & 0o777);
            builder.permissions(std::fs::Permissions::from_mode(mode));
        }
        let tmp = builder.tempfile_in(dir).map_err(fail)?;
        Ok(Output { flag, path: path.to_path_buf(), tmp })
    }

    /// The temporary file's path, for writers that take a path.
    pub fn temp_path(&self) -> &Path {
        self.tmp.path()
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A failure writing the file, naming the destination.
    pub fn error(&self, e: impl std::fmt::Display) -> Failure {
        Failure::Run(format!("{} {}: {e}", self.flag, self.path.display()))
    }

    /// Writes all of `bytes`.
    pub fn write_all_bytes(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.tmp.write_all(bytes).map_err(|e| self.error(e))
    }

    /// Flushes the file and renames it over the destination.
    pub fn finish(mut self) -> Result<(), Failure> {
        self.tmp.flush().map_err(|e| self.error(e))?;
        let (flag, path) = (self.flag, self.path);
        self.tmp
            .persist(&path)
            .map(drop)
            .map_err(|e| Failure::Run(format!("{flag} {}: {}", path.display(), e.error)))
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.tmp.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.tmp.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(p: &Path) -> String {
        std::fs::read_to_string(p).unwrap()
    }

    #[test]
    fn a_file_appears_only_when_finished_and_a_dropped_one_leaves_the_old_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        std::fs::write(&path, "old").unwrap();
        let mut out = Output::create("--json", &path).unwrap();
        out.write_all_bytes(b"new").unwrap();
        assert_eq!(read(&path), "old", "not replaced before finish");
        let temp = out.temp_path().to_path_buf();
        assert_eq!(temp.parent(), Some(dir.path()), "beside its destination");
        assert_eq!(temp.extension().unwrap(), "json", "keeps the extension last");
        drop(out);
        assert_eq!(read(&path), "old", "a dropped output leaves the old file");
        assert!(!temp.exists(), "and its temporary file is gone");
        let mut out = Output::create("--json", &path).unwrap();
        out.write_all_bytes(b"new").unwrap();
        out.finish().unwrap();
        assert_eq!(read(&path), "new");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "nothing else left beside it");
    }

    /// An output is as readable as `File::create` makes a file (umask applied), and a
    /// replaced file keeps its mode.
    #[cfg(unix)]
    #[test]
    fn outputs_get_the_mode_a_created_file_gets() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).unwrap();
        let path = dir.path().join("report.html");
        let mut out = Output::create("--out", &path).unwrap();
        out.write_all_bytes(b"x").unwrap();
        out.finish().unwrap();
        assert_eq!(mode(&path), mode(&plain));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let mut out = Output::create("--out", &path).unwrap();
        out.write_all_bytes(b"y").unwrap();
        out.finish().unwrap();
        // 0640 less the umask, which `plain`'s mode (0666 less the umask) shows.
        assert_eq!(mode(&path), 0o640 & mode(&plain));
    }

    #[test]
    fn paths_that_cannot_be_written_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let msg = |r: Result<Output, Failure>| match r {
            Err(Failure::Usage(m)) => m,
            Err(_) => panic!("not a usage error"),
            Ok(_) => panic!("accepted"),
        };
        let d = dir.path().display();
        assert_eq!(msg(Output::create("--out", dir.path())), format!("--out {d}: is a directory"));
        let missing = dir.path().join("no/such/x.html");
        assert_eq!(
            msg(Output::create("--out", &missing)),
            format!("--out {}: No such file or directory (os error 2)", missing.display())
        );
    }
}
