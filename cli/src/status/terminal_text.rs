//! Text from the master made safe to print on an operator's terminal.
//!
//! Trainer names, failure reasons, job names and addresses are chosen by clients: a raw ESC
//! or OSC sequence would clear the screen or retitle the window, a CR or newline would forge
//! a status line, and a bidi override would reorder what follows. Each such character is
//! printed as a visible escape instead (`\x1b`, `\r`, `\n`, `\0`, `\u{202e}`), and a backslash
//! as `\\` so an escape cannot be faked either. The JSON view needs none of this: JSON
//! escapes control characters itself.

use std::fmt::Write;

/// `text` with every control character, bidi control and backslash escaped.
pub(crate) fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '\n' => out.push_str(r"\n"),
            '\r' => out.push_str(r"\r"),
            '\t' => out.push_str(r"\t"),
            '\0' => out.push_str(r"\0"),
            c if c.is_ascii_control() => {
                write!(out, r"\x{:02x}", u32::from(c)).expect("writing to a String cannot fail");
            }
            c if c.is_control() || is_bidi_control(c) => {
                write!(out, r"\u{{{:x}}}", u32::from(c)).expect("writing to a String cannot fail");
            }
            c => out.push(c),
        }
    }
    out
}

/// The Unicode bidirectional formatting characters (UAX #9): marks, embeddings, overrides
/// and isolates.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::escaped;

    /// Plain text, including non-ASCII letters, passes unchanged; every kind of control
    /// character comes out as a visible escape.
    #[test]
    fn escapes_only_what_a_terminal_would_act_on() {
        let cases = [
            ("alice", "alice"),
            ("zoë 训练", "zoë 训练"),
            ("\u{1b}[2J", r"\x1b[2J"),
            ("\u{1b}]0;t\u{7}", r"\x1b]0;t\x07"),
            ("a\rb\nc\0d\te", r"a\rb\nc\0d\te"),
            ("\u{7f}\u{9b}", r"\x7f\u{9b}"),
            ("\u{202e}x\u{2066}", r"\u{202e}x\u{2066}"),
            (r"\x1b", r"\\x1b"),
        ];
        for (text, expected) in cases {
            assert_eq!(escaped(text), expected, "{text:?}");
        }
    }
}
