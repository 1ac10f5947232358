-- Migration 1, continued: the functions of docs/design/postgres-store.md §1.5, in the same
-- transaction as 0001_initial.sql.

-- The id of message `seq` enqueued at `at_ms`, the layout of the SQLite store's ids.rs: 48 bits of
-- ms, version 7, rand_a 0, variant 10, seq's low 62 bits. Checked byte for byte against ids::encode.
CREATE FUNCTION message_id(seq bigint, at_ms bigint) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT encode(
        substring(int8send(at_ms & 281474976710655) FROM 3 FOR 6)
        || '\x7000'::bytea
        || set_byte(int8send(seq & 4611686018427387903), 0,
                    128 | get_byte(int8send(seq & 4611686018427387903), 0)),
        'hex')::uuid
$$;

-- A receipt token: 32 strong random bits (gen_random_uuid draws from pg_strong_random; its first
-- eight hex digits are all random bits).
CREATE FUNCTION lease_token() RETURNS integer
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT ('x' || left(gen_random_uuid()::text, 8))::bit(32)::integer
$$;
