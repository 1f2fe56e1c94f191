//! Where the fleet's Redis is: `redis://[user[:password]@]host[:port][/db]`, `rediss://` for
//! TLS, the password from the URL or else from `TRIAGE_REDIS_PASSWORD` (read by the context
//! and handed in). It is shown everywhere without its password.

use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo};
use std::fmt;

/// A parsed Redis address, with its password kept out of every message.
#[derive(Clone)]
pub struct Target {
    info: ConnectionInfo,
    shown: String,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

/// Why a TLS store URL cannot be used by a build without the feature `tls`, and what to do.
fn no_tls(shown: &str) -> String {
    format!(
        "the store URL {shown} asks for TLS, which this build of triage lacks (built without the feature `tls`); install a prebuilt binary (they have it), or `cargo install agent-triage --features tls`, or reach Redis with redis:// through a TLS tunnel"
    )
}

impl Target {
    /// Parses `url`; `password` (from `TRIAGE_REDIS_PASSWORD`) is used when the URL has none.
    /// The error says what is wrong and what a good URL looks like, never the password.
    pub fn parse(url: &str, password: Option<&str>) -> Result<Target, String> {
        let url = url.trim();
        let example = "write it like redis://host:6379/0 or rediss://host:6380/0";
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("redis" | "rediss" | "valkey" | "valkeys") => {}
            Some(other) => {
                return Err(format!(
                    "the store URL's scheme `{other}://` is not redis:// or rediss://; {example}"
                ))
            }
            None => return Err(format!("the store URL has no scheme; {example}")),
        }
        let shown = redacted(url);
        let tls = matches!(scheme.as_deref(), Some("rediss" | "valkeys"));
        if tls && !cfg!(feature = "tls") {
            return Err(no_tls(&shown));
        }
        let info = url
            .into_connection_info()
            .map_err(|e| format!("the store URL {shown} is not valid ({e}); {example}"))?;
        if let ConnectionAddr::Unix(_) = info.addr() {
            return Err(format!("the store URL {shown} names no host; {example}"));
        }
        if !info.addr().is_supported() {
            return Err(no_tls(&shown));
        }
        let db = info.redis_settings().db();
        if db < 0 {
            return Err(format!(
                "the store URL {shown} names database {db}; databases are numbered from 0"
            ));
        }
        let info = match (info.redis_settings().password(), password) {
            (None, Some(p)) if !p.is_empty() => {
                let redis = info.redis_settings().clone().set_password(p);
                info.set_redis_settings(redis)
            }
            _ => info,
        };
        // The library's name is not sent on connect: one command less per process.
        let redis = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(redis);
        let shown = format!(
            "{}://{}/{}",
            if matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
                "rediss"
            } else {
                "redis"
            },
            info.addr(),
            info.redis_settings().db()
        );
        Ok(Target { info, shown })
    }

    /// What the client connects with.
    pub fn connection_info(&self) -> ConnectionInfo {
        self.info.clone()
    }
}

/// `url` with the part before `@` (user and password) replaced, for messages about a URL
/// that could not be parsed.
fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_host_port_db_and_never_show_the_password() {
        let t = Target::parse("redis://:s3cret@cache.internal:6390/2", None).unwrap();
        assert_eq!(t.to_string(), "redis://cache.internal:6390/2");
        assert!(t.connection_info().redis_settings().password().is_some());
        assert_eq!(
            t.connection_info().redis_settings().password(),
            Some("s3cret")
        );
        assert!(!format!("{t:?}").contains("s3cret"));
        let t = Target::parse("redis://localhost", None).unwrap();
        assert_eq!(t.to_string(), "redis://localhost:6379/0");
        assert!(t.connection_info().redis_settings().password().is_none());
    }

    #[test]
    fn rediss_is_tls() {
        let t = Target::parse("rediss://:pw@cache:6380/1", None).unwrap();
        assert_eq!(t.to_string(), "rediss://cache:6380/1");
        assert!(matches!(
            t.connection_info().addr(),
            ConnectionAddr::TcpTls {
                insecure: false,
                ..
            }
        ));
    }

    #[test]
    fn the_env_password_is_used_only_when_the_url_has_none() {
        let t = Target::parse("redis://h:1/0", Some("fromenv")).unwrap();
        assert_eq!(
            t.connection_info().redis_settings().password(),
            Some("fromenv")
        );
        let t = Target::parse("redis://:inurl@h:1/0", Some("fromenv")).unwrap();
        assert_eq!(
            t.connection_info().redis_settings().password(),
            Some("inurl")
        );
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        let e = Target::parse("http://h:1", None).unwrap_err();
        assert!(e.contains("`http://`"), "{e}");
        let e = Target::parse("localhost:6379", None).unwrap_err();
        assert!(e.contains("no scheme"), "{e}");
        let e = Target::parse("redis://:pw@h:notaport/0", None).unwrap_err();
        assert!(!e.contains("pw@"), "{e}");
        assert!(e.contains("redis://"), "{e}");
        let e = Target::parse("redis://:pw@h:1/x", None).unwrap_err();
        assert!(!e.contains("pw"), "{e}");
    }
}
