//! `/convert`: BGPPeer between `metallb.io/v1beta1` and `metallb.io/v1beta2`, pure, as MetalLB
//! v0.16.2 converts it (`api/v1beta1/bgppeer_conversion.go`, v1beta2 being the hub, through
//! controller-runtime's conversion handler).
//!
//! The facts followed:
//! - v1beta1 → v1beta2 keeps `myASN`, `peerASN`, `peerAddress`, `sourceAddress`, `peerPort`,
//!   `routerID`, `password`, `bfdProfile`, `ebgpMultiHop`; `holdTime` and `keepaliveTime`
//!   are always set (`0s` when absent); each legacy node selector becomes a label selector
//!   (an empty one stays empty). v1beta2's `passwordSecret` appears empty, as Go writes a
//!   zero struct.
//! - v1beta2 → v1beta1 keeps the same fields; a missing `holdTime` or `keepaliveTime` becomes
//!   `0s`; `peerASN`, `myASN` and `peerAddress` are always written; the fields v1beta1 lacks
//!   (`localASN`, `dynamicASN`, `interface`, `connectTime`, `passwordSecret`,
//!   `enableGracefulRestart`, `vrf`, `disableMP`, `dualStackAddressFamily`) are dropped, as
//!   MetalLB drops them; each expression's `values` is always written.
//! - Metadata is kept; `apiVersion` becomes the desired one. Any other kind, group or version,
//!   or an object already in the desired version, fails the whole review, with a message.
//!
//! Durations are kept as written (Go would print `90s` back as `1m30s`; both mean the same).

use serde_json::{Map, Value, json};

/// The group converted.
const GROUP: &str = "metallb.io";
const V1BETA1: &str = "metallb.io/v1beta1";
const V1BETA2: &str = "metallb.io/v1beta2";

/// Why a review could not be answered at all (an HTTP 400, as MetalLB's handler).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReviewError {
    /// Not JSON, or not a ConversionReview.
    #[error("not a ConversionReview: {0}")]
    Malformed(String),
    /// The review has no request.
    #[error("conversion request is nil")]
    NoRequest,
}

/// Answers a `apiextensions.k8s.io/v1` ConversionReview (body in, body out).
pub fn review(body: &[u8]) -> Result<(Value, bool), ReviewError> {
    let mut review: Value =
        serde_json::from_slice(body).map_err(|e| ReviewError::Malformed(e.to_string()))?;
    if !review.is_object() {
        return Err(ReviewError::Malformed("not an object".into()));
    }
    let request = review
        .get_mut("request")
        .filter(|r| r.is_object())
        .map(Value::take)
        .ok_or(ReviewError::NoRequest)?;
    let uid = request.get("uid").cloned().unwrap_or(Value::Null);
    let desired = request
        .get("desiredAPIVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let objects = request
        .get("objects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let converted: Result<Vec<Value>, String> =
        objects.into_iter().map(|o| convert(o, &desired)).collect();
    let ok = converted.is_ok();
    let response = match converted {
        Ok(objects) => json!({
            "uid": uid,
            "convertedObjects": objects,
            "result": {"metadata": {}, "status": "Success"},
        }),
        Err(message) => json!({
            "uid": uid,
            "convertedObjects": null,
            "result": {"metadata": {}, "status": "Failure", "message": message},
        }),
    };
    let out = review.as_object_mut().ok_or(ReviewError::NoRequest)?;
    out.remove("request");
    out.insert("response".into(), response);
    Ok((review, ok))
}

/// One object to `desired`.
fn convert(object: Value, desired: &str) -> Result<Value, String> {
    let Value::Object(mut object) = object else {
        return Err("an object to convert is not an object".into());
    };
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if kind != "BGPPeer" || !from.starts_with(&format!("{GROUP}/")) {
        return Err(format!("{from} {kind} is not convertible to {desired}"));
    }
    if from == desired {
        return Err(format!(
            "conversion is not allowed between same type {from} {kind}"
        ));
    }
    let spec = match object.remove("spec") {
        Some(Value::Object(s)) => s,
        Some(Value::Null) | None => Map::new(),
        Some(_) => return Err("spec is not an object".into()),
    };
    let spec = match (from.as_str(), desired) {
        (V1BETA1, V1BETA2) => to_v1beta2(&spec),
        (V1BETA2, V1BETA1) => to_v1beta1(&spec),
        _ => return Err(format!("{from} {kind} is not convertible to {desired}")),
    };
    object.insert("apiVersion".into(), Value::String(desired.to_string()));
    object.insert("spec".into(), Value::Object(spec));
    object.entry("status").or_insert_with(|| json!({}));
    Ok(Value::Object(object))
}

/// The fields both versions share, copied when set (Go's omitempty: zero values not written).
const SHARED: [&str; 8] = [
    "myASN",
    "peerASN",
    "peerAddress",
    "sourceAddress",
    "peerPort",
    "routerID",
    "password",
    "bfdProfile",
];

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn copy_shared(src: &Map<String, Value>, dst: &mut Map<String, Value>) {
    for field in SHARED.iter().copied().chain(["ebgpMultiHop"]) {
        if let Some(v) = src.get(field).filter(|v| !is_zero(v)) {
            dst.insert(field.into(), v.clone());
        }
    }
    // Go writes myASN whatever its value.
    dst.entry("myASN").or_insert(json!(0));
    for field in ["holdTime", "keepaliveTime"] {
        let v = src.get(field).filter(|v| v.is_string()).cloned();
        dst.insert(field.into(), v.unwrap_or_else(|| json!("0s")));
    }
}

fn to_v1beta2(src: &Map<String, Value>) -> Map<String, Value> {
    let mut dst = Map::new();
    copy_shared(src, &mut dst);
    let selectors: Vec<Value> = src
        .get("nodeSelectors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|legacy| {
            let labels = legacy.get("matchLabels").filter(|v| !is_zero(v));
            let exprs = legacy
                .get("matchExpressions")
                .and_then(Value::as_array)
                .filter(|v| !v.is_empty());
            let mut sel = Map::new();
            if let Some(l) = labels {
                sel.insert("matchLabels".into(), l.clone());
            }
            if let Some(e) = exprs {
                let e: Vec<Value> = e
                    .iter()
                    .map(|req| {
                        let mut r = Map::new();
                        r.insert("key".into(), req.get("key").cloned().unwrap_or(json!("")));
                        r.insert(
                            "operator".into(),
                            req.get("operator").cloned().unwrap_or(json!("")),
                        );
                        if let Some(v) = req.get("values").filter(|v| !is_zero(v)) {
                            r.insert("values".into(), v.clone());
                        }
                        Value::Object(r)
                    })
                    .collect();
                sel.insert("matchExpressions".into(), Value::Array(e));
            }
            Value::Object(sel)
        })
        .collect();
    if !selectors.is_empty() {
        dst.insert("nodeSelectors".into(), Value::Array(selectors));
    }
    dst.insert("passwordSecret".into(), json!({}));
    dst
}

fn to_v1beta1(src: &Map<String, Value>) -> Map<String, Value> {
    let mut dst = Map::new();
    copy_shared(src, &mut dst);
    dst.entry("peerASN").or_insert(json!(0));
    dst.entry("peerAddress").or_insert(json!(""));
    let selectors: Vec<Value> = src
        .get("nodeSelectors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|sel| {
            let mut legacy = Map::new();
            if let Some(l) = sel.get("matchLabels").filter(|v| !is_zero(v)) {
                legacy.insert("matchLabels".into(), l.clone());
            }
            let exprs: Vec<Value> = sel
                .get("matchExpressions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|req| {
                    json!({
                        "key": req.get("key").cloned().unwrap_or(json!("")),
                        "operator": req.get("operator").cloned().unwrap_or(json!("")),
                        "values": req.get("values").filter(|v| v.is_array()).cloned().unwrap_or(json!([])),
                    })
                })
                .collect();
            if !exprs.is_empty() {
                legacy.insert("matchExpressions".into(), Value::Array(exprs));
            }
            Value::Object(legacy)
        })
        .collect();
    if !selectors.is_empty() {
        dst.insert("nodeSelectors".into(), Value::Array(selectors));
    }
    dst
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(desired: &str, objects: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u1", "desiredAPIVersion": desired, "objects": objects},
        }))
        .unwrap()
    }

    #[test]
    fn v1beta1_to_v1beta2_and_back() {
        let peer = json!({
            "apiVersion": V1BETA1, "kind": "BGPPeer",
            "metadata": {"name": "p", "namespace": "metallb-system", "uid": "x"},
            "spec": {"myASN": 64512, "peerASN": 64513, "peerAddress": "198.18.0.1",
                     "holdTime": "90s",
                     "nodeSelectors": [{"matchLabels": {"a": "b"}},
                                       {"matchExpressions": [{"key": "k", "operator": "Exists", "values": []}]}]}
        });
        let (out, ok) = review(&request(V1BETA2, json!([peer]))).unwrap();
        assert!(ok);
        let r = &out["response"];
        assert_eq!(r["uid"], "u1");
        assert_eq!(r["result"]["status"], "Success");
        let o = &r["convertedObjects"][0];
        assert_eq!(o["apiVersion"], V1BETA2);
        assert_eq!(o["metadata"]["name"], "p");
        assert_eq!(o["spec"]["holdTime"], "90s");
        assert_eq!(o["spec"]["keepaliveTime"], "0s");
        assert_eq!(
            o["spec"]["nodeSelectors"][0],
            json!({"matchLabels": {"a": "b"}})
        );
        assert_eq!(
            o["spec"]["nodeSelectors"][1],
            json!({"matchExpressions": [{"key": "k", "operator": "Exists"}]})
        );
        let mut back = o.clone();
        back["spec"]["vrf"] = json!("red");
        let (out, _) = review(&request(V1BETA1, json!([back]))).unwrap();
        let o = &out["response"]["convertedObjects"][0];
        assert_eq!(o["apiVersion"], V1BETA1);
        assert_eq!(o["spec"]["peerASN"], 64513);
        assert!(o["spec"].get("vrf").is_none());
        assert!(o["spec"].get("passwordSecret").is_none());
        assert_eq!(
            o["spec"]["nodeSelectors"][1]["matchExpressions"][0]["values"],
            json!([])
        );
    }

    #[test]
    fn what_cannot_be_converted_fails_the_review() {
        let pool =
            json!({"apiVersion": V1BETA1, "kind": "IPAddressPool", "metadata": {"name": "a"}});
        let (out, ok) = review(&request(V1BETA2, json!([pool]))).unwrap();
        assert!(!ok);
        assert_eq!(out["response"]["result"]["status"], "Failure");
        let same = json!({"apiVersion": V1BETA2, "kind": "BGPPeer", "metadata": {"name": "a"}});
        let (_, ok) = review(&request(V1BETA2, json!([same]))).unwrap();
        assert!(!ok);
        assert!(matches!(review(b"{"), Err(ReviewError::Malformed(_))));
        assert_eq!(review(b"{}"), Err(ReviewError::NoRequest));
    }
}
