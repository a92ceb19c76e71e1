"""
A gRPC client nobody here wrote: Python's grpcio (Debian's python3-grpcio, gRPC's C core), with
the project's messages built at run time from the FileDescriptorSet that `buf build` made of
proto/ and third_party/ (no generated code, no stubs of ours). Run by test/api/grpcio.test.ts as
`client.py CASE`, with a JSON object on stdin: target (host:port), descriptors (the set's path),
key (an API key) and the case's inputs. It prints what it saw as one JSON object on stdout, for the
test to assert; it asserts nothing itself. Messages travel as proto JSON dicts, field names as
written in the .proto files.
"""
import json
import sys

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

args = json.load(sys.stdin)
case = sys.argv[1]

pool = descriptor_pool.DescriptorPool()
with open(args["descriptors"], "rb") as f:
    for file in descriptor_pb2.FileDescriptorSet.FromString(f.read()).file:
        pool.Add(file)
factory = message_factory.MessageFactory(pool)


def message_class(full_name):
    return factory.GetPrototype(pool.FindMessageTypeByName(full_name))


def as_dict(m):
    return json_format.MessageToDict(m, preserving_proto_field_name=True)


# No proxy for a local server whatever the environment says; otherwise grpcio's defaults.
OPTIONS = [("grpc.enable_http_proxy", 0)]


def channel(compression=None):
    return grpc.insecure_channel(args["target"], options=OPTIONS, compression=compression)


def message_classes(path):
    """The request and response classes of the method `path` (/package.Service/Method), from its descriptor."""
    service, name = path.strip("/").split("/")
    method = pool.FindServiceByName(service).FindMethodByName(name)
    return message_class(method.input_type.full_name), message_class(method.output_type.full_name)


def callable_of(ch, path, kind="unary_unary"):
    """The method `path` of the channel, typed by its descriptor, and its request class."""
    request, response = message_classes(path)
    return getattr(ch, kind)(path, request_serializer=lambda m: m.SerializeToString(), response_deserializer=response.FromString), request


def keyed(key=None):
    key = args["key"] if key is None else key
    return [("x-api-key", key)] if key else []


def failure(e):
    """A failed call as seen by grpcio: its code, its message, and its error details decoded."""
    out = {"code": e.code().name, "details": e.details()}
    trailers = e.trailing_metadata() or ()
    for k, v in trailers:
        if k == "grpc-status-details-bin":
            status = message_class("google.rpc.Status").FromString(v)
            decoded = []
            for d in status.details:
                inner = message_class(d.TypeName())()
                d.Unpack(inner)
                decoded.append({"type": d.TypeName(), "value": as_dict(inner)})
            out["status"] = {"code": status.code, "message": status.message, "details": decoded}
    return out


def unary(ch, path, body, key=None, **kw):
    """A unary call: {"ok": answer} or {"error": failure}."""
    call, request = callable_of(ch, path)
    try:
        return {"ok": as_dict(call(json_format.ParseDict(body, request()), metadata=keyed(key), **kw))}
    except grpc.RpcError as e:
        return {"error": failure(e)}


def events(n, subject, key_of, value_of):
    request, _ = message_classes("/billing.v1.UsageEventService/StreamUsageEvents")
    for i in range(n):
        yield json_format.ParseDict(
            {"idempotency_key": key_of(i), "subject_id": subject, "event_name": "api", "data": {"n": value_of(i)}, "timestamp": "2026-03-01T10:00:00Z"},
            request(),
        )


out = {}
if case == "unary":
    ch = channel()
    created = unary(ch, "/billing.v1.SubjectService/CreateSubject", {"name": "Ada Lovelace", "email": "ada@example.com", "external_id": args["external_id"], "metadata": {"plan": "pro"}})
    out["created"] = created
    if "ok" in created:
        sid = created["ok"]["subject"]["id"]
        out["got"] = unary(ch, "/billing.v1.SubjectService/GetSubject", {"subject_id": sid})
        # proto3 optional and a FieldMask: the name changes, the metadata is cleared by naming it
        # with an empty map, the email (not set, not named) stays.
        out["updated"] = unary(ch, "/billing.v1.SubjectService/UpdateSubject", {"subject_id": sid, "name": "Ada King", "update_mask": "name,metadata"})
elif case == "errors":
    ch = channel()
    out["bad_email"] = unary(ch, "/billing.v1.SubjectService/CreateSubject", {"email": "not an email", "name": "x"})
    out["not_found"] = unary(ch, "/billing.v1.SubjectService/GetSubject", {"subject_id": args["odd_id"]})
    out["no_key"] = unary(ch, "/billing.v1.SubjectService/GetSubject", {"subject_id": "x"}, key="")
    out["bad_key"] = unary(ch, "/billing.v1.SubjectService/GetSubject", {"subject_id": "x"}, key="sk_test_nope")
elif case == "gzip":
    ch = channel(grpc.Compression.Gzip)
    big = {f"k{i}": str(i) * 400 for i in range(1, 5)}
    created = unary(ch, "/billing.v1.SubjectService/CreateSubject", {"name": "Zipped Grace", "external_id": args["external_id"], "metadata": big})
    out["created"] = created
    if "ok" in created:
        out["got"] = unary(ch, "/billing.v1.SubjectService/GetSubject", {"subject_id": created["ok"]["subject"]["id"]})
    out["huge"] = unary(ch, "/billing.v1.SubjectService/CreateSubject", {"name": "a" * (1024 * 1024)})
elif case == "deadline":
    ch = channel()
    out["within"] = unary(ch, "/billing.v1.SubjectService/ListSubjects", {"limit": 1}, timeout=60)
    watch, request = callable_of(ch, "/grpc.health.v1.Health/Watch", "unary_stream")
    seen = []
    try:
        for m in watch(request(service=""), timeout=0.3):
            seen.append(as_dict(m))
        out["watch"] = {"messages": seen, "code": "OK"}
    except grpc.RpcError as e:
        out["watch"] = {"messages": seen, "code": e.code().name}
elif case == "health":
    ch = channel()
    out["check"] = {s: unary(ch, "/grpc.health.v1.Health/Check", {"service": s}, key="") for s in args["services"]}
    watch, request = callable_of(ch, "/grpc.health.v1.Health/Watch", "unary_stream")
    out["watch"] = {}
    for s in ["", "billing.v1.NoSuchService"]:
        call = watch(request(service=s))
        first = as_dict(next(call))
        call.cancel()
        try:
            for _ in call:
                pass
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
        out["watch"][s] = {"first": first, "ended": code}
elif case == "unimplemented":
    ch = channel()
    call = ch.unary_unary("/billing.v1.NoSuchService/DoIt", request_serializer=lambda b: b, response_deserializer=lambda b: b)
    try:
        call(b"", metadata=keyed())
        out["result"] = {"ok": True}
    except grpc.RpcError as e:
        out["result"] = {"error": failure(e)}
elif case == "stream":
    ch = channel()
    stream, _ = callable_of(ch, "/billing.v1.UsageEventService/StreamUsageEvents", "stream_unary")
    subject = args["subject_id"]
    # 300 events: the last repeats the first's key and payload (a duplicate), the 151st has a bad value.
    first = stream(events(300, subject, lambda i: "e0" if i == 299 else f"e{i}", lambda i: "oops" if i == 150 else "0.5"), metadata=keyed())
    out["first"] = as_dict(first)
    # 5,000 events, about 400 KB: past HTTP/2's 64 KB flow-control windows. The first 300 keys again.
    try:
        second = stream(events(5000, subject, lambda i: f"e{i}", lambda i: "oops" if i == 150 else "0.5"), metadata=keyed(), compression=grpc.Compression.Gzip)
        out["second"] = as_dict(second)
    except grpc.RpcError as e:
        out["second"] = {"error": failure(e)}
elif case == "abandon":
    # A usage stream given up midway: three events, then the client cancels it ("cancel") or
    # lets its deadline pass ("deadline") while its request iterator waits for more.
    import threading

    ch = channel()
    stream, _ = callable_of(ch, "/billing.v1.UsageEventService/StreamUsageEvents", "stream_unary")
    more = threading.Event()

    def slow():
        yield from events(3, args["subject_id"], lambda i: f"a{i}", lambda i: "1")
        more.wait(30)

    timeout = 1 if args["give_up"] == "deadline" else None
    future = stream.future(slow(), metadata=keyed(), timeout=timeout)
    if args["give_up"] == "cancel":
        threading.Timer(0.5, future.cancel).start()
    try:
        future.result()
        out["code"] = "OK"
    except grpc.FutureCancelledError:
        out["code"] = "CANCELLED"
    except grpc.RpcError as e:
        out["code"] = e.code().name
    more.set()
    ch.close()
else:
    raise SystemExit(f"unknown case {case}")

json.dump(out, sys.stdout)
