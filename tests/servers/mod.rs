//! What the Redis tests start themselves, shared by their files: free ports, a command sent to
//! a server by port, and a `redis-server` of a test's own on a unix socket, stopped when dropped.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A TCP port nothing listens on now, and never handed out before in this process: the
/// kernel may give a port just let go to the next ask, and two servers of one test (or of two
/// tests running at once) were given the same one.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// One command to the server on `port` of 127.0.0.1.
pub fn cli(port: u16, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}"))?
        .get_connection_with_timeout(Duration::from_secs(2))?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut c)
}

/// A redis-server of a test's own, on a unix socket in `dir`, with `args`; killed on drop.
pub struct OwnServer {
    child: Child,
    /// `unix://` and the socket's path.
    pub url: String,
}

impl OwnServer {
    pub fn start(dir: &Path, args: &[&str]) -> Self {
        let sock = dir.join("redis.sock");
        let _ = std::fs::remove_file(&sock);
        let child = Command::new("redis-server")
            .current_dir(dir)
            .args(["--port", "0", "--save", "", "--appendonly", "no"])
            .arg("--unixsocket")
            .arg(&sock)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/install-deps installs it)");
        // Owned at once: killed on drop, also when it never answers.
        let server = OwnServer {
            child,
            url: format!("unix://{}", sock.display()),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let up = redis::Client::open(server.url.as_str())
                .and_then(|c| c.get_connection())
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if up.is_ok() {
                return server;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on {} did not answer within 20 s",
                server.url
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A plain connection of the test's own, to look and to tamper.
    pub fn admin(&self) -> redis::Connection {
        redis::Client::open(self.url.as_str())
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
