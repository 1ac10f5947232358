//! Queue operations: create, URL, list, delete, attributes, purge, dead-letter sources, tags
//! and permissions (docs/design/sqs-compat.md §3.1-3.6, 3.12-3.13).

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sluice_core::queue::QueueConfig;
use sluice_core::queue::validate_tags;
use sluice_core::store::{PurgeScope, QueueInfo};
use sluice_sqs::request::{
    AddPermission, CreateQueue, GetQueueAttributes, GetQueueUrl, ListDeadLetterSourceQueues,
    ListQueues, QueueOnly, RemovePermission, SetQueueAttributes, TagQueue, UntagQueue,
};
use sluice_sqs::response::{
    GetQueueAttributesResult, ListDeadLetterSourceQueuesResult, ListQueueTagsResult,
    ListQueuesResult, QueueUrlResult,
};
use sluice_sqs::{Action, ErrorKind, Response, SqsError};
use sluice_wire::ErrorCode;

use super::attributes::{self, Redrive};
use super::{Ctx, from_ops, names, note_purge};
use crate::auth::Need;

type Answer = Result<Response, SqsError>;

pub async fn create(ctx: &Ctx<'_>, request: CreateQueue) -> Answer {
    let name = request.queue_name;
    ctx.allow(Need::Admin, Some(&name)).await?;
    names::check_new_name(&name)?;
    let fifo = name.ends_with(".fifo");
    let fifo_attribute = request
        .attributes
        .get("FifoQueue")
        .map(|value| value.eq_ignore_ascii_case("true"));
    // `FifoQueue=false` on a standard queue is refused below as an unknown attribute, as SQS does.
    if !matches!(
        (fifo, fifo_attribute),
        (true, Some(true)) | (false, None | Some(false))
    ) {
        return Err(invalid(
            "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length, and FIFO queues need the attribute FifoQueue=true.",
        ));
    }
    attributes::check_names(&request.attributes, fifo)?;
    let redrive = redrive_of(ctx, &name, &request.attributes, fifo).await?;
    match ctx.app.ops.queue_get(&name).await {
        Ok(info) => {
            let current = attributes::all(&info, &ctx.sqs.config);
            if let Some(differs) =
                attributes::first_difference(&current, &request.attributes, &ctx.sqs.config)
            {
                return Err(SqsError::new(
                    ErrorKind::QueueNameExists,
                    format!(
                        "A queue already exists with the same name and a different value for attribute {differs}"
                    ),
                ));
            }
            return Ok(url_of(ctx, &name, true));
        }
        Err(error) if error.code == ErrorCode::QueueNotFound => {}
        Err(error) => return Err(from_ops(error)),
    }
    let now_ms = ctx.now_ms();
    let mut config = attributes::new_queue(&name, fifo, &ctx.sqs.config, now_ms);
    attributes::apply(
        &mut config,
        &request.attributes,
        redrive,
        &ctx.sqs.config,
        now_ms,
    )?;
    validate_tags(&request.tags).map_err(invalid)?;
    config.tags = request.tags;
    ctx.app
        .ops
        .queue_put_config(&name, config)
        .await
        .map_err(from_ops)?;
    Ok(url_of(ctx, &name, true))
}

pub async fn get_url(ctx: &Ctx<'_>, request: GetQueueUrl) -> Answer {
    if request
        .queue_owner_aws_account_id
        .as_ref()
        .is_some_and(|account| *account != ctx.sqs.config.account_id)
    {
        return Err(SqsError::queue_does_not_exist());
    }
    let name = names::queue_of_url(&ctx.sqs.config, &request.queue_name)?;
    ctx.allow(Need::Read, Some(&name)).await?;
    queue(ctx, &name).await?;
    Ok(url_of(ctx, &name, false))
}

pub async fn list(ctx: &Ctx<'_>, request: ListQueues) -> Answer {
    ctx.allow(Need::AnyToken, None).await?;
    let prefix = request.queue_name_prefix.unwrap_or_default();
    let names: Vec<String> = all_queues(ctx)
        .await?
        .into_iter()
        .map(|info| info.name)
        .filter(|name| name.starts_with(&prefix))
        .collect();
    let (page, next_token) = paginate(names, request.max_results, request.next_token)?;
    Ok(Response::ListQueues(ListQueuesResult {
        queue_urls: page.iter().map(|name| ctx.queue_url(name)).collect(),
        next_token,
    }))
}

pub async fn delete(ctx: &Ctx<'_>, request: QueueOnly) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Admin, Some(&name)).await?;
    // As AWS: a queue's dead-letter queue is a queue of its own that DeleteQueue leaves.
    ctx.app
        .delete_queue(
            ctx.caller.as_ref(),
            &name,
            sluice_ops::OnDelete::KeepDeadLetters,
        )
        .await
        .map_err(from_ops)?;
    Ok(Response::Empty(Action::DeleteQueue))
}

pub async fn get_attributes(ctx: &Ctx<'_>, request: GetQueueAttributes) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Read, Some(&name)).await?;
    let info = queue(ctx, &name).await?;
    Ok(Response::GetQueueAttributes(GetQueueAttributesResult {
        attributes: attributes::select(&info, &ctx.sqs.config, &request.attribute_names)?,
    }))
}

pub async fn set_attributes(ctx: &Ctx<'_>, request: SetQueueAttributes) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Admin, Some(&name)).await?;
    let info = queue(ctx, &name).await?;
    let fifo = attributes::is_fifo(&name, &info.config);
    attributes::check_names(&request.attributes, fifo)?;
    let redrive = redrive_of(ctx, &name, &request.attributes, fifo).await?;
    let mut config = info.config;
    attributes::apply(
        &mut config,
        &request.attributes,
        redrive,
        &ctx.sqs.config,
        ctx.now_ms(),
    )?;
    put(ctx, &name, config).await?;
    Ok(Response::Empty(Action::SetQueueAttributes))
}

pub async fn purge(ctx: &Ctx<'_>, request: QueueOnly) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Admin, Some(&name)).await?;
    queue(ctx, &name).await?;
    note_purge(ctx.sqs, &name)?;
    ctx.app
        .ops
        .queue_purge(&name, PurgeScope::Everything)
        .await
        .map_err(from_ops)?;
    Ok(Response::Empty(Action::PurgeQueue))
}

pub async fn dead_letter_sources(ctx: &Ctx<'_>, request: ListDeadLetterSourceQueues) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Read, Some(&name)).await?;
    queue(ctx, &name).await?;
    let who = crate::auth::ops_caller(ctx.caller.as_ref());
    let sources = ctx
        .app
        .ops
        .dead_letter_sources(who, &name)
        .await
        .map_err(from_ops)?;
    let (page, next_token) = paginate(sources, request.max_results, request.next_token)?;
    Ok(Response::ListDeadLetterSourceQueues(
        ListDeadLetterSourceQueuesResult {
            queue_urls: page.iter().map(|name| ctx.queue_url(name)).collect(),
            next_token,
        },
    ))
}

pub async fn tag(ctx: &Ctx<'_>, request: TagQueue) -> Answer {
    edit_tags(ctx, &request.queue_url, |tags| tags.extend(request.tags)).await?;
    Ok(Response::Empty(Action::TagQueue))
}

pub async fn untag(ctx: &Ctx<'_>, request: UntagQueue) -> Answer {
    edit_tags(ctx, &request.queue_url, |tags| {
        for key in &request.tag_keys {
            tags.remove(key);
        }
    })
    .await?;
    Ok(Response::Empty(Action::UntagQueue))
}

pub async fn list_tags(ctx: &Ctx<'_>, request: QueueOnly) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Read, Some(&name)).await?;
    let info = queue(ctx, &name).await?;
    Ok(Response::ListQueueTags(ListQueueTagsResult {
        tags: info.config.tags,
    }))
}

/// Adds a statement to the queue's `Policy`, as SQS does. sluice keeps the policy so it reads
/// back (tools compare it) but grants nothing by it: tokens and roles decide access.
pub async fn add_permission(ctx: &Ctx<'_>, request: AddPermission) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Admin, Some(&name)).await?;
    check_label(&request.label)?;
    if request.aws_account_ids.is_empty() {
        return Err(SqsError::missing_parameter("AWSAccountIds"));
    }
    if request.actions.is_empty() {
        return Err(SqsError::missing_parameter("Actions"));
    }
    if request.actions.len() > 7 {
        return Err(SqsError::new(
            ErrorKind::OverLimit,
            format!(
                "{} Actions were found, maximum allowed is 7.",
                request.actions.len()
            ),
        ));
    }
    const ACTIONS: &[&str] = &[
        "*",
        "SendMessage",
        "ReceiveMessage",
        "DeleteMessage",
        "ChangeMessageVisibility",
        "GetQueueAttributes",
        "GetQueueUrl",
        "ListDeadLetterSourceQueues",
        "PurgeQueue",
    ];
    if let Some(action) = request
        .actions
        .iter()
        .find(|a| !ACTIONS.contains(&a.as_str()))
    {
        return Err(invalid(format!(
            "Value SQS:{action} for parameter ActionName is invalid. Reason: Only the queue owner is allowed to invoke this action."
        )));
    }
    let info = queue(ctx, &name).await?;
    let arn = names::queue_arn(&ctx.sqs.config, &name);
    let mut policy = policy_of(&info.config, &arn);
    let statements = statements(&mut policy);
    if statements
        .iter()
        .any(|s| s["Sid"] == request.label.as_str())
    {
        return Err(invalid(format!(
            "Value {} for parameter Label is invalid. Reason: Already exists.",
            request.label
        )));
    }
    let principals: Vec<String> = request
        .aws_account_ids
        .iter()
        .map(|account| format!("arn:aws:iam::{account}:root"))
        .collect();
    let actions: Vec<String> = request.actions.iter().map(|a| format!("SQS:{a}")).collect();
    statements.push(serde_json::json!({
        "Sid": request.label,
        "Effect": "Allow",
        "Principal": {"AWS": if principals.len() == 1 { serde_json::json!(principals[0]) } else { serde_json::json!(principals) }},
        "Action": if actions.len() == 1 { serde_json::json!(actions[0]) } else { serde_json::json!(actions) },
        "Resource": arn,
    }));
    let mut config = info.config;
    config
        .protocol_attributes
        .insert(format!("{}Policy", attributes::PREFIX), policy.to_string());
    put(ctx, &name, config).await?;
    Ok(Response::Empty(Action::AddPermission))
}

pub async fn remove_permission(ctx: &Ctx<'_>, request: RemovePermission) -> Answer {
    let name = ctx.queue_of(&request.queue_url)?;
    ctx.allow(Need::Admin, Some(&name)).await?;
    let info = queue(ctx, &name).await?;
    let arn = names::queue_arn(&ctx.sqs.config, &name);
    let mut policy = policy_of(&info.config, &arn);
    let statements = statements(&mut policy);
    let before = statements.len();
    statements.retain(|s| s["Sid"] != request.label.as_str());
    if statements.len() == before {
        return Err(invalid(format!(
            "Value {} for parameter Label is invalid. Reason: can't find label.",
            request.label
        )));
    }
    let empty = statements.is_empty();
    let mut config = info.config;
    let key = format!("{}Policy", attributes::PREFIX);
    if empty {
        config.protocol_attributes.remove(&key);
    } else {
        config.protocol_attributes.insert(key, policy.to_string());
    }
    put(ctx, &name, config).await?;
    Ok(Response::Empty(Action::RemovePermission))
}

fn check_label(label: &str) -> Result<(), SqsError> {
    let valid = !label.is_empty()
        && label.len() <= 80
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(invalid(format!(
            "Value {label} for parameter Label is invalid. Reason: Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length."
        )))
    }
}

fn policy_of(config: &QueueConfig, arn: &str) -> serde_json::Value {
    attributes::kept(config, "Policy")
        .and_then(|text| serde_json::from_str(text).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| {
            serde_json::json!({
                "Version": "2008-10-17",
                "Id": format!("{arn}/SQSDefaultPolicy"),
                "Statement": [],
            })
        })
}

fn statements(policy: &mut serde_json::Value) -> &mut Vec<serde_json::Value> {
    let object = policy.as_object_mut().expect("a policy is an object");
    let statement = object
        .entry("Statement")
        .or_insert_with(|| serde_json::json!([]));
    if !statement.is_array() {
        *statement = serde_json::json!([statement.clone()]);
    }
    statement.as_array_mut().expect("made an array above")
}

async fn edit_tags(
    ctx: &Ctx<'_>,
    url: &str,
    edit: impl FnOnce(&mut BTreeMap<String, String>),
) -> Result<(), SqsError> {
    let name = ctx.queue_of(url)?;
    ctx.allow(Need::Admin, Some(&name)).await?;
    let mut config = queue(ctx, &name).await?.config;
    edit(&mut config.tags);
    validate_tags(&config.tags).map_err(invalid)?;
    put(ctx, &name, config).await
}

/// The parsed `RedrivePolicy` of `attributes`, if given, with its target checked: it exists,
/// is not the queue itself, is of the same type, and its `RedriveAllowPolicy` lets this
/// queue use it.
async fn redrive_of(
    ctx: &Ctx<'_>,
    name: &str,
    attributes: &BTreeMap<String, String>,
    fifo: bool,
) -> Result<Option<Option<Redrive>>, SqsError> {
    let Some(text) = attributes.get("RedrivePolicy") else {
        return Ok(None);
    };
    let redrive = attributes::parse_redrive(&ctx.sqs.config, text)?;
    if let Some(redrive) = &redrive {
        let refuse = |why: &str| {
            invalid(format!(
                "Value {text} for parameter RedrivePolicy is invalid. Reason: {why}"
            ))
        };
        if sluice_ops::is_own_dead_letter_queue(name, Some(&redrive.dead_letter_queue)) {
            return Err(refuse("A queue cannot be its own dead-letter queue."));
        }
        // A tenant admin's queue dead-letters within the tenant (the native API's rule).
        ctx.allow(Need::Admin, Some(&redrive.dead_letter_queue))
            .await?;
        let target = match ctx.app.ops.queue_get(&redrive.dead_letter_queue).await {
            Ok(target) => target,
            Err(error) if error.code == ErrorCode::QueueNotFound => {
                return Err(refuse("Dead letter target does not exist."));
            }
            Err(error) => return Err(from_ops(error)),
        };
        if attributes::is_fifo(&target.name, &target.config) != fifo {
            return Err(refuse(
                "Dead-letter queue must be same type of queue as the source.",
            ));
        }
        if !redrive_allowed(ctx, &target.config, name) {
            return Err(refuse(
                "Queue is not allowed as a dead-letter target by its RedriveAllowPolicy.",
            ));
        }
    }
    Ok(Some(redrive))
}

/// Does the dead-letter queue's `RedriveAllowPolicy` let `source` send to it?
fn redrive_allowed(ctx: &Ctx<'_>, dead_letter: &QueueConfig, source: &str) -> bool {
    let Some(policy) = attributes::kept(dead_letter, "RedriveAllowPolicy")
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
    else {
        return true;
    };
    match policy["redrivePermission"].as_str() {
        Some("denyAll") => false,
        Some("byQueue") => {
            let arn = names::queue_arn(&ctx.sqs.config, source);
            policy["sourceQueueArns"]
                .as_array()
                .is_some_and(|arns| arns.iter().any(|a| a.as_str() == Some(arn.as_str())))
        }
        _ => true,
    }
}

/// The queue, or `QueueDoesNotExist`.
pub async fn queue(ctx: &Ctx<'_>, name: &str) -> Result<QueueInfo, SqsError> {
    ctx.app.ops.queue_get(name).await.map_err(from_ops)
}

async fn put(ctx: &Ctx<'_>, name: &str, config: QueueConfig) -> Result<(), SqsError> {
    ctx.app
        .ops
        .queue_put_config(name, config)
        .await
        .map(|_| ())
        .map_err(from_ops)
}

/// Every queue the caller may read, by name.
async fn all_queues(ctx: &Ctx<'_>) -> Result<Vec<QueueInfo>, SqsError> {
    let who = crate::auth::ops_caller(ctx.caller.as_ref());
    ctx.app.ops.queue_list(who).await.map_err(from_ops)
}

/// One page of names sorted by name. Without `MaxResults`, up to 1000 and no `NextToken`, as
/// SQS answers; the token is the page's last name, encoded.
fn paginate(
    mut names: Vec<String>,
    max_results: Option<i64>,
    next_token: Option<String>,
) -> Result<(Vec<String>, Option<String>), SqsError> {
    names.sort();
    if let Some(max) = max_results
        && !(1..=1000).contains(&max)
    {
        return Err(invalid(format!(
            "Value {max} for parameter MaxResults is invalid. Reason: MaxResults must be an integer between 1 and 1000."
        )));
    }
    if let Some(token) = next_token.filter(|t| !t.is_empty()) {
        let after = URL_SAFE_NO_PAD
            .decode(&token)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| invalid(format!("Invalid NextToken value {token}.")))?;
        names.retain(|name| *name > after);
    }
    let limit = max_results.unwrap_or(1000) as usize;
    let more = names.len() > limit;
    names.truncate(limit);
    let token = (more && max_results.is_some())
        .then(|| names.last().map(|last| URL_SAFE_NO_PAD.encode(last)))
        .flatten();
    Ok((names, token))
}

fn url_of(ctx: &Ctx<'_>, name: &str, created: bool) -> Response {
    let result = QueueUrlResult {
        queue_url: ctx.queue_url(name),
    };
    if created {
        Response::CreateQueue(result)
    } else {
        Response::GetQueueUrl(result)
    }
}

fn invalid(message: impl Into<String>) -> SqsError {
    SqsError::new(ErrorKind::InvalidParameterValue, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_their_token_and_only_with_max_results() {
        let names: Vec<String> = (0..5).map(|i| format!("q{i}")).collect();
        let (page, token) = paginate(names.clone(), Some(2), None).unwrap();
        assert_eq!(page, ["q0", "q1"]);
        let (page, token) = paginate(names.clone(), Some(2), token).unwrap();
        assert_eq!(page, ["q2", "q3"]);
        let (page, token) = paginate(names.clone(), Some(2), token).unwrap();
        assert_eq!(
            (page.as_slice(), token),
            (["q4".to_owned()].as_slice(), None)
        );
        let (page, token) = paginate(names.clone(), None, None).unwrap();
        assert_eq!((page.len(), token), (5, None));
        assert!(paginate(names.clone(), Some(0), None).is_err());
        assert!(paginate(names, Some(1), Some("%%%".into())).is_err());
    }
}
