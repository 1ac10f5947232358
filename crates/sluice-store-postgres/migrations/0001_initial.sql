-- Migration 1: the tables and indexes of docs/design/postgres-store.md §1.2 and §1.3, as the
-- spec writes them. Run by migrate.rs in one transaction with its schema_migrations row, with
-- search_path set to the store's schema, so no name here is qualified.

CREATE TABLE schema_migrations (
    version      integer PRIMARY KEY,
    applied_at   timestamptz NOT NULL DEFAULT now(),
    applied_by   text NOT NULL                      -- "sluice <version> <node name>"
);

-- Queue definitions. `config` is the stored form the SQLite store writes (StoredQueueConfig, moved to
-- sluice-core in step 1); the columns after it copy what SQL must read without parsing JSON.
CREATE TABLE queues (
    id                 integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name               text NOT NULL UNIQUE,
    config             jsonb NOT NULL,
    config_version     bigint NOT NULL DEFAULT 1,   -- bumped by every change; node caches compare it
    ordering           text NOT NULL CHECK (ordering IN ('unordered', 'fifo', 'per_key')),
    dead_letter_queue  text,
    max_message_bytes  integer NOT NULL,
    max_depth          bigint,
    dedup_window_ms    bigint NOT NULL,
    has_schema         boolean NOT NULL,
    created_at_ms      bigint NOT NULL
);
CREATE INDEX queues_by_dead_letter_queue ON queues (dead_letter_queue) WHERE dead_letter_queue IS NOT NULL;

-- What changes while a queue runs, apart from its definition: a small row, locked by claims of
-- paced queues and by admissions to bounded ones, updated in place (HOT: no indexed column changes).
CREATE TABLE queue_state (
    queue_id              integer PRIMARY KEY,
    is_paused             boolean NOT NULL DEFAULT false,
    is_push_paused        boolean NOT NULL DEFAULT false,
    bucket_tokens         double precision,          -- TokenBucket.tokens; NULL: full at first use
    bucket_updated_at_ms  bigint                     -- TokenBucket.updated_at_ms
) WITH (fillfactor = 50);

CREATE TYPE message_state AS ENUM (
    'waiting',                                  -- behind the active member of its lane
    'ready', 'delayed', 'leased',               -- the active member / an unordered message
    'acked', 'expired', 'cancelled', 'purged', 'replayed', 'deleted');   -- final: kept as records

CREATE SEQUENCE message_seq AS bigint;          -- global enqueue order; also inside every id

CREATE TABLE messages (
    seq                    bigint PRIMARY KEY,
    id                     uuid NOT NULL,           -- message_id(seq, enqueued_at_ms): a lookup decodes seq
    queue_id               integer NOT NULL,        -- no foreign key: every insert would share-lock the queue row
    state                  message_state NOT NULL,
    priority               integer NOT NULL,
    lane_key               text,                    -- rules::lanes::lane_key: NULL none, '' fifo, the key per_key
    msg_key                text,
    idempotency_key        text,
    enqueued_at_ms         bigint NOT NULL,
    visible_at_ms          bigint NOT NULL,
    attempts               integer NOT NULL DEFAULT 0,
    lease_number           integer NOT NULL DEFAULT 0,   -- leases ever granted; part of the receipt
    lease_token            integer,                 -- the receipt's random u32 (as i32); kept after expiry
                                                    -- and give-back (the receipt still acks), NULL after nack
    lease_expires_at_ms    bigint,                  -- set while leased
    leased_at_ms           bigint,
    first_received_at_ms   bigint,
    last_error             text,
    body                   bytea,                   -- NULL once final, except replayed
    body_kind              smallint NOT NULL,       -- 0 JSON, 1 bytes (body_kind.rs)
    headers                jsonb,
    result                 text,                    -- the ack's result memo
    finished_at_ms         bigint,                  -- time of the final state (acked_at for acks)
    replayed_as            uuid,
    dead_source_queue      text,
    dead_last_error        text,
    dead_attempts          integer,
    dead_first_seen_at_ms  bigint,
    dead_last_seen_at_ms   bigint,
    failures               jsonb,                   -- [{attempt, at, error, dead_lettered}], as SQLite's
    deliveries             jsonb                    -- push delivery log, the last N attempts
) WITH (toast_tuple_target = 256, fillfactor = 90,
        autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_insert_scale_factor = 0.01,
        autovacuum_vacuum_cost_delay = 0);
ALTER TABLE messages ALTER COLUMN body SET STORAGE EXTERNAL;

CREATE TABLE lanes (
    queue_id  integer NOT NULL,
    lane_key  text NOT NULL,
    members   bigint NOT NULL CHECK (members >= 0),   -- live messages of the lane: active + waiting
    PRIMARY KEY (queue_id, lane_key)
);

CREATE TABLE idempotency (
    queue_id       integer NOT NULL,
    key            text NOT NULL,
    message_id     uuid NOT NULL,
    expires_at_ms  bigint NOT NULL,                 -- first enqueue + dedup_window_ms
    acked_at_ms    bigint,                          -- remembered for the whole window, past the record
    result         text,
    PRIMARY KEY (queue_id, key)
);

CREATE TABLE webhooks (
    name           text PRIMARY KEY,
    spec           text NOT NULL,                   -- opaque JSON to the store, as today
    version        bigint NOT NULL DEFAULT 1,
    created_at_ms  bigint NOT NULL
);

CREATE TABLE sessions (                             -- dashboard sessions (§4.4)
    id_digest      bytea PRIMARY KEY,               -- SHA-256 of the cookie's id; the id is not kept
    token_digest   bytea NOT NULL,
    created_at_ms  bigint NOT NULL,
    expires_at_ms  bigint NOT NULL
);

CREATE TABLE nodes (                                -- who is serving; leader and counters (§4)
    node_id        uuid PRIMARY KEY,                -- random per process start
    name           text NOT NULL,                   -- [store] node_name, default host:port
    started_at_ms  bigint NOT NULL,
    seen_at_ms     bigint NOT NULL,
    is_leader      boolean NOT NULL DEFAULT false
);

CREATE TABLE queue_counters (                       -- Counters per node, flushed every second (§2.11)
    queue_id integer NOT NULL, node_id uuid NOT NULL,
    enqueued bigint NOT NULL DEFAULT 0, delivered bigint NOT NULL DEFAULT 0, acked bigint NOT NULL DEFAULT 0,
    nacked bigint NOT NULL DEFAULT 0, dead_lettered bigint NOT NULL DEFAULT 0, lease_expired bigint NOT NULL DEFAULT 0,
    expired bigint NOT NULL DEFAULT 0, rejected bigint NOT NULL DEFAULT 0, cancelled bigint NOT NULL DEFAULT 0,
    purged bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, node_id)
);
CREATE TABLE queue_counter_deltas (queue_id integer NOT NULL, enqueued bigint NOT NULL);  -- sluice.enqueue's, append-only

CREATE TABLE queue_stats (                          -- the leader's last count of every queue (§2.11)
    queue_id integer PRIMARY KEY,
    ready bigint NOT NULL, waiting bigint NOT NULL, delayed bigint NOT NULL, in_flight bigint NOT NULL,
    oldest_ready_enqueued_at_ms bigint,
    counted_at_ms bigint NOT NULL
);

CREATE INDEX messages_ready   ON messages (queue_id, priority DESC, seq) WHERE state = 'ready';
CREATE INDEX messages_delayed ON messages (queue_id, visible_at_ms, seq) WHERE state = 'delayed';
CREATE INDEX messages_leased  ON messages (queue_id, lease_expires_at_ms, seq) WHERE state = 'leased';
CREATE INDEX messages_waiting ON messages (queue_id, lane_key, seq) WHERE state = 'waiting';
CREATE UNIQUE INDEX messages_one_active_per_lane ON messages (queue_id, lane_key)
    WHERE lane_key IS NOT NULL AND state IN ('ready', 'delayed', 'leased');
CREATE INDEX messages_by_age  ON messages (queue_id, coalesce(dead_last_seen_at_ms, enqueued_at_ms), seq)
    WHERE state IN ('waiting', 'ready', 'delayed', 'leased');
CREATE INDEX messages_finished ON messages (finished_at_ms) WHERE finished_at_ms IS NOT NULL;
CREATE INDEX idempotency_by_expiry ON idempotency (expires_at_ms);
CREATE INDEX sessions_by_token ON sessions (token_digest, created_at_ms);
CREATE INDEX sessions_by_expiry ON sessions (expires_at_ms);
