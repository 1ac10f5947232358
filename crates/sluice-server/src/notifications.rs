//! How an alert's notification is written for its destination: the alert event's JSON
//! (`AlertEventOut`: webhooks, commands, consumers of the alert's queue) or a Slack message
//! (mrkdwn). `sluice_ops::alerts` decides what is notified and when; this renders it.

use sluice_ops::alerts::{Alert, AlertEvent, AlertKind, NotificationFormat};
use sluice_wire::{AlertEventOut, AlertSampleOut, format_rfc3339};

/// The server's notification bodies, with links to its dashboard when it knows its address.
pub(crate) struct Notifications {
    /// The dashboard's address (`https://host/ui/`), for links.
    pub(crate) dashboard: Option<String>,
}

impl NotificationFormat for Notifications {
    fn body(&self, alert: &Alert, event: &AlertEvent) -> String {
        let out = self.event_out(event);
        if alert.spec.destination.slack_url.is_some() {
            slack_message(&out).to_string()
        } else {
            serde_json::to_string(&out).unwrap_or_default()
        }
    }
}

impl Notifications {
    /// The wire form of a notification, with its summary for people.
    fn event_out(&self, event: &AlertEvent) -> AlertEventOut {
        let queue = &event.queue;
        let page = match event.kind {
            AlertKind::DeadLetters => "dlq",
            AlertKind::Depth | AlertKind::OldestReadyAge => "queue",
        };
        let counted = event.dead_letters.as_ref();
        let (value, threshold) = event.threshold.unzip();
        AlertEventOut {
            kind: event.kind.as_str().into(),
            status: if event.firing { "firing" } else { "resolved" }.into(),
            alert: event.alert.clone(),
            queue: queue.clone(),
            timestamp: format_rfc3339(event.at_ms),
            text: summary(event),
            count: counted.map(|counted| counted.count),
            count_capped: counted.is_some_and(|counted| counted.capped),
            since: counted.map(|counted| format_rfc3339(counted.since_ms)),
            until: counted.map(|counted| format_rfc3339(counted.until_ms)),
            dead_letter_queue: counted.map(|counted| counted.dead_letter_queue.clone()),
            sample: counted
                .map(|counted| {
                    counted
                        .sample
                        .iter()
                        .map(|sample| AlertSampleOut {
                            message_id: sample.message_id.to_string(),
                            error: sample.error.clone(),
                            attempts: sample.attempts,
                            dead_lettered_at: format_rfc3339(sample.dead_lettered_at_ms),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            value,
            threshold,
            dashboard_url: self
                .dashboard
                .as_ref()
                .map(|base| format!("{base}#/{page}/{queue}")),
        }
    }
}

/// A notification's one-paragraph summary for people.
fn summary(event: &AlertEvent) -> String {
    let queue = &event.queue;
    if let Some(counted) = &event.dead_letters {
        let capped = if counted.capped { "more than " } else { "" };
        let count = counted.count;
        return format!(
            "{capped}{count} message{} dead-lettered in queue {queue} since {}.{}",
            if count == 1 { " was" } else { "s were" },
            format_rfc3339(counted.since_ms),
            counted
                .sample
                .first()
                .and_then(|first| first.error.as_deref())
                .map(|error| format!(" Latest error: {error}"))
                .unwrap_or_default()
        );
    }
    let (value, limit) = event.threshold.unwrap_or_default();
    let (what, unit) = match event.kind {
        AlertKind::OldestReadyAge => ("has its oldest ready message at", " ms"),
        AlertKind::Depth | AlertKind::DeadLetters => ("holds", " messages"),
    };
    if event.firing {
        format!("Queue {queue} {what} {value}{unit}, over the alert's {limit}{unit}.")
    } else {
        format!("Queue {queue} {what} {value}{unit}, back within the alert's {limit}{unit}.")
    }
}

/// A Slack message (mrkdwn): the summary, the sample's errors, the dashboard link.
fn slack_message(event: &AlertEventOut) -> serde_json::Value {
    let icon = if event.status == "resolved" {
        ":white_check_mark:"
    } else {
        ":rotating_light:"
    };
    let mut text = format!(
        "{icon} *sluice alert {}*: {}",
        event.alert,
        escape(&event.text)
    );
    for sample in &event.sample {
        text.push_str(&format!(
            "\n• `{}`: {}",
            sample.message_id,
            escape(sample.error.as_deref().unwrap_or("(no error given)"))
        ));
    }
    if let Some(url) = &event.dashboard_url {
        text.push_str(&format!("\n<{url}|Open in the dashboard>"));
    }
    serde_json::json!({ "text": text })
}

/// Slack's three control characters, escaped so an error message cannot make links or
/// mentions.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ops::alerts::{AlertOrigin, AlertSample, DeadLettersCounted};
    use sluice_wire::{AlertDestinationSpec, AlertSpec};

    fn dead_letters_event(error: &str) -> AlertEvent {
        AlertEvent {
            kind: AlertKind::DeadLetters,
            firing: true,
            alert: "ops".into(),
            queue: "orders".into(),
            at_ms: 1_795_000_000_000,
            dead_letters: Some(DeadLettersCounted {
                count: 3,
                capped: false,
                since_ms: 1_794_999_000_000,
                until_ms: 1_794_999_999_000,
                dead_letter_queue: "orders.dlq".into(),
                sample: vec![AlertSample {
                    message_id: uuid::Uuid::nil(),
                    error: Some(error.into()),
                    attempts: 1,
                    dead_lettered_at_ms: 1_794_999_500_000,
                }],
            }),
            threshold: None,
        }
    }

    fn alert(destination: AlertDestinationSpec) -> Alert {
        let spec = AlertSpec {
            destination,
            ..AlertSpec::default()
        };
        Alert::compile("ops", spec, AlertOrigin::Api).expect("an alert")
    }

    #[test]
    fn slack_text_cannot_be_made_into_links_by_an_error() {
        let format = Notifications {
            dashboard: Some("http://127.0.0.1:1/ui/".into()),
        };
        let slack = alert(AlertDestinationSpec {
            slack_url: Some("https://x".into()),
            ..AlertDestinationSpec::default()
        });
        let body = format.body(&slack, &dead_letters_event("<!channel> & <http://evil|x>"));
        let body: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let text = body["text"].as_str().expect("a text").to_owned();
        assert!(
            text.contains("&lt;!channel&gt; &amp; &lt;http://evil|x&gt;"),
            "{text}"
        );
        assert!(text.ends_with("<http://127.0.0.1:1/ui/#/dlq/orders|Open in the dashboard>"));
    }

    #[test]
    fn a_webhook_gets_the_event_with_its_times_and_summary() {
        let format = Notifications { dashboard: None };
        let webhook = alert(AlertDestinationSpec {
            webhook_url: Some("https://x".into()),
            ..AlertDestinationSpec::default()
        });
        let body = format.body(&webhook, &dead_letters_event("boom"));
        let event: AlertEventOut = serde_json::from_str(&body).expect("an alert event");
        assert_eq!(event.kind, "dead_letters");
        assert_eq!(event.status, "firing");
        assert_eq!(event.timestamp, "2026-11-18T11:06:40.000Z");
        assert_eq!(event.count, Some(3));
        assert_eq!(event.dead_letter_queue.as_deref(), Some("orders.dlq"));
        assert_eq!(event.sample[0].error.as_deref(), Some("boom"));
        assert!(
            event
                .text
                .starts_with("3 messages were dead-lettered in queue orders since 2026-")
                && event.text.ends_with("Latest error: boom"),
            "{}",
            event.text
        );
        assert_eq!(event.dashboard_url, None);
    }
}
