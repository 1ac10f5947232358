-- Migration 6: acked messages kept with their body (a queue's `keep_acked_ms`, issue 17).
--
-- An ack in such a queue keeps the message's row, also with `acked_retention_ms = 0`, and its
-- `payloads` row, and sets `kept_until_ms` (the ack time plus the queue's `keep_acked_ms` then).
-- Reads compare it with their own time, so a keep ends exactly; the leader's cleanup later
-- deletes the payload and clears the column, and the row then follows the usual retention of
-- final records. Only acked rows are ever kept.
ALTER TABLE messages ADD COLUMN kept_until_ms bigint;

-- The cleanup of final records walks only rows no longer kept.
DROP INDEX messages_finished;
CREATE INDEX messages_finished ON messages (finished_at_ms)
    WHERE finished_at_ms IS NOT NULL AND kept_until_ms IS NULL;

-- Browsing a queue's kept messages, newest ack first (read backwards).
CREATE INDEX messages_kept ON messages (queue_id, finished_at_ms, seq)
    WHERE kept_until_ms IS NOT NULL;
-- Searching them by ordering key and by idempotency key.
CREATE INDEX messages_kept_key ON messages (queue_id, msg_key, finished_at_ms, seq)
    WHERE kept_until_ms IS NOT NULL AND msg_key IS NOT NULL;
CREATE INDEX messages_kept_idempotency ON messages (queue_id, idempotency_key, finished_at_ms, seq)
    WHERE kept_until_ms IS NOT NULL AND idempotency_key IS NOT NULL;
-- The cleanup of keeps that ended.
CREATE INDEX messages_kept_until ON messages (kept_until_ms) WHERE kept_until_ms IS NOT NULL;
