//! `/v1/people`: the people who decide, with their groups, operator keys
//! and chat identities (admins; `docs/teams.md`).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};

use actiongate_api::{PeopleList, Person, PersonBody};

use crate::auth::Admin;
use crate::error::{ApiJson, ApiPath, ApiResult, Problem};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/people", post(create_person).get(list_people))
        .route(
            "/v1/people/{id}",
            get(get_person).put(replace_person).delete(delete_person),
        )
}

/// Add a person (admins).
#[utoipa::path(
    post, path = "/v1/people", tag = "people",
    request_body = PersonBody,
    responses(
        (status = 201, description = "Added", body = Person),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The name or an identity belongs to another person", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_person(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiJson(body): ApiJson<PersonBody>,
) -> ApiResult<(StatusCode, axum::Json<Person>)> {
    let person = state.gate().create_person(&caller, body).await?;
    Ok((StatusCode::CREATED, axum::Json(person)))
}

/// List people, by name (admins).
#[utoipa::path(
    get, path = "/v1/people", tag = "people",
    responses(
        (status = 200, description = "Every person", body = PeopleList),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_people(
    State(state): State<AppState>,
    Admin(caller): Admin,
) -> ApiResult<axum::Json<PeopleList>> {
    let items = state.gate().list_people(&caller).await?;
    Ok(axum::Json(PeopleList { items }))
}

/// Read a person (admins).
#[utoipa::path(
    get, path = "/v1/people/{id}", tag = "people",
    params(("id" = String, Path, description = "Person id")),
    responses(
        (status = 200, description = "The person", body = Person),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such person", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get_person(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<Person>> {
    Ok(axum::Json(state.gate().get_person(&caller, &id).await?))
}

/// Replace a person (admins).
#[utoipa::path(
    put, path = "/v1/people/{id}", tag = "people",
    params(("id" = String, Path, description = "Person id")),
    request_body = PersonBody,
    responses(
        (status = 200, description = "Replaced", body = Person),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such person", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The name or an identity belongs to another person", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn replace_person(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<PersonBody>,
) -> ApiResult<axum::Json<Person>> {
    Ok(axum::Json(
        state.gate().replace_person(&caller, &id, body).await?,
    ))
}

/// Remove a person (admins): their keys and chat identities decide as
/// themselves from then on.
#[utoipa::path(
    delete, path = "/v1/people/{id}", tag = "people",
    params(("id" = String, Path, description = "Person id")),
    responses(
        (status = 204, description = "Removed"),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such person", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn delete_person(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<StatusCode> {
    state.gate().delete_person(&caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
