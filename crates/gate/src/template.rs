//! Handler templates (`detail`, `render`): `{name}` is a top-level param,
//! `{a.b}` a nested one, `{{` and `}}` literal braces. Values are filled in
//! as plain text, never markup; rendering is the viewer's job.

use serde_json::Value;

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Param(Vec<String>),
}

impl Template {
    /// Parses `text`; unbalanced braces or malformed names are errors.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    lit.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    lit.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => return Err(format!("unclosed '{{' in template '{text}'")),
                        }
                    }
                    let path: Vec<String> = name.split('.').map(str::to_owned).collect();
                    let valid = path.iter().all(|seg| {
                        !seg.is_empty()
                            && seg
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    });
                    if !valid {
                        return Err(format!(
                            "'{{{name}}}' is not a param name (use {{name}} or {{a.b}}; {{{{ and }}}} for braces)"
                        ));
                    }
                    if !lit.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut lit)));
                    }
                    parts.push(Part::Param(path));
                }
                '}' => {
                    return Err(format!(
                        "unmatched '}}' in template '{text}' (use '}}}}' for a brace)"
                    ));
                }
                c => lit.push(c),
            }
        }
        if !lit.is_empty() {
            parts.push(Part::Text(lit));
        }
        Ok(Template { parts })
    }

    /// The param paths the template names.
    pub fn params(&self) -> impl Iterator<Item = &[String]> {
        self.parts.iter().filter_map(|p| match p {
            Part::Param(path) => Some(path.as_slice()),
            Part::Text(_) => None,
        })
    }

    /// Fills the template from `params`; a missing value is empty, a string
    /// is itself, anything else its JSON text.
    pub fn fill(&self, params: &Value) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Text(t) => out.push_str(t),
                Part::Param(path) => {
                    let mut v = Some(params);
                    for seg in path {
                        v = v.and_then(|v| v.get(seg));
                    }
                    match v {
                        None | Some(Value::Null) => {}
                        Some(Value::String(s)) => out.push_str(s),
                        Some(other) => out.push_str(&other.to_string()),
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_top_level_and_nested_params_as_text() {
        let t = Template::parse("send to {to} about {msg.subject} ({n})").unwrap();
        let out = t.fill(&json!({"to": "<b>bob</b>", "msg": {"subject": "hi"}, "n": 3}));
        assert_eq!(out, "send to <b>bob</b> about hi (3)");
    }

    #[test]
    fn doubled_braces_are_literal() {
        let t = Template::parse("{{literal}} {x}}}").unwrap();
        assert_eq!(t.fill(&json!({"x": 1})), "{literal} 1}");
        assert_eq!(t.params().count(), 1);
    }

    #[test]
    fn missing_values_are_empty() {
        assert_eq!(Template::parse("a{b}c").unwrap().fill(&json!({})), "ac");
    }

    #[test]
    fn malformed_templates_are_rejected() {
        for bad in ["{", "a}", "{a b}", "{}", "{a..b}"] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
    }
}
