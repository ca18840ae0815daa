"""moto, behind the template's IAM: the stand-in for SQS, S3 and Secrets Manager refuses
what each function's role does not grant, as AWS would, and records every call.

    python -m iam.gate --host 127.0.0.1 --port 5391 --template infra/template.yaml --log calls.jsonl

Each request's SigV4 access key id names its caller. The key of a function's logical id
(`SearchFunction`, `DetailFunction`, `DrainerFunction`) or of a role of the template
(`SyncScheduleRole`) makes the request that principal's: its action, resource ARN and
request context are evaluated against the role rendered from the template by SAM's own
transform (`render.py`, `policy.py`); a request the role does not allow is answered
AccessDenied in the service's own error format and never reaches moto. A `...~probe`
suffix (`DetailFunction~probe`) is evaluated and enforced the same way but recorded apart,
for tests that provoke a refusal on purpose. Any other key is the test harness (setting
up queues and buckets, reading what was stored), as an operator with full rights would
be, and is passed through.

S3 answers 403, not 404, for a missing object when the caller may not list the bucket
under that key (`s3:ListBucket` with `s3:prefix` matching the key); the stand-in does the
same.

moto's own IAM enforcement (`INITIAL_NO_AUTH_ACTION_COUNT`) is not used: it checks actions
only, treats resources and conditions as a to-do (a Secrets Manager grant is checked
against `*`), and cannot see `s3:prefix`.

Every call is one JSON line in the log: who, the operation, each check (action, resource,
context, decision) and the outcome (`allowed`, `denied`, `unevaluated`, `harness`).
`report.py` reads it at the end of `make test`.
"""
import argparse
import io
import json
import os
import re
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from .policy import Unsupported, evaluate
from .render import ACCOUNT, PARTITION, render

# The stack the tests stand for: the template's defaults (a created secret, network and
# cache), with what the defaults leave out given a value, so that every grant the
# functions can hold is rendered: a Slack webhook secret and a Redis ACL password secret.
# `Env` is `*`: each test names its queues, bucket and secrets as the stack would for an
# environment of its own (lawsync-<env>-search, lawsync/<env>/law-api-oc, ...).
STACK_PARAMETERS = {
    "Env": "*",
    "SlackWebhookSecretArn": f"arn:{PARTITION}:secretsmanager:ap-northeast-2:{ACCOUNT}:secret:lawsync/*/slack-webhook-??????",
    "RedisAuth": "password",
    "RedisAuthSecretArn": f"arn:{PARTITION}:secretsmanager:ap-northeast-2:{ACCOUNT}:secret:lawsync/*/redis-auth-??????",
}
PROBE_SUFFIX = "~probe"

CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/([^/]+)/aws4_request")


class Call:
    """One request as IAM sees it: who, which operation, and the checks it needs."""

    def __init__(self, principal, service, region, operation):
        self.principal = principal
        self.service = service
        self.region = region
        self.operation = operation
        # (action, resource ARN, context)
        self.checks = []


def credential(environ):
    """(access key id, region, service) of a SigV4 request, from its header or query."""
    m = CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
    if m:
        return m.groups()
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
    cred = query.get("X-Amz-Credential", [""])[0].split("/")
    if len(cred) == 5:
        return cred[0], cred[2], cred[3]
    return None, None, None


def read_body(environ):
    """The request body, put back for moto to read again."""
    try:
        n = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        n = 0
    body = environ["wsgi.input"].read(n) if n > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


# SQS operations whose IAM action is another's (the batch forms).
SQS_ACTIONS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


def queue_arn(url, region):
    parts = urllib.parse.urlparse(url).path.strip("/").split("/")
    if len(parts) != 2:
        raise Unsupported(f"a QueueUrl that is not /ACCOUNT/NAME: {url}")
    return f"arn:{PARTITION}:sqs:{region}:{parts[0]}:{parts[1]}"


def describe_sqs(call, environ, body):
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if target.startswith("AmazonSQS."):
        call.operation = target.split(".", 1)[1]
        params = json.loads(body or b"{}")
    else:
        form = urllib.parse.parse_qs(body.decode("utf-8", "replace"))
        call.operation = form.get("Action", ["?"])[0]
        params = {k: v[0] for k, v in form.items()}
    action = "sqs:" + SQS_ACTIONS.get(call.operation, call.operation)
    if "QueueUrl" in params:
        call.checks.append((action, queue_arn(params["QueueUrl"], call.region), {}))
    elif call.operation == "CreateQueue":
        call.checks.append((action, f"arn:{PARTITION}:sqs:{call.region}:{ACCOUNT}:{params.get('QueueName')}", {}))
    else:
        raise Unsupported(f"SQS {call.operation} without a QueueUrl")


def describe_secrets(call, environ, body):
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if not target.startswith("secretsmanager."):
        raise Unsupported(f"Secrets Manager request without an X-Amz-Target ({target!r})")
    call.operation = target.split(".", 1)[1]
    params = json.loads(body or b"{}")
    secret_id = params.get("SecretId")
    if secret_id is None:
        raise Unsupported(f"Secrets Manager {call.operation} without a SecretId")
    call.checks.append(("secretsmanager:" + call.operation, secret_arn(secret_id, call.region), {}))


def secret_arn(secret_id, region):
    """The full ARN of a secret given by ARN or name (moto knows the random suffix)."""
    if secret_id.startswith("arn:"):
        return secret_id
    from moto.secretsmanager.models import secretsmanager_backends

    secret = secretsmanager_backends[ACCOUNT][region].secrets.get(secret_id)
    if secret is not None:
        return secret.arn
    return f"arn:{PARTITION}:secretsmanager:{region}:{ACCOUNT}:secret:{secret_id}"


# Bucket sub-resources a request may name, and the IAM action of each method on them.
S3_BUCKET_SUBRESOURCES = {
    ("GET", "versioning"): "s3:GetBucketVersioning",
    ("PUT", "versioning"): "s3:PutBucketVersioning",
    ("GET", "location"): "s3:GetBucketLocation",
    ("GET", "versions"): "s3:ListBucketVersions",
    ("GET", "lifecycle"): "s3:GetLifecycleConfiguration",
    ("PUT", "lifecycle"): "s3:PutLifecycleConfiguration",
    ("GET", "policy"): "s3:GetBucketPolicy",
    ("PUT", "policy"): "s3:PutBucketPolicy",
}


def describe_s3(call, environ):
    method = environ["REQUEST_METHOD"]
    path = urllib.parse.unquote(environ.get("PATH_INFO", ""))
    query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    bucket, _, key = path.lstrip("/").partition("/")
    ctx = {"aws:SecureTransport": "true"}
    if not bucket:
        call.operation = "ListBuckets"
        call.checks.append(("s3:ListAllMyBuckets", "*", ctx))
        return
    bucket_arn = f"arn:{PARTITION}:s3:::{bucket}"
    if not key:
        sub = next((s for (m, s) in S3_BUCKET_SUBRESOURCES if m == method and s in query), None)
        if sub is not None:
            call.operation = f"{method} ?{sub}"
            call.checks.append((S3_BUCKET_SUBRESOURCES[(method, sub)], bucket_arn, ctx))
        elif method in ("GET", "HEAD"):
            call.operation = "ListObjects" if method == "GET" else "HeadBucket"
            listing = dict(ctx)
            for name in ("prefix", "delimiter", "max-keys"):
                if name in query:
                    listing["s3:" + name] = query[name][0]
            call.checks.append(("s3:ListBucket", bucket_arn, listing))
        elif method == "PUT":
            call.operation = "CreateBucket"
            call.checks.append(("s3:CreateBucket", bucket_arn, ctx))
        elif method == "DELETE":
            call.operation = "DeleteBucket"
            call.checks.append(("s3:DeleteBucket", bucket_arn, ctx))
        else:
            raise Unsupported(f"S3 {method} on a bucket with {sorted(query)}")
        return
    object_arn = f"{bucket_arn}/{key}"
    versioned = "versionId" in query
    if set(query) - {"versionId", "x-id"}:
        raise Unsupported(f"S3 {method} on an object with {sorted(query)}")
    if method in ("GET", "HEAD"):
        call.operation = "GetObject" if method == "GET" else "HeadObject"
        call.checks.append(("s3:GetObjectVersion" if versioned else "s3:GetObject", object_arn, ctx))
    elif method == "PUT":
        call.operation = "PutObject"
        call.checks.append(("s3:PutObject", object_arn, ctx))
        source = environ.get("HTTP_X_AMZ_COPY_SOURCE")
        if source:
            call.operation = "CopyObject"
            src = urllib.parse.unquote(source).lstrip("/").split("?")[0]
            call.checks.append(("s3:GetObject", f"arn:{PARTITION}:s3:::{src}", ctx))
    elif method == "DELETE":
        call.operation = "DeleteObject"
        call.checks.append(("s3:DeleteObjectVersion" if versioned else "s3:DeleteObject", object_arn, ctx))
    else:
        raise Unsupported(f"S3 {method} on an object")


def denial(call, action, resource, environ):
    """(status, headers, body) of AccessDenied as the service would send it."""
    role = call.principal.removesuffix(PROBE_SUFFIX)
    who = f"arn:{PARTITION}:sts::{ACCOUNT}:assumed-role/{role}/lawsync"
    text = (f"User: {who} is not authorized to perform: {action} on resource: {resource} "
            f"because no identity-based policy allows the {action} action")
    if call.service == "s3":
        body = (b"" if environ["REQUEST_METHOD"] == "HEAD" else
                ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                 f"<Message>{text}</Message><RequestId>LAWSYNCIAM</RequestId></Error>").encode())
        return "403 Forbidden", [("Content-Type", "application/xml")], body
    if call.service == "sqs" and environ.get("HTTP_X_AMZ_TARGET"):
        body = json.dumps({"__type": "com.amazon.coral.service#AccessDeniedException", "message": text}).encode()
        return "400 Bad Request", [("Content-Type", "application/x-amz-json-1.0"),
                                   ("x-amzn-query-error", "AccessDenied;Sender")], body
    if call.service == "sqs":
        body = ('<?xml version="1.0"?><ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>'
                f"<Message>{text}</Message></Error><RequestId>LAWSYNCIAM</RequestId></ErrorResponse>").encode()
        return "403 Forbidden", [("Content-Type", "text/xml")], body
    body = json.dumps({"__type": "AccessDeniedException", "Message": text}).encode()
    return "400 Bad Request", [("Content-Type", "application/x-amz-json-1.1")], body


class IamGate:
    """The WSGI middleware in front of moto."""

    def __init__(self, app, rendered, log_path):
        self.app = app
        self.rendered = rendered
        self.principals = set(rendered.function_role) | set(rendered.roles)
        self.log_path = log_path
        self.lock = threading.Lock()

    def record(self, call, checks, outcome, why=None, status=None):
        line = {
            "t": round(time.time(), 3),
            "principal": call.principal,
            "service": call.service,
            "operation": call.operation,
            "checks": checks,
            "outcome": outcome,
        }
        if why:
            line["why"] = why
        if status:
            line["status"] = status
        with self.lock, open(self.log_path, "a") as f:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")

    def __call__(self, environ, start_response):
        key, region, service = credential(environ)
        principal = key if key and key.removesuffix(PROBE_SUFFIX) in self.principals else None
        if service not in ("sqs", "s3", "secretsmanager"):
            return self.app(environ, start_response)
        call = Call(principal or "harness", service, region, "?")
        body = read_body(environ) if service != "s3" else b""
        try:
            {"sqs": lambda: describe_sqs(call, environ, body),
             "secretsmanager": lambda: describe_secrets(call, environ, body),
             "s3": lambda: describe_s3(call, environ)}[service]()
        except (Unsupported, ValueError) as e:
            self.record(call, [], "harness" if principal is None else "unevaluated", why=str(e))
            return self.app(environ, start_response)
        if principal is None:
            self.record(call, [], "harness")
            return self.app(environ, start_response)
        role = principal.removesuffix(PROBE_SUFFIX)
        checks = []
        try:
            for action, resource, ctx in call.checks:
                policies = list(self.rendered.policies_for(role))
                policies += self.rendered.resource_policies_for(resource)
                decision = evaluate(policies, action, resource, ctx)
                checks.append({"action": action, "resource": resource, "context": ctx, "decision": decision})
                if decision != "allow":
                    self.record(call, checks, "denied")
                    status, headers, out = denial(call, action, resource, environ)
                    start_response(status, headers + [("Content-Length", str(len(out)))])
                    return [out]
        except Unsupported as e:
            self.record(call, checks, "unevaluated", why=str(e))
            return self.app(environ, start_response)
        if call.operation in ("GetObject", "HeadObject"):
            return self.missing_object(call, checks, environ, start_response)
        self.record(call, checks, "allowed")
        return self.app(environ, start_response)

    def missing_object(self, call, checks, environ, start_response):
        """GetObject/HeadObject: moto's 404 becomes S3's 403 unless the caller may list the
        bucket under the key."""
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers
            return lambda data: None

        out = b"".join(self.app(environ, capture))
        status = captured.get("status", "500")
        if status.startswith("404"):
            path = urllib.parse.unquote(environ.get("PATH_INFO", "")).lstrip("/")
            bucket, _, key = path.partition("/")
            bucket_arn = f"arn:{PARTITION}:s3:::{bucket}"
            ctx = {"aws:SecureTransport": "true", "s3:prefix": key}
            role = call.principal.removesuffix(PROBE_SUFFIX)
            policies = list(self.rendered.policies_for(role)) + self.rendered.resource_policies_for(bucket_arn)
            decision = evaluate(policies, "s3:ListBucket", bucket_arn, ctx)
            checks.append({"action": "s3:ListBucket", "resource": bucket_arn, "context": ctx,
                           "decision": decision, "for": "404 or 403"})
            if decision != "allow":
                self.record(call, checks, "denied", why="a missing key without s3:ListBucket on it is 403")
                status, headers, body = denial(call, "s3:ListBucket", bucket_arn, environ)
                start_response(status, headers + [("Content-Length", str(len(body)))])
                return [body]
        self.record(call, checks, "allowed", status=status.split(" ")[0])
        start_response(status, captured.get("headers", []))
        return [out]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--template", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args(argv)
    try:
        rendered = render(args.template, STACK_PARAMETERS)
    except Exception as e:  # a template SAM cannot transform is a template no stack gets
        sys.exit(f"iam gate: {args.template} cannot be rendered: {e}")
    Path(args.log).write_text("")
    os.environ.setdefault("MOTO_PORT", str(args.port))
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    app = IamGate(DomainDispatcherApplication(create_backend_app), rendered, args.log)
    run_simple(args.host, args.port, app, threaded=True, use_reloader=False, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
