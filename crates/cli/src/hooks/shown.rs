//! What a file call shows the humans who decide it: the runtime's input
//! for the call (a write's content, an edit's old and new text), sent as
//! the action's `params`. The daemon refuses params past its bound, and a
//! refused request would fail the call, so the input is cut here first:
//! every long string to [`MAX_STRING`] bytes with a marker saying how
//! much is not shown, and the whole kept within [`MAX_TOTAL`].

use serde_json::{Map, Value, json};

use super::map::Call;

/// Most bytes of one string value shown.
pub const MAX_STRING: usize = 128 * 1024;

/// Most bytes of the whole object as JSON: below the daemon's default
/// bound on params (256 KiB), with room for the markers' escapes.
pub const MAX_TOTAL: usize = 192 * 1024;

/// Most levels of nesting sent; the daemon takes 64.
const MAX_DEPTH: usize = 32;

/// Strings are cut shorter, down to this, until the whole fits.
const MIN_STRING: usize = 256;

/// The params to send with `call`: its runtime's `input`, bounded, for a
/// file call; nothing for any other (its detail is the whole call).
pub fn params_for(call: &Call, input: Option<&Value>) -> Option<Value> {
    if !matches!(call, Call::File { .. }) {
        return None;
    }
    let input = match input? {
        Value::Object(m) => Value::Object(m.clone()),
        Value::Null => return None,
        // A patch sent as text: still an object, as the daemon takes.
        other => json!({ "input": other }),
    };
    Some(bounded(input))
}

/// The caution an action whose params were cut carries: the humans who
/// decide cannot read all of what would be written, so no rule, grant or
/// plan allows it ([`super::gate`] sends it), only an operator who
/// approves it knowing so.
pub fn cut_caution(params: &Value) -> Option<&'static str> {
    fn cut(v: &Value) -> bool {
        match v {
            Value::String(s) => s.ends_with(" more bytes not shown]"),
            Value::Array(items) => items.iter().any(cut),
            Value::Object(m) => m.contains_key("not_shown") || m.values().any(cut),
            _ => false,
        }
    }
    cut(params).then_some(
        "the tool's input is too large to show whole (see \"more bytes not shown\"): \
         approving it approves content nobody read",
    )
}

/// `input` with every string longer than [`MAX_STRING`] cut, shorter
/// still while the whole is past [`MAX_TOTAL`]; an input that cannot be
/// made to fit so (or nests too deeply) is replaced by a note saying so.
pub fn bounded(input: Value) -> Value {
    if depth(&input) > MAX_DEPTH {
        return not_shown(&input, "nests too deeply to show");
    }
    let mut max = MAX_STRING;
    loop {
        let cut = cut_strings(&input, max);
        if serde_json::to_vec(&cut).map_or(usize::MAX, |v| v.len()) <= MAX_TOTAL {
            return cut;
        }
        if max <= MIN_STRING {
            return not_shown(&input, "is too large to show");
        }
        max /= 2;
    }
}

/// A note in place of an input that cannot be shown.
fn not_shown(input: &Value, why: &str) -> Value {
    let size = serde_json::to_vec(input).map_or(0, |v| v.len());
    json!({ "not_shown": format!("the tool's input ({size} bytes as JSON) {why}") })
}

/// `s` cut to at most `max` bytes on a character boundary, with the marker
/// saying how many bytes are not shown.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[{} more bytes not shown]", &s[..end], s.len() - end)
}

fn cut_strings(v: &Value, max: usize) -> Value {
    match v {
        Value::String(s) => Value::String(cut(&visible(s), max)),
        Value::Array(items) => Value::Array(items.iter().map(|i| cut_strings(i, max)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (cut(&visible(k), max), cut_strings(v, max)))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

/// `s` with each NUL shown as `␀`: the daemon refuses text holding one,
/// and a refused request would fail the call the human is to see.
fn visible(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains('\0') {
        s.replace('\0', "\u{2400}").into()
    } else {
        s.into()
    }
}

/// How deeply `v` nests, stopping once past [`MAX_DEPTH`].
fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => continue,
        };
        deepest = deepest.max(d);
        if deepest > MAX_DEPTH {
            break;
        }
        stack.extend(children.map(|c| (c, d + 1)));
    }
    deepest
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn file() -> Call {
        Call::File {
            verb: "write",
            path: "/p/a".into(),
        }
    }

    #[test]
    fn a_nul_the_daemon_would_refuse_is_shown_as_a_symbol() {
        let input = json!({"file_path": ".g\u{0}it/config", "k\u{0}": ["a\u{0}"]});
        assert_eq!(
            params_for(&file(), Some(&input)),
            Some(json!({"file_path": ".g\u{2400}it/config", "k\u{2400}": ["a\u{2400}"]}))
        );
    }

    #[test]
    fn a_file_call_sends_its_input_and_other_calls_none() {
        let input = json!({"file_path": "/p/a", "content": "hi"});
        assert_eq!(params_for(&file(), Some(&input)), Some(input.clone()));
        assert_eq!(params_for(&Call::Shell("ls".into()), Some(&input)), None);
        assert_eq!(params_for(&Call::Read("/p/a".into()), Some(&input)), None);
        assert_eq!(params_for(&file(), None), None);
        assert_eq!(
            params_for(&file(), Some(&json!("*** Begin Patch"))),
            Some(json!({"input": "*** Begin Patch"}))
        );
    }

    #[test]
    fn a_long_string_is_cut_with_a_marker_saying_what_is_not_shown() {
        let content = "é".repeat(80_000);
        let got = bounded(json!({"file_path": "/p/a", "content": content}));
        let shown = got["content"].as_str().unwrap();
        let marker = "…[28928 more bytes not shown]";
        assert!(cut_caution(&got).is_some());
        assert!(shown.ends_with(marker), "{}", &shown[shown.len() - 40..]);
        assert_eq!(shown.len() - marker.len(), MAX_STRING);
        assert_eq!(got["file_path"], "/p/a");
        let short = json!({"content": "x".repeat(MAX_STRING)});
        assert_eq!(bounded(short.clone()), short);
        assert!(cut_caution(&short).is_none());
    }

    #[test]
    fn the_whole_stays_within_the_bound() {
        // Many strings each under the cut, together far past the bound.
        let edits: Vec<Value> = (0..200)
            .map(|_| json!({"old_string": "o".repeat(10_000), "new_string": "n".repeat(10_000)}))
            .collect();
        let got = bounded(json!({"file_path": "/p/a", "edits": edits}));
        assert!(serde_json::to_vec(&got).unwrap().len() <= MAX_TOTAL);
        assert_eq!(got["edits"].as_array().unwrap().len(), 200);
        assert!(
            got["edits"][0]["old_string"]
                .as_str()
                .unwrap()
                .contains("more bytes not shown]")
        );
        let huge: Vec<Value> = (0..100_000).map(|i| json!(i)).collect();
        let got = bounded(json!({ "items": huge }));
        assert!(got["not_shown"].as_str().unwrap().contains("too large"));
        assert!(cut_caution(&got).is_some());
        let mut deep = json!(1);
        for _ in 0..40 {
            deep = json!([deep]);
        }
        assert!(bounded(json!({ "d": deep }))["not_shown"].is_string());
    }
}
