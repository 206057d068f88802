//! One line of text for an error and its causes (`outer: cause: inner`), for the places that keep a
//! failure as text rather than as the error: a proxy log record, the sources a download tried.
//!
//! Errors that are returned never go through it: they carry their cause as `source`, and the
//! binary prints each cause once, on its own line.

/// `error` and each of its causes, joined by `: `.
pub fn one_line(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
