//! AdmissionReview (`admission.k8s.io/v1`) in, AdmissionReview out: the request read, the
//! objects MetalLB's webhook would list read straight from the API server (not a cache, as
//! MetalLB's webhook reads them), the verdict from [`super::validate`], and the answer in
//! controller-runtime's form (allowed: code 200; denied: code 403, reason `Forbidden`, the
//! message; an object that does not decode: code 400), so the API server words the refusal
//! as it does for MetalLB: `admission webhook "<name>" denied the request: <message>`.

use super::validate::{self, Kind, Op};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{GroupVersionKind, Status};
use serde::de::DeserializeOwned;
use vigil_metallb::crd::{IPAddressPool, L2Advertisement};

/// Why a body is not a review this server answers.
#[derive(Debug, thiserror::Error)]
pub enum Malformed {
    /// Not JSON of an AdmissionReview.
    #[error("not an AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    /// An AdmissionReview without a request.
    #[error("AdmissionReview without a request: {0}")]
    NoRequest(#[from] kube::core::admission::ConvertAdmissionReviewError),
}

/// Answers admission reviews for the MetalLB namespace.
#[derive(Clone)]
pub struct Reviewer {
    client: Client,
    namespace: String,
}

/// A verdict, before it is written as a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed.
    Allowed,
    /// Denied with MetalLB's message.
    Denied(String),
    /// The object did not decode (controller-runtime's 400).
    Errored(String),
}

impl Reviewer {
    /// A reviewer listing objects in `namespace` through `client`.
    pub fn new(client: Client, namespace: String) -> Self {
        Self { client, namespace }
    }

    /// Answers one review; `Err` when the body is not a review at all. Returns the answer and
    /// whether it allowed.
    pub async fn answer(&self, kind: Kind, body: &[u8]) -> Result<(Vec<u8>, bool), Malformed> {
        let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body)?;
        let request: AdmissionRequest<DynamicObject> = review.try_into()?;
        let verdict = self.verdict(kind, &request).await;
        let mut response = AdmissionResponse::from(&request);
        let allowed = verdict == Verdict::Allowed;
        response.allowed = allowed;
        response.result = match verdict {
            Verdict::Allowed => Status {
                code: 200,
                ..Status::success()
            },
            Verdict::Denied(message) => Status {
                status: None,
                code: 403,
                reason: "Forbidden".into(),
                message,
                metadata: None,
                details: None,
            },
            Verdict::Errored(message) => Status {
                status: None,
                code: 400,
                reason: String::new(),
                message,
                metadata: None,
                details: None,
            },
        };
        Ok((serde_json::to_vec(&response.into_review())?, allowed))
    }

    async fn verdict(&self, kind: Kind, request: &AdmissionRequest<DynamicObject>) -> Verdict {
        let op = match request.operation {
            Operation::Create => Op::Create,
            Operation::Update => Op::Update,
            Operation::Delete => Op::Delete,
            Operation::Connect => Op::Other,
        };
        // A delete is judged on the old object, as MetalLB's handlers decode it.
        let object = if op == Op::Delete {
            request.old_object.as_ref()
        } else {
            request.object.as_ref()
        };
        let Some(object) = object else {
            return Verdict::Errored("there is no content to decode".into());
        };
        let ns = &self.namespace;
        let result = match kind {
            Kind::IpAddressPool => {
                let pool: IPAddressPool = match decode(object) {
                    Ok(p) => p,
                    Err(e) => return Verdict::Errored(e),
                };
                if !matches!(op, Op::Create | Op::Update) {
                    return Verdict::Allowed;
                }
                match self.list::<IPAddressPool>("IPAddressPool").await {
                    Ok(pools) => validate::pool(op, &pool, &pools, ns),
                    Err(e) => Err(e),
                }
            }
            Kind::L2Advertisement => {
                let ad: L2Advertisement = match decode(object) {
                    Ok(a) => a,
                    Err(e) => return Verdict::Errored(e),
                };
                if !matches!(op, Op::Create | Op::Update) {
                    return Verdict::Allowed;
                }
                let listed = async {
                    let ads = self
                        .list::<L2Advertisement>("v1beta1.L2Advertisement")
                        .await?;
                    let pools = self.list::<IPAddressPool>("IPAddressPool").await?;
                    Ok::<_, String>((ads, pools))
                };
                match listed.await {
                    Ok((ads, pools)) => validate::l2_advertisement(op, &ad, &ads, &pools, ns),
                    Err(e) => Err(e),
                }
            }
            Kind::BfdProfile if op == Op::Delete => {
                let name = object.metadata.name.clone().unwrap_or_default();
                match self.bgp_peers().await {
                    Ok(peers) => validate::bfd_profile_delete(&name, &peers),
                    Err(e) => Err(e),
                }
            }
            Kind::BgpPeer | Kind::BgpAdvertisement | Kind::Community | Kind::BfdProfile => {
                let object_ns = object.metadata.namespace.as_deref().unwrap_or_default();
                match validate::namespace_refusal(op, object_ns, ns) {
                    Some(refusal) => Err(refusal),
                    None => Ok(()),
                }
            }
        };
        match result {
            Ok(()) => Verdict::Allowed,
            Err(message) => Verdict::Denied(message),
        }
    }

    /// The objects of the MetalLB namespace, read from the API server; a failure is MetalLB's
    /// refusal (`<error>\nfailed to get existing <Kind> objects`).
    async fn list<T>(&self, kind: &str) -> Result<Vec<T>, String>
    where
        T: kube::Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        T::DynamicType: Default,
    {
        Api::<T>::namespaced(self.client.clone(), &self.namespace)
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .map_err(|e| format!("{e}\nfailed to get existing {kind} objects"))
    }

    /// The BGPPeers (`metallb.io/v1beta2`) of the namespace: (name, `spec.bfdProfile`).
    async fn bgp_peers(&self) -> Result<Vec<(String, String)>, String> {
        let gvk = GroupVersionKind::gvk("metallb.io", "v1beta2", "BGPPeer");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "bgppeers");
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.namespace, &resource);
        let peers = api
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("failed to get existing BGPPeer objects: {e}"))?;
        Ok(peers
            .items
            .into_iter()
            .map(|p| {
                let profile = p.data["spec"]["bfdProfile"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (p.metadata.name.unwrap_or_default(), profile)
            })
            .collect())
    }
}

/// The reviewed object as its typed form.
fn decode<T: DeserializeOwned>(object: &DynamicObject) -> Result<T, String> {
    serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| e.to_string())
}
