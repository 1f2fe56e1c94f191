//! A real `redis-server` for one test: started on 127.0.0.1 on a free port with its data in a
//! temp folder, waited for until it answers, stopped (and its folder removed) when dropped.
//! Installed by `.ci/run` with apt-get; when it is missing the tests skip, saying why, unless
//! `TRIAGE_REQUIRE_REDIS=1` (set by `.ci/run` once it is installed) makes that a failure.

// The includer provides it: `tests/fleet/main.rs` (the suites' own), and the scripts' unit
// tests in `src/store/fleet/against_redis.rs`.
use super::skip_unless_tool;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
    /// With TLS: the port of `--tls-port` (plain `port` still answers, for the checks).
    pub tls_port: Option<u16>,
}

/// The server binary, or `None` (after saying why) when the test should skip.
fn binary() -> Option<PathBuf> {
    if !skip_unless_tool("redis-server", "TRIAGE_REQUIRE_REDIS") {
        return None;
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("redis-server"))
            .find(|p| p.is_file())
    })
}

/// Lets the tests send `DEBUG SLEEP` from loopback (Redis 7 refuses DEBUG unless told).
fn debug_command() -> Vec<&'static str> {
    let version = Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let major = version
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if major >= 7 {
        vec!["--enable-debug-command", "local"]
    } else {
        Vec::new()
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Server {
    /// A new server, or `None` when redis-server is not installed (the test then returns).
    pub fn start() -> Option<Server> {
        binary()?;
        let dir = tempfile::tempdir().expect("temp dir");
        let mut s = Server {
            child: None,
            port: free_port(),
            dir,
            tls_port: None,
        };
        s.spawn();
        Some(s)
    }

    /// A server that also speaks TLS, with a certificate for 127.0.0.1 signed by a CA of the
    /// test's own (`ca()`); `None` when redis-server or openssl is missing (said why).
    pub fn start_tls() -> Option<Server> {
        binary()?;
        if !skip_unless_tool("openssl", "TRIAGE_REQUIRE_OPENSSL") {
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let d = dir.path();
        let ok = |args: &[&str]| {
            Command::new("openssl")
                .args(args)
                .current_dir(d)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        std::fs::write(d.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").expect("ext");
        let made = ok(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=triage test CA",
        ]) && ok(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]) && ok(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]);
        if !made {
            eprintln!("skipped: openssl could not make a test certificate");
            return None;
        }
        let mut s = Server {
            child: None,
            port: free_port(),
            dir,
            tls_port: Some(free_port()),
        };
        s.spawn();
        Some(s)
    }

    /// The CA that signed a TLS server's certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    fn spawn(&mut self) {
        let bin = binary().expect("redis-server");
        let mut cmd = Command::new(bin);
        if let Some(tls) = self.tls_port {
            let d = self.dir.path();
            cmd.arg("--tls-port")
                .arg(tls.to_string())
                .arg("--tls-cert-file")
                .arg(d.join("server.crt"))
                .arg("--tls-key-file")
                .arg(d.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(d.join("ca.crt"))
                .args(["--tls-auth-clients", "no"]);
        }
        let child = cmd
            .args(["--bind", "127.0.0.1", "--port"])
            .arg(self.port.to_string())
            .args(["--save", "", "--appendonly", "yes", "--appendfsync", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(debug_command())
            .args([
                "--daemonize",
                "no",
                "--protected-mode",
                "yes",
                "--loglevel",
                "warning",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.ping() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server on port {} did not answer in 20 s", self.port);
    }

    /// Stalls the server for `secs` seconds (`DEBUG SLEEP`, sent from a connection of its own,
    /// as a slow or overloaded Redis would be), returning once it is stalled: a PING on another
    /// connection gets no answer. The thread ends when the stall does; join it to wait for that.
    pub fn stall(&self, secs: f64) -> std::thread::JoinHandle<()> {
        let port = self.port;
        let t = std::thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            s.write_all(format!("DEBUG SLEEP {secs}\r\n").as_bytes())
                .expect("DEBUG SLEEP");
            let mut buf = [0u8; 5];
            let _ = s.set_read_timeout(Some(Duration::from_secs(120)));
            s.read_exact(&mut buf).expect("DEBUG SLEEP answers");
            assert_eq!(&buf, b"+OK\r\n", "DEBUG SLEEP refused");
        });
        // Stalled once a PING goes unanswered for a while.
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let Ok(mut c) = TcpStream::connect(("127.0.0.1", self.port)) else {
                break;
            };
            let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
            let mut buf = [0u8; 7];
            if c.write_all(b"PING\r\n").is_ok() && c.read_exact(&mut buf).is_err() {
                return t;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("redis-server on port {} never stalled", self.port);
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// True when the server answers PING.
    pub fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    /// Kills the server at once (SIGKILL), as a crash or a lost host would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port with the same folder (its append-only file brings
    /// back what it had written).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A server that accepts connections and reads, but never answers: a hung Redis, a proxy
/// whose backend is gone. Stops when dropped.
pub struct Silent {
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Silent {
    pub fn start() -> Silent {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        l.set_nonblocking(true).expect("nonblocking");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(120);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() < deadline {
                if let Ok((s, _)) = l.accept() {
                    let _ = s.set_nonblocking(true);
                    held.push(s);
                }
                let mut buf = [0u8; 4096];
                for s in &mut held {
                    let _ = s.read(&mut buf);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Silent { port, stop }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
