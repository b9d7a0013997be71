//! The lock cycle against etcd v3.4, through the JSON gateway it serves at `/v3/...` on its
//! client port (HTTP/1.1, one keep-alive connection per client). Keys and values travel in
//! base64, int64s as JSON strings.
//!
//! Each client grants itself one lease when it starts, as etcd's own lock recipe does with a
//! session, and attaches every lock it takes to that lease; it does not keep the lease alive.
//! The TTL is the round's duration plus 60 s (set in `run_round`), so the lease cannot expire
//! while the client works, and the locks of a client that dies expire within a minute or so
//! of the round's end. One cycle is three requests:
//!
//! 1. acquire: a txn that puts `k = owner` with the lease if `create_revision(k) == 0`, that is
//!    if nobody holds `k`; a failed compare is a busy lock. The txn's header revision (the
//!    revision of the put) is the fencing token.
//! 2. write: a plain put of `res:k`; like Redis's SET, etcd has no fenced write to pass the
//!    token to.
//! 3. release: a txn that deletes `k` if `value(k) == owner`.
//!
//! An HTTP error status from etcd counts as an error reply; a failed connection or a reply
//! that is not etcd's JSON ends the run with an error.

use std::time::Duration;

use anyhow::Context;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::workload::Step;

/// How long one request may take before the run fails.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One client's session with an etcd member: an HTTP client and the client's lease.
pub struct Session {
    http: reqwest::Client,
    base: String,
    lease: i64,
}

/// The header of every etcd reply.
#[derive(Deserialize)]
struct Header {
    /// The store's revision after the request (int64 as a string).
    revision: String,
}

#[derive(Deserialize)]
struct LeaseGrant {
    #[serde(rename = "ID")]
    id: String,
    /// etcd 3.4 reports some refusals here rather than in the HTTP status.
    #[serde(default)]
    error: String,
}

#[derive(Deserialize)]
struct Txn {
    header: Header,
    /// Left out of the JSON when false.
    #[serde(default)]
    succeeded: bool,
}

/// The body of an HTTP error status from the gateway.
#[derive(Deserialize)]
struct Failure {
    #[serde(default)]
    message: String,
    #[serde(default)]
    error: String,
}

fn int64(s: &str, what: &str) -> anyhow::Result<i64> {
    s.parse()
        .with_context(|| format!("etcd sent {what} {s:?}, not an integer"))
}

impl Session {
    /// Connects to the etcd member at `addr` (HOST:PORT) and grants a lease of `ttl_secs`.
    pub async fn start(addr: &str, ttl_secs: u64) -> anyhow::Result<Session> {
        // Targets are local: an HTTP proxy from the environment must not carry the requests.
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(TIMEOUT)
            .build()
            .context("building the HTTP client")?;
        let mut s = Session {
            http,
            base: format!("http://{addr}"),
            lease: 0,
        };
        let grant: LeaseGrant = s
            .post("/v3/lease/grant", &json!({ "TTL": ttl_secs.to_string() }))
            .await?
            .map_err(|e| anyhow::anyhow!("etcd at {addr} refused a lease: {e}"))?;
        if !grant.error.is_empty() {
            anyhow::bail!("etcd at {addr} refused a lease: {}", grant.error);
        }
        s.lease = int64(&grant.id, "the lease ID")?;
        Ok(s)
    }

    /// POSTs `body` to `path`. The outer error is a failed connection or a reply that is not
    /// etcd's JSON; the inner one is etcd's error message for an HTTP error status.
    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
    ) -> anyhow::Result<Result<T, String>> {
        let url = format!("{}{path}", self.base);
        let reply = self
            .http
            .post(&url)
            .json(body)
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        let status = reply.status();
        let bytes = reply
            .bytes()
            .await
            .with_context(|| format!("reading the reply to POST {url}"))?;
        if !status.is_success() {
            let message = match serde_json::from_slice::<Failure>(&bytes) {
                Ok(f) if !f.message.is_empty() => f.message,
                Ok(f) if !f.error.is_empty() => f.error,
                _ => String::from_utf8_lossy(&bytes).chars().take(200).collect(),
            };
            return Ok(Err(format!("{status}: {message}")));
        }
        serde_json::from_slice(&bytes).map(Ok).with_context(|| {
            format!(
                "unexpected reply to POST {url}: {}",
                String::from_utf8_lossy(&bytes)
            )
        })
    }

    /// Runs one lock cycle on `key` for `owner`.
    pub async fn cycle(&self, key: &str, owner: &str) -> anyhow::Result<Step> {
        let mut step = Step::default();
        let (k, o) = (B64.encode(key), B64.encode(owner));
        // 1. acquire
        let acquire = json!({
            "compare": [{ "key": k, "target": "CREATE", "result": "EQUAL", "create_revision": "0" }],
            "success": [{ "request_put": { "key": k, "value": o, "lease": self.lease.to_string() } }],
        });
        let _token = match self.post::<Txn>("/v3/kv/txn", &acquire).await? {
            Ok(txn) if txn.succeeded => int64(&txn.header.revision, "a revision")?,
            Ok(_) => {
                step.busy += 1;
                return Ok(step);
            }
            Err(_) => {
                step.errors += 1;
                return Ok(step);
            }
        };
        // 2. write the resource
        let res = B64.encode(format!("res:{key}"));
        let write = json!({ "key": res, "value": B64.encode("value") });
        let wrote = self.post::<IgnoredAny>("/v3/kv/put", &write).await?;
        // 3. release
        let release = json!({
            "compare": [{ "key": k, "target": "VALUE", "result": "EQUAL", "value": o }],
            "success": [{ "request_delete_range": { "key": k } }],
        });
        let released = self.post::<Txn>("/v3/kv/txn", &release).await?;
        step.errors += u64::from(wrote.is_err()) + u64::from(released.is_err());
        step.done += 1;
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replies as etcd 3.4.23's gateway sends them: int64s as strings, `succeeded` left out
    /// when false.
    #[test]
    fn replies_of_etcd_3_4_parse() {
        let header = r#""header":{"cluster_id":"677069309497867243","member_id":"8517238011526840312","revision":"2","raft_term":"2"}"#;
        let won: Txn = serde_json::from_str(&format!(
            r#"{{{header},"succeeded":true,"responses":[{{"response_put":{{"header":{{"revision":"2"}}}}}}]}}"#
        ))
        .unwrap();
        assert!(won.succeeded);
        assert_eq!(int64(&won.header.revision, "a revision").unwrap(), 2);
        let lost: Txn = serde_json::from_str(&format!("{{{header}}}")).unwrap();
        assert!(!lost.succeeded);
        let grant: LeaseGrant = serde_json::from_str(&format!(
            r#"{{{header},"ID":"9221298531320922373","TTL":"60"}}"#
        ))
        .unwrap();
        assert_eq!(
            int64(&grant.id, "the lease ID").unwrap(),
            9221298531320922373
        );
        let failure: Failure = serde_json::from_str(
            r#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#,
        )
        .unwrap();
        assert_eq!(failure.message, "etcdserver: requested lease not found");
        assert!(int64("x", "a revision").is_err());
    }
}
