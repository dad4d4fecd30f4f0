//! Outputs appear complete or not at all: written under a temporary name, then renamed.
//!
//! The temporary file sits in the destination's directory (`.flows.arrow.tmp-<pid>-<n>`), so the final
//! `rename` stays on one file system and replaces an existing output in one step: a reader sees the old
//! file or the new one, never a half-written one. A write that fails or is abandoned removes its
//! temporary file.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temporary files of concurrent writes within one process.
static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

/// The temporary name a write of `dest` uses: `.<file name>.tmp-<pid>-<n>` in the same directory.
pub fn temp_path(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".to_string());
    let n = NEXT_TMP.fetch_add(1, Ordering::Relaxed);
    let tmp = format!(".{name}.tmp-{}-{n}", std::process::id());
    match dest.parent() {
        Some(dir) => dir.join(tmp),
        None => PathBuf::from(tmp),
    }
}

/// A file being written under a temporary name; [`AtomicFile::commit`] renames it to its destination.
/// Dropped without a commit, it deletes the temporary file and leaves the destination untouched.
pub struct AtomicFile {
    dest: PathBuf,
    tmp: PathBuf,
    file: Option<BufWriter<File>>,
}

impl AtomicFile {
    /// Start writing `dest` (its directory must exist).
    pub fn create(dest: &Path) -> io::Result<Self> {
        let tmp = temp_path(dest);
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        Ok(Self {
            dest: dest.to_path_buf(),
            tmp,
            file: Some(BufWriter::with_capacity(1 << 16, file)),
        })
    }

    /// The temporary path being written.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// The final path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Flush, sync to disk and rename over the destination.
    pub fn commit(mut self) -> io::Result<()> {
        let writer = self
            .file
            .take()
            .expect("an uncommitted AtomicFile has a file");
        let result = writer
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|file| {
                file.sync_all()?;
                drop(file);
                fs::rename(&self.tmp, &self.dest)
            });
        if result.is_err() {
            let _ = fs::remove_file(&self.tmp);
        }
        result
    }

    fn writer(&mut self) -> &mut BufWriter<File> {
        self.file
            .as_mut()
            .expect("an uncommitted AtomicFile has a file")
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if let Some(file) = self.file.take() {
            drop(file);
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Write `dest` atomically with `write`; on error the destination is untouched and no temporary file
/// remains.
pub fn write_atomic<F>(dest: &Path, write: F) -> io::Result<()>
where
    F: FnOnce(&mut AtomicFile) -> io::Result<()>,
{
    let mut file = AtomicFile::create(dest)?;
    write(&mut file)?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("fabricemu-atomic-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_and_cleans_up() {
        let dir = scratch("replace");
        let dest = dir.join("out.txt");
        write_atomic(&dest, |f| f.write_all(b"first")).unwrap();
        write_atomic(&dest, |f| f.write_all(b"second")).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"second");
        assert_eq!(entries(&dir), vec!["out.txt"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn failed_write_keeps_old_file() {
        let dir = scratch("fail");
        let dest = dir.join("out.txt");
        write_atomic(&dest, |f| f.write_all(b"old")).unwrap();
        let err = write_atomic(&dest, |f| {
            f.write_all(b"half")?;
            Err(io::Error::other("boom"))
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "boom");
        assert_eq!(fs::read(&dest).unwrap(), b"old");
        assert_eq!(entries(&dir), vec!["out.txt"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn temp_names_are_hidden_and_distinct() {
        let a = temp_path(Path::new("/x/flows.arrow"));
        let b = temp_path(Path::new("/x/flows.arrow"));
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(Path::new("/x")));
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with(".flows.arrow.tmp-"), "{name}");
    }
}
