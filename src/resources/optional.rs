//! Specs that read a `null` (or absent) value as their default, as Go's decoder does for the
//! CRDs' struct-valued specs.

/// Implements `Serialize` and `Deserialize` for a spec type derived with
/// `#[serde(remote = "Self")]`, deserializing an absent or null spec as the default spec.
///
/// Upstream's root types declare `spec` with `omitempty`, so the CRDs do not require it and the
/// API server stores objects without one; Go decodes those as an empty spec. kube-derive's root
/// type requires `spec`, and one such object would fail a whole list decode. Making the spec
/// type itself accept "missing" (serde asks a missing field's type to deserialize from none)
/// restores Go's behaviour without giving up the derive.
macro_rules! optional_spec {
    ($spec:ty) => {
        impl serde::Serialize for $spec {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$spec>::serialize(self, serializer)
            }
        }

        impl<'de> serde::Deserialize<'de> for $spec {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct OptionalSpec;
                impl<'de> serde::de::Visitor<'de> for OptionalSpec {
                    type Value = $spec;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a spec object or null")
                    }
                    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                        Ok(Default::default())
                    }
                    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                        Ok(Default::default())
                    }
                    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                        <$spec>::deserialize(d)
                    }
                }
                deserializer.deserialize_option(OptionalSpec)
            }
        }
    };
}
pub(crate) use optional_spec;
