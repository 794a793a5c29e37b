//! Who may see and change what: a random token, given once in the URL and
//! kept in a cookie (`HttpOnly`, `SameSite=Strict`), asked of every request;
//! and, for every request that changes something, the page's own Origin
//! and its CSRF token.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};

/// The cookie that carries the token after the first visit.
pub(crate) const COOKIE: &str = "kesoku_console";
/// The header a page's changes carry the CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

/// A fresh random secret: 244 random bits, as hex.
pub(crate) fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// The secrets a console checks requests against.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    pub(crate) token: String,
    pub(crate) csrf: String,
}

/// Why a request is refused, as its status and a line for the body.
#[derive(Debug)]
pub(crate) struct Refused(pub(crate) StatusCode, pub(crate) &'static str);

impl Keys {
    /// Whether `headers` (the cookie, or `Authorization: Bearer`) or the
    /// query's `token` carry the token.
    pub(crate) fn admits(&self, headers: &HeaderMap, query_token: Option<&str>) -> bool {
        let from_cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == COOKIE && same(value, &self.token));
        let from_bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| same(t, &self.token));
        from_cookie || from_bearer || query_token.is_some_and(|t| same(t, &self.token))
    }

    /// A change is allowed only from the console's own page: its Origin
    /// is this host's, and it carries the CSRF token the page was given.
    pub(crate) fn allows_change(&self, headers: &HeaderMap) -> Result<(), Refused> {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .ok_or(Refused(
                StatusCode::BAD_REQUEST,
                "the request names no host",
            ))?;
        let origin = headers
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .ok_or(Refused(
                StatusCode::FORBIDDEN,
                "a change must come from the console's page (no Origin)",
            ))?;
        if origin != format!("http://{host}") {
            return Err(Refused(
                StatusCode::FORBIDDEN,
                "a change must come from the console's page (another Origin)",
            ));
        }
        let csrf = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !csrf.is_some_and(|c| same(c, &self.csrf)) {
            return Err(Refused(
                StatusCode::FORBIDDEN,
                "a change must carry the page's CSRF token",
            ));
        }
        Ok(())
    }

    /// The cookie that keeps the token, for the page's own requests only.
    pub(crate) fn cookie(&self) -> HeaderValue {
        let cookie = format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", self.token);
        HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// Equal, in a time that does not tell how much of a guess was right.
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Keys {
        Keys {
            token: "t0k".into(),
            csrf: "c5rf".into(),
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_token_comes_by_cookie_bearer_or_query() {
        let k = keys();
        assert!(k.admits(&headers(&[("cookie", "a=b; kesoku_console=t0k")]), None));
        assert!(k.admits(&headers(&[("authorization", "Bearer t0k")]), None));
        assert!(k.admits(&HeaderMap::new(), Some("t0k")));
        assert!(!k.admits(&headers(&[("cookie", "kesoku_console=t0")]), None));
        assert!(!k.admits(&HeaderMap::new(), Some("nope")));
    }

    #[test]
    fn a_change_needs_the_origin_and_the_csrf_token() {
        let k = keys();
        let ok = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("x-csrf-token", "c5rf"),
        ];
        assert!(k.allows_change(&headers(&ok)).is_ok());
        let other = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
            ("x-csrf-token", "c5rf"),
        ];
        assert_eq!(k.allows_change(&headers(&other)).unwrap_err().0, 403);
        let no_csrf = [
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ];
        assert_eq!(k.allows_change(&headers(&no_csrf)).unwrap_err().0, 403);
    }
}
