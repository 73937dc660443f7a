//! Writing results to stdout in the chosen format, one document at a time, flushed at once so
//! that a watch shows each config as it arrives.

use super::cli::Output;
use serde::Serialize;
use std::error::Error;
use std::io::{self, Write};
use stunner_gateway::config::{StunnerConfig, json};

pub struct Printer {
    format: Output,
    /// Documents written so far: YAML needs a `---` before every one but the first.
    written: usize,
}

impl Printer {
    pub fn new(format: Output) -> Self {
        Printer { format, written: 0 }
    }

    /// A config, or upstream's one-liner when it is a deletion (its zero config).
    pub fn config(&mut self, config: &StunnerConfig) -> Result<(), Box<dyn Error>> {
        if config.normalized().is_ok_and(|c| c.is_deleted()) {
            return write(&format!("Gateway: {} <deleted>\n", config.admin.name));
        }
        self.document(config, super::summary::config)
    }

    /// `value` as JSON or YAML, or `summary(value)` as text.
    pub fn document<T: Serialize>(
        &mut self,
        value: &T,
        summary: impl FnOnce(&T) -> String,
    ) -> Result<(), Box<dyn Error>> {
        let text = match self.format {
            Output::Summary => summary(value),
            // Go-compatible escaping: the same bytes upstream stunnerctl prints.
            Output::Json => json::to_string(value) + "\n",
            Output::Yaml if self.written == 0 => serde_yaml_ng::to_string(value)?,
            Output::Yaml => format!("---\n{}", serde_yaml_ng::to_string(value)?),
        };
        self.written += 1;
        write(&text)
    }
}

fn write(text: &str) -> Result<(), Box<dyn Error>> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}
