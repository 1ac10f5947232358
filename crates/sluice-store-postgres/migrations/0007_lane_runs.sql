-- Migration 7: lane runs (sluice_core::rules::lanes, issue 33).
--
-- A claim with `lane_runs` (SQS's FIFO receive) leases the members that follow a lane's head
-- with it, so a lane may have several leased members; a member of such a run that comes back
-- (a failure, a release, a lease that ran out) is ready or delayed while the others are still
-- out. The claim keeps the order (`CLAIM_SQL`: a lane member is taken only when no member of
-- its lane is leased and none before it is live), so the unique index that allowed one active
-- member per lane goes; an ordinary index serves the claim's look at a lane's active members.
DROP INDEX messages_one_active_per_lane;
CREATE INDEX messages_active_by_lane ON messages (queue_id, lane_key, seq)
    WHERE lane_key IS NOT NULL AND state IN ('ready', 'delayed', 'leased');
