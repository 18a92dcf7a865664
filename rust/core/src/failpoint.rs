//! Named failure points for crash and I/O-error tests of the durable path.
//!
//! Off by default and free when off (one relaxed atomic load). Tests switch
//! a point on with [`set`], or a child process with the environment variable
//! `JEVMEM_FAILPOINTS="wal.fsync=eio,checkpoint.rename=abort"` (read once).
//! Actions: `eio`, `enospc` (the I/O call fails with that error), `abort`
//! (the process dies on the spot, like a kill), `off`.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Eio,
    Enospc,
    Abort,
}

impl Action {
    pub fn parse(s: &str) -> Option<Option<Action>> {
        match s {
            "eio" => Some(Some(Action::Eio)),
            "enospc" => Some(Some(Action::Enospc)),
            "abort" => Some(Some(Action::Abort)),
            "off" => Some(None),
            _ => None,
        }
    }
}

/// Every point the durable path checks, so a typo in a test is an error.
pub const POINTS: &[&str] = &[
    "wal.write",
    "wal.fsync",
    "wal.rotate",
    "checkpoint.write",
    "checkpoint.fsync",
    "checkpoint.rename",
    "manifest.write",
    "manifest.rename",
    "dir.fsync",
    "checkpoint.cleanup",
    "recovery.replay",
];

static ANY: AtomicBool = AtomicBool::new(false);

fn table() -> &'static Mutex<HashMap<String, Action>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Action>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut map = HashMap::new();
        if let Ok(spec) = std::env::var("JEVMEM_FAILPOINTS") {
            for item in spec.split(',').filter(|s| !s.trim().is_empty()) {
                if let Some((name, action)) = item.trim().split_once('=') {
                    if let Some(Some(a)) = Action::parse(action.trim()) {
                        map.insert(name.trim().to_string(), a);
                    }
                }
            }
        }
        if !map.is_empty() {
            ANY.store(true, Ordering::Relaxed);
        }
        Mutex::new(map)
    })
}

/// Switch a point on (`Some`) or off (`None`). Unknown names are refused.
pub fn set(name: &str, action: Option<Action>) -> Result<(), String> {
    if !POINTS.contains(&name) {
        return Err(format!(
            "unknown failpoint {name:?}; known: {}",
            POINTS.join(", ")
        ));
    }
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    match action {
        Some(a) => {
            t.insert(name.to_string(), a);
        }
        None => {
            t.remove(name);
        }
    }
    ANY.store(!t.is_empty(), Ordering::Relaxed);
    Ok(())
}

/// Check a point: `Err` with the injected error, or the process ends.
pub fn hit(name: &str) -> io::Result<()> {
    let table = table(); // the first call reads the environment
    if !ANY.load(Ordering::Relaxed) {
        return Ok(());
    }
    let action = table
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(name)
        .copied();
    match action {
        None => Ok(()),
        Some(Action::Eio) => Err(io::Error::from_raw_os_error(5)),
        Some(Action::Enospc) => Err(io::Error::from_raw_os_error(28)),
        Some(Action::Abort) => std::process::abort(),
    }
}
