-- Migration 4: the idempotency hit counter (at the end), and when a message first becomes visible, for one enqueued with a delay (NULL means
-- its enqueue). Retention counts from there (sluice-core's `rules::retention`), so a long
-- delay does not eat into `max_age_ms`, and a retry's backoff, which moves `visible_at_ms`,
-- does not move it. Live rows never delivered still hold their delay in `visible_at_ms`.
ALTER TABLE messages ADD COLUMN first_visible_at_ms bigint;

UPDATE messages SET first_visible_at_ms = visible_at_ms
 WHERE state IN ('waiting', 'ready', 'delayed') AND attempts = 0
   AND visible_at_ms > enqueued_at_ms;

DROP INDEX messages_by_age;
CREATE INDEX messages_by_age ON messages
    (queue_id, coalesce(dead_last_seen_at_ms, first_visible_at_ms, enqueued_at_ms), seq)
    WHERE state IN ('waiting', 'ready', 'delayed', 'leased');

-- Idempotency hits (a message whose key was seen within the dedup window, stored once) per
-- queue and node, as the other counters.
ALTER TABLE queue_counters ADD COLUMN deduplicated bigint NOT NULL DEFAULT 0;
