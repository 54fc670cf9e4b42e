"""The registry's REST API against Confluent's documented answers and error codes, and its
state across restarts (SIGTERM and SIGKILL): nothing registered is lost."""

from __future__ import annotations

import json
import signal

import pytest

from tests.schema_registry.conftest import Registry

pytestmark = pytest.mark.integration


def avro(*fields: tuple[str, object], default: dict[str, object] | None = None) -> str:
    out = []
    for name, kind in fields:
        field: dict[str, object] = {"name": name, "type": kind}
        if default and name in default:
            field["default"] = default[name]
        out.append(field)
    return json.dumps({"type": "record", "name": "User", "fields": out})


V1 = avro(("name", "string"))
V2 = avro(("name", "string"), ("age", "int"), default={"age": 0})
V2_NO_DEFAULT = avro(("name", "string"), ("age", "int"))


def test_register_lookup_and_errors(module_registry: Registry) -> None:
    r = module_registry
    assert r.ok("GET", "/schemas/types") == ["JSON", "PROTOBUF", "AVRO"]
    assert r.ok("POST", "/subjects/users-value/versions", {"schema": V1}) == {"id": 1}
    # the same schema again: the same id, no new version
    assert r.ok("POST", "/subjects/users-value/versions", {"schema": V1}) == {"id": 1}
    # the same schema under another subject keeps its id
    assert r.ok("POST", "/subjects/other-value/versions", {"schema": V1}) == {"id": 1}
    assert r.ok("GET", "/schemas/ids/1/subjects") == ["other-value", "users-value"]
    # BACKWARD (the default): a new field needs a default
    status, code = r.error("POST", "/subjects/users-value/versions", {"schema": V2_NO_DEFAULT})
    assert (status, code) == (409, 409)
    body = r.call("POST", "/subjects/users-value/versions", {"schema": V2_NO_DEFAULT}).json()
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in body["message"]
    assert r.ok("POST", "/subjects/users-value/versions", {"schema": V2}) == {"id": 2}
    assert r.ok("GET", "/subjects/users-value/versions") == [1, 2]
    latest = r.ok("GET", "/subjects/users-value/versions/latest")
    assert (latest["subject"], latest["version"], latest["id"]) == ("users-value", 2, 2)
    assert json.loads(latest["schema"]) == json.loads(V2)
    assert json.loads(r.ok("GET", "/schemas/ids/2")["schema"]) == json.loads(V2)
    found = r.ok("POST", "/subjects/users-value", {"schema": V1})
    assert (found["version"], found["id"]) == (1, 1)
    # the error codes Confluent's clients parse
    assert r.error("GET", "/subjects/nope/versions") == (404, 40401)
    assert r.error("GET", "/subjects/users-value/versions/9") == (404, 40402)
    assert r.error("GET", "/schemas/ids/999") == (404, 40403)
    assert r.error("POST", "/subjects/users-value", {"schema": avro(("x", "int"))}) == (404, 40403)
    assert r.error("GET", "/subjects/users-value/versions/zero") == (422, 42202)
    assert r.error("POST", "/subjects/bad/versions", {"schema": '{"type":"recrd"}'}) == (
        422,
        42201,
    )
    assert r.error("POST", "/subjects/bad/versions", {"schema": "{not json"}) == (422, 42201)
    assert r.error("PUT", "/config", {"compatibility": "SIDEWAYS"}) == (422, 42203)
    assert r.error("GET", "/config/users-value") == (404, 40408)
    assert r.error("GET", "/mode/users-value") == (404, 40409)
    assert r.ok("GET", "/subjects") == ["other-value", "users-value"]


def test_compatibility_endpoint_and_config(module_registry: Registry) -> None:
    r = module_registry
    r.ok("POST", "/subjects/cfg-value/versions", {"schema": V1})
    path = "/compatibility/subjects/cfg-value/versions/latest"
    verdict = r.ok("POST", path, {"schema": V2_NO_DEFAULT}, verbose="true")
    assert verdict["is_compatible"] is False and verdict["messages"]
    assert r.ok("POST", path, {"schema": V2}) == {"is_compatible": True}
    assert r.ok("PUT", "/config/cfg-value", {"compatibility": "NONE"}) == {"compatibility": "NONE"}
    assert r.ok("GET", "/config/cfg-value") == {"compatibilityLevel": "NONE"}
    assert r.ok("POST", path, {"schema": V2_NO_DEFAULT}) == {"is_compatible": True}
    assert r.ok("POST", "/subjects/cfg-value/versions", {"schema": V2_NO_DEFAULT})["id"] > 0
    assert r.ok("DELETE", "/config/cfg-value") == {"compatibilityLevel": "NONE"}
    assert r.ok("GET", "/config/cfg-value", defaultToGlobal="true") == {
        "compatibilityLevel": "BACKWARD"
    }
    # FORWARD: the old schema must read the new one's data; removing a field without a
    # default in the old schema breaks it
    r.ok("PUT", "/config/fwd-value", {"compatibility": "FORWARD"})
    r.ok("POST", "/subjects/fwd-value/versions", {"schema": V2_NO_DEFAULT})
    assert r.error("POST", "/subjects/fwd-value/versions", {"schema": V1}) == (409, 409)
    # modes
    assert r.ok("PUT", "/mode/ro-value", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert r.error("POST", "/subjects/ro-value/versions", {"schema": V1}) == (422, 42205)
    assert r.ok("DELETE", "/mode/ro-value") == {"mode": "READONLY"}
    assert r.ok("GET", "/mode") == {"mode": "READWRITE"}
    assert r.error("PUT", "/mode", {"mode": "SIDEWAYS"}) == (422, 42204)


def test_transitive_modes(module_registry: Registry) -> None:
    r = module_registry
    a = avro(("a", "string"))
    ab = avro(("a", "string"), ("b", "int"), default={"b": 1})
    # drops b's default: BACKWARD against v2 (which has b) is fine since v2 writes b;
    # against v1 (no b) it fails: only the transitive mode sees v1
    ab_no_default = avro(("a", "string"), ("b", "int"))
    for subject, level, status in (
        ("tr-plain-value", "BACKWARD", 200),
        ("tr-trans-value", "BACKWARD_TRANSITIVE", 409),
    ):
        r.ok("PUT", f"/config/{subject}", {"compatibility": level})
        r.ok("POST", f"/subjects/{subject}/versions", {"schema": a})
        r.ok("POST", f"/subjects/{subject}/versions", {"schema": ab})
        got = r.call("POST", f"/subjects/{subject}/versions", {"schema": ab_no_default})
        assert got.status_code == status, (level, got.text)


def test_deletes(module_registry: Registry) -> None:
    r = module_registry
    r.ok("POST", "/subjects/del-value/versions", {"schema": V1})
    r.ok("POST", "/subjects/del-value/versions", {"schema": V2})
    # a permanent delete needs a soft delete first
    assert r.error("DELETE", "/subjects/del-value/versions/1", permanent="true") == (404, 40407)
    assert r.ok("DELETE", "/subjects/del-value/versions/1") == 1
    assert r.error("DELETE", "/subjects/del-value/versions/1") == (404, 40406)
    assert r.ok("GET", "/subjects/del-value/versions") == [2]
    assert r.ok("GET", "/subjects/del-value/versions", deleted="true") == [1, 2]
    assert r.ok("DELETE", "/subjects/del-value/versions/1", permanent="true") == 1
    assert r.error("DELETE", "/subjects/del-value", permanent="true") == (404, 40405)
    assert r.ok("DELETE", "/subjects/del-value") == [2]
    assert r.error("DELETE", "/subjects/del-value") == (404, 40404)
    assert "del-value" not in r.ok("GET", "/subjects")
    assert "del-value" in r.ok("GET", "/subjects", deleted="true")
    assert r.ok("DELETE", "/subjects/del-value", permanent="true") == [2]
    assert r.error("GET", "/subjects/del-value/versions", deleted="true") == (404, 40401)


def test_references(module_registry: Registry) -> None:
    r = module_registry
    address = json.dumps(
        {"type": "record", "name": "Address", "namespace": "ex", "fields": [
            {"name": "city", "type": "string"}]}
    )  # fmt: skip
    person = json.dumps(
        {"type": "record", "name": "Person", "namespace": "ex", "fields": [
            {"name": "home", "type": "ex.Address"}]}
    )  # fmt: skip
    r.ok("POST", "/subjects/address/versions", {"schema": address})
    refs = [{"name": "ex.Address", "subject": "address", "version": 1}]
    # without its reference the schema does not parse
    assert r.error("POST", "/subjects/person-value/versions", {"schema": person}) == (422, 42201)
    missing = [{"name": "ex.Address", "subject": "address", "version": 7}]
    body = {"schema": person, "references": missing}
    assert r.error("POST", "/subjects/person-value/versions", body) == (422, 42201)
    sid = r.ok("POST", "/subjects/person-value/versions", {"schema": person, "references": refs})
    got = r.ok("GET", f"/schemas/ids/{sid['id']}")
    assert got["references"] == refs
    assert r.ok("GET", "/subjects/address/versions/1/referencedby") == [sid["id"]]
    assert r.error("DELETE", "/subjects/address/versions/1") == (422, 42206)


def test_protobuf_and_json_schema(module_registry: Registry) -> None:
    r = module_registry
    proto = 'syntax = "proto3";\npackage ex;\nmessage Order { string id = 1; int64 cents = 2; }\n'
    pid = r.ok(
        "POST", "/subjects/orders-value/versions", {"schema": proto, "schemaType": "PROTOBUF"}
    )
    got = r.ok("GET", f"/schemas/ids/{pid['id']}")
    assert got["schemaType"] == "PROTOBUF" and "message Order" in got["schema"]
    # int64 -> string is not a compatible scalar change; int64 -> uint64 is
    renamed = proto.replace("int64 cents", "string cents")
    body = {"schema": renamed, "schemaType": "PROTOBUF"}
    assert r.error("POST", "/subjects/orders-value/versions", body) == (409, 409)
    widened = proto.replace("int64 cents", "uint64 cents")
    body = {"schema": widened, "schemaType": "PROTOBUF"}
    assert r.ok("POST", "/subjects/orders-value/versions", body)["id"] > pid["id"]
    bad = {"schema": "message {", "schemaType": "PROTOBUF"}
    assert r.error("POST", "/subjects/orders-value/versions", bad) == (422, 42201)

    closed = {"type": "object", "properties": {"a": {"type": "string"}},
              "additionalProperties": False}  # fmt: skip
    body = {"schema": json.dumps(closed), "schemaType": "JSON"}
    r.ok("POST", "/subjects/js-value/versions", body)
    wider = dict(closed, properties={"a": {"type": "string"}, "b": {"type": "integer"}})
    body = {"schema": json.dumps(wider), "schemaType": "JSON"}
    assert r.ok("POST", "/subjects/js-value/versions", body)["id"] > 0
    narrower = dict(wider, required=["b"])
    body = {"schema": json.dumps(narrower), "schemaType": "JSON"}
    assert r.error("POST", "/subjects/js-value/versions", body) == (409, 409)
    body = {"schema": json.dumps({"type": 12}), "schemaType": "JSON"}
    assert r.error("POST", "/subjects/js-value/versions", body) == (422, 42201)


def test_huge_body_is_refused(module_registry: Registry) -> None:
    r = module_registry
    r.ok("POST", "/subjects/keep-value/versions", {"schema": V1})
    huge = {"schema": avro(("name", "string")) + " " * (17 * 1024 * 1024)}
    status, code = r.error("POST", "/subjects/keep-value/versions", huge)
    assert (status, code) == (413, 413)
    assert r.ok("GET", "/subjects/keep-value/versions") == [1]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_restart_keeps_everything(registry: Registry, sig: int) -> None:
    r = registry
    r.ok("POST", "/subjects/a-value/versions", {"schema": V1})
    r.ok("POST", "/subjects/a-value/versions", {"schema": V2})
    r.ok("DELETE", "/subjects/a-value/versions/1")
    r.ok("PUT", "/config/a-value", {"compatibility": "FULL"})
    r.ok("PUT", "/mode/b-value", {"mode": "READONLY"})
    r.ok("POST", "/subjects/c-value/versions", {"schema": V1})
    r.ok("DELETE", "/subjects/c-value")

    def everything() -> dict[str, object]:
        return {
            "schemas": r.ok("GET", "/schemas", deleted="true"),
            "subjects": r.ok("GET", "/subjects", deleted="true"),
            "config": r.ok("GET", "/config/a-value"),
            "mode": r.ok("GET", "/mode/b-value"),
            "live": r.ok("GET", "/subjects"),
        }

    before = everything()
    r.broker.stop(sig)
    r.broker.start()
    assert everything() == before
    # ids keep growing after a restart
    assert r.ok("POST", "/subjects/d-value/versions", {"schema": avro(("z", "long"))}) == {"id": 3}
