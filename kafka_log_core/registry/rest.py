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

**Authentication**, as Confluent's serializers do it (their ``basic.auth.credentials.source`` and
``bearer.auth.credentials.source``), sent as the ``Authorization`` header of every request:

* HTTP Basic from the URL's user info, ``https://user:password@host:8081`` (their source ``URL``;
  percent-encoded as in any URL), else from the environment variable :data:`USER_INFO_ENV`,
  ``user:password`` (their ``USER_INFO`` source with ``basic.auth.user.info``);
* a bearer token from :data:`BEARER_TOKEN_ENV` (their ``STATIC_TOKEN`` source with ``bearer.auth.token``).

Environment variables keep a password off the command line (``ps``) and out of the job's rows; no message
names a URL with its user info. Both environment variables set, or user info in the URL and a token, is a
:class:`UsageError`: which one the registry should see cannot be guessed.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from kafka_log_core.errors import SchemaError, UsageError
from kafka_log_core.registry.storage import SchemaStore, store_of

SCHEMES = ("http", "https")
#: Seconds a request may wait for the registry to connect or answer.
TIMEOUT_S = 30.0
_ACCEPT = "application/vnd.schemaregistry.v1+json, application/json"
#: ``user:password`` for HTTP Basic (Confluent's ``basic.auth.user.info``).
USER_INFO_ENV = "KAFKA_LOG_REGISTRY_USER_INFO"
#: A bearer token (Confluent's ``bearer.auth.token``).
BEARER_TOKEN_ENV = "KAFKA_LOG_REGISTRY_BEARER_TOKEN"


@dataclass(frozen=True)
class Registry:
    """Where the registry is (no user info) and the ``Authorization`` header its requests carry."""

    base: str
    authorization: str | None = None

    def __repr__(self) -> str:  # never the credentials
        return f"Registry({self.base!r})"


def is_registry_url(value: str) -> bool:
    return value.split(":", 1)[0].lower() in SCHEMES and "://" in value


def check_url(url: str) -> str:
    """The registry's base URL without its user info and a trailing slash; a :class:`UsageError` if it
    is not ``http(s)://[user:password@]host[:port][/path]``."""
    return _split(url)[0]


def _split(url: str) -> tuple[str, str | None]:
    """(base URL without user info, ``user:password`` from the URL or None)."""
    try:
        parts = urlsplit(url)
        ok = parts.scheme.lower() in SCHEMES and parts.hostname and (parts.port is None or parts.port > 0)
    except ValueError:  # a port that is no number or out of range
        ok = False
    if not ok or parts.query or parts.fragment or (parts.username is not None and parts.password is None):
        shown = url if _user_free(url) else "<the URL>"
        raise UsageError(
            f"schemas={shown!r}: expected a registry URL http(s)://[user:password@]host[:port][/path]"
        )
    netloc = parts.netloc.rpartition("@")[2]
    base = urlunsplit((parts.scheme, netloc, parts.path, "", "")).rstrip("/")
    if parts.username is None:
        return base, None
    return base, f"{unquote(parts.username)}:{unquote(parts.password or '')}"


def _user_free(url: str) -> bool:
    """The URL names no user info (safe to show)."""
    return "@" not in url.partition("://")[2].partition("/")[0]


def registry_of(url: str, environ: Mapping[str, str] | None = None) -> Registry:
    """The registry ``url`` names, with its credentials (module docstring); a :class:`UsageError` for a
    malformed URL or credentials that contradict each other."""
    environ = os.environ if environ is None else environ
    base, user_info = _split(url)
    env_user_info = environ.get(USER_INFO_ENV) or None
    token = environ.get(BEARER_TOKEN_ENV) or None
    if token is not None and (user_info is not None or env_user_info is not None):
        raise UsageError(
            f"the registry {base}: a bearer token ({BEARER_TOKEN_ENV}) and a user's password "
            f"({'the URL' if user_info is not None else USER_INFO_ENV}) are both given: keep one"
        )
    if token is not None:
        return Registry(base, f"Bearer {token}")
    user_info = user_info if user_info is not None else env_user_info
    if user_info is None:
        return Registry(base)
    if ":" not in user_info:
        raise UsageError(f"the registry {base}: {USER_INFO_ENV} must be user:password")
    return Registry(base, "Basic " + base64.b64encode(user_info.encode("utf-8")).decode("ascii"))


def read_answers(url: str, timeout: float = TIMEOUT_S) -> list[dict]:
    """A live registry's answers for every version of the default context (``deleted`` set), as a
    schema file holds them (:func:`kafka_log_core.registry.storage.read_schema_file`)."""
    return [answer for _, answer in _answers(registry_of(url), timeout)]


def read_registry(url: str, timeout: float = TIMEOUT_S) -> SchemaStore:
    """The store a live registry's answers make, as from a file of the same answers."""
    return store_of(_answers(registry_of(url), timeout))


def _answers(registry: Registry, timeout: float) -> list[tuple[str, dict]]:
    entries = []
    for subject in _strings(registry, "/subjects?deleted=true", timeout):
        path = f"/subjects/{quote(subject, safe='')}/versions"
        live = set(_ints(registry, path, timeout, missing_ok=True))
        for version in _ints(registry, f"{path}?deleted=true", timeout):
            where = f"{registry.base}{path}/{version}"
            answer = _get(registry, f"{path}/{version}?deleted=true", timeout)
            if isinstance(answer, dict):
                answer = {**answer, "deleted": version not in live}
            entries.append((where, answer))
    return entries


def _strings(registry: Registry, path: str, timeout: float) -> list[str]:
    found = _get(registry, path, timeout)
    if not isinstance(found, list) or not all(isinstance(s, str) for s in found):
        raise SchemaError(f"{registry.base}{path}: expected a JSON array of subjects")
    return found


def _ints(registry: Registry, path: str, timeout: float, *, missing_ok: bool = False) -> list[int]:
    found = _get(registry, path, timeout, missing_ok=missing_ok)
    if found is None:
        return []
    if not isinstance(found, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in found):
        raise SchemaError(f"{registry.base}{path}: expected a JSON array of versions")
    return found


def _get(registry: Registry, path: str, timeout: float, *, missing_ok: bool = False):
    """The JSON the registry answers to GET ``base + path`` (None for a 404 when ``missing_ok``)."""
    url = registry.base + path
    headers = {"Accept": _ACCEPT}
    if registry.authorization is not None:
        headers["Authorization"] = registry.authorization
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 (http(s) checked)
            body = answer.read()
    except urllib.error.HTTPError as err:
        if missing_ok and err.code == 404:
            return None
        hint = ""
        if err.code == 401 and registry.authorization is None:
            hint = f": it asks for credentials ({USER_INFO_ENV}=user:password or {BEARER_TOKEN_ENV})"
        raise SchemaError(
            f"{url}: the registry answered HTTP {err.code} {err.reason}{_message(err)}{hint}"
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
