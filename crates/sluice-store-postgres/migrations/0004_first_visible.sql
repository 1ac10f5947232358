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

-- As migration 3: the function's `SET search_path FROM CURRENT` takes pg_temp last.
SELECT set_config('search_path', current_setting('search_path') || ', pg_temp', true);

-- `enqueue_message` of migration 3, taking delays up to 100 years (sluice-core's
-- `limits::DELAY_MS_MAX`) and keeping when a delayed message first becomes visible.
CREATE OR REPLACE FUNCTION enqueue_message(
    queue_name     text,
    body_bytes     bytea,
    body_kind      smallint,                  -- 0 JSON, 1 bytes (sluice-core's BodyKind)
    dedup_id       text,
    msg_key        text,
    msg_priority   integer,
    msg_delay_ms   bigint,
    msg_headers    jsonb,
    schema_checked boolean)
RETURNS TABLE (message_id uuid, created boolean)
LANGUAGE plpgsql VOLATILE
SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_column
DECLARE
    q            queues%ROWTYPE;
    now_ms       bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    new_seq      bigint;
    new_id       uuid;
    lane         text;
    lane_members bigint := 0;
    live         bigint;
BEGIN
    SELECT * INTO q FROM queues WHERE name = queue_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'sluice: queue "%" does not exist', queue_name USING ERRCODE = 'SLQ01';
    END IF;
    -- The checks, in the order the HTTP API makes them (sluice-ops enqueue.rs).
    IF q.has_schema AND body_kind <> 0 THEN
        RAISE EXCEPTION 'sluice: queue "%" has a JSON Schema: give a JSON body (sluice.enqueue), not bytes', queue_name USING ERRCODE = 'SLQ03';
    END IF;
    IF q.has_schema AND NOT schema_checked THEN
        RAISE EXCEPTION 'sluice: queue "%" has a JSON Schema, which sluice.enqueue cannot check; check the body and pass schema_checked => true', queue_name USING ERRCODE = 'SLQ03';
    END IF;
    IF body_bytes IS NULL THEN
        RAISE EXCEPTION 'sluice: the body must not be NULL' USING ERRCODE = 'SLQ03';
    END IF;
    IF octet_length(body_bytes) > q.max_message_bytes THEN
        RAISE EXCEPTION 'sluice: body is % bytes; queue "%" accepts at most %', octet_length(body_bytes), queue_name, q.max_message_bytes USING ERRCODE = 'SLQ03';
    END IF;
    IF octet_length(dedup_id) NOT BETWEEN 1 AND 1024 OR octet_length(msg_key) NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'sluice: id and key must be 1 to 1024 bytes long' USING ERRCODE = 'SLQ03';
    END IF;
    IF msg_priority IS NULL OR msg_delay_ms IS NULL OR msg_delay_ms NOT BETWEEN 0 AND 3153600000000 THEN
        RAISE EXCEPTION 'sluice: delay_ms must be between 0 and 3153600000000 (100 years), and priority an integer' USING ERRCODE = 'SLQ03';
    END IF;
    IF msg_headers IS NOT NULL AND (jsonb_typeof(msg_headers) <> 'object'
        OR (SELECT count(*) > 64 OR coalesce(bool_or(jsonb_typeof(v) <> 'string'), false)
                   OR coalesce(sum(octet_length(k) + octet_length(v #>> '{}')), 0) > 65536
            FROM jsonb_each(msg_headers) AS h(k, v))) THEN
        RAISE EXCEPTION 'sluice: headers must be an object of at most 64 strings and 65536 bytes' USING ERRCODE = 'SLQ03';
    END IF;
    IF msg_headers = '{}'::jsonb THEN
        msg_headers := NULL;                    -- no headers are stored as none, as the nodes do
    END IF;
    IF q.max_depth IS NOT NULL THEN
        -- Without the nodes' admission lock: an application transaction may last long and must
        -- not hold up the queue's producers meanwhile (so concurrent transactions may overshoot).
        SELECT count(*) INTO live FROM (
            SELECT 1 FROM messages
            WHERE queue_id = q.id AND state IN ('waiting', 'ready', 'delayed', 'leased')
            LIMIT q.max_depth) AS held;
        IF live >= q.max_depth THEN
            RAISE EXCEPTION 'sluice: queue "%" is full (max_depth %)', queue_name, q.max_depth USING ERRCODE = 'SLQ02';
        END IF;
    END IF;
    lane := CASE q.ordering WHEN 'fifo' THEN '' WHEN 'per_key' THEN msg_key END;  -- rules::lanes::lane_key
    IF lane IS NOT NULL THEN
        -- The nodes' lock order (§2.0): a lane before an idempotency key, so an application's
        -- transaction and a node's enqueue group cannot deadlock over one key.
        PERFORM 1 FROM lanes WHERE queue_id = q.id AND lane_key = lane FOR UPDATE;
    END IF;
    new_seq := nextval('message_seq');
    new_id := message_id(new_seq, now_ms);
    IF dedup_id IS NOT NULL THEN
        INSERT INTO idempotency AS i (queue_id, key, message_id, expires_at_ms)
        VALUES (q.id, dedup_id, new_id, now_ms + q.dedup_window_ms)
        ON CONFLICT (queue_id, key) DO UPDATE
            SET message_id = excluded.message_id, expires_at_ms = excluded.expires_at_ms,
                acked_at_ms = NULL, result = NULL
            WHERE i.expires_at_ms <= now_ms;
        IF NOT FOUND THEN                       -- a duplicate within the window
            RETURN QUERY SELECT i.message_id, false FROM idempotency i
                         WHERE i.queue_id = q.id AND i.key = dedup_id;
            RETURN;
        END IF;
    END IF;
    IF lane IS NOT NULL THEN
        INSERT INTO lanes AS l (queue_id, lane_key, members) VALUES (q.id, lane, 1)
        ON CONFLICT (queue_id, lane_key) DO UPDATE SET members = l.members + 1
        RETURNING l.members INTO lane_members;
    END IF;
    INSERT INTO messages (seq, id, queue_id, state, priority, lane_key, msg_key, idempotency_key,
                          enqueued_at_ms, visible_at_ms, body_kind, first_visible_at_ms)
    VALUES (new_seq, new_id, q.id,
            CASE WHEN lane_members > 1 THEN 'waiting'::message_state
                 WHEN msg_delay_ms = 0 THEN 'ready' ELSE 'delayed' END,
            msg_priority, lane, msg_key, dedup_id,
            now_ms, now_ms + msg_delay_ms, body_kind,
            CASE WHEN msg_delay_ms > 0 THEN now_ms + msg_delay_ms END);
    INSERT INTO payloads (seq, body, headers) VALUES (new_seq, body_bytes, msg_headers);
    INSERT INTO queue_counter_deltas (queue_id, enqueued) VALUES (q.id, 1);
    PERFORM pg_notify(current_schema() || '.wake', queue_name);
    RETURN QUERY SELECT new_id, true;
END
$fn$;
