"""Schemathesis checks of our own, loaded by .ci/fuzz-api (SCHEMATHESIS_HOOKS).

Every error the daemon answers must be an RFC 9457 problem: the
`application/problem+json` content type and a body with the fields our
`Problem` schema promises. `content_type_conformance` only sees statuses the
OpenAPI document declares; this check holds for every 4xx/5xx, declared or
not (405s of the method fallback, 404s of unknown paths, extractor
rejections).
"""

import json

import schemathesis

PROBLEM_FIELDS = ("type", "title", "status", "detail", "code")


@schemathesis.check
def errors_are_problem_json(ctx, response, case):
    if response.status_code < 400:
        return None
    content_type = ";".join(response.headers.get("content-type", []))
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != "application/problem+json":
        raise AssertionError(
            f"{response.status_code} answered with Content-Type {content_type!r}, "
            "not application/problem+json"
        )
    if case.method.upper() == "HEAD":
        # A HEAD response carries the headers of the GET and no body.
        return None
    try:
        body = json.loads(response.content)
    except ValueError as exc:
        raise AssertionError(f"{response.status_code} problem body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise AssertionError(f"{response.status_code} problem body is not an object")
    missing = [f for f in PROBLEM_FIELDS if f not in body]
    if missing:
        raise AssertionError(f"{response.status_code} problem body lacks {', '.join(missing)}")
    if body["status"] != response.status_code:
        raise AssertionError(
            f"problem status {body['status']} differs from the HTTP status {response.status_code}"
        )
    if not str(body["type"]).startswith("urn:actiongate:problem:"):
        raise AssertionError(f"problem type {body['type']!r} is not urn:actiongate:problem:<code>")
    return None


# A long-poll answers when its wait is up if nothing is decided meanwhile:
# a generated `?wait=37` on an action that asks (a `caution` makes one ask
# even under `open`) takes 37 s, past schemathesis's response time limit
# (10 s), without anything being wrong (schemathesis.toml raises the limit
# on these operations to the longest wait). Waits within the allowed range
# are shortened to 2 s, so the run spends its time on other requests;
# those out of it are left to be refused at once.
LONG_POLL_SHORTENED_TO = 2


@schemathesis.hook
def map_query(ctx, query):
    if isinstance(query, dict):
        wait = query.get("wait")
        if isinstance(wait, int) and not isinstance(wait, bool) and LONG_POLL_SHORTENED_TO < wait <= 60:
            query["wait"] = LONG_POLL_SHORTENED_TO
    return query
