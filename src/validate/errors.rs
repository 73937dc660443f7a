//! What validation reports: the errors of one object, bounded in count and in the length of
//! every value they quote. A leaf: the checks ([`super::meta`], [`super::schema`],
//! [`super::rules`]) push into [`Errors`] and [`super::validate`] turns them into [`Invalid`].
//! Every value they quote goes through [`Errors::quote`], which shows no secret field's value.

use crate::resources::redact;
use serde_json::Value;
use std::fmt;

/// The errors of one object beyond which only a count is kept.
pub const MAX_ERRORS: usize = 10;

/// The longest quote of a value in an error message, in characters.
const MAX_SHOWN: usize = 64;

/// One thing wrong with an object: where (`spec.listeners[0].port`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Why the API server would refuse an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Invalid {
    pub kind: String,
    /// The object's name as given, cut short for messages.
    pub name: String,
    /// The first [`MAX_ERRORS`] errors.
    pub errors: Vec<FieldError>,
    /// How many more there were.
    pub more: usize,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} is invalid: ", self.kind, self.name)?;
        let errors: Vec<String> = self.errors.iter().map(FieldError::to_string).collect();
        f.write_str(&errors.join("; "))?;
        if self.more > 0 {
            write!(f, "; and {} more", self.more)?;
        }
        Ok(())
    }
}

/// The errors found so far, at most [`MAX_ERRORS`] of them kept, for an object of one kind.
#[derive(Debug, Default)]
pub struct Errors {
    /// The kind of the object checked: which of its fields are secret
    /// ([`crate::resources::redact::SECRET_FIELDS`]).
    kind: String,
    pub(super) kept: Vec<FieldError>,
    pub(super) more: usize,
}

impl Errors {
    /// The errors of an object of `kind`.
    pub(crate) fn of_kind(kind: &str) -> Self {
        Errors { kind: kind.to_string(), ..Errors::default() }
    }

    /// `v`, the value at `path`, as a message may quote it: cut short, and never the value of a
    /// secret field.
    pub(crate) fn quote(&self, path: &str, v: &Value) -> String {
        if redact::is_secret_field(&self.kind, path) { redact::REDACTED.to_string() } else { shown(v) }
    }

    pub(crate) fn push(&mut self, field: &str, message: String) {
        if self.kept.len() < MAX_ERRORS {
            self.kept.push(FieldError { field: field.to_string(), message });
        } else {
            self.more += 1;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// A value as error messages quote it: JSON, cut at [`MAX_SHOWN`] characters.
pub(super) fn shown(v: &Value) -> String {
    let text = match v {
        Value::Object(_) | Value::Array(_) if v.to_string().len() > MAX_SHOWN * 4 => {
            return if v.is_object() { "\"object\"".into() } else { "\"array\"".into() };
        }
        _ => v.to_string(),
    };
    let len = text.chars().count();
    if len <= MAX_SHOWN {
        return text;
    }
    let head: String = text.chars().take(MAX_SHOWN).collect();
    format!("{head}... ({len} characters)")
}
