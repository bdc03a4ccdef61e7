//! Which files the extension trusts: the key and the database are used only when they are
//! ours. PHP often runs on hosts shared by several users, and the system temp directory is
//! writable by all of them, so a file or link someone else planted there must be refused, the
//! way OpenSSH refuses a private key whose permissions are too open.
//!
//! The rules are pure functions over the facts `stat(2)` gives (`st_mode` with its type bits,
//! `st_uid`) and the effective user id, so they are tested without root; the I/O functions
//! around them (the per-user directory, opening the key, checking the database before SQLite
//! opens it, the modes of `-wal`/`-shm`) run only when a worker opens its store, never per
//! call. Every refusal is an [`Untrusted`] naming the path and what is wrong with it.

use std::fmt;
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A file or directory refused, and why (modes in octal; never a subject, never key bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    pub path: PathBuf,
    pub what: String,
}

impl fmt::Display for Untrusted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ratelimit: refusing {}: {}",
            self.path.display(),
            self.what
        )
    }
}

impl std::error::Error for Untrusted {}

fn untrusted(path: &Path, what: impl Into<String>) -> Untrusted {
    Untrusted {
        path: path.to_owned(),
        what: what.into(),
    }
}

/// The effective user id of this process (the pool's `user` under php-fpm).
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) takes no arguments, touches no memory of ours and always succeeds.
    unsafe { libc::geteuid() }
}

/// What the rules look at: `st_mode` (file type and permission bits), `st_uid`, `st_gid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Facts {
    pub fn of(m: &Metadata) -> Self {
        Self {
            mode: m.mode(),
            uid: m.uid(),
            gid: m.gid(),
        }
    }
}

const S_IFMT: u32 = libc::S_IFMT;
const S_IFREG: u32 = libc::S_IFREG;
const S_IFDIR: u32 = libc::S_IFDIR;
const S_IFLNK: u32 = libc::S_IFLNK;
const S_ISGID: u32 = libc::S_ISGID;
const S_ISVTX: u32 = libc::S_ISVTX;

fn file_type(mode: u32) -> u32 {
    mode & S_IFMT
}

fn kind(mode: u32) -> &'static str {
    match file_type(mode) {
        S_IFREG => "a regular file",
        S_IFDIR => "a directory",
        S_IFLNK => "a symbolic link",
        t if t == libc::S_IFIFO => "a FIFO",
        t if t == libc::S_IFSOCK => "a socket",
        t if t == libc::S_IFCHR => "a character device",
        t if t == libc::S_IFBLK => "a block device",
        _ => "of an unknown type",
    }
}

/// "0644", "1777": the permission bits as `chmod` takes them.
pub fn octal(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

/// "readable by group and others", "readable by group, readable and writable by others":
/// who besides the owner has access.
fn access(mode: u32) -> String {
    let can = |bits: u32| {
        let mut c = Vec::new();
        for (bit, word) in [(0o4, "readable"), (0o2, "writable"), (0o1, "searchable")] {
            if bits & bit != 0 {
                c.push(word);
            }
        }
        match c.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => c.join(""),
        }
    };
    let (group, others) = (can((mode >> 3) & 0o7), can(mode & 0o7));
    match (group.is_empty(), others.is_empty()) {
        (false, false) if group == others => format!("{group} by group and others"),
        (false, false) => format!("{group} by group, {others} by others"),
        (false, true) => format!("{group} by group"),
        (true, false) => format!("{others} by others"),
        (true, true) => String::new(),
    }
}

fn owner_ok(uid: u32, euid: u32) -> bool {
    uid == euid || uid == 0
}

fn verdict(problems: Vec<String>) -> Result<(), String> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join(", and "))
    }
}

// The judges below answer with what is wrong as verb phrases ("is owned by uid 1001, ...",
// "has mode 0644 (...), wanted 0600 or stricter"); the caller puts the subject in front.

/// The per-user directory `<temp dir>/php-ratelimit-<euid>/`: a directory (not a link), owned
/// by the effective user (root's is not good enough: it is not ours), no access for group or
/// others.
pub fn judge_private_dir(f: Facts, euid: u32) -> Result<(), String> {
    if file_type(f.mode) != S_IFDIR {
        return Err(format!(
            "is {}, wanted a directory of mode 0700 owned by uid {euid}",
            kind(f.mode)
        ));
    }
    let mut p = Vec::new();
    if f.uid != euid {
        p.push(format!(
            "is owned by uid {}, not by the effective user (uid {euid})",
            f.uid
        ));
    }
    if f.mode & 0o077 != 0 {
        p.push(format!(
            "has mode {} ({}), wanted 0700",
            octal(f.mode),
            access(f.mode)
        ));
    }
    verdict(p)
}

/// The directory that holds the per-user directory (the system temp dir): owned by us or
/// root, and if everyone may write to it, sticky (else anyone could rename our directory away
/// and put theirs in its place between the check and the open).
pub fn judge_temp_dir(f: Facts, euid: u32) -> Result<(), String> {
    if file_type(f.mode) != S_IFDIR {
        return Err(format!("is {}", kind(f.mode)));
    }
    let mut p = Vec::new();
    if !owner_ok(f.uid, euid) {
        p.push(format!(
            "is owned by uid {}, not by the effective user (uid {euid}) or root",
            f.uid
        ));
    }
    if f.mode & 0o002 != 0 && f.mode & S_ISVTX == 0 {
        p.push(format!(
            "has mode {} (writable by every user, without the sticky bit)",
            octal(f.mode)
        ));
    }
    verdict(p)
}

/// A key file, on the descriptor it is read from: a regular file owned by the effective user
/// or root, with no access at all for group or others (the key is the only secret here).
pub fn judge_key(f: Facts, euid: u32) -> Result<(), String> {
    if file_type(f.mode) != S_IFREG {
        return Err(format!("is {}, wanted a regular file", kind(f.mode)));
    }
    let mut p = Vec::new();
    if !owner_ok(f.uid, euid) {
        p.push(format!(
            "is owned by uid {}, not by the effective user (uid {euid}) or root (its owner \
             knows the key)",
            f.uid
        ));
    }
    if f.mode & 0o077 != 0 {
        p.push(format!(
            "has mode {} ({}), wanted 0600 or stricter",
            octal(f.mode),
            access(f.mode)
        ));
    }
    verdict(p)
}

/// The database file, and its `-wal`, `-shm` and `-journal` companions: regular files (a link
/// could send our writes into someone else's file), owned by the effective user or root (their
/// owner could read and rewrite every bucket), not writable by others. In a group-shared
/// directory (`shared`: its group, see [`shared_group`]) a file of that group may belong to
/// another member: the operator shares the database on purpose.
pub fn judge_database(f: Facts, euid: u32, shared: Option<u32>) -> Result<(), String> {
    if file_type(f.mode) == S_IFLNK {
        return Err(
            "is a symbolic link (someone else's link could send our writes into \
                    another file; the database is opened with SQLITE_OPEN_NOFOLLOW)"
                .to_string(),
        );
    }
    if file_type(f.mode) != S_IFREG {
        return Err(format!("is {}, wanted a regular file", kind(f.mode)));
    }
    let mut p = Vec::new();
    if !owner_ok(f.uid, euid) && shared != Some(f.gid) {
        p.push(match shared {
            None => format!(
                "is owned by uid {}, not by the effective user (uid {euid}) or root (its owner \
                 could read and rewrite every bucket)",
                f.uid
            ),
            Some(g) => format!(
                "is owned by uid {} and gid {}, not by the effective user (uid {euid}), root, \
                 or the group of the group-shared directory (gid {g})",
                f.uid, f.gid
            ),
        });
    }
    if f.mode & 0o002 != 0 {
        p.push(format!(
            "has mode {} (writable by others), wanted 0600, or 0660 in a group-shared directory",
            octal(f.mode)
        ));
    }
    verdict(p)
}

/// The directory the database (or a default key) is created in: owned by the effective user
/// or root, and not writable by others. A world-writable directory such as /tmp is refused:
/// there, the default location `<temp dir>/php-ratelimit-<euid>/` is the way.
pub fn judge_database_dir(f: Facts, euid: u32) -> Result<(), String> {
    if file_type(f.mode) != S_IFDIR {
        return Err(format!("is {}", kind(f.mode)));
    }
    let mut p = Vec::new();
    if !owner_ok(f.uid, euid) {
        p.push(format!(
            "is owned by uid {}, not by the effective user (uid {euid}) or root (that user \
             could replace the files in it)",
            f.uid
        ));
    }
    if f.mode & 0o002 != 0 {
        p.push(format!(
            "has mode {} (writable by every user: anyone could plant a file or a link there); \
             leave ratelimit.db_path empty to use <temp dir>/php-ratelimit-{euid}/, or use a \
             directory of your own",
            octal(f.mode)
        ));
    }
    verdict(p)
}

/// The group of `dir` when it is group-shared on purpose: setgid and group-writable (e.g.
/// `install -d -m 2770 -g www-data`), so that every file made in it belongs to that group.
pub fn shared_group(dir: Facts) -> Option<u32> {
    (file_type(dir.mode) == S_IFDIR && dir.mode & S_ISGID != 0 && dir.mode & 0o020 != 0)
        .then_some(dir.gid)
}

/// The mode a new database gets in directory `dir`: 0660 in a group-shared directory, else
/// 0600.
pub fn database_mode(dir: Facts) -> u32 {
    if shared_group(dir).is_some() {
        0o660
    } else {
        0o600
    }
}

fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn is_loop(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// Creates (mode 0700) or checks the per-user directory `path`. Workers racing on the first
/// request all end with the one directory: `mkdir` either creates it or finds it, and every
/// worker then checks what is there on a descriptor opened without following a link.
pub fn private_dir(path: &Path) -> Result<(), Untrusted> {
    private_dir_as(path, euid())
}

fn private_dir_as(path: &Path, euid: u32) -> Result<(), Untrusted> {
    let parent = dir_of(path);
    match fs::metadata(parent) {
        Ok(m) => judge_temp_dir(Facts::of(&m), euid)
            .map_err(|w| untrusted(parent, format!("the temp directory {w}")))?,
        Err(e) => {
            return Err(untrusted(
                parent,
                format!("the temp directory cannot be used: {e}"),
            ))
        }
    }
    let created = match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) => {
            return Err(untrusted(
                path,
                format!("cannot create the per-user directory: {e}"),
            ))
        }
    };
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            let found = fs::symlink_metadata(path).map(|m| Facts::of(&m));
            match found {
                Ok(f) if judge_private_dir(f, euid).is_err() => untrusted(
                    path,
                    format!(
                        "the per-user directory {}",
                        judge_private_dir(f, euid).unwrap_err()
                    ),
                ),
                _ if is_loop(&e) => untrusted(path, "the per-user directory is a symbolic link"),
                _ => untrusted(path, format!("cannot open the per-user directory: {e}")),
            }
        })?;
    if created {
        // The mode must not depend on the umask.
        dir.set_permissions(fs::Permissions::from_mode(0o700))
            .map_err(|e| untrusted(path, format!("cannot set mode 0700: {e}")))?;
    }
    let m = dir
        .metadata()
        .map_err(|e| untrusted(path, format!("cannot stat the per-user directory: {e}")))?;
    judge_private_dir(Facts::of(&m), euid)
        .map_err(|w| untrusted(path, format!("the per-user directory {w}")))
}

/// A key file opened for reading, and the verdict on it: the caller reads it either way (to
/// say whether a refused key is also weak) and uses it only when the verdict is Ok.
pub struct KeyFile {
    pub file: Option<File>,
    pub verdict: Result<(), String>,
}

/// Opens the key file at `path` and checks it on the open descriptor. A symbolic link is
/// followed only when `link_allowed` (a `ratelimit.key_file` the operator set) and only when
/// no link on the way sits in a world-writable directory; the default key is never a link.
/// Errors that say nothing about trust (the file is missing) come back as `io::Error`.
pub fn check_key_file(path: &Path, link_allowed: bool) -> io::Result<KeyFile> {
    check_key_file_as(path, link_allowed, euid())
}

fn check_key_file_as(path: &Path, link_allowed: bool, euid: u32) -> io::Result<KeyFile> {
    let mut real = path.to_path_buf();
    if link_allowed {
        for _ in 0..40 {
            if !fs::symlink_metadata(&real)?.file_type().is_symlink() {
                break;
            }
            let dir = dir_of(&real).to_path_buf();
            let dm = fs::metadata(&dir)?;
            if dm.mode() & 0o002 != 0 {
                return Ok(KeyFile {
                    file: None,
                    verdict: Err(format!(
                        "the key file is a symbolic link in {}, a directory every user can \
                         write to (mode {}): the link may be someone else's; point \
                         ratelimit.key_file at the file itself",
                        dir.display(),
                        octal(dm.mode())
                    )),
                });
            }
            let target = fs::read_link(&real)?;
            real = dir.join(target); // an absolute target replaces dir
        }
    }
    // O_NOFOLLOW: a link swapped in after the walk above fails to open; O_NONBLOCK: a FIFO
    // planted as the key cannot make the worker wait (it is then refused as not a file).
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real);
    let file = match opened {
        Ok(f) => f,
        Err(e) if is_loop(&e) => {
            return Ok(KeyFile {
                file: None,
                verdict: Err(if link_allowed {
                    "the key file is a symbolic link that changed while it was checked".into()
                } else {
                    "the key file is a symbolic link: the default key (next to the database) \
                     never is one"
                        .into()
                }),
            })
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            // Unreadable: say so in terms of trust when the file is not ours.
            if let Ok(m) = fs::symlink_metadata(&real) {
                if let Err(w) = judge_key(Facts::of(&m), euid) {
                    return Ok(KeyFile {
                        file: None,
                        verdict: Err(format!("the key file {w}")),
                    });
                }
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let verdict =
        judge_key(Facts::of(&file.metadata()?), euid).map_err(|w| format!("the key file {w}"));
    Ok(KeyFile {
        file: Some(file),
        verdict,
    })
}

/// Checks the directory a default key is created in, as for a database (see
/// [`judge_database_dir`]). Missing or unreadable: Ok, the creation then reports it.
pub fn check_new_file_dir(path: &Path) -> Result<(), Untrusted> {
    match fs::metadata(dir_of(path)) {
        Ok(m) => judge_database_dir(Facts::of(&m), euid()).map_err(|w| {
            untrusted(
                path,
                format!("its directory {} {w}", dir_of(path).display()),
            )
        }),
        Err(_) => Ok(()),
    }
}

const COMPANIONS: [&str; 3] = ["-wal", "-shm", "-journal"];

fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// Checks the database at `path` before SQLite opens it, and creates it (empty, mode 0600, or
/// 0660 in a group-shared directory) when missing, so that its mode is ours and not SQLite's
/// 0644. Refused: a symbolic link anywhere on the path (SQLite's NOFOLLOW refuses those too,
/// with a less helpful message), a file or companion (`-wal`, `-shm`, `-journal`) that is not
/// ours or that others can write, a directory that is not ours or that everyone can write.
/// Faults that are not about trust (a missing directory) are left for SQLite to report.
pub fn check_database(path: &Path) -> Result<(), Untrusted> {
    check_database_as(path, euid())
}

fn check_database_as(path: &Path, euid: u32) -> Result<(), Untrusted> {
    for dir in path.ancestors().skip(1) {
        if dir.as_os_str().is_empty() {
            continue;
        }
        if let Ok(m) = fs::symlink_metadata(dir) {
            if m.file_type().is_symlink() {
                let real = fs::canonicalize(dir)
                    .ok()
                    .zip(path.strip_prefix(dir).ok())
                    .map(|(r, rest)| format!(": use the real path {}", r.join(rest).display()))
                    .unwrap_or_default();
                return Err(untrusted(
                    path,
                    format!(
                        "{} on the path is a symbolic link, and the database is opened without \
                         following links (SQLITE_OPEN_NOFOLLOW){real}",
                        dir.display()
                    ),
                ));
            }
        }
    }
    let dir = dir_of(path);
    let dir_facts = fs::metadata(dir).ok().map(|m| Facts::of(&m));
    let shared = dir_facts.and_then(shared_group);
    let check_file = |p: &Path, name: &str| -> Result<bool, Untrusted> {
        match fs::symlink_metadata(p) {
            Ok(m) => judge_database(Facts::of(&m), euid, shared)
                .map(|()| true)
                .map_err(|w| untrusted(p, format!("the {name} {w}"))),
            Err(_) => Ok(false),
        }
    };
    let exists = check_file(path, "database")?;
    for suffix in COMPANIONS {
        check_file(
            &companion(path, suffix),
            &format!("database's {suffix} file"),
        )?;
    }
    let Some(dm) = dir_facts else {
        return Ok(());
    };
    judge_database_dir(dm, euid)
        .map_err(|w| untrusted(path, format!("its directory {} {w}", dir.display())))?;
    if !exists {
        let mode = database_mode(dm);
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path);
        match created {
            // The mode must not depend on the umask.
            Ok(f) => f
                .set_permissions(fs::Permissions::from_mode(mode))
                .map_err(|e| untrusted(path, format!("cannot set mode {}: {e}", octal(mode))))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Another worker was first, or someone else: judge what is there now.
                check_file(path, "database")?;
            }
            Err(_) => return Ok(()), // SQLite reports it, as before
        }
    }
    Ok(())
}

/// Gives the database's `-wal` and `-shm` files the database's own mode (SQLite does so for
/// the files it creates; this also fixes companions left by an older version or another tool).
///
/// By path, never by opening them: SQLite holds POSIX locks on these files, and closing any
/// other descriptor of a file drops every lock this process holds on it (a -shm lock lost
/// lets another process reinitialise the WAL index under our feet). `chmod` follows a link,
/// but the file was just checked not to be one, in a directory only we (or root, or the
/// group of a group-shared directory) can write to.
pub fn match_companion_modes(path: &Path) -> Result<(), Untrusted> {
    let Ok(db) = fs::symlink_metadata(path) else {
        return Ok(());
    };
    let want = db.mode() & 0o777;
    let shared = fs::metadata(dir_of(path))
        .ok()
        .and_then(|m| shared_group(Facts::of(&m)));
    for suffix in ["-wal", "-shm"] {
        let p = companion(path, suffix);
        let m = match fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(untrusted(&p, format!("cannot check its mode: {e}"))),
        };
        judge_database(Facts::of(&m), euid(), shared)
            .map_err(|w| untrusted(&p, format!("it {w}")))?;
        if m.mode() & 0o777 != want {
            fs::set_permissions(&p, fs::Permissions::from_mode(want)).map_err(|e| {
                untrusted(
                    &p,
                    format!(
                        "it has mode {}, wanted {} (the database's), and chmod failed: {e}",
                        octal(m.mode()),
                        octal(want)
                    ),
                )
            })?;
        }
    }
    Ok(())
}

/// A small state file next to the database that every worker of the host maps (the breaker's,
/// `<db>.breaker`): a regular file (never a link: it is opened with `O_NOFOLLOW`), owned by the
/// effective user or root, writable by nobody else, except by the group of a group-shared
/// directory (`shared`), as the database itself is. Unlike [`judge_database`], write access
/// for a group is refused outside such a directory: nothing else needs this file.
pub fn judge_state_file(f: Facts, euid: u32, shared: Option<u32>) -> Result<(), String> {
    judge_database(f, euid, shared)?;
    if f.mode & 0o020 != 0 && shared.is_none() {
        return Err(format!(
            "has mode {} (writable by group), wanted 0600, or 0660 in a group-shared directory",
            octal(f.mode)
        ));
    }
    Ok(())
}

/// Opens (creating it mode 0600, or 0660 in a group-shared directory, as a database is) the
/// state file `path` for reading and writing, and judges it on the open descriptor (see
/// [`judge_state_file`]) and its directory as a database's (see [`judge_database_dir`]). The
/// descriptor is close-on-exec. What is wrong, trust or not, is an [`Untrusted`] naming it.
pub fn open_state_file(path: &Path) -> Result<File, Untrusted> {
    open_state_file_as(path, euid())
}

fn open_state_file_as(path: &Path, euid: u32) -> Result<File, Untrusted> {
    let dir = dir_of(path);
    let dm = fs::metadata(dir).map_err(|e| {
        untrusted(
            path,
            format!("its directory {} cannot be used: {e}", dir.display()),
        )
    })?;
    let dir_facts = Facts::of(&dm);
    judge_database_dir(dir_facts, euid)
        .map_err(|w| untrusted(path, format!("its directory {} {w}", dir.display())))?;
    let mode = database_mode(dir_facts);
    let open = |create: bool| {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(create)
            .mode(mode)
            // O_NONBLOCK: a FIFO planted there cannot make the worker wait (it is refused).
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
    };
    let opened = match open(true) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => open(false).map(|f| (f, false)),
        Err(e) => Err(e),
    };
    let (file, created) = opened.map_err(|e| {
        if is_loop(&e) {
            untrusted(path, "the state file is a symbolic link")
        } else {
            untrusted(path, format!("cannot open the state file: {e}"))
        }
    })?;
    if created {
        // The mode must not depend on the umask.
        file.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(|e| untrusted(path, format!("cannot set mode {}: {e}", octal(mode))))?;
    }
    let m = file
        .metadata()
        .map_err(|e| untrusted(path, format!("cannot stat the state file: {e}")))?;
    judge_state_file(Facts::of(&m), euid, shared_group(dir_facts))
        .map_err(|w| untrusted(path, format!("the state file {w}")))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const ME: u32 = 1000;
    const OTHER: u32 = 1001;
    const GID: u32 = 33;
    fn reg(perm: u32, uid: u32) -> Facts {
        Facts {
            mode: S_IFREG | perm,
            uid,
            gid: GID,
        }
    }
    fn dir(perm: u32, uid: u32) -> Facts {
        Facts {
            mode: S_IFDIR | perm,
            uid,
            gid: GID,
        }
    }
    fn link(uid: u32) -> Facts {
        Facts {
            mode: S_IFLNK | 0o777,
            uid,
            gid: GID,
        }
    }
    fn mode_of(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }
    fn chmod(p: &Path, mode: u32) {
        fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn key_rules() {
        for ok in [0o600, 0o400, 0o700, 0o200] {
            assert_eq!(judge_key(reg(ok, ME), ME), Ok(()), "{ok:o}");
            assert_eq!(judge_key(reg(ok, 0), ME), Ok(()), "root's, {ok:o}");
        }
        let e = judge_key(reg(0o644, ME), ME).unwrap_err();
        assert!(
            e.contains("mode 0644 (readable by group and others), wanted 0600 or stricter"),
            "{e}"
        );
        let e = judge_key(reg(0o640, ME), ME).unwrap_err();
        assert!(
            e.contains("mode 0640 (readable by group), wanted 0600"),
            "{e}"
        );
        let e = judge_key(reg(0o666, ME), ME).unwrap_err();
        assert!(
            e.contains("(readable and writable by group and others)"),
            "{e}"
        );
        let e = judge_key(reg(0o642, ME), ME).unwrap_err();
        assert!(e.contains("(readable by group, writable by others)"), "{e}");
        let e = judge_key(reg(0o620, ME), ME).unwrap_err();
        assert!(e.contains("writable by group"), "{e}");
        let e = judge_key(reg(0o600, OTHER), ME).unwrap_err();
        assert!(e.contains("owned by uid 1001, not by the effective user (uid 1000) or root"));
        // Both faults are named at once.
        let e = judge_key(reg(0o666, OTHER), ME).unwrap_err();
        assert!(e.contains("uid 1001") && e.contains("mode 0666"), "{e}");
        assert!(judge_key(link(ME), ME)
            .unwrap_err()
            .contains("symbolic link"));
        assert!(judge_key(dir(0o700, ME), ME)
            .unwrap_err()
            .contains("a directory"));
        let fifo = Facts {
            mode: libc::S_IFIFO | 0o600,
            uid: ME,
            gid: GID,
        };
        assert!(judge_key(fifo, ME).unwrap_err().contains("a FIFO"));
    }

    #[test]
    fn database_rules() {
        for ok in [0o600, 0o660, 0o644, 0o640] {
            assert_eq!(judge_database(reg(ok, ME), ME, None), Ok(()), "{ok:o}");
            assert_eq!(
                judge_database(reg(ok, 0), ME, None),
                Ok(()),
                "root's, {ok:o}"
            );
        }
        let e = judge_database(reg(0o666, ME), ME, None).unwrap_err();
        assert!(
            e.contains("mode 0666 (writable by others), wanted 0600"),
            "{e}"
        );
        let e = judge_database(reg(0o600, OTHER), ME, None).unwrap_err();
        assert!(e.contains("owned by uid 1001"), "{e}");
        let e = judge_database(link(ME), ME, None).unwrap_err();
        assert!(e.contains("symbolic link") && e.contains("NOFOLLOW"), "{e}");
        assert!(judge_database(dir(0o700, ME), ME, None).is_err());
        // In a group-shared directory of gid 33: another member's file of that group is fine,
        // not one of another group, and never one writable by others.
        assert_eq!(judge_database(reg(0o660, OTHER), ME, Some(GID)), Ok(()));
        let e = judge_database(reg(0o660, OTHER), ME, Some(34)).unwrap_err();
        assert!(
            e.contains("owned by uid 1001 and gid 33, not by the effective user (uid 1000), root, or the group of the group-shared directory (gid 34)"),
            "{e}"
        );
        assert!(judge_database(reg(0o666, OTHER), ME, Some(GID)).is_err());
        assert!(judge_database(link(OTHER), ME, Some(GID)).is_err());
        assert_eq!(shared_group(dir(0o2770, 0)), Some(GID));
        assert_eq!(shared_group(dir(0o770, 0)), None);
        assert_eq!(shared_group(reg(0o2770, 0)), None);
    }

    #[test]
    fn directory_rules() {
        // Where a database may be created.
        for ok in [0o700, 0o755, 0o2770, 0o750] {
            assert_eq!(judge_database_dir(dir(ok, ME), ME), Ok(()), "{ok:o}");
            assert_eq!(judge_database_dir(dir(ok, 0), ME), Ok(()), "{ok:o}");
        }
        let e = judge_database_dir(dir(0o1777, 0), ME).unwrap_err();
        assert!(
            e.contains("mode 1777") && e.contains("php-ratelimit-1000"),
            "{e}"
        );
        let e = judge_database_dir(dir(0o755, OTHER), ME).unwrap_err();
        assert!(e.contains("owned by uid 1001"), "{e}");
        // The per-user directory: ours alone, 0700 or stricter; root's is not ours.
        assert_eq!(judge_private_dir(dir(0o700, ME), ME), Ok(()));
        assert_eq!(judge_private_dir(dir(0o700, 0), 0), Ok(()));
        let e = judge_private_dir(dir(0o755, ME), ME).unwrap_err();
        assert!(
            e.contains("mode 0755 (readable and searchable by group and others), wanted 0700"),
            "{e}"
        );
        let e = judge_private_dir(dir(0o700, 0), ME).unwrap_err();
        assert!(
            e.contains("owned by uid 0, not by the effective user (uid 1000)"),
            "{e}"
        );
        assert!(judge_private_dir(link(ME), ME)
            .unwrap_err()
            .contains("symbolic link"));
        assert!(judge_private_dir(reg(0o700, ME), ME)
            .unwrap_err()
            .contains("regular file"));
        // Its parent, the temp dir: sticky if world-writable.
        assert_eq!(judge_temp_dir(dir(0o1777, 0), ME), Ok(()));
        assert_eq!(judge_temp_dir(dir(0o755, ME), ME), Ok(()));
        assert!(judge_temp_dir(dir(0o777, 0), ME)
            .unwrap_err()
            .contains("sticky"));
        assert!(judge_temp_dir(dir(0o1777, OTHER), ME)
            .unwrap_err()
            .contains("uid 1001"));
        let e = judge_private_dir(dir(0o777, ME), ME).unwrap_err();
        assert!(
            e.contains("(readable, writable and searchable by group and others)"),
            "{e}"
        );
    }

    #[test]
    fn new_database_modes() {
        assert_eq!(database_mode(dir(0o700, ME)), 0o600);
        assert_eq!(
            database_mode(dir(0o770, ME)),
            0o600,
            "group-writable alone is not on purpose"
        );
        assert_eq!(
            database_mode(dir(0o2750, ME)),
            0o600,
            "setgid alone neither"
        );
        assert_eq!(database_mode(dir(0o2770, ME)), 0o660);
    }

    #[test]
    fn messages_name_the_path_and_octal_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let k = tmp.path().join("x.key");
        fs::write(&k, [7u8; 32]).unwrap();
        chmod(&k, 0o644);
        let what = check_key_file(&k, false).unwrap().verdict.unwrap_err();
        assert_eq!(
            what,
            "the key file has mode 0644 (readable by group and others), wanted 0600 or stricter"
        );
        let db = tmp.path().join("rl.sqlite");
        fs::write(&db, b"").unwrap();
        chmod(&db, 0o666);
        assert_eq!(
            check_database(&db).unwrap_err().to_string(),
            format!(
                "ratelimit: refusing {}: the database has mode 0666 (writable by others), \
                 wanted 0600, or 0660 in a group-shared directory",
                db.display()
            )
        );
        let two = judge_key(reg(0o604, OTHER), ME).unwrap_err();
        assert_eq!(
            two,
            "is owned by uid 1001, not by the effective user (uid 1000) or root (its owner \
             knows the key), and has mode 0604 (readable by others), wanted 0600 or stricter"
        );
    }

    #[test]
    fn the_private_dir_is_created_0700_and_then_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("php-ratelimit-x");
        // (The umask is process-wide and these tests run in parallel threads: a mode that does
        // not depend on it is shown by php-tests/trust_default_dir.phpt, under umask 0277.)
        private_dir(&p).unwrap();
        assert_eq!(mode_of(&p), 0o700);
        fs::write(p.join("f"), b"x").unwrap();
        private_dir(&p).unwrap();
        assert!(p.join("f").exists(), "reused, not recreated");
    }

    #[test]
    fn racing_threads_all_get_the_one_private_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("php-ratelimit-race");
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..8).map(|_| s.spawn(|| private_dir(&p))).collect();
            for h in hs {
                h.join().unwrap().unwrap();
            }
        });
        assert_eq!(mode_of(&p), 0o700);
    }

    #[test]
    fn a_private_dir_that_is_open_or_a_link_is_refused_not_repaired() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("open");
        fs::create_dir(&p).unwrap();
        chmod(&p, 0o755);
        let e = private_dir(&p).unwrap_err();
        assert_eq!(e.path, p);
        assert!(e.what.contains("mode 0755"), "{e}");
        assert_eq!(mode_of(&p), 0o755, "left as found");

        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        chmod(&real, 0o700);
        let l = tmp.path().join("link");
        symlink(&real, &l).unwrap();
        let e = private_dir(&l).unwrap_err();
        assert!(e.what.contains("symbolic link"), "{e}");

        let f = tmp.path().join("file");
        fs::write(&f, b"").unwrap();
        assert!(private_dir(&f).unwrap_err().what.contains("regular file"));
    }

    #[test]
    fn a_world_writable_temp_dir_without_sticky_bit_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().join("t");
        fs::create_dir(&t).unwrap();
        chmod(&t, 0o777);
        let e = private_dir(&t.join("php-ratelimit-1")).unwrap_err();
        assert!(e.what.contains("sticky"), "{e}");
        assert!(!t.join("php-ratelimit-1").exists());
        chmod(&t, 0o1777);
        private_dir(&t.join("php-ratelimit-1")).unwrap();
    }

    #[test]
    fn key_file_checks_on_the_open_descriptor() {
        let tmp = tempfile::tempdir().unwrap();
        let k = tmp.path().join("k");
        fs::write(&k, [7u8; 32]).unwrap();
        chmod(&k, 0o600);
        let kf = check_key_file(&k, false).unwrap();
        assert!(kf.file.is_some() && kf.verdict.is_ok());
        chmod(&k, 0o640);
        let kf = check_key_file(&k, false).unwrap();
        assert!(kf.verdict.unwrap_err().contains("mode 0640"));
        chmod(&k, 0o600);
        assert!(matches!(
            check_key_file(&tmp.path().join("absent"), true),
            Err(e) if e.kind() == io::ErrorKind::NotFound
        ));
        // A FIFO does not block the open and is refused.
        let fifo = tmp.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: c is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let kf = check_key_file(&fifo, false).unwrap();
        assert!(kf.verdict.unwrap_err().contains("a FIFO"));
    }

    #[test]
    fn key_links_are_followed_only_when_set_on_purpose_and_not_from_a_world_writable_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let k = tmp.path().join("k");
        fs::write(&k, [7u8; 32]).unwrap();
        chmod(&k, 0o600);
        let l = tmp.path().join("l");
        symlink("k", &l).unwrap(); // relative, resolved against the link's directory
        assert!(check_key_file(&l, true).unwrap().verdict.is_ok());
        let e = check_key_file(&l, false).unwrap().verdict.unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");

        let pub_dir = tmp.path().join("pub");
        fs::create_dir(&pub_dir).unwrap();
        chmod(&pub_dir, 0o1777);
        let l2 = pub_dir.join("l2");
        symlink(&k, &l2).unwrap();
        let e = check_key_file(&l2, true).unwrap().verdict.unwrap_err();
        assert!(
            e.contains("mode 1777") && e.contains("someone else's"),
            "{e}"
        );
        // A chain whose second link sits in the world-writable directory is refused too.
        let l3 = tmp.path().join("l3");
        symlink(&l2, &l3).unwrap();
        assert!(check_key_file(&l3, true).unwrap().verdict.is_err());
    }

    #[test]
    fn a_new_database_is_created_0600_and_its_companions_follow_its_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("rl.sqlite");
        check_database(&db).unwrap();
        assert_eq!(mode_of(&db), 0o600);
        assert_eq!(fs::metadata(&db).unwrap().len(), 0);
        // Companions left with another mode get the database's.
        fs::write(companion(&db, "-wal"), b"").unwrap();
        chmod(&companion(&db, "-wal"), 0o644);
        fs::write(companion(&db, "-shm"), b"").unwrap();
        chmod(&companion(&db, "-shm"), 0o640);
        match_companion_modes(&db).unwrap();
        assert_eq!(mode_of(&companion(&db, "-wal")), 0o600);
        assert_eq!(mode_of(&companion(&db, "-shm")), 0o600);
        check_database(&db).unwrap();
    }

    /// POSIX locks this process holds on the file at `p`: from the `lock:` lines of the
    /// fdinfo of a descriptor SQLite has open on it (found by its link in /proc/self/fd, so
    /// that the test opens, and closes, nothing of the file). Not /proc/locks: read while other
    /// tests take and drop locks, it can skip an entry.
    fn my_locks_on(p: &Path) -> usize {
        let target = fs::canonicalize(p).unwrap();
        let pid = std::process::id().to_string();
        for e in fs::read_dir("/proc/self/fd").unwrap().flatten() {
            if fs::read_link(e.path()).ok().as_deref() != Some(target.as_path()) {
                continue;
            }
            let fd = e.file_name();
            let Ok(info) =
                fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.to_string_lossy()))
            else {
                continue;
            };
            // lock:	1: POSIX  ADVISORY  READ 1234 08:01:5678 128 128
            return info
                .lines()
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .filter(|f| f.first() == Some(&"lock:") && f.get(2) == Some(&"POSIX"))
                .filter(|f| f.get(5) == Some(&pid.as_str()))
                .count();
        }
        0
    }

    #[test]
    fn opening_another_store_on_the_file_keeps_this_process_locks() {
        // Closing any descriptor of a file drops all of the process's POSIX locks on it:
        // the checks must never open (and close) the database or its -wal/-shm.
        use crate::storage::sqlite::SqliteStore;
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("rl.sqlite");
        let _a = SqliteStore::open(&db, 1000, 10, crate::storage::system_clock()).unwrap();
        let shm = companion(&db, "-shm");
        let before = my_locks_on(&shm);
        assert!(
            before >= 1,
            "SQLite holds a lock on the -shm while connected"
        );
        chmod(&companion(&db, "-wal"), 0o640); // a mode to fix, as left by another tool
        let _b = SqliteStore::open(&db, 1000, 10, crate::storage::system_clock()).unwrap();
        assert_eq!(mode_of(&companion(&db, "-wal")), 0o600);
        assert_eq!(my_locks_on(&shm), before);
    }

    #[test]
    fn a_group_shared_directory_gets_a_0660_database() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("shared");
        fs::create_dir(&d).unwrap();
        chmod(&d, 0o2770);
        if mode_of(&d) != 0o2770 {
            // Not a member of the directory's group: the kernel dropped the setgid bit.
            panic!(
                "cannot make a setgid directory here (mode {:o})",
                mode_of(&d)
            );
        }
        let db = d.join("rl.sqlite");
        check_database(&db).unwrap();
        assert_eq!(mode_of(&db), 0o660);
    }

    #[test]
    fn in_a_group_shared_directory_a_members_database_is_used() {
        // As root: the file given to uid 65534 in the directory's group, then in another group.
        // As anyone else: our own files judged as uid + 1, whose directory is then not theirs.
        let me = euid();
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("shared");
        fs::create_dir(&d).unwrap();
        chmod(&d, 0o2770);
        let db = d.join("rl.sqlite");
        fs::write(&db, b"").unwrap();
        chmod(&db, 0o660);
        let gid = fs::metadata(&d).unwrap().gid();
        if me == 0 {
            std::os::unix::fs::chown(&db, Some(65534), Some(gid)).unwrap();
            check_database_as(&db, 0).unwrap();
            match_companion_modes(&db).unwrap();
            std::os::unix::fs::chown(&db, Some(65534), Some(gid + 1)).unwrap();
            let e = check_database_as(&db, 0).unwrap_err();
            assert!(
                e.what.contains(&format!(
                    "or the group of the group-shared directory (gid {gid})"
                )),
                "{e}"
            );
        } else {
            let e = check_database_as(&db, me + 1).unwrap_err();
            assert!(
                !e.what.contains("the database is owned"),
                "the file passes: {e}"
            );
            assert!(
                e.what.contains(&format!(
                    "its directory {} is owned by uid {me}",
                    d.display()
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn database_paths_refused() {
        let tmp = tempfile::tempdir().unwrap();
        // A link at the database path: refused, and the target untouched.
        let target = tmp.path().join("app.sqlite");
        fs::write(&target, b"the application's own data").unwrap();
        let l = tmp.path().join("rl.sqlite");
        symlink(&target, &l).unwrap();
        let e = check_database(&l).unwrap_err();
        assert_eq!(e.path, l);
        assert!(e.what.contains("symbolic link"), "{e}");
        assert_eq!(fs::read(&target).unwrap(), b"the application's own data");
        // A link as a companion.
        let db = tmp.path().join("db.sqlite");
        symlink(&target, companion(&db, "-wal")).unwrap();
        let e = check_database(&db).unwrap_err();
        assert!(
            e.what.contains("-wal file") && e.what.contains("symbolic link"),
            "{e}"
        );
        assert!(!db.exists(), "nothing created next to a bad companion");
        // A link on the way to the database.
        let real = tmp.path().join("realdir");
        fs::create_dir(&real).unwrap();
        symlink(&real, tmp.path().join("linkdir")).unwrap();
        let e = check_database(&tmp.path().join("linkdir/db.sqlite")).unwrap_err();
        assert!(
            e.what.contains("linkdir on the path is a symbolic link"),
            "{e}"
        );
        assert!(e.what.contains("realdir"), "names the real path: {e}");
        // A world-writable directory, sticky or not.
        let p = tmp.path().join("pub");
        fs::create_dir(&p).unwrap();
        chmod(&p, 0o1777);
        let e = check_database(&p.join("db.sqlite")).unwrap_err();
        assert!(e.what.contains("mode 1777"), "{e}");
        assert!(!p.join("db.sqlite").exists());
        // A database file writable by others.
        let d = tmp.path().join("w.sqlite");
        fs::write(&d, b"").unwrap();
        chmod(&d, 0o666);
        let e = check_database(&d).unwrap_err();
        assert!(e.what.contains("mode 0666 (writable by others)"), "{e}");
        // A missing directory is SQLite's to report.
        check_database(&tmp.path().join("none/db.sqlite")).unwrap();
    }

    #[test]
    fn files_of_another_user_are_refused() {
        // As root: files given away to uid 65534. As anyone else (who cannot give files away):
        // our own files judged as if we were uid + 1. Either way the I/O path runs, without a
        // skip; the real thing, another user planting files for a php-fpm pool, is
        // php-tests/trust/run.
        let me = euid();
        let (judge_as, owner) = if me == 0 { (0, 65534) } else { (me + 1, me) };
        let give = |p: &Path| {
            if me == 0 {
                std::os::unix::fs::chown(p, Some(owner), Some(owner)).unwrap();
            }
        };
        let want = format!("owned by uid {owner}, not by the effective user (uid {judge_as})");
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db.sqlite");
        fs::write(&db, b"").unwrap();
        give(&db);
        let e = check_database_as(&db, judge_as).unwrap_err();
        assert!(e.what.contains(&want), "{e}");
        for suffix in ["-wal", "-shm"] {
            let other = tmp.path().join(format!("o{suffix}.sqlite"));
            let c = companion(&other, suffix);
            fs::write(&c, b"").unwrap();
            give(&c);
            let e = check_database_as(&other, judge_as).unwrap_err();
            assert!(e.what.contains(&want) && e.path == c, "{e}");
            assert!(
                !other.exists(),
                "nothing created next to someone else's {suffix}"
            );
        }
        let k = tmp.path().join("k");
        fs::write(&k, [7u8; 32]).unwrap();
        chmod(&k, 0o600);
        give(&k);
        let e = check_key_file_as(&k, false, judge_as)
            .unwrap()
            .verdict
            .unwrap_err();
        assert!(e.contains(&want), "{e}");
        // In the system temp dir (root's, sticky), so that its parent passes and the
        // directory itself is judged.
        let t = tempfile::Builder::new()
            .prefix("php-ratelimit-test-")
            .tempdir_in(std::env::temp_dir())
            .unwrap();
        give(t.path());
        let e = private_dir_as(t.path(), judge_as).unwrap_err();
        assert_eq!(e.path, t.path());
        assert!(e.what.contains(&want), "{e}");
    }

    #[test]
    fn a_state_file_is_created_0600_and_opened_again() {
        let tmp = tempfile::tempdir().unwrap();
        chmod(tmp.path(), 0o700);
        let p = tmp.path().join("db.sqlite.breaker");
        drop(open_state_file(&p).unwrap());
        assert_eq!(mode_of(&p), 0o600);
        assert!(open_state_file(&p).is_ok());
    }

    #[test]
    fn a_state_file_that_is_a_link_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        chmod(tmp.path(), 0o700);
        let target = tmp.path().join("elsewhere");
        fs::write(&target, b"").unwrap();
        chmod(&target, 0o600);
        let p = tmp.path().join("db.sqlite.breaker");
        symlink(&target, &p).unwrap();
        let e = open_state_file(&p).unwrap_err();
        assert!(e.what.contains("symbolic link"), "{e}");
    }

    #[test]
    fn a_state_file_others_or_the_group_can_write_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        chmod(tmp.path(), 0o700);
        for perm in [0o602, 0o620, 0o666] {
            let p = tmp.path().join(format!("b{perm:o}"));
            fs::write(&p, b"x").unwrap();
            chmod(&p, perm);
            let e = open_state_file(&p).unwrap_err();
            assert!(e.what.contains("writable by"), "{perm:o}: {e}");
        }
    }

    #[test]
    fn a_state_file_of_someone_else_is_refused() {
        let f = reg(0o600, OTHER);
        assert!(judge_state_file(f, ME, None)
            .unwrap_err()
            .contains("owned by uid 1001"));
        assert!(judge_state_file(reg(0o600, ME), ME, None).is_ok());
        assert!(
            judge_state_file(reg(0o660, OTHER), ME, Some(GID)).is_ok(),
            "a shared dir"
        );
    }

    #[test]
    fn a_state_file_in_a_world_writable_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        chmod(tmp.path(), 0o777);
        let e = open_state_file(&tmp.path().join("b")).unwrap_err();
        assert!(e.what.contains("writable by every user"), "{e}");
        assert!(!tmp.path().join("b").exists());
    }
}
