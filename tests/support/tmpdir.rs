//! A test's scratch directory under the system temp dir, removed when the test passes and kept
//! when it fails (the pcaps are the evidence). The workspace's integration tests share this file
//! with `#[path]`; before it, every run left its outputs (a 120 MB pcap from the SIGINT test
//! among them) in /tmp.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

pub struct TmpDir(PathBuf);

impl TmpDir {
    /// `$TMPDIR/longhaul-{suite}-{pid}-{name}`, created empty.
    pub fn new(suite: &str, name: &str) -> TmpDir {
        let d =
            std::env::temp_dir().join(format!("longhaul-{suite}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        // Canonical, so a test comparing paths (the control API's allowed directories) sees the
        // same spelling the program does.
        TmpDir(d.canonicalize().unwrap())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for TmpDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TmpDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for TmpDir {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
