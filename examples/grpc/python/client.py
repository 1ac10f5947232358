#!/usr/bin/env python3
"""An example client of sluice's gRPC API (proto/sluice/v1/sluice.proto), with grpcio.

    python client.py HOST:PORT

It creates a queue, publishes 1,000 messages on one Publish stream with many in flight,
consumes them on one Pull stream (granting credit as messages arrive, acking each on the same
stream), shows how a refused call reports its sluice error code, checks that the queue is
empty, deletes it and prints a summary. Every step is checked: the exit code is 1 when any
check fails. With access control on, set SLUICE_TOKEN to a token that may manage queues,
produce and consume (an admin token, say).

The stubs come from generate.sh (README.md): in generated/ beside this file, or on PYTHONPATH.
"""

import argparse
import json
import os
import queue
import sys
import threading
import time
import uuid

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "generated"))
from sluice.v1 import sluice_pb2 as pb  # noqa: E402
from sluice.v1 import sluice_pb2_grpc as pb_grpc  # noqa: E402

MESSAGES = 1_000
# How many messages the server may send the Pull stream before we grant more.
CREDIT = 100
# The longest a stream may take before the call is given up (DEADLINE_EXCEEDED).
STREAM_DEADLINE_S = 60.0
UNARY_DEADLINE_S = 10.0


class CheckFailed(Exception):
    """A result that is not what the API promises."""


def check(condition, what):
    if not condition:
        raise CheckFailed(what)


def auth_metadata():
    """The metadata every call carries: the bearer token, when access control is on."""
    token = os.environ.get("SLUICE_TOKEN")
    return [("authorization", f"Bearer {token}")] if token else []


def create_queue(stub, metadata, name):
    settings = {"visibility_timeout_ms": 60_000}
    answer = stub.PutQueue(
        pb.PutQueueRequest(name=name, settings_json=json.dumps(settings)),
        metadata=metadata,
        timeout=UNARY_DEADLINE_S,
    )
    check(answer.created, f"PutQueue {name}: created is false (the queue existed)")
    check(answer.queue.name == name, f"PutQueue answered queue {answer.queue.name!r}")
    print(f"created queue {name}")


def publish(stub, metadata, name):
    """Publishes MESSAGES messages on one stream; returns {seq: message_id}.

    grpcio reads the request generator on a thread of its own, so the requests go out as fast
    as the server takes them (HTTP/2 flow control holds the generator when the server is
    busy) while this thread reads the answers, which come in any order.
    """
    sent = 0
    lock = threading.Lock()

    def requests():
        nonlocal sent
        for seq in range(MESSAGES):
            body = json.dumps({"n": seq, "text": f"message {seq}"})
            yield pb.PublishRequest(
                seq=seq,
                queue=name,
                message=pb.OutgoingMessage(json=body, headers={"example": "grpc-python"}),
            )
            with lock:
                sent += 1

    started = time.monotonic()
    answers = stub.Publish(requests(), metadata=metadata, timeout=STREAM_DEADLINE_S)
    message_ids = {}
    most_in_flight = 0
    for answer in answers:
        with lock:
            most_in_flight = max(most_in_flight, sent - len(message_ids))
        check(0 <= answer.seq < MESSAGES, f"Publish answered unknown seq {answer.seq}")
        check(answer.seq not in message_ids, f"Publish answered seq {answer.seq} twice")
        outcome = answer.WhichOneof("outcome")
        if outcome == "error":
            error = answer.error
            raise CheckFailed(f"seq {answer.seq} refused: {error.code}: {error.message}")
        check(outcome == "enqueued", f"seq {answer.seq}: answer without an outcome")
        check(answer.enqueued.created, f"seq {answer.seq}: created is false")
        check(answer.enqueued.message_id, f"seq {answer.seq}: no message id")
        message_ids[answer.seq] = answer.enqueued.message_id
    seconds = time.monotonic() - started
    check(len(message_ids) == MESSAGES, f"{MESSAGES - len(message_ids)} messages unanswered")
    check(
        len(set(message_ids.values())) == MESSAGES,
        "two messages got the same message id",
    )
    print(
        f"published {MESSAGES} messages in {seconds:.2f}s on one stream "
        f"(up to {most_in_flight} sent and not yet answered)"
    )
    return message_ids


def consume(stub, metadata, name, message_ids):
    """Consumes every message on one Pull stream, acking each on the same stream.

    The requests (the start, more credit, acks) go through a queue that a generator feeds to
    grpcio; the answers (messages, and the Settled answer to each ack) are read here as they
    come. Once everything is acked and answered we close our side, and the server ends the
    stream.
    """
    outbox = queue.Queue()

    def requests():
        yield pb.PullRequest(start=pb.PullStart(queue=name, credit=CREDIT))
        while (request := outbox.get()) is not None:
            yield request

    seqs_by_id = {message_id: seq for seq, message_id in message_ids.items()}
    delivered = set()  # seqs
    acks = {}  # request_id -> seq, for the acks not yet answered
    settled = 0
    next_request_id = 1
    most_in_one_batch = 0
    started = time.monotonic()
    answers = stub.Pull(requests(), metadata=metadata, timeout=STREAM_DEADLINE_S)
    try:
        for answer in answers:
            kind = answer.WhichOneof("response")
            if kind == "messages":
                batch = answer.messages.messages
                most_in_one_batch = max(most_in_one_batch, len(batch))
                for delivery in batch:
                    seq = seqs_by_id.get(delivery.message_id)
                    check(seq is not None, f"delivered unknown message {delivery.message_id}")
                    check(seq not in delivered, f"message {seq} delivered twice")
                    check(delivery.attempt == 1, f"message {seq}: attempt {delivery.attempt}")
                    check(
                        delivery.WhichOneof("body") == "json"
                        and json.loads(delivery.json)["n"] == seq,
                        f"message {seq}: body {delivery.json!r}",
                    )
                    check(
                        delivery.headers.get("example") == "grpc-python",
                        f"message {seq}: headers {dict(delivery.headers)}",
                    )
                    delivered.add(seq)
                    acks[next_request_id] = seq
                    outbox.put(
                        pb.PullRequest(
                            ack=pb.PullAck(request_id=next_request_id, receipts=[delivery.receipt])
                        )
                    )
                    next_request_id += 1
                # Each message sent used one credit: give them back, so the server keeps
                # sending while we work. (A client with slow work would grant credit as it
                # finishes messages instead, so it is never sent more than it can hold.)
                if len(delivered) < MESSAGES:
                    outbox.put(pb.PullRequest(credit=len(batch)))
            elif kind == "settled":
                answered = answer.settled
                seq = acks.pop(answered.request_id, None)
                check(seq is not None, f"Settled for unknown request {answered.request_id}")
                outcome = answered.WhichOneof("outcome")
                if outcome == "error":
                    error = answered.error
                    raise CheckFailed(
                        f"ack of message {seq} refused: {error.code}: {error.message}"
                    )
                check(outcome == "acked", f"ack of message {seq} answered {outcome}")
                acked = answered.acked
                check(
                    acked.acked == 1 and len(acked.results) == 1 and acked.results[0].acked,
                    f"ack of message {seq}: {acked}",
                )
                settled += 1
            else:
                raise CheckFailed(f"Pull answered {kind}")
            if settled == MESSAGES:
                # Everything delivered and acked: close our side; the server ends the stream.
                outbox.put(None)
    finally:
        # On a failed check, let the request generator end too.
        outbox.put(None)
    seconds = time.monotonic() - started
    check(len(delivered) == MESSAGES, f"{MESSAGES - len(delivered)} messages never delivered")
    check(settled == MESSAGES, f"{MESSAGES - settled} acks unanswered")
    print(
        f"consumed and acked {MESSAGES} messages in {seconds:.2f}s on one stream "
        f"(credit {CREDIT}, up to {most_in_one_batch} in one batch)"
    )


def show_a_refusal(stub, metadata):
    """A refused call: its gRPC status, and the sluice error code in the trailing metadata
    `sluice-error-code` (also the reason of the google.rpc.ErrorInfo in the status details)."""
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    try:
        stub.Receive(pb.ReceiveRequest(queue=missing), metadata=metadata, timeout=UNARY_DEADLINE_S)
    except grpc.RpcError as refused:
        code = refused.code()
        sluice_code = dict(refused.trailing_metadata() or ()).get("sluice-error-code")
        print(f"Receive on {missing}: {code.name} {sluice_code!r}: {refused.details()}")
        check(code == grpc.StatusCode.NOT_FOUND, f"Receive on a missing queue: {code}")
        check(sluice_code == "queue_not_found", f"sluice-error-code {sluice_code!r}")

        # The same code, as the standard error model carries it.
        status = rpc_status.from_call(refused)
        check(status is not None, "no google.rpc.Status in the trailers")
        reasons = []
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                reasons.append((info.domain, info.reason))
        check(reasons == [("sluice", "queue_not_found")], f"ErrorInfo: {reasons}")
        return code.name, sluice_code
    raise CheckFailed(f"Receive on missing queue {missing} succeeded")


def check_empty_and_delete(stub, metadata, name):
    found = stub.GetQueue(
        pb.GetQueueRequest(name=name), metadata=metadata, timeout=UNARY_DEADLINE_S
    )
    stats = found.stats
    check(
        (stats.ready, stats.delayed, stats.in_flight) == (0, 0, 0),
        f"queue {name} is not empty: {stats}",
    )
    check(
        (stats.enqueued, stats.acked) == (MESSAGES, MESSAGES),
        f"queue {name}: enqueued {stats.enqueued}, acked {stats.acked}",
    )
    print(f"queue {name} is empty: {stats.enqueued} enqueued, {stats.acked} acked")
    deleted = stub.DeleteQueue(
        pb.DeleteQueueRequest(name=name), metadata=metadata, timeout=UNARY_DEADLINE_S
    )
    check(deleted.deleted_messages == 0, f"DeleteQueue removed {deleted.deleted_messages}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address", help="the server's gRPC address, host:port")
    args = parser.parse_args()

    metadata = auth_metadata()
    name = f"grpc-example-{uuid.uuid4().hex[:8]}"
    # Cleartext HTTP/2; for a server with a certificate use grpc.secure_channel(address,
    # grpc.ssl_channel_credentials(root_certificates)).
    with grpc.insecure_channel(args.address) as channel:
        stub = pb_grpc.QueuesStub(channel)
        try:
            create_queue(stub, metadata, name)
            message_ids = publish(stub, metadata, name)
            consume(stub, metadata, name, message_ids)
            code, sluice_code = show_a_refusal(stub, metadata)
            check_empty_and_delete(stub, metadata, name)
        except CheckFailed as failed:
            print(f"FAILED: {failed}", file=sys.stderr)
            return 1
        except grpc.RpcError as error:
            sluice_code = dict(error.trailing_metadata() or ()).get("sluice-error-code")
            print(
                f"FAILED: call refused: {error.code().name} ({sluice_code}): {error.details()}",
                file=sys.stderr,
            )
            return 1
    print(
        f"OK: {MESSAGES} published, {MESSAGES} consumed and acked exactly once, "
        f"refusal {code}/{sluice_code}, queue empty"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
