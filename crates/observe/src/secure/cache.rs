//! The answers of TokenReview and SubjectAccessReview, kept for as long as
//! controller-runtime's metrics filter keeps them (MetalLB v0.16.2's
//! `filters.WithAuthenticationAndAuthorization`), so a scrape every 10 s asks the API server
//! no more often than MetalLB does.
//!
//! | answer | kept |
//! |---|---|
//! | a token authenticated | [`TOKEN_TTL`] (1 min) |
//! | a token refused, without an error text | [`TOKEN_TTL`] |
//! | a token refused with an error text, or a review that failed | not kept |
//! | access allowed | [`ALLOW_TTL`] (5 min) |
//! | access denied (or no opinion) | [`DENY_TTL`] (30 s) |
//! | an access review that failed | not kept |
//!
//! Pure: the caller passes the time. A token is kept by its SHA-256 digest, never as text.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a token's review is kept (controller-runtime: `CacheTTL`, for success and failure).
pub const TOKEN_TTL: Duration = Duration::from_secs(60);
/// How long an allowed access is kept (`AllowCacheTTL`).
pub const ALLOW_TTL: Duration = Duration::from_secs(5 * 60);
/// How long a denied access is kept (`DenyCacheTTL`).
pub const DENY_TTL: Duration = Duration::from_secs(30);
/// Entries each cache holds at most; past it, expired entries go, then the oldest.
pub const MAX_ENTRIES: usize = 4096;

/// Who a token belongs to, as TokenReview says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct User {
    /// `status.user.username`.
    pub name: String,
    /// `status.user.uid`.
    pub uid: String,
    /// `status.user.groups`, with `system:authenticated` added when missing (as the API
    /// server's authenticated-group adder does).
    pub groups: Vec<String>,
    /// `status.user.extra`, sorted by key.
    pub extra: Vec<(String, Vec<String>)>,
}

/// What a TokenReview answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenVerdict {
    /// The token is valid for this user.
    Authenticated(User),
    /// The token is not valid; the text is the review's `status.error` (empty when none).
    Refused(String),
}

/// One access asked of SubjectAccessReview: a user, a verb and a non-resource path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Access {
    /// Who asks.
    pub user: User,
    /// The request's method in lower case (`get`).
    pub verb: String,
    /// The request's path (`/metrics`).
    pub path: String,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    expires: Instant,
    stored: Instant,
}

/// A map whose entries expire.
#[derive(Debug)]
struct Expiring<K, V> {
    entries: HashMap<K, Entry<V>>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Expiring<K, V> {
    fn new() -> Self {
        Self {
            entries: HashMap::new(),
        }
    }

    fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.entries
            .get(key)
            .filter(|e| e.expires > now)
            .map(|e| e.value.clone())
    }

    fn put(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if self.entries.len() >= MAX_ENTRIES && !self.entries.contains_key(&key) {
            self.entries.retain(|_, e| e.expires > now);
            if self.entries.len() >= MAX_ENTRIES {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.stored)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(
            key,
            Entry {
                value,
                expires: now + ttl,
                stored: now,
            },
        );
    }

    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The kept answers of both reviews.
#[derive(Debug)]
pub struct ReviewCache {
    tokens: Expiring<[u8; 32], TokenVerdict>,
    access: Expiring<Access, bool>,
}

impl Default for ReviewCache {
    fn default() -> Self {
        Self {
            tokens: Expiring::new(),
            access: Expiring::new(),
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl ReviewCache {
    /// The kept verdict on `token`, if any.
    pub fn token(&self, token: &str, now: Instant) -> Option<TokenVerdict> {
        self.tokens.get(&digest(token), now)
    }

    /// Keeps a TokenReview's verdict when controller-runtime would (module docs).
    pub fn put_token(&mut self, token: &str, verdict: &TokenVerdict, now: Instant) {
        if matches!(verdict, TokenVerdict::Refused(error) if !error.is_empty()) {
            return;
        }
        self.tokens
            .put(digest(token), verdict.clone(), TOKEN_TTL, now);
    }

    /// The kept decision on `access`, if any (`true`: allowed).
    pub fn access(&self, access: &Access, now: Instant) -> Option<bool> {
        self.access.get(access, now)
    }

    /// Keeps a SubjectAccessReview's decision.
    pub fn put_access(&mut self, access: Access, allowed: bool, now: Instant) {
        let ttl = if allowed { ALLOW_TTL } else { DENY_TTL };
        self.access.put(access, allowed, ttl, now);
    }

    /// Entries held (tokens, accesses), expired ones included until they are pushed out.
    pub fn len(&self) -> (usize, usize) {
        (self.tokens.len(), self.access.len())
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> User {
        User {
            name: name.into(),
            uid: "u".into(),
            groups: vec!["system:authenticated".into()],
            extra: Vec::new(),
        }
    }

    fn access(name: &str) -> Access {
        Access {
            user: user(name),
            verb: "get".into(),
            path: "/metrics".into(),
        }
    }

    /// A scrape every 10 s for 10 minutes: the API server is asked what controller-runtime
    /// would ask it (one TokenReview a minute, one SubjectAccessReview every 5 minutes).
    #[test]
    fn a_scrape_every_ten_seconds_asks_as_often_as_metallb() {
        let start = Instant::now();
        let mut cache = ReviewCache::default();
        let (mut token_reviews, mut access_reviews) = (0, 0);
        for i in 0..60u64 {
            let now = start + Duration::from_secs(10 * i);
            if cache.token("t", now).is_none() {
                token_reviews += 1;
                cache.put_token("t", &TokenVerdict::Authenticated(user("prom")), now);
            }
            if cache.access(&access("prom"), now).is_none() {
                access_reviews += 1;
                cache.put_access(access("prom"), true, now);
            }
        }
        assert_eq!((token_reviews, access_reviews), (10, 2));
    }

    #[test]
    fn refusals_and_denials_are_kept_as_controller_runtime_keeps_them() {
        let now = Instant::now();
        let mut cache = ReviewCache::default();
        // A refusal with an error text is an error there: not kept.
        cache.put_token("bad", &TokenVerdict::Refused("invalid".into()), now);
        assert_eq!(cache.token("bad", now), None);
        cache.put_token("quiet", &TokenVerdict::Refused(String::new()), now);
        assert_eq!(
            cache.token("quiet", now + Duration::from_secs(59)),
            Some(TokenVerdict::Refused(String::new()))
        );
        assert_eq!(cache.token("quiet", now + TOKEN_TTL), None);
        cache.put_access(access("nobody"), false, now);
        assert_eq!(
            cache.access(&access("nobody"), now + Duration::from_secs(29)),
            Some(false)
        );
        assert_eq!(cache.access(&access("nobody"), now + DENY_TTL), None);
    }

    #[test]
    fn the_caches_are_bounded() {
        let now = Instant::now();
        let mut cache = ReviewCache::default();
        for i in 0..MAX_ENTRIES + 10 {
            let t = format!("token-{i}");
            cache.put_token(&t, &TokenVerdict::Refused(String::new()), now);
        }
        assert_eq!(cache.len().0, MAX_ENTRIES);
    }
}
