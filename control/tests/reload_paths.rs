//! `POST /reload {"path": ...}` reads only from the allowed directories (issue 20): no `..`,
//! no symlink out of them, no absolute path elsewhere; relative paths are taken from the first.

use longhaul_control::api::ApiError;
use longhaul_control::plane::check_reload_path;
use std::path::Path;

#[path = "../../tests/support/tmpdir.rs"]
mod tmpdir;
use tmpdir::TmpDir;

fn tempdir(tag: &str) -> TmpDir {
    TmpDir::new("reload", tag)
}

#[test]
fn only_files_inside_the_allowed_directories_are_read() {
    let root = tempdir("paths");
    let etc = root.join("etc");
    let other = root.join("other");
    std::fs::create_dir_all(etc.join("sub")).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    for f in [
        etc.join("a.toml"),
        etc.join("sub/b.toml"),
        other.join("x.toml"),
    ] {
        std::fs::write(f, "").unwrap();
    }
    let allowed = vec![etc.clone()];
    // Inside: absolute, relative, in a subdirectory.
    assert_eq!(
        check_reload_path(&etc.join("a.toml"), &allowed).unwrap(),
        etc.join("a.toml")
    );
    assert_eq!(
        check_reload_path(Path::new("a.toml"), &allowed).unwrap(),
        etc.join("a.toml")
    );
    assert_eq!(
        check_reload_path(Path::new("sub/b.toml"), &allowed).unwrap(),
        etc.join("sub/b.toml")
    );
    let forbidden = |p: &Path| match check_reload_path(p, &allowed) {
        Err(ApiError::Forbidden(m)) => m,
        other => panic!("{} must be refused: {other:?}", p.display()),
    };
    // `..`, even one that would land inside.
    assert!(forbidden(&etc.join("sub/../a.toml")).contains("'..'"));
    assert!(forbidden(Path::new("../other/x.toml")).contains("'..'"));
    // An absolute path elsewhere.
    let m = forbidden(&other.join("x.toml"));
    assert!(m.contains("outside the directories"), "{m}");
    assert!(m.contains("control.reload_dirs"), "{m}");
    // A symlink inside pointing out (to a file, and to a directory).
    std::os::unix::fs::symlink(other.join("x.toml"), etc.join("link.toml")).unwrap();
    std::os::unix::fs::symlink(&other, etc.join("linkdir")).unwrap();
    assert!(forbidden(&etc.join("link.toml")).contains("outside"));
    assert!(forbidden(Path::new("linkdir/x.toml")).contains("outside"));
    // A missing file is a bad request, not a leak of whether it exists elsewhere.
    assert!(matches!(
        check_reload_path(Path::new("missing.toml"), &allowed),
        Err(ApiError::BadRequest(_))
    ));
    // No allowed directory at all: everything refused.
    assert!(matches!(
        check_reload_path(&etc.join("a.toml"), &[]),
        Err(ApiError::Forbidden(_))
    ));
    // Several directories.
    let both = vec![etc.clone(), other.clone()];
    assert!(check_reload_path(&other.join("x.toml"), &both).is_ok());
}

/// A config is read only from a regular file within the size limit, and never blocks: a FIFO
/// (no writer), a directory, a device and a file over the limit are refused at once.
#[test]
fn only_regular_files_within_the_limit_are_read_and_nothing_blocks() {
    use longhaul_control::config::{read_config_file, ReadConfigError};
    let d = tempdir("kinds");
    let fifo = d.join("x.toml");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // On a thread: a blocking open would hang the test, not fail it.
    let (tx, rx) = std::sync::mpsc::channel();
    let f = fifo.clone();
    std::thread::spawn(move || tx.send(read_config_file(&f, 1 << 20)).unwrap());
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(2))
        .expect("reading a FIFO blocked");
    assert!(
        matches!(r, Err(ReadConfigError::NotRegular("FIFO"))),
        "{r:?}"
    );
    let r = read_config_file(&d, 1 << 20);
    assert!(
        matches!(r, Err(ReadConfigError::NotRegular("directory"))),
        "{r:?}"
    );
    let r = read_config_file(Path::new("/dev/zero"), 1 << 20);
    assert!(
        matches!(r, Err(ReadConfigError::NotRegular("character device"))),
        "{r:?}"
    );
    let big = d.join("big.toml");
    std::fs::write(&big, vec![b'#'; 5000]).unwrap();
    let e = read_config_file(&big, 4096).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the file is 5000 bytes, more than the limit of 4096 bytes"
    );
    assert_eq!(read_config_file(&big, 5000).unwrap().len(), 5000);
}
