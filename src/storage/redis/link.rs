//! One connection to one Redis server, every step of which ends by the call's deadline: name
//! resolution (see `resolve`), connect, the TLS handshake, AUTH and SELECT, every write and
//! every read. The redis crate's connection gives each read the whole timeout again, so a
//! reply trickling in a byte at a time held a call for 1.8 s of a 50 ms budget; here each read
//! waits at most what is left. The crate still builds most commands and runs the scripts (its
//! `ConnectionLike`); the replies are read by `resp`, one buffer per connection.

use super::resolve;
use super::resp::Reader;
use redis::{ConnectionLike, RedisError, RedisResult, Value};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::io::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How far a socket's timeout may be from what is left before it is set again (a system call):
/// a call starting on a kept connection finds it within this of its whole budget.
const SLACK: Duration = Duration::from_millis(1);

fn left(deadline: Instant) -> io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "the call's time budget ran out"))
}

fn fits(set: Option<Duration>, left: Duration) -> bool {
    set.is_some_and(|s| s <= left + SLACK && s + SLACK >= left)
}

/// A socket kind with kernel timeouts.
trait Sock: Read + Write + AsRawFd {
    fn read_timeout(&self, d: Duration) -> io::Result<()>;
    fn write_timeout(&self, d: Duration) -> io::Result<()>;
}

impl Sock for TcpStream {
    fn read_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(d))
    }
    fn write_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(d))
    }
}

impl Sock for UnixStream {
    fn read_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(d))
    }
    fn write_timeout(&self, d: Duration) -> io::Result<()> {
        self.set_write_timeout(Some(d))
    }
}

/// What a socket's own timeout may overshoot by: the kernel counts it in ticks (4 ms at
/// HZ=250), rounded up.
const TICK: Duration = Duration::from_millis(5);

/// Waits until `fd` can be read (or has an error or end of stream), at most `wait`; false when
/// the wait ran out. `ppoll` keeps the wait to the nanosecond, where a socket's receive
/// timeout is counted in the kernel's ticks (4 ms here: a 25 ms budget became 30.7 ms).
fn readable(fd: RawFd, wait: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: wait.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
    };
    // SAFETY: `p` and `ts` are valid for the whole call and `p` is one element, as nfds says;
    // a null signal mask leaves the mask unchanged.
    let n = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    match n {
        -1 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
        0 => Ok(false),
        _ => Ok(true),
    }
}

/// A socket whose reads and writes each wait at most until the deadline. A read blocks with
/// the socket's receive timeout set to what is left less a [`TICK`] (set again only when that
/// moved by more than [`SLACK`]: no system call more than a plain read on the usual path),
/// then waits out the rest in `ppoll`, precise to the microsecond. A write waits with the
/// socket's send timeout (a request is a few hundred bytes: a write waits only when the server
/// stopped reading).
struct Timed<S> {
    sock: S,
    deadline: Instant,
    read_set: Option<Duration>,
    write_set: Option<Duration>,
}

impl<S: Sock> Timed<S> {
    fn new(sock: S, deadline: Instant) -> Self {
        Self {
            sock,
            deadline,
            read_set: None,
            write_set: None,
        }
    }
}

impl<S: Sock> Read for Timed<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let coarse = left(self.deadline)?.saturating_sub(TICK);
        if coarse >= SLACK {
            if !fits(self.read_set, coarse) {
                self.sock.read_timeout(coarse)?;
                self.read_set = Some(coarse);
            }
            match self.sock.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                done => return done,
            }
        }
        while !readable(self.sock.as_raw_fd(), left(self.deadline)?)? {}
        self.sock.read(buf)
    }
}

impl<S: Sock> Write for Timed<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = left(self.deadline)?;
        if !fits(self.write_set, left) {
            self.sock.write_timeout(left)?;
            self.write_set = Some(left);
        }
        self.sock.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, Timed<TcpStream>>;

enum Stream {
    Tcp(Timed<TcpStream>),
    Tls(Box<Tls>),
    Unix(Timed<UnixStream>),
}

impl Stream {
    fn set_deadline(&mut self, deadline: Instant) {
        match self {
            Stream::Tcp(s) => s.deadline = deadline,
            Stream::Tls(s) => s.sock.deadline = deadline,
            Stream::Unix(s) => s.deadline = deadline,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
        }
    }
}

/// What a connection is for: a data node (SELECT its database) or a Sentinel (which has none).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    Data,
    Sentinel,
}

/// An open connection to one server.
pub struct Link {
    stream: Stream,
    reader: Reader,
    db: i64,
}

impl Link {
    /// Connects to the server of `info` and logs in (AUTH, and SELECT for a data node), all by
    /// `deadline`.
    pub fn open(info: &redis::ConnectionInfo, role: Role, deadline: Instant) -> RedisResult<Link> {
        let stream = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => {
                Stream::Tcp(Timed::new(tcp(host, *port, deadline)?, deadline))
            }
            redis::ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                ..
            } => {
                if *insecure {
                    return Err(RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        "a TLS connection that does not check the certificate is not supported",
                    )));
                }
                let name = rustls::pki_types::ServerName::try_from(host.clone()).map_err(|_| {
                    RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        "not a valid TLS server name",
                    ))
                })?;
                let conn = rustls::ClientConnection::new(tls_config()?, name)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                let sock = Timed::new(tcp(host, *port, deadline)?, deadline);
                let mut s = rustls::StreamOwned::new(conn, sock);
                while s.conn.is_handshaking() {
                    s.conn.complete_io(&mut s.sock)?;
                }
                Stream::Tls(Box::new(s))
            }
            redis::ConnectionAddr::Unix(path) => {
                Stream::Unix(Timed::new(unix(path, deadline)?, deadline))
            }
            _ => {
                return Err(RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "an address of a kind not supported",
                )))
            }
        };
        let mut link = Link {
            stream,
            reader: Reader::new(),
            db: 0,
        };
        link.log_in(info.redis_settings(), role)?;
        Ok(link)
    }

    /// Sets the deadline of the next call's reads and writes.
    pub fn arm(&mut self, deadline: Instant) {
        self.stream.set_deadline(deadline);
    }

    /// AUTH (when there is a password) and SELECT (a data node's database other than 0), sent
    /// together, read by the same deadline.
    fn log_in(&mut self, r: &redis::RedisConnectionInfo, role: Role) -> RedisResult<()> {
        let mut packed = Vec::new();
        let mut steps = Vec::new();
        if let Some(password) = r.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = r.username() {
                auth.arg(user);
            }
            auth.arg(password);
            packed.extend(auth.get_packed_command());
            steps.push("AUTH");
        }
        if role == Role::Data && r.db() != 0 {
            packed.extend(redis::cmd("SELECT").arg(r.db()).get_packed_command());
            steps.push("SELECT");
        }
        if steps.is_empty() {
            return Ok(());
        }
        self.send(&packed)?;
        let mut refused = None;
        for step in steps {
            if let Value::ServerError(e) = self.read()? {
                let detail = e.details().unwrap_or_default().to_string();
                refused.get_or_insert(match step {
                    "AUTH" => RedisError::from((
                        redis::ErrorKind::AuthenticationFailed,
                        "the server refused the password",
                        format!("{} {detail}", e.code()),
                    )),
                    _ => RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        "the server refused to switch database",
                        format!("{} {detail}", e.code()),
                    )),
                });
            }
        }
        if let Some(e) = refused {
            return Err(e);
        }
        self.db = r.db();
        Ok(())
    }

    /// Sends a command. Bytes already read past the last reply (a server that answered one
    /// command twice, or more than it was asked, in one segment) fail it before it is sent, and
    /// so drop the connection (see `conn.rs`): read as the next call's reply, they would answer
    /// it with another call's answer. Bytes still in the socket are not looked for (a system
    /// call per command; see the ignored test `a_reply_nobody_asked_for_that_comes_late_..`).
    fn send(&mut self, bytes: &[u8]) -> RedisResult<()> {
        if self.reader.has_unread() {
            return Err(RedisError::from((
                redis::ErrorKind::Io,
                "bytes no command asked for came before this one: the connection lost its place",
            )));
        }
        self.stream.write_all(bytes)?;
        self.stream.flush()?;
        Ok(())
    }

    fn read(&mut self) -> RedisResult<Value> {
        loop {
            match self.reader.read(&mut self.stream)? {
                // Not a reply (RESP3 pushes are never asked for; skipped if any comes).
                Value::Push { .. } => continue,
                v => return Ok(v),
            }
        }
    }

    /// Sends a packed command and reads its reply, offered first to `take` as its bytes (see
    /// `Reader::read_with`): `Ok` what `take` made of them, else `Err` the reply as
    /// [`ConnectionLike::req_packed_command`] gives it.
    pub fn request_with<T>(
        &mut self,
        cmd: &[u8],
        mut take: impl FnMut(&[u8]) -> Option<(T, usize)>,
    ) -> RedisResult<Result<T, Value>> {
        self.send(cmd)?;
        loop {
            match self.reader.read_with(&mut self.stream, &mut take)? {
                Err(Value::Push { .. }) => continue,
                r => return Ok(r),
            }
        }
    }
}

impl ConnectionLike for Link {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.send(cmd)?;
        self.read()
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.send(cmd)?;
        let mut out = Vec::with_capacity(count);
        for i in 0..offset + count {
            let v = self.read()?;
            if i >= offset {
                out.push(v);
            }
        }
        Ok(out)
    }

    fn get_db(&self) -> i64 {
        self.db
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        true
    }
}

/// A TCP connection to the first address of `host` that accepts one by `deadline`. When none
/// does, the name is looked up again in the background (the server may have moved).
fn tcp(host: &str, port: u16, deadline: Instant) -> io::Result<TcpStream> {
    let addrs = resolve::resolve(host, port, deadline)?;
    let mut last = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, left(deadline)?) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    resolve::stale(host, port);
    Err(last
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the host name has no address")))
}

/// A connection to a unix socket by `deadline`. A blocking connect waits for as long as the
/// server's listen queue stays full (a server that stopped accepting, SIGSTOPped say); a
/// non-blocking one answers EAGAIN at once instead (a unix socket has no connect in
/// progress to wait on), so it is tried again every millisecond until the deadline.
fn unix(path: &std::path::Path, deadline: Instant) -> io::Result<UnixStream> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::io::{FromRawFd, OwnedFd};
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain old data, for which all zero bytes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a unix socket path too long or with a NUL byte",
        ));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len =
        (std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1) as libc::socklen_t;
    // SAFETY: plain system call; its result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket() and is owned by nothing else.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    loop {
        // SAFETY: `addr` is a valid sockaddr_un for the whole call and `len` does not exceed
        // its size (checked above); `fd` is open (owned by `sock`).
        let r = unsafe {
            libc::connect(
                fd,
                (&addr as *const libc::sockaddr_un).cast::<libc::sockaddr>(),
                len,
            )
        };
        if r == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => std::thread::sleep(left(deadline)?.min(Duration::from_millis(1))),
            _ => return Err(e),
        }
        left(deadline)?;
    }
    let s = UnixStream::from(sock);
    s.set_nonblocking(false)?;
    Ok(s)
}

/// Makes the TLS settings ahead of the first call (see [`Conn::new`](super::conn::Conn::new)):
/// reading the roots took 11 ms here, work of this process that is no wait for Redis and must
/// not spend a call's budget (a first call under load was "unavailable" for it).
pub fn prepare_tls() {
    let _ = tls_config();
}

/// The TLS settings, made once per process: roots from the system, or from `SSL_CERT_FILE` /
/// `SSL_CERT_DIR`.
fn tls_config() -> RedisResult<Arc<rustls::ClientConfig>> {
    static C: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    let made = C.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = rustls::RootCertStore::empty();
        for cert in found.certs {
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(found
                .errors
                .first()
                .map_or("no certificate authority found".into(), |e| e.to_string()));
        }
        Ok(Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        ))
    });
    made.clone().map_err(|why| {
        RedisError::from((redis::ErrorKind::InvalidClientConfig, "no TLS roots", why))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;

    /// A fault injector, not a Redis: accepts one connection, reads one command line, then
    /// sends a reply of 200 bytes (a bulk string) one byte every `gap`.
    fn trickling_peer(gap: Duration) -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = io::BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            let mut s = s;
            let mut reply = b"$200\r\n".to_vec();
            reply.extend([b'x'; 200]);
            reply.extend(b"\r\n");
            for b in reply {
                if s.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(gap);
            }
        });
        port
    }

    /// A fault injector, not a Redis: accepts one connection and answers each command line it
    /// reads (an inline command is one line, "PING\r\n"): the first with the parts of `first`,
    /// 30 ms apart (each its own segment), every later one with `rest`.
    fn answering_peer(first: &'static [&'static [u8]], rest: &'static [u8]) -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut r = io::BufReader::new(s.try_clone().unwrap());
            let mut s = s;
            let mut line = String::new();
            let mut parts = first;
            while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                for (i, part) in parts.iter().enumerate() {
                    if i > 0 {
                        std::thread::sleep(Duration::from_millis(30));
                    }
                    if s.write_all(part).and_then(|()| s.flush()).is_err() {
                        return;
                    }
                }
                parts = std::slice::from_ref(&rest);
                line.clear();
            }
        });
        port
    }

    /// A link to a peer of the test's on 127.0.0.1:`port`.
    fn link_to(port: u16, deadline: Instant) -> Link {
        let info =
            redis::IntoConnectionInfo::into_connection_info(format!("redis://127.0.0.1:{port}/0"))
                .unwrap();
        Link::open(&info, Role::Data, deadline).unwrap()
    }

    /// A server that answers one command with two replies (red team): the second is never read
    /// as the next command's answer; the next command fails, unsent.
    #[test]
    fn a_reply_nobody_asked_for_fails_the_next_command() {
        let port = answering_peer(&[b":1\r\n:2\r\n"], b":1\r\n:2\r\n");
        let mut link = link_to(port, Instant::now() + Duration::from_secs(5));
        // Both replies come in one write: the first read takes them both.
        assert_eq!(link.req_packed_command(b"PING\r\n").unwrap(), Value::Int(1));
        let e = link.req_packed_command(b"PING\r\n").unwrap_err();
        assert!(e.is_io_error(), "{e}");
        assert!(e.to_string().contains("lost its place"), "{e}");
    }

    /// A known limit, not fixed (red team): a server that answers one command twice, the second
    /// reply a moment after the first (another TCP segment: not in the reader's buffer when the
    /// next command is sent), has that second reply read as the next command's answer: `send`
    /// looks at the reader's buffer only. Seeing it would take asking the socket before every
    /// command (`ppoll` with a zero wait; for TLS, rustls' buffered bytes too): a system call
    /// per decision, some 2 % of a native command's round trip, for a server or proxy that
    /// breaks the protocol. Another way, for later: a nonce the decision's reply echoes.
    #[test]
    #[ignore]
    fn a_reply_nobody_asked_for_that_comes_late_fails_the_next_command() {
        // The answer, then a moment later the same command answered again.
        let port = answering_peer(&[b":1\r\n", b":2\r\n"], b":3\r\n");
        let mut link = link_to(port, Instant::now() + Duration::from_secs(5));
        assert_eq!(link.req_packed_command(b"PING\r\n").unwrap(), Value::Int(1));
        std::thread::sleep(Duration::from_millis(200));
        let second = link.req_packed_command(b"PING\r\n");
        assert!(
            second.as_ref().is_err_and(|e| e.is_io_error()),
            "the second PING was answered {second:?}: the first one's duplicate"
        );
    }

    #[test]
    fn a_reply_trickling_in_holds_a_call_no_longer_than_its_budget() {
        let port = trickling_peer(Duration::from_millis(10));
        let info =
            redis::IntoConnectionInfo::into_connection_info(format!("redis://127.0.0.1:{port}/0"))
                .unwrap();
        let t0 = Instant::now();
        let deadline = t0 + Duration::from_millis(50);
        let mut link = Link::open(&info, Role::Data, deadline).unwrap();
        let e = redis::cmd("PING").query::<String>(&mut link).unwrap_err();
        let took = t0.elapsed();
        assert!(e.is_timeout(), "{e}");
        // 50 to 51 ms on an idle machine; the reply takes 2 s. The margin is for a machine
        // so loaded that the test's thread waits to be scheduled.
        assert!(
            took >= Duration::from_millis(50) && took < Duration::from_millis(150),
            "{took:?}"
        );
    }

    #[test]
    fn a_unix_socket_whose_listen_queue_is_full_holds_a_connect_no_longer_than_its_budget() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deaf.sock");
        // Listening, never accepting: its queue fills up as a stopped server's does.
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut queued = Vec::new();
        loop {
            let deadline = Instant::now() + Duration::from_millis(20);
            match unix(&path, deadline) {
                Ok(s) => queued.push(s),
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
                    break;
                }
            }
            assert!(queued.len() < 100_000, "the listen queue never filled");
        }
        let info =
            redis::IntoConnectionInfo::into_connection_info(format!("unix://{}", path.display()))
                .unwrap();
        let t0 = Instant::now();
        let e = Link::open(&info, Role::Data, t0 + Duration::from_millis(50))
            .err()
            .expect("a full queue admits no connection");
        let took = t0.elapsed();
        assert!(
            e.is_timeout() || e.is_connection_dropped() || e.is_io_error(),
            "{e}"
        );
        // A blocking connect waited here until the test's end.
        assert!(
            took >= Duration::from_millis(50) && took < Duration::from_millis(150),
            "{took:?} (after {} queued connections)",
            queued.len()
        );
    }
}
