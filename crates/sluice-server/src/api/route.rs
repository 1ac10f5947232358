//! The route table. Each module that serves requests lists its routes in a `routes()`
//! function, every handler with the access rule it is served under; the router, the OpenAPI
//! document and the authorization rules are all built from those lists, so a route is written
//! down once. A documented handler is registered with utoipa-axum's `routes!`, which takes its
//! method and path from its `#[utoipa::path]`; a route the document does not show (the
//! dashboard's pages, `/metrics`, the test clock) names its method and path itself.

use axum::Router;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, on};
use utoipa::openapi::OpenApi;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use super::AppState;
use crate::auth::{Need, Rule, Rules};

/// Routes, each with its access rule.
#[must_use]
pub struct Routes {
    /// The OpenAPI tag of the documented operations that name none: the module's name, as the
    /// derived document gave them before the table existed.
    tag: &'static str,
    router: OpenApiRouter<AppState>,
    rules: Vec<Rule>,
}

impl Routes {
    /// No routes yet; `tag` names the module in the OpenAPI document.
    pub fn new(tag: &'static str) -> Self {
        Self {
            tag,
            router: OpenApiRouter::default(),
            rules: Vec::new(),
        }
    }

    /// Serves a documented handler (what `routes!(handler)` gives) to callers who meet `need`.
    pub fn documented(mut self, need: Need, handler: UtoipaMethodRouter<AppState>) -> Self {
        let (schemas, mut paths, method_router) = handler;
        for (path, item) in &mut paths.paths {
            for (method, operation) in operations(item) {
                let tags = operation.tags.get_or_insert_with(Vec::new);
                if tags.is_empty() {
                    tags.push(self.tag.to_owned());
                }
                self.rules.push(Rule {
                    method,
                    path: path.clone(),
                    need,
                });
            }
        }
        self.router = self.router.routes((schemas, paths, method_router));
        self
    }

    /// Serves `handler` at `method path` to callers who meet `need`, without a place in the
    /// OpenAPI document.
    pub fn undocumented<H, T>(
        mut self,
        need: Need,
        method: Method,
        path: &'static str,
        handler: H,
    ) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        let filter = MethodFilter::try_from(method.clone())
            .unwrap_or_else(|_| panic!("{method} {path}: axum cannot route this method"));
        self.router = self.router.route(path, on(filter, handler));
        self.rules.push(Rule {
            method,
            path: path.to_owned(),
            need,
        });
        self
    }

    /// These routes and `other`'s.
    pub fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.rules.extend(other.rules);
        self
    }

    /// The router, the OpenAPI description of its documented routes, and every route's rule.
    pub fn split(self) -> (Router<AppState>, OpenApi, Rules) {
        let (router, document) = self.router.split_for_parts();
        (router, document, Rules::new(self.rules))
    }
}

/// The operations of a path item, by method.
fn operations(item: &mut PathItem) -> impl Iterator<Item = (Method, &mut Operation)> {
    [
        (Method::GET, &mut item.get),
        (Method::PUT, &mut item.put),
        (Method::POST, &mut item.post),
        (Method::DELETE, &mut item.delete),
        (Method::OPTIONS, &mut item.options),
        (Method::HEAD, &mut item.head),
        (Method::PATCH, &mut item.patch),
        (Method::TRACE, &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(method, operation)| operation.as_mut().map(|operation| (method, operation)))
}
