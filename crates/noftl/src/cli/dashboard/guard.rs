//! Who may talk to the dashboard: the checks every request passes before it is served.
//!
//! Why: the dashboard starts runs that take this machine's cores and memory, and a web page the
//! user happens to visit can send requests to it. Before these checks, `POST /api/runs` with
//! `Content-Type: text/plain` (a "simple" request, sent cross-origin without asking), an
//! `Origin` of another site and another `Host` started a run; and since no `Host` was checked,
//! a page whose domain name was re-pointed at 127.0.0.1 (DNS rebinding) could read every API.
//!
//! Invariants:
//! 1. `Host` names this dashboard on every request: `localhost`, a loopback address or the
//!    bound address (any address literal when bound to all of them), with the bound port. A
//!    domain name of someone else's never passes, so a rebound name reads nothing.
//! 2. An `Origin`, when the browser sends one, is this dashboard's own (`http://` and a `Host`
//!    that passes 1).
//! 3. A request that changes anything (any method but GET and HEAD) carries the token drawn at
//!    start-up (printed with the URL, embedded in the page the dashboard serves, so its own form
//!    works) in `X-Noftl-Token`, and a JSON body (`Content-Type: application/json`). A custom
//!    header and that type make a browser ask first (CORS preflight), which the dashboard never
//!    grants; the token stops the rest.

use std::net::{IpAddr, SocketAddr};

use axum::http::{header, HeaderMap, Method, StatusCode};

/// The header that carries the token.
pub const TOKEN_HEADER: &str = "x-noftl-token";

/// The checks of one dashboard: its bound address and its token.
#[derive(Clone, Debug)]
pub struct Guard {
    bound: SocketAddr,
    token: String,
}

/// A refused request: its status and why, for the body.
pub type Refusal = (StatusCode, String);

impl Guard {
    /// The guard of a dashboard bound to `bound`, with a fresh random token.
    pub fn new(bound: SocketAddr) -> Guard {
        // 128 bits from the thread's generator (ChaCha, seeded by the operating system): not
        // guessable by a page that cannot read this process's output.
        let token = format!("{:032x}", rand::random::<u128>());
        Guard { bound, token }
    }

    /// The token, to print and to embed in the page.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Invariants 1 to 3 for a request with `method` and `headers`.
    pub fn admit(&self, method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
        let forbidden = |msg: String| Err((StatusCode::FORBIDDEN, msg));
        let Some(host) = headers.get(header::HOST).and_then(|h| h.to_str().ok()) else {
            return forbidden(
                "no Host header: the dashboard answers requests for its own address only".into(),
            );
        };
        if !self.host_is_mine(host) {
            return forbidden(format!(
                "Host '{host}' is not this dashboard ({}): requests for other names are refused (DNS rebinding)",
                self.bound
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let mine = origin
                .to_str()
                .ok()
                .and_then(|o| o.strip_prefix("http://"))
                .is_some_and(|h| self.host_is_mine(h));
            if !mine {
                return forbidden(format!(
                    "Origin {origin:?} is not this dashboard's page: other sites may not use it"
                ));
            }
        }
        if method == Method::GET || method == Method::HEAD {
            return Ok(());
        }
        let token = headers.get(TOKEN_HEADER).map(|t| t.as_bytes());
        if !token.is_some_and(|t| same_secret(t, self.token.as_bytes())) {
            return forbidden(format!(
                "no valid {TOKEN_HEADER} header: runs are started and cancelled by the dashboard's page, or with the token it printed at start-up"
            ));
        }
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|c| c.to_str().ok())
            .and_then(|c| c.split(';').next())
            .is_some_and(|c| c.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Err((
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a request that changes anything has a JSON body (Content-Type: application/json)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Invariant 1: `host` (a `Host` header's value, `NAME[:PORT]`) names this dashboard.
    fn host_is_mine(&self, host: &str) -> bool {
        let (name, port) = match host.strip_prefix('[') {
            // [v6]:port
            Some(rest) => match rest.split_once(']') {
                Some((name, tail)) => (name, tail.strip_prefix(':')),
                None => return false,
            },
            None => match host.rsplit_once(':') {
                Some((name, port)) => (name, Some(port)),
                None => (host, None),
            },
        };
        // No port: HTTP's default.
        let port = match port {
            Some(p) => p.parse::<u16>().ok(),
            None => Some(80),
        };
        if port != Some(self.bound.port()) {
            return false;
        }
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        match name.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback() || ip == self.bound.ip() || self.bound.ip().is_unspecified(),
            Err(_) => false,
        }
    }
}

/// Whether `a` equals `b`, in a time that does not depend on where they first differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().expect("header value"));
        }
        h
    }

    #[test]
    fn only_this_dashboards_host_and_origin_pass_and_changes_need_the_token_and_json() {
        let g = Guard::new("127.0.0.1:8080".parse().expect("addr"));
        let get = Method::GET;
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "LOCALHOST:8080",
        ] {
            assert!(g.admit(&get, &headers(&[("host", host)])).is_ok(), "{host}");
        }
        for host in [
            "evil.example:8080",
            "127.0.0.1:80",
            "127.0.0.1",
            "10.0.0.1:8080",
            "[::1",
        ] {
            assert!(
                g.admit(&get, &headers(&[("host", host)])).is_err(),
                "{host}"
            );
        }
        assert!(g.admit(&get, &HeaderMap::new()).is_err(), "no Host");
        let evil = headers(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
        ]);
        assert!(g.admit(&get, &evil).is_err());
        let token = g.token().to_string();
        let post = Method::POST;
        let ok = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("content-type", "application/json; charset=utf-8"),
            (TOKEN_HEADER, token.as_str()),
        ];
        assert!(g.admit(&post, &headers(&ok)).is_ok());
        let (status, _) = g.admit(&post, &headers(&ok[..3])).expect_err("no token");
        assert_eq!(status, StatusCode::FORBIDDEN);
        let wrong = [ok[0], ok[1], ok[2], (TOKEN_HEADER, "0123")];
        assert!(g.admit(&post, &headers(&wrong)).is_err());
        let plain = [ok[0], ok[1], ("content-type", "text/plain"), ok[3]];
        let (status, _) = g.admit(&post, &headers(&plain)).expect_err("not JSON");
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_ne!(Guard::new(g.bound).token(), g.token(), "a token per start");
        let all = Guard::new("0.0.0.0:9000".parse().expect("addr"));
        assert!(all
            .admit(&get, &headers(&[("host", "192.0.2.7:9000")]))
            .is_ok());
        assert!(all
            .admit(&get, &headers(&[("host", "rebound.example:9000")]))
            .is_err());
    }
}
