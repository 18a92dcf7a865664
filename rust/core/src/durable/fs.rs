//! File-system steps of the durable protocol: unique temporary files,
//! fsync of files and directories, atomic replacement.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::failpoint;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary name beside `path`, unique per process and call, hidden.
/// Created with `create_new` (O_EXCL): it never follows a planted symlink
/// and two writers can never share one.
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(
        ".{name}.tmp-{}-{n}-{nanos:08x}",
        std::process::id()
    ))
}

pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// fsync a directory, so a rename or a new file in it survives power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    failpoint::hit("dir.fsync")?;
    File::open(dir)?.sync_all()
}

pub fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Replace `path` with `bytes` atomically: unique temp file, write, fsync,
/// rename over `path`, fsync the directory. A crash at any point leaves
/// either the old file or the new one, never a mix; the temp file is
/// removed on error. `points` names the failpoints (write, fsync, rename).
pub fn atomic_write(path: &Path, bytes: &[u8], points: [&str; 3]) -> io::Result<()> {
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = create_new(&tmp)?;
        failpoint::hit(points[0])?;
        f.write_all(bytes)?;
        failpoint::hit(points[1])?;
        f.sync_all()?;
        drop(f);
        failpoint::hit(points[2])?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    sync_dir(&parent_of(path))
}
