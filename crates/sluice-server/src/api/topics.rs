//! Topics: list, define, show, delete, and publish (one copy per matching subscription, in one
//! commit). The fan-out itself is `crate::topics::publish`.

use axum::Json;
use axum::extract::State;
use sluice_wire::{
    MessageIn, TopicDeleteOut, TopicListOut, TopicOut, TopicPublishOut, TopicPutOut, TopicSpec,
};

use super::{ApiJson, ApiPath, AppState};
use crate::error::ApiError;
use crate::topics;

/// `GET /v1/topics`
#[utoipa::path(get, operation_id = "topic_list", path = "/v1/topics", responses((status = 200, body = TopicListOut)))]
pub async fn list(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
) -> Json<TopicListOut> {
    Json(TopicListOut {
        topics: app
            .topics
            .list()
            .iter()
            .filter(|topic| crate::auth::manages(&caller, &topic.name))
            .map(|topic| topic.out())
            .collect(),
    })
}

/// `PUT /v1/topics/{name}`: define or replace a topic.
#[utoipa::path(put, operation_id = "topic_put", path = "/v1/topics/{name}", params(("name" = String, Path)), request_body = TopicSpec,
    responses((status = 200, body = TopicPutOut), (status = 400, body = sluice_wire::ErrorBody),
        (status = 404, description = "a subscribed queue does not exist", body = sluice_wire::ErrorBody),
        (status = 422, description = "a field or filter is wrong; the message says which", body = sluice_wire::ErrorBody)))]
pub async fn put(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
    ApiPath(name): ApiPath<String>,
    ApiJson(spec): ApiJson<TopicSpec>,
) -> Result<Json<TopicPutOut>, ApiError> {
    for (index, subscription) in spec.subscriptions.iter().enumerate() {
        let field = format!("subscriptions[{index}].queue");
        crate::auth::check_manages(&caller, &field, &subscription.queue)?;
    }
    let created = topics::define(&app, &name, spec).await?;
    let topic = topics::find(&app, &name)?;
    Ok(Json(TopicPutOut {
        created,
        topic: topic.out(),
    }))
}

/// `GET /v1/topics/{name}`: the definition and its counts.
#[utoipa::path(get, operation_id = "topic_get", path = "/v1/topics/{name}", params(("name" = String, Path)),
    responses((status = 200, body = TopicOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn get_one(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<TopicOut>, ApiError> {
    Ok(Json(topics::find(&app, &name)?.out()))
}

/// `DELETE /v1/topics/{name}`: the topic goes; its queues and their messages stay.
#[utoipa::path(delete, operation_id = "topic_delete", path = "/v1/topics/{name}", params(("name" = String, Path)),
    responses((status = 200, body = TopicDeleteOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn delete(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<TopicDeleteOut>, ApiError> {
    if !topics::delete(&app, &name).await? {
        return Err(topics::find(&app, &name)
            .err()
            .unwrap_or_else(|| ApiError::unavailable("the topic came back while it was deleted")));
    }
    Ok(Json(TopicDeleteOut { deleted: true }))
}

/// `POST /v1/topics/{name}/messages`: one copy of the message in each subscribed queue whose
/// filter takes it, all stored in one commit before the answer (or none, on any refusal).
#[utoipa::path(post, operation_id = "topic_publish", path = "/v1/topics/{name}/messages", params(("name" = String, Path)), request_body = MessageIn,
    responses((status = 200, body = TopicPublishOut),
        (status = 403, description = "with access control on: the token may not produce to a subscribed queue", body = sluice_wire::ErrorBody),
        (status = 404, description = "no such topic, or a subscribed queue is gone", body = sluice_wire::ErrorBody),
        (status = 413, body = sluice_wire::ErrorBody),
        (status = 422, description = "a field is wrong, a copy fails its queue's schema, or a filter failed", body = sluice_wire::ErrorBody),
        (status = 503, description = "a subscribed queue is full (nothing was stored)", body = sluice_wire::ErrorBody)))]
pub async fn publish(
    State(app): State<AppState>,
    caller: Option<axum::Extension<std::sync::Arc<crate::auth::Caller>>>,
    ApiPath(name): ApiPath<String>,
    // Read as bytes and parsed after the caller is authorized: a caller who may not publish
    // here learns that (403) before anything about what they sent, and nothing is built of it.
    super::ApiBytes(body): super::ApiBytes,
) -> Result<Json<TopicPublishOut>, ApiError> {
    let topic = topics::find(&app, &name)?;
    let queues: Vec<&str> = topic
        .spec
        .subscriptions
        .iter()
        .map(|s| s.queue.as_str())
        .collect();
    // A topic none of whose queues the caller may see (another tenant's) is answered as one
    // that does not exist: a 403 would tell its name is taken.
    if let Some(caller) = caller.as_deref()
        && !queues.iter().any(|queue| caller.may_read(queue))
    {
        return Err(topics::not_found(&name));
    }
    crate::auth::check_produce_to(&app, caller.as_deref().map(|c| &**c), "topic", &queues).await?;
    let input = super::messages::parse_one(&body)?;
    let message = super::messages::message_request(input, "")?;
    let copies = topics::publish(&app, &topic, message).await?;
    Ok(Json(TopicPublishOut { copies }))
}

/// The topics' routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("topics")
        .documented(Need::Administrators, routes!(list))
        .documented(Need::Admin, routes!(get_one))
        .documented(Need::Admin, routes!(put))
        .documented(Need::Admin, routes!(delete))
        .documented(Need::AnyToken, routes!(publish))
}
