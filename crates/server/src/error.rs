//! `ApiError`, the one type that becomes an HTTP error response: RFC 9457
//! `application/problem+json` with a stable machine-readable `type`.

use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;

use actiongate_gate::{ErrorCode, GateError};

pub use actiongate_api::{FieldError, Problem};

/// An error answered to the client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    title: &'static str,
    detail: String,
    errors: Vec<FieldError>,
    current_status: Option<String>,
    /// Seconds for the `Retry-After` header.
    retry_after: Option<u32>,
}

impl ApiError {
    fn new(
        status: StatusCode,
        code: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            code,
            title,
            detail: detail.into(),
            errors: Vec::new(),
            current_status: None,
            retry_after: None,
        }
    }

    /// 400: the request could not be read.
    pub fn bad_request(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "bad-request",
            "Malformed request",
            detail,
        )
    }

    /// 401: no key, or a key we do not know.
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "Missing or invalid API key",
            detail,
        )
    }

    /// This error, a 401 titled for what the endpoint authenticates by
    /// when that is not an API key (an executor's webhook signature).
    pub fn unauthorized_as(self, title: &'static str) -> Self {
        if self.status == StatusCode::UNAUTHORIZED {
            Self { title, ..self }
        } else {
            self
        }
    }

    /// 403: the key's role may not do this.
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "Not allowed for this key",
            detail,
        )
    }

    /// 404: nothing there (or nothing this caller may see).
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not-found", "Not found", detail)
    }

    /// 405.
    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method-not-allowed",
            "Method not allowed",
            "this resource does not support that method",
        )
    }

    /// 406: the client accepts none of the media types the endpoint answers in.
    pub fn not_acceptable(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_ACCEPTABLE,
            "not-acceptable",
            "Not acceptable",
            detail,
        )
    }

    /// The problem for a refusal another layer (rmcp's transport) answered
    /// with `status` and a plain-text `detail`.
    pub fn refusal(status: StatusCode, detail: impl Into<String>) -> Self {
        let detail = detail.into();
        match status.as_u16() {
            400 => Self::bad_request(detail),
            401 => Self::unauthorized(detail),
            403 => Self::forbidden(detail),
            404 => Self::not_found(detail),
            405 => Self {
                detail,
                ..Self::method_not_allowed()
            },
            406 => Self::not_acceptable(detail),
            413 => Self::too_large(detail),
            415 => Self::unsupported_media(detail),
            503 => Self::unavailable(detail),
            _ if status.is_client_error() => Self {
                status,
                ..Self::bad_request(detail)
            },
            _ => Self::internal(),
        }
    }

    /// 422 with one invalid field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::invalid_fields(vec![FieldError {
            field: field.into(),
            message: message.into(),
        }])
    }

    /// 422 with every invalid field.
    pub fn invalid_fields(errors: Vec<FieldError>) -> Self {
        let detail = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect::<Vec<_>>()
            .join("; ");
        let mut e = Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation",
            "The request is not valid",
            detail,
        );
        e.errors = errors;
        e
    }

    /// 413.
    pub fn too_large(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too-large",
            "Request body too large",
            detail,
        )
    }

    /// 415.
    pub fn unsupported_media(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "Expected application/json",
            detail,
        )
    }

    /// 503: the store is closing or busy.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable",
            detail,
        )
    }

    /// 500; the detail says nothing internal (the cause goes to the log).
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal server error",
            "the server failed to handle the request; see its log",
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The problem body.
    pub fn problem(&self) -> Problem {
        Problem {
            kind: format!("urn:actiongate:problem:{}", self.code),
            title: self.title.to_owned(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            code: self.code.to_owned(),
            errors: self.errors.clone(),
            current_status: self.current_status.clone(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut resp = (self.status, body).into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        // 503s are worth a retry shortly (every one carries Retry-After).
        let retry_after = self
            .retry_after
            .or((self.status == StatusCode::SERVICE_UNAVAILABLE).then_some(1));
        if let Some(secs) = retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

impl From<GateError> for ApiError {
    /// Each [`ErrorCode`] has exactly one status, `type` and title.
    fn from(err: GateError) -> Self {
        let (status, title) = match err.code {
            ErrorCode::Unauthorized => (StatusCode::UNAUTHORIZED, "Missing or invalid API key"),
            ErrorCode::Forbidden => (StatusCode::FORBIDDEN, "Not allowed for this key"),
            ErrorCode::NotFound => (StatusCode::NOT_FOUND, "Not found"),
            ErrorCode::Conflict => (StatusCode::CONFLICT, "Conflict with the current state"),
            ErrorCode::ActionSettled => (
                StatusCode::CONFLICT,
                "The action is not in a state that allows this",
            ),
            ErrorCode::GrantRequestSettled => (
                StatusCode::CONFLICT,
                "The grant request was already answered",
            ),
            ErrorCode::Validation => (StatusCode::UNPROCESSABLE_ENTITY, "The request is not valid"),
            ErrorCode::LimitReached => (StatusCode::TOO_MANY_REQUESTS, "A limit was reached"),
            ErrorCode::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "Service unavailable"),
            ErrorCode::DatabaseBusy => (StatusCode::SERVICE_UNAVAILABLE, "Database busy"),
            ErrorCode::StorageFull => (StatusCode::INSUFFICIENT_STORAGE, "Insufficient storage"),
            ErrorCode::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "Internal server error"),
        };
        ApiError {
            status,
            code: err.code.as_str(),
            title,
            detail: err.detail,
            errors: err.errors,
            current_status: err.current_status,
            retry_after: (err.code == ErrorCode::DatabaseBusy).then_some(2),
        }
    }
}

/// Splits serde's `path: message` into a field error.
fn field_error(text: &str) -> FieldError {
    match text.split_once(": ") {
        Some((path, msg)) if !path.contains(' ') => FieldError {
            field: path.to_owned(),
            message: msg.to_owned(),
        },
        _ => FieldError {
            field: "body".to_owned(),
            message: text.to_owned(),
        },
    }
}

/// Whether the request says its body is JSON: `application/json` or
/// `application/<anything>+json`, parameters ignored.
pub(crate) fn has_json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match essence.split_once('/') {
        Some(("application", sub)) => sub == "json" || sub.ends_with("+json"),
        _ => false,
    }
}

/// The raw body, whose rejections are problem+json (413 over the size
/// limit), for endpoints that check a signature over the bytes as sent.
#[derive(Debug, Clone, Default)]
pub struct ApiBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        body_bytes(req, state).await.map(ApiBytes)
    }
}

/// What a request body fails with once `http.request_read_seconds` is up
/// (the server module's body deadline); answered 408.
pub const BODY_LATE: &str = "the request body did not arrive in time";

/// Reads the body of `req` as bytes: 413 over the size limit, 408 late.
async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|rej| {
        if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(
                "the body exceeds the size limit (`http.body_limit_bytes`, 1 MiB unless configured)",
            )
        } else if rej.body_text().contains(BODY_LATE) {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request-timeout",
                "Request timeout",
                format!("{} (http.request_read_seconds)", BODY_LATE),
            )
        } else {
            ApiError::bad_request(rej.body_text())
        }
    })
}

/// Whether `bytes` can only be a JSON object: its first character past
/// whitespace opens one. serde would also take a struct written as an array.
pub fn is_object_text(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Parses a JSON object body into `T`. Text that is not JSON is 400; JSON of
/// the wrong shape (not an object, a field of the wrong type, an unknown
/// field) is 422 naming the field.
pub fn parse_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if is_object_text(bytes) {
        refuse_nul(bytes)?;
    }
    parse_any_text(bytes)
}

/// [`parse_object`] taking U+0000 in strings: for what is kept, not
/// matched or run (an executor's result, which may report what a file
/// held, and which Postgres stores as JSON text).
pub fn parse_any_text<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // serde_json reports some shape errors (an enum given as `{}`, a struct
    // given as a longer array) as syntax errors; what decides between 400
    // and 422 is whether the text is JSON at all.
    let shape_error = |field: String, message: String| match serde_json::from_slice::<
        serde::de::IgnoredAny,
    >(bytes)
    {
        Ok(_) => ApiError::invalid_fields(vec![FieldError { field, message }]),
        Err(e) => ApiError::bad_request(format!("the body is not valid JSON: {e}")),
    };
    if !is_object_text(bytes) {
        return Err(shape_error(
            "body".to_owned(),
            "expected a JSON object".to_owned(),
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let first = serde_path_to_error::deserialize(&mut de);
    // `128.0` is an integer to JSON Schema (and to most senders); serde
    // wants `128`. Only on this path: a body that parses costs nothing more.
    if let Err(err) = &first
        && err
            .inner()
            .to_string()
            .contains("invalid type: floating point")
        && let Some(whole) = whole_floats_as_integers(bytes)
    {
        return parse_any_text(&whole);
    }
    let value: T = first.map_err(|err| {
        let path = err.path().to_string();
        let message = err.inner().to_string();
        // Past the parser's own nesting limit: named by the field it is
        // in, with the limit every free-form value is held to.
        if message.starts_with("recursion limit exceeded") {
            let field = path
                .split(['.', '['])
                .next()
                .filter(|f| !f.is_empty())
                .unwrap_or("body");
            return shape_error(
                field.to_owned(),
                format!(
                    "nests deeper than {} levels of arrays and objects",
                    actiongate_gate::bounds::MAX_DEPTH
                ),
            );
        }
        // A repeated or missing field is reported on the object holding
        // it; named here by itself.
        let field = match (named_field(&message), path.as_str()) {
            (Some(name), ".") => name.to_owned(),
            (Some(name), _) => format!("{path}.{name}"),
            (None, ".") => "body".to_owned(),
            (None, _) => path,
        };
        shape_error(field, message)
    })?;
    de.end()
        .map_err(|e| shape_error("body".to_owned(), e.to_string()))?;
    Ok(value)
}

/// Refuses a JSON body with U+0000 in a string or key, naming the first
/// (Postgres cannot store it, and a command line cannot hold it: refused
/// on every backend alike). JSON writes it only as an escape: the body is
/// looked through only where one may be.
pub fn refuse_nul(bytes: &[u8]) -> Result<(), ApiError> {
    if bytes.windows(5).any(|w| w == b"u0000")
        && let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes)
        && let Some(field) = actiongate_gate::bounds::nul_at(&value, String::new())
    {
        return Err(ApiError::invalid_fields(vec![FieldError {
            field,
            message: actiongate_gate::actions::NUL_REFUSED.to_owned(),
        }]));
    }
    Ok(())
}

/// `bytes` with every number written as a whole float (`128.0`, `-3.00`)
/// written as the integer it is; `None` when there is none. Strings are
/// left alone, and the result is parsed (and checked) again from the start.
fn whole_floats_as_integers(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut changed = false;
    let mut in_string = false;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if in_string {
            out.push(b);
            if b == b'\\' {
                if let Some(&next) = bytes.get(i + 1) {
                    out.push(next);
                    i += 1;
                }
            } else if b == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
        } else if b == b'-' || b.is_ascii_digit() {
            let start = i;
            let mut j = i + 1;
            while bytes.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            if bytes.get(j) == Some(&b'.') {
                let mut k = j + 1;
                while bytes.get(k) == Some(&b'0') {
                    k += 1;
                }
                let ends = !bytes
                    .get(k)
                    .is_some_and(|c| c.is_ascii_digit() || matches!(c, b'e' | b'E'));
                if k > j + 1 && ends {
                    out.extend_from_slice(&bytes[start..j]);
                    changed = true;
                    i = k;
                    continue;
                }
            }
            out.extend_from_slice(&bytes[start..j]);
            i = j;
            continue;
        }
        out.push(b);
        i += 1;
    }
    changed.then_some(out)
}

/// The field serde's "duplicate field `x`" or "missing field `x`" names.
fn named_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("duplicate field `")
        .or_else(|| message.strip_prefix("missing field `"))?
        .split_once('`')
        .map(|(field, _)| field)
}

/// Whether `bytes`, a JSON object, has `key` among its own keys: for bodies
/// of two forms told apart by a key, before [`parse_object`] parses the
/// one it picks (and names the field at fault, a repeated one too). Not an
/// object: `false`, and the parse that follows says what is wrong.
pub fn object_has_key(bytes: &[u8], key: &str) -> bool {
    serde_json::from_slice::<std::collections::HashMap<String, serde::de::IgnoredAny>>(bytes)
        .is_ok_and(|keys| keys.contains_key(key))
}

/// `Json` whose rejections are problem+json: not JSON 400, JSON of the
/// wrong shape 422, wrong content type 415, too large 413. The body must be
/// a JSON object (serde alone would also take a struct as an array).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let ApiJsonBody(bytes) = ApiJsonBody::from_request(req, state).await?;
        parse_object(&bytes).map(ApiJson)
    }
}

/// The body of a JSON request with [`ApiJson`]'s checks (content type,
/// size) but not parsed yet, for a handler that picks its shape itself and
/// then parses it with [`parse_object`].
#[derive(Debug, Clone)]
pub struct ApiJsonBody(pub Bytes);

impl<S> FromRequest<S> for ApiJsonBody
where
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !has_json_content_type(req.headers()) {
            return Err(ApiError::unsupported_media(
                "send the body as Content-Type: application/json",
            ));
        }
        body_bytes(req, state).await.map(ApiJsonBody)
    }
}

/// An optional body: none when the body is empty or the JSON `null`;
/// otherwise a JSON object like any other.
impl<S, T> OptionalFromRequest<S> for ApiJson<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, Self::Rejection> {
        let typed = req.headers().contains_key(header::CONTENT_TYPE);
        let json = has_json_content_type(req.headers());
        let bytes = body_bytes(req, state).await?;
        let text = bytes.trim_ascii();
        if text.is_empty() {
            return Ok(None);
        }
        if !json {
            return Err(ApiError::unsupported_media(if typed {
                "send the body as Content-Type: application/json"
            } else {
                "a body needs Content-Type: application/json"
            }));
        }
        if text == b"null" {
            return Ok(None);
        }
        parse_object(text).map(|v| Some(ApiJson(v)))
    }
}

impl<T: Serialize> IntoResponse for ApiJson<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `Path` whose rejections are problem+json (400: a segment that does not
/// decode, e.g. percent-encoded bytes that are not UTF-8).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(ApiPath(v)),
            Err(rej) if rej.status().is_server_error() => {
                tracing::error!(error = %rej.body_text(), "path extraction failed");
                Err(ApiError::internal())
            }
            Err(rej) => Err(ApiError::bad_request(rej.body_text())),
        }
    }
}

/// `Query` whose rejections are problem+json (422 naming the parameter).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(ApiQuery(v)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => {
                let text = std::error::Error::source(&e)
                    .map(ToString::to_string)
                    .unwrap_or_else(|| e.body_text());
                let mut fe = field_error(&text);
                if fe.field == "body" {
                    fe.field = "query".to_owned();
                }
                Err(ApiError::invalid_fields(vec![fe]))
            }
            Err(other) => Err(ApiError::bad_request(other.body_text())),
        }
    }
}

/// Result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        uses: i64,
        note: String,
    }

    #[test]
    fn a_whole_float_is_the_integer_it_is_and_strings_are_left_alone() {
        let b: Body = parse_object(br#"{"uses": 128.0, "note": "1.0 \"2.00\""}"#).unwrap();
        assert_eq!((b.uses, b.note.as_str()), (128, r#"1.0 "2.00""#));
        assert!(parse_object::<Body>(br#"{"uses": 1.5, "note": ""}"#).is_err());
        assert!(parse_object::<Body>(br#"{"uses": 1.0e2, "note": ""}"#).is_err());
        // A repeated field is still refused after the rewrite.
        let e = parse_object::<Body>(br#"{"uses": 1.0, "uses": 2, "note": ""}"#).unwrap_err();
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            whole_floats_as_integers(br#"{"a": -3.00}"#).unwrap(),
            br#"{"a": -3}"#
        );
        assert_eq!(whole_floats_as_integers(br#"{"a": 3}"#), None);
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        inner: Body,
    }

    fn fields(e: &ApiError) -> Vec<String> {
        e.problem().errors.into_iter().map(|f| f.field).collect()
    }

    #[test]
    fn a_missing_field_is_named_where_it_is_missing() {
        let e = parse_object::<Body>(br#"{"uses": 1}"#).unwrap_err();
        assert_eq!(e.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(fields(&e), ["note"]);
        let e = parse_object::<Outer>(br#"{"inner": {"note": ""}}"#).unwrap_err();
        assert_eq!(fields(&e), ["inner.uses"]);
        // A repeated field is still named by itself.
        let e = parse_object::<Body>(br#"{"uses": 1, "uses": 2, "note": ""}"#).unwrap_err();
        assert_eq!(fields(&e), ["uses"]);
    }
}
