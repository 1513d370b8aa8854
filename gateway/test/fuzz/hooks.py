"""Schemathesis hooks for gateway/test/fuzz.test.ts, loaded through SCHEMATHESIS_HOOKS=hooks.

FUZZ_WORKSPACE_ID is the workspace the run acts in (the `workspace_id` header).
FUZZ_KNOWN_FAILURES, when set, is a file that receives one JSON line per failure
waived as a known, reported bug (see filter_failure); the test prints them.
"""

import json
import os
import uuid

import schemathesis

WORKSPACE = os.environ.get("FUZZ_WORKSPACE_ID", "").lower()
UNKNOWN_WORKSPACE = "00000000-0000-4000-8000-000000000000"
KNOWN_FAILURES = os.environ.get("FUZZ_KNOWN_FAILURES", "")
CAMPAIGN_PATHS = {"/email-campaigns/", "/email-campaigns/{id}"}
IDENTITY_PATHS = ("/workspaces/", "/users/")


def _is_uuid(value):
    try:
        uuid.UUID(str(value))
        return True
    except ValueError:
        return False


@schemathesis.hook
def before_call(context, case, kwargs):
    path = case.operation.path
    method = case.method.upper()
    # The stateful phase feeds ids from responses into later calls: it finds the run's workspace in
    # GET /workspaces/ and would delete it, after which every workspace-scoped operation answers 404
    # and is no longer tested. That one call goes to an unknown workspace instead.
    if method == "DELETE" and path == "/workspaces/{id}":
        parameters = case.path_parameters or {}
        if str(parameters.get("id", "")).lower() == WORKSPACE:
            case.path_parameters = {**parameters, "id": UNKNOWN_WORKSPACE}
    # A campaign's body workspace_id must equal the header (else 422 value_error); a generated
    # random UUID would make nearly every campaign write a 422 and leave the create/update/read/delete
    # paths untested. Values that are not UUIDs stay, so type and format errors are still exercised.
    if method in ("POST", "PUT") and path in CAMPAIGN_PATHS and isinstance(case.body, dict):
        if _is_uuid(case.body.get("workspace_id")):
            case.body = {**case.body, "workspace_id": WORKSPACE}


def _contains_nul(value):
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_contains_nul(k) or _contains_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_contains_nul(v) for v in value)
    return False


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """Waives exactly one known, reported bug, and records every waiver.

    KNOWN BUG nul-in-postgres-text: the identity service passes a string with U+0000 (workspace
    `name`, user `display_name`, the `q` filter of /workspaces/ and /users/) to PostgreSQL, which
    refuses it with SQLSTATE 22021, and the answer is 500 instead of a 4xx (brand-guide and campaign
    already answer 422 / no match). Only a 500 from an identity operation to a request carrying
    U+0000 in its query or JSON body is waived; FUZZ_STRICT=1 waives nothing.
    """
    if os.environ.get("FUZZ_STRICT") == "1" or response.status_code != 500:
        return True
    if not case.operation.path.startswith(IDENTITY_PATHS):
        return True
    if not (_contains_nul(case.query) or _contains_nul(case.body)):
        return True
    if KNOWN_FAILURES:
        with open(KNOWN_FAILURES, "a", encoding="utf-8") as out:
            record = {
                "bug": "nul-in-postgres-text",
                "operation": f"{case.method.upper()} {case.operation.path}",
                "failure": failure.code,
                "query": case.query,
                "body": case.body if isinstance(case.body, (dict, list, str)) else None,
            }
            out.write(json.dumps(record, default=str) + "\n")
    return False
