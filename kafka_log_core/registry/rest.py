"""The Schema Registry's schemas fetched from a live registry's REST API, on the driver: the same answers a
schema file holds (:func:`kafka_log_core.registry.storage.read_schema_file`), asked for one by one.

    GET /subjects?deleted=true                       every subject, soft-deleted ones too
    GET /subjects/{s}/versions?deleted=true          a subject's versions, soft-deleted ones too
    GET /subjects/{s}/versions                       its live versions (404 when all are soft-deleted)
    GET /subjects/{s}/versions/{v}?deleted=true      one version: subject, version, id, schemaType, schema,
                                                     references (which are (subject, version)s listed too)

A version listed with ``deleted=true`` but not without it is soft-deleted: still readable by id, never the
latest, as in the ``_schemas`` topic. Only the default context is asked, the one a record's id is looked up
in. Standard library only (``urllib``); every request has a timeout; an answer that is not the JSON the
registry documents, an HTTP error or an unreachable host is a :class:`SchemaError` naming the URL.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import quote, urlsplit

from kafka_log_core.errors import SchemaError, UsageError
from kafka_log_core.registry.storage import SchemaStore, store_of

SCHEMES = ("http", "https")
#: Seconds a request may wait for the registry to connect or answer.
TIMEOUT_S = 30.0
_ACCEPT = "application/vnd.schemaregistry.v1+json, application/json"


def is_registry_url(value: str) -> bool:
    return value.split(":", 1)[0].lower() in SCHEMES and "://" in value


def check_url(url: str) -> str:
    """The registry's base URL without a trailing slash; a :class:`UsageError` if it is not
    ``http(s)://host[:port][/path]``."""
    try:
        parts = urlsplit(url)
        ok = parts.scheme.lower() in SCHEMES and parts.hostname and (parts.port is None or parts.port > 0)
    except ValueError:  # a port that is no number or out of range
        ok = False
    if not ok or parts.query or parts.fragment:
        raise UsageError(f"schemas={url!r}: expected a registry URL http(s)://host[:port][/path]")
    return url.rstrip("/")


def read_registry(url: str, timeout: float = TIMEOUT_S) -> SchemaStore:
    """The store a live registry's answers make, as from a file of the same answers."""
    base = check_url(url)
    entries = []
    for subject in _strings(base, "/subjects?deleted=true", timeout):
        path = f"/subjects/{quote(subject, safe='')}/versions"
        live = set(_ints(base, path, timeout, missing_ok=True))
        for version in _ints(base, f"{path}?deleted=true", timeout):
            where = f"{base}{path}/{version}"
            answer = _get(base, f"{path}/{version}?deleted=true", timeout)
            if isinstance(answer, dict):
                answer = {**answer, "deleted": version not in live}
            entries.append((where, answer))
    return store_of(entries)


def _strings(base: str, path: str, timeout: float) -> list[str]:
    found = _get(base, path, timeout)
    if not isinstance(found, list) or not all(isinstance(s, str) for s in found):
        raise SchemaError(f"{base}{path}: expected a JSON array of subjects")
    return found


def _ints(base: str, path: str, timeout: float, *, missing_ok: bool = False) -> list[int]:
    found = _get(base, path, timeout, missing_ok=missing_ok)
    if found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in found):
        raise SchemaError(f"{base}{path}: expected a JSON array of versions")
    return found


def _get(base: str, path: str, timeout: float, *, missing_ok: bool = False):
    """The JSON the registry answers to GET ``base + path`` (None for a 404 when ``missing_ok``)."""
    url = base + path
    request = urllib.request.Request(url, headers={"Accept": _ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (http(s) checked)
            body = answer.read()
    except urllib.error.HTTPError as err:
        if missing_ok and err.code == 404:
            return None
        raise SchemaError(
            f"{url}: the registry answered HTTP {err.code} {err.reason}{_message(err)}"
        ) from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise SchemaError(f"{url}: cannot reach the registry: {reason}") from None
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SchemaError(f"{url}: the registry's answer is not JSON ({err})") from None


def _message(err: urllib.error.HTTPError) -> str:
    """The registry's own error message (``{"error_code":40401,"message":"Subject not found."}``)."""
    try:
        message = json.loads(err.read()).get("message")
    except (OSError, ValueError, AttributeError):
        return ""
    return f" ({message})" if isinstance(message, str) and message else ""
