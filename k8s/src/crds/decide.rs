//! Whether to apply one of our CRDs over the live one: never an older schema over a newer one.
//! Pure, so that every case is a unit test.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use semver::Version;
use stunner_gateway::keys::CRD_BUNDLE_VERSION;

/// What to do with one CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Absent: create it.
    Create,
    /// Present and older than ours (or from an install that did not stamp a version, such as
    /// upstream's chart): apply ours over it; `from` is its version, if stamped.
    Upgrade { from: Option<String> },
    /// Present at our version: apply ours anyway (idempotent; it undoes hand edits).
    Same,
    /// Present and newer than ours, or serving an API version we do not know: leave it alone.
    Newer { why: String },
}

/// The bundle version stamped on a CRD, as written.
pub fn bundle_version(crd: &CustomResourceDefinition) -> Option<&str> {
    crd.metadata.annotations.as_ref()?.get(CRD_BUNDLE_VERSION).map(String::as_str)
}

/// Decides for `ours` (whose version is `our_version`) against `live`.
pub fn decide(
    live: Option<&CustomResourceDefinition>,
    ours: &CustomResourceDefinition,
    our_version: &Version,
) -> Decision {
    let Some(live) = live else { return Decision::Create };
    let known: Vec<&str> = ours.spec.versions.iter().map(|v| v.name.as_str()).collect();
    if let Some(unknown) = live.spec.versions.iter().find(|v| !known.contains(&v.name.as_str())) {
        return Decision::Newer {
            why: format!("it serves version {}, which this operator does not know", unknown.name),
        };
    }
    let Some(stamped) = bundle_version(live) else { return Decision::Upgrade { from: None } };
    match Version::parse(stamped) {
        Ok(live_version) if live_version > *our_version => {
            Decision::Newer { why: format!("its {CRD_BUNDLE_VERSION} {stamped} is newer than ours, {our_version}") }
        }
        Ok(live_version) if live_version == *our_version => Decision::Same,
        Ok(_) => Decision::Upgrade { from: Some(stamped.to_string()) },
        // Not a version: someone wrote it by hand, and we cannot tell that it is older.
        Err(e) => Decision::Newer { why: format!("its {CRD_BUNDLE_VERSION} {stamped:?} is not a version ({e})") },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion;

    fn crd(version: Option<&str>, api_versions: &[&str]) -> CustomResourceDefinition {
        let mut crd = CustomResourceDefinition::default();
        crd.metadata.annotations = version.map(|v| [(CRD_BUNDLE_VERSION.to_string(), v.to_string())].into());
        crd.spec.versions = api_versions
            .iter()
            .map(|name| CustomResourceDefinitionVersion { name: name.to_string(), ..Default::default() })
            .collect();
        crd
    }

    fn at(version: &str) -> Decision {
        let ours = crd(Some("1.2.0"), &["v1", "v1alpha1"]);
        decide(Some(&crd(Some(version), &["v1"])), &ours, &Version::new(1, 2, 0))
    }

    #[test]
    fn absent_is_created_older_or_unstamped_upgraded_same_reapplied() {
        let ours = crd(Some("1.2.0"), &["v1"]);
        let v = Version::new(1, 2, 0);
        assert_eq!(decide(None, &ours, &v), Decision::Create);
        assert_eq!(decide(Some(&crd(None, &["v1"])), &ours, &v), Decision::Upgrade { from: None });
        assert_eq!(at("1.1.9"), Decision::Upgrade { from: Some("1.1.9".into()) });
        // A pre-release comes before its release.
        assert_eq!(at("1.2.0-rc.1"), Decision::Upgrade { from: Some("1.2.0-rc.1".into()) });
        assert_eq!(at("1.2.0"), Decision::Same);
    }

    #[test]
    fn newer_or_unknown_is_left_alone() {
        for live in ["1.2.1", "2.0.0", "1.10.0", "one"] {
            assert!(matches!(at(live), Decision::Newer { .. }), "{live}: {:?}", at(live));
        }
        // A version of the API we do not serve: applying ours would drop it.
        let ours = crd(Some("1.2.0"), &["v1"]);
        let live = crd(Some("1.0.0"), &["v1", "v2"]);
        let Decision::Newer { why } = decide(Some(&live), &ours, &Version::new(1, 2, 0)) else { panic!() };
        assert!(why.contains("v2"), "{why}");
    }
}
