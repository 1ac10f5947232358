-- Schedules (issue 17): the definition as its JSON spec (opaque to the store, as webhooks'),
-- the progress as sluice_core::stored::ScheduleState's JSON, and the last run done in a
-- column of its own: a pass advances a schedule only from the run it read, so two nodes
-- passing at once record one pass (the runs' idempotency keys keep them from enqueueing twice).
CREATE TABLE schedules (
    name           text PRIMARY KEY,
    spec           text NOT NULL,
    state          text NOT NULL,
    last_run_ms    bigint NOT NULL,
    created_at_ms  bigint NOT NULL
);

-- Definitions of other kinds (topics): the kind, the name and the spec as given (opaque JSON to
-- the store). Each change is announced on <schema>.config as '<kind>:<name>'.
CREATE TABLE definitions (
    kind           text NOT NULL,
    name           text NOT NULL,
    spec           text NOT NULL,
    created_at_ms  bigint NOT NULL,
    PRIMARY KEY (kind, name)
);
