//! `--clock virtual|real|none`: one spelling and one meaning for every verb that has a clock.
//!
//! - virtual: deterministic virtual time (the device's modelled time, never waited on);
//! - real: the device's modelled time is waited on the wall clock;
//! - none: no waiting at all, as fast as the host allows (device time still counted).
//!
//! Every verb parses the same three values; a verb that cannot run in one of them refuses it at
//! parse time with the same message, naming the modes it supports.

use clap::builder::{PossibleValuesParser, TypedValueParser};

/// The three clock modes, in the order the help lists them.
pub const MODES: [&str; 3] = ["virtual", "real", "none"];

/// The message a verb gives for a mode it cannot run in.
pub fn unsupported(verb: &str, mode: &str, supported: &[&str]) -> String {
    format!(
        "{verb} does not run with --clock {mode}: it supports --clock {}",
        supported.join("|")
    )
}

/// A `--clock` parser for a `String` field: the three modes, `supported` accepted.
pub fn parser(
    verb: &'static str,
    supported: &'static [&'static str],
) -> impl TypedValueParser<Value = String> {
    PossibleValuesParser::new(MODES).try_map(move |s: String| {
        if supported.contains(&s.as_str()) {
            Ok(s)
        } else {
            Err(unsupported(verb, &s, supported))
        }
    })
}

/// A `--clock` parser for a [`nand::ClockMode`] field.
pub fn mode_parser(
    verb: &'static str,
    supported: &'static [&'static str],
) -> impl TypedValueParser<Value = nand::ClockMode> {
    parser(verb, supported).try_map(|s: String| s.parse::<nand::ClockMode>())
}
