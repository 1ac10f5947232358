//! What the OpenAPI document says about every operation alike: the error answers any route
//! can give (a request that cannot be read, access control, a body over the size limit, a
//! store that refuses work) and the bearer token. Each handler's annotation lists only the
//! answers that are its own; [`SharedAnswers`] adds these, so no operation forgets one.

use axum::http::Method;
use utoipa::Modify;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr};

use crate::auth::{Need, Rules};

/// Name of the bearer token's security scheme.
const BEARER: &str = "bearer";

/// An error answer every operation of some kind can give: its status, the name of its shared
/// response in `components.responses`, and what it means.
struct SharedAnswer {
    status: &'static str,
    name: &'static str,
    description: &'static str,
}

const UNREADABLE: SharedAnswer = SharedAnswer {
    status: "400",
    name: "Unreadable",
    description: "The request could not be read: `malformed_path` (a path segment that is not \
        UTF-8), `malformed_query` (a query parameter of the wrong type) or `malformed_json` \
        (a body that is not JSON of the expected shape).",
};
const UNAUTHORIZED: SharedAnswer = SharedAnswer {
    status: "401",
    name: "Unauthorized",
    description: "`unauthorized`: access control is on and the request carries no valid token \
        (`Authorization: Bearer <token>`).",
};
const FORBIDDEN: SharedAnswer = SharedAnswer {
    status: "403",
    name: "Forbidden",
    description: "`forbidden`: the token may not do this on this queue, or a cross-site \
        request was refused.",
};
const TOO_LARGE: SharedAnswer = SharedAnswer {
    status: "413",
    name: "TooLarge",
    description: "`too_large`: the request body is larger than 16 MiB.",
};
const NOT_JSON: SharedAnswer = SharedAnswer {
    status: "415",
    name: "NotJson",
    description: "The body was not sent with a JSON content type (`application/json`).",
};
const UNAVAILABLE: SharedAnswer = SharedAnswer {
    status: "503",
    name: "Unavailable",
    description: "`unavailable`: the store refuses work for now (the disk is full, a sync \
        failed, or the server is shutting down); the message says why.",
};

/// Adds the answers and the security requirement every operation shares, judging each by the
/// access rule of its route.
pub struct SharedAnswers<'a>(pub &'a Rules);

impl Modify for SharedAnswers<'_> {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for answer in [
            &UNREADABLE,
            &UNAUTHORIZED,
            &FORBIDDEN,
            &TOO_LARGE,
            &NOT_JSON,
            &UNAVAILABLE,
        ] {
            let content = ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build();
            let response = ResponseBuilder::new()
                .description(answer.description)
                .content("application/json", content)
                .build();
            components
                .responses
                .insert(answer.name.into(), response.into());
        }
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API token, when access control is on (`[[auth.tokens]]`); in the \
                         default open mode no token is needed.",
                    ))
                    .build(),
            ),
        );
        for (path, item) in openapi.paths.paths.iter_mut() {
            for (method, operation) in [
                (Method::GET, &mut item.get),
                (Method::PUT, &mut item.put),
                (Method::POST, &mut item.post),
                (Method::DELETE, &mut item.delete),
            ] {
                if let Some(operation) = operation {
                    add_shared(self.0.need(&method, path), path, operation);
                }
            }
        }
    }
}

/// The shared answers one operation can give, judged by what it takes and who may call it.
fn add_shared(need: Option<Need>, path: &str, operation: &mut Operation) {
    let parameters = operation.parameters.as_deref().unwrap_or_default();
    let takes_parameters = parameters
        .iter()
        .any(|p| matches!(p.parameter_in, ParameterIn::Path | ParameterIn::Query));
    let takes_body = operation.request_body.is_some();
    // Webhook senders post whatever their service signs, in any content type.
    let takes_json = takes_body && path != "/hooks/{name}";
    let guarded = need.is_some_and(|need| need != Need::Public);
    // These answer without the store: nothing there can be unavailable.
    let uses_store = !matches!(path, "/healthz" | "/v1/openapi.json");

    let mut add = |answer: &SharedAnswer| {
        operation
            .responses
            .responses
            .entry(answer.status.into())
            .or_insert_with(|| {
                RefOr::Ref(Ref::new(format!("#/components/responses/{}", answer.name)))
            });
    };
    if takes_parameters || takes_body {
        add(&UNREADABLE);
    }
    if guarded {
        add(&UNAUTHORIZED);
        add(&FORBIDDEN);
    }
    if takes_body {
        add(&TOO_LARGE);
    }
    if takes_json {
        add(&NOT_JSON);
    }
    if uses_store {
        add(&UNAVAILABLE);
    }
    if guarded {
        // No token in open mode, a bearer token with access control on.
        operation.security = Some(vec![
            SecurityRequirement::default(),
            SecurityRequirement::new(BEARER, Vec::<String>::new()),
        ]);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use serde_json::{Value, json};

    use crate::api::document as api_document;

    /// The OpenAPI Initiative's JSON Schema of OpenAPI 3.1 documents
    /// (<https://spec.openapis.org/oas/3.1/schema/2022-10-07>, Apache-2.0), kept here so the
    /// test needs no network.
    const OAS_3_1_SCHEMA: &str = include_str!("oas-3.1-schema.json");

    const METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];

    fn document() -> Value {
        serde_json::to_value(api_document()).unwrap()
    }

    /// Every operation: its path, method and object.
    fn operations(doc: &Value) -> Vec<(String, &'static str, &Value)> {
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in METHODS {
                if let Some(operation) = item.get(method) {
                    out.push((path.clone(), method, operation));
                }
            }
        }
        out
    }

    /// What a `$ref` inside the document points to.
    fn resolve<'a>(doc: &'a Value, reference: &str) -> &'a Value {
        let pointer = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{reference} points outside the document"));
        doc.pointer(pointer)
            .unwrap_or_else(|| panic!("{reference} points to nothing"))
    }

    fn follow<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => follow(doc, resolve(doc, reference)),
            None => value,
        }
    }

    /// A validator of one component schema, with the document's other components in reach.
    fn validator(doc: &Value, schema: &str) -> jsonschema::Validator {
        let root = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": format!("#/components/schemas/{schema}"),
            "components": doc["components"],
        });
        jsonschema::validator_for(&root).unwrap()
    }

    fn errors(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
        validator
            .iter_errors(instance)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect()
    }

    /// The document validates against the OpenAPI 3.1 schema, and every schema in it is a
    /// valid JSON Schema 2020-12 schema (the dialect of OpenAPI 3.1).
    #[test]
    fn the_document_is_valid_openapi_3_1() {
        let doc = document();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1."));
        let meta: Value = serde_json::from_str(OAS_3_1_SCHEMA).unwrap();
        let validator = jsonschema::validator_for(&meta).unwrap();
        let found = errors(&validator, &doc);
        assert!(found.is_empty(), "not valid OpenAPI 3.1: {found:#?}");
        for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
            assert!(
                jsonschema::meta::validate(schema).is_ok(),
                "schema {name} is not a valid JSON Schema: {schema}"
            );
        }
    }

    /// Clients generated from the document name methods by operationId: each must be there and
    /// unique.
    #[test]
    fn operation_ids_are_unique() {
        let doc = document();
        let mut seen: HashMap<String, String> = HashMap::new();
        for (path, method, operation) in operations(&doc) {
            let id = operation["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has no operationId"))
                .to_owned();
            let here = format!("{method} {path}");
            if let Some(first) = seen.insert(id.clone(), here.clone()) {
                panic!("operationId {id:?} is used by {first} and {here}");
            }
        }
    }

    /// Path parameters are exactly the template's names, required; everything else is in the
    /// query; no parameter is declared twice.
    #[test]
    fn parameters_match_the_path_templates() {
        let doc = document();
        for (path, method, operation) in operations(&doc) {
            let in_template: BTreeSet<&str> = path
                .split('/')
                .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            let mut declared_in_path = BTreeSet::new();
            let mut declared = BTreeSet::new();
            let parameters = operation["parameters"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for parameter in &parameters {
                let parameter = follow(&doc, parameter);
                let name = parameter["name"].as_str().unwrap();
                let location = parameter["in"].as_str().unwrap();
                assert!(
                    declared.insert((name.to_owned(), location.to_owned())),
                    "{method} {path}: parameter {name} in {location} is declared twice"
                );
                match location {
                    "path" => {
                        assert!(
                            in_template.contains(name),
                            "{method} {path}: path parameter {name} is not in the path \
                             (a query parameter declared in path?)"
                        );
                        assert_eq!(parameter["required"], true, "{method} {path}: {name}");
                        declared_in_path.insert(name);
                    }
                    "query" => {}
                    other => panic!("{method} {path}: parameter {name} in {other}"),
                }
            }
            assert_eq!(
                declared_in_path, in_template,
                "{method} {path}: every path parameter must be declared"
            );
        }
    }

    /// Every `$ref` points into the document.
    #[test]
    fn every_reference_resolves() {
        fn walk(doc: &Value, value: &Value) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(reference)) = map.get("$ref") {
                        resolve(doc, reference);
                    }
                    map.values().for_each(|v| walk(doc, v));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(doc, v)),
                _ => {}
            }
        }
        let doc = document();
        walk(&doc, &doc);
    }

    /// Every answer of every operation says what it holds: errors the `ErrorBody`, and every
    /// operation that reads a request or the store lists the errors that can bring.
    #[test]
    fn every_answer_has_a_described_body() {
        let doc = document();
        for (path, method, operation) in operations(&doc) {
            let responses = operation["responses"].as_object().unwrap();
            for (status, response) in responses {
                let response = follow(&doc, response);
                let schema = &response["content"]["application/json"]["schema"];
                assert!(
                    schema.is_object(),
                    "{method} {path} {status}: no application/json schema"
                );
                let is_error = !status.starts_with('2');
                if is_error && path != "/readyz" {
                    assert_eq!(
                        schema["$ref"], "#/components/schemas/ErrorBody",
                        "{method} {path} {status}"
                    );
                }
            }
            let reads_input = operation.get("requestBody").is_some()
                || operation["parameters"]
                    .as_array()
                    .is_some_and(|p| !p.is_empty());
            if reads_input {
                assert!(responses.contains_key("400"), "{method} {path}: no 400");
            }
            if operation.get("requestBody").is_some() {
                assert!(responses.contains_key("413"), "{method} {path}: no 413");
            }
            if !matches!(path.as_str(), "/healthz" | "/v1/openapi.json") {
                assert!(responses.contains_key("503"), "{method} {path}: no 503");
            }
            // What a path names may not exist (a queue or an alert is created by its PUT,
            // and an alert's PUT names nothing else that must exist).
            let names_something = path.contains('{');
            let creates = method == "put"
                && matches!(path.as_str(), "/v1/queues/{queue}" | "/v1/alerts/{name}");
            if names_something && !creates {
                assert!(responses.contains_key("404"), "{method} {path}: no 404");
            }
        }
    }

    /// A JSON body is any JSON value, as the README shows (`"body": "a"`), and the answers that
    /// carry one validate too; an enqueue is one message or a batch, and so is its answer.
    #[test]
    fn bodies_of_any_json_value_validate_and_batches_are_described() {
        let doc = document();
        let enqueue = &doc["paths"]["/v1/queues/{queue}/messages"]["post"];
        let request = follow(
            &doc,
            &enqueue["requestBody"]["content"]["application/json"]["schema"],
        );
        let answer = &enqueue["responses"]["200"]["content"]["application/json"]["schema"];
        let request_name = request_name(enqueue);
        let answer_name = answer["$ref"].as_str().unwrap().rsplit('/').next().unwrap();
        let _ = request;
        let cases = [
            (request_name.as_str(), json!({"body": "a"})),
            (request_name.as_str(), json!({"body": null})),
            (
                request_name.as_str(),
                json!({"body": [1, {"x": true}], "priority": 2}),
            ),
            (request_name.as_str(), json!({"body_base64": "AA=="})),
            (
                request_name.as_str(),
                json!({"messages": [{"body": 1}, {"body_base64": "AA=="}]}),
            ),
            (
                answer_name,
                json!({"message_id": uuid::Uuid::nil(), "created": true, "position": 0}),
            ),
            (
                answer_name,
                json!({"message_id": uuid::Uuid::nil(), "created": false, "state": "acked",
                       "result": "done"}),
            ),
            (
                answer_name,
                json!({"results": [{"message_id": uuid::Uuid::nil(), "created": true}]}),
            ),
            (
                "ReceivedMessage",
                json!({"message_id": uuid::Uuid::nil(), "receipt": "r", "body": "a",
                       "headers": {}, "priority": 0, "attempts": 1,
                       "enqueued_at": "2026-01-01T00:00:00Z",
                       "first_received_at": "2026-01-01T00:00:00Z",
                       "lease_expires_at": "2026-01-01T00:00:30Z"}),
            ),
            (
                "MessageBodyOut",
                json!({"message_id": uuid::Uuid::nil(), "queue": "q", "state": "ready",
                       "available": true, "body": 3}),
            ),
            ("AckIn", json!({"receipt": "r", "result": [1]})),
            ("QueueSpec", json!({"schema": true})),
        ];
        for (schema, instance) in cases {
            let found = errors(&validator(&doc, schema), &instance);
            assert!(found.is_empty(), "{instance} is not a {schema}: {found:#?}");
        }
        let batch = validator(&doc, &request_name);
        assert!(!batch.is_valid(&json!({"messages": [{"body": 1}], "body": 2})));
        assert!(!batch.is_valid(&json!({"colour": "red"})));
    }

    fn request_name(operation: &Value) -> String {
        operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned()
    }
}
