"""What a Schema Registry producer writes, made with independent libraries: the Confluent wire format
framed here from its documentation (magic byte 0, the id as a big-endian int32, Protobuf's message
indexes as zigzag varints with ``[0]`` as a single 0), payloads by fastavro, by classes ``protoc``
generates from the ``.proto`` text, and by ``json``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import types
from pathlib import Path

import fastavro

#: An Avro subject's two versions, as the tests register them: v2 drops ``name``, widens ``qty`` (int to
#: long) and adds ``email`` and ``status`` with defaults.
ORDER_V1 = json.dumps(
    {"type": "record", "name": "Order", "namespace": "shop",
     "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
                {"name": "qty", "type": "int"}]}
)  # fmt: skip
ORDER_V2 = json.dumps(
    {"type": "record", "name": "Order", "namespace": "shop",
     "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "long"},
                {"name": "email", "type": ["null", "string"], "default": None},
                {"name": "status", "type": "string", "default": "new"}]}
)  # fmt: skip


def zigzag(value: int) -> bytes:
    u = (value << 1) ^ (value >> 31)
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def frame(schema_id: int, payload: bytes, indexes: list[int] | None = None) -> bytes:
    head = b"\x00" + schema_id.to_bytes(4, "big")
    if indexes is None:
        return head + payload
    if indexes == [0]:
        return head + b"\x00" + payload
    return head + zigzag(len(indexes)) + b"".join(zigzag(i) for i in indexes) + payload


def avro_payload(schema_text: str, value) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(schema_text)), value)
    return out.getvalue()


def json_payload(value) -> bytes:
    return json.dumps(value).encode()


def proto_module(tmp_path: Path, name: str, text: str, imports: dict[str, str] | None = None):
    """The message classes of a ``.proto`` text (``name`` without ``.proto``), from protoc's descriptors in
    a pool of their own (two versions of a schema define the same names), as attributes by name."""
    import grpc_tools
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    out = tmp_path / f"gen_{name}"
    out.mkdir(parents=True, exist_ok=True)
    for path, body in {**(imports or {}), f"{name}.proto": text}.items():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_text(body)
    include = Path(grpc_tools.__file__).parent / "_proto"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{out}", f"-I{include}", "--include_imports",
         f"--descriptor_set_out={out}/set.pb", f"{name}.proto"],
        check=True,
    )  # fmt: skip
    pool = descriptor_pool.DescriptorPool()
    for proto in descriptor_pb2.FileDescriptorSet.FromString((out / "set.pb").read_bytes()).file:
        pool.Add(proto)
    module = types.SimpleNamespace()
    for message in pool.FindFileByName(f"{name}.proto").message_types_by_name.values():
        setattr(module, message.name, message_factory.GetMessageClass(message))
    return module
