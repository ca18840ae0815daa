"""Checks the template for what lawsync relies on and cfn-lint cannot know.

Run with the project venv's python (cfn-lint's YAML loader reads the intrinsic tags):
    .venv/bin/python infra/check_template.py infra/template.yaml [--layout shared/src/mirror/layout.rs]
Exits 1 with one line per broken rule, 2 when layout.rs cannot be read.

The SQS rule: each function's role, as SAM's transform renders it, allows sqs:SendMessage
on the search and the detail queue (see SENDS) and on no other queue; each schedule's role
may send to its target and its dead-letter queue.

The deploy rules: Lambda's log controls set and not undone (no RUST_LOG; JSON logs; an
application level that keeps the INFO lines the EMF metrics travel on); the bucket, the
cache and the key's secret retained on delete and on replacement; the bucket versioned,
with a lifecycle for old versions and incomplete uploads; the cache snapshotted; every
schedule with a retry policy and a dead-letter queue; the architecture defaulting to the
one the tests run (x86_64).

The S3 rule: each function's policy grants exactly what the prefix table in
shared/src/mirror/layout.rs says the code does (s3:GetObject on <prefix>* for a read
prefix, s3:PutObject for a write prefix, s3:ListBucket on the bucket with an s3:prefix
condition for a list prefix), nothing it does not name, and nothing on the whole bucket.
"""
import json
import re
import sys
from pathlib import Path

from cfnlint.decode import decode

from iam.policy import Unsupported, evaluate
from iam.render import render

SECRET_VARS = {"LAW_API_OC", "SLACK_WEBHOOK_URL"}
LAYOUT = Path(__file__).resolve().parent.parent / "shared" / "src" / "mirror" / "layout.rs"
BUCKET = "DocumentBucket"
# The S3 action each column of the table stands for.
ACTIONS = {"read": "s3:GetObject", "write": "s3:PutObject", "list": "s3:ListBucket"}
# The queues each function sends to. Every function can run every job: a search or detail
# handler works off retry-queue entries after its batch, and the drainer runs both kinds.
# A search page sends detail messages and its next page; a detail job sends backfill work
# met beside another run back to the detail queue, and a run it completes releases the
# backfill's next windows to the search queue. So each sends to both, and to nothing else.
SENDS = {fn: ("SearchQueue", "DetailQueue") for fn in ("SearchFunction", "DetailFunction", "DrainerFunction")}
SCHEDULE_KINDS = {"daily", "sweep"}
# Levels at which Lambda still sends INFO lines: the EMF metric lines carry no "level", so
# Lambda counts them INFO, and WARN, ERROR or FATAL would drop every metric.
METRIC_SAFE_LEVELS = {"TRACE", "DEBUG", "INFO"}
SYSTEM_LEVELS = {"DEBUG", "INFO", "WARN"}
# What outlives the stack: the mirror, the cache's state (parked work, runs, the
# backfill), the key.
RETAINED = ("AWS::S3::Bucket", "AWS::ElastiCache::ServerlessCache", "AWS::SecretsManager::Secret")
# The architecture the bootstraps are built and run for by the tests.
TESTED_ARCHITECTURE = "x86_64"
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"

PREFIX_LINE = re.compile(
    r'^pub const (\w+): Prefix = Prefix \{ path: "([a-z0-9_-]+/)", '
    r"read: (true|false), write: (true|false), list: (true|false) \};$")


class LayoutError(Exception):
    pass


def read_layout(path):
    """The prefix table: {path: {"read": bool, "write": bool, "list": bool}}. Raises
    LayoutError for a table it cannot read whole, rather than checking against part of it."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise LayoutError(f"{path}: cannot be read: {e}")
    table, names = {}, {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not re.search(r"\bPrefix\s*\{|:\s*Prefix\s*=", line) or line.startswith(("pub struct", "//")):
            continue
        m = PREFIX_LINE.match(line)
        if not m:
            raise LayoutError(
                f"{path}:{n}: a Prefix the check cannot parse (want "
                f'`pub const NAME: Prefix = Prefix {{ path: "p/", read: B, write: B, list: B }};` '
                f"on one line): {line}")
        name, prefix, *flags = m.groups()
        if prefix in table:
            raise LayoutError(f"{path}:{n}: prefix {prefix} is named twice")
        table[prefix] = dict(zip(ACTIONS, (f == "true" for f in flags)))
        names[name] = prefix
    if not table:
        raise LayoutError(f"{path}: no `pub const NAME: Prefix = Prefix {{ ... }};` found")
    for a in table:
        for b in table:
            if a != b and b.startswith(a):
                raise LayoutError(f"{path}: prefix {b} lies inside {a}; a grant on {a}* would cover both")
    m = re.search(r"pub const ALL: \[Prefix; (\d+)\] = \[([^\]]*)\];", text)
    listed = [x.strip() for x in m.group(2).split(",") if x.strip()] if m else None
    if listed is None or sorted(listed) != sorted(names) or int(m.group(1)) != len(names):
        raise LayoutError(f"{path}: ALL must list every Prefix const once ({', '.join(names)}); it lists {listed}")
    return table


def as_list(v):
    return v if isinstance(v, list) else [v]


def bucket_ref(res):
    """("bucket", None) for the bucket's ARN, ("object", rest) for ${DocumentBucket.Arn}/rest,
    None for anything else."""
    if isinstance(res, dict) and list(res) == ["Fn::GetAtt"]:
        att = res["Fn::GetAtt"]
        att = att.split(".", 1) if isinstance(att, str) else att
        return ("bucket", None) if list(att) == [BUCKET, "Arn"] else None
    if isinstance(res, dict) and list(res) == ["Fn::Sub"]:
        sub = res["Fn::Sub"]
        if isinstance(sub, list):
            if len(sub) != 2 or sub[1]:
                return None
            sub = sub[0]
        if not isinstance(sub, str):
            return None
        head = "${%s.Arn}" % BUCKET
        if sub == head:
            return ("bucket", None)
        if sub.startswith(head + "/"):
            return ("object", sub[len(head) + 1:])
    return None


def show(res):
    if isinstance(res, dict) and "Fn::Sub" in res:
        sub = res["Fn::Sub"]
        return sub if isinstance(sub, str) else json.dumps(sub)
    if isinstance(res, dict) and "Fn::GetAtt" in res:
        att = res["Fn::GetAtt"]
        return "${%s}" % (att if isinstance(att, str) else ".".join(att))
    return json.dumps(res) if not isinstance(res, str) else res


def s3_grants(name, policies):
    """What a function's Policies grant in S3: a set of (action, prefix) and the problems
    found on the way (grants the table cannot express)."""
    grants, problems = set(), []
    for pol in as_list(policies if policies is not None else []):
        if isinstance(pol, str):
            problems.append(f"{name}: managed policy {pol}: the check cannot see what it grants in S3; write statements")
            continue
        if not isinstance(pol, dict):
            problems.append(f"{name}: a policy the check cannot read: {json.dumps(pol)[:80]}")
            continue
        if "Statement" not in pol:
            for template in pol:
                if template.upper().startswith("S3") or BUCKET in json.dumps(pol[template]):
                    problems.append(f"{name}: SAM policy template {template} grants S3 actions beyond layout.rs; write statements")
            continue
        for st in as_list(pol["Statement"]):
            if not isinstance(st, dict) or st.get("Effect") != "Allow":
                continue
            if "NotAction" in st or "NotResource" in st:
                problems.append(f"{name}: an Allow with NotAction/NotResource grants more than it names")
                continue
            actions = [a for a in as_list(st.get("Action", [])) if isinstance(a, str)]
            s3 = [a for a in actions if a == "*" or a.lower().startswith("s3:")]
            if not s3:
                continue
            resources = as_list(st.get("Resource", []))
            cond = st.get("Condition")
            for action in s3:
                known = {v.lower(): v for v in ACTIONS.values()}.get(action.lower())
                for res in resources:
                    ref = bucket_ref(res)
                    where = show(res)
                    if known is None:
                        problems.append(f"{name}: {action} on {where}: layout.rs uses only "
                                        f"{', '.join(ACTIONS.values())}")
                    elif known == ACTIONS["list"]:
                        if ref != ("bucket", None):
                            problems.append(f"{name}: s3:ListBucket on {where}: it belongs on ${{{BUCKET}.Arn}} with an s3:prefix condition")
                            continue
                        values = list_prefixes(cond)
                        if values is None:
                            problems.append(f"{name}: s3:ListBucket on the whole bucket: needs "
                                            f"Condition {{StringLike: {{'s3:prefix': [<prefix>*, ...]}}}}, nothing else")
                            continue
                        for v in values:
                            if isinstance(v, str) and v.endswith("/*") and "*" not in v[:-1]:
                                grants.add((known, v[:-1]))
                            else:
                                problems.append(f"{name}: s3:ListBucket s3:prefix {json.dumps(v)}: want <prefix>* for a prefix of layout.rs")
                    else:
                        if cond is not None:
                            problems.append(f"{name}: {known} with a Condition the check cannot read; grant it plainly")
                            continue
                        if ref is None or ref[0] != "object":
                            problems.append(f"{name}: {known} on {where}: want ${{{BUCKET}.Arn}}/<prefix>*")
                        elif ref[1] == "*" or not ref[1].endswith("/*") or "*" in ref[1][:-1]:
                            problems.append(f"{name}: {known} on {where}: "
                                            + ("an object grant on the whole bucket" if ref[1] == "*" or ref[1].startswith("*")
                                               else "want <prefix>* for a prefix of layout.rs"))
                        else:
                            grants.add((known, ref[1][:-1]))
    return grants, problems


def list_prefixes(cond):
    """The values of {StringLike: {s3:prefix: [...]}}, or None for no or any other condition."""
    if not isinstance(cond, dict) or list(cond) != ["StringLike"]:
        return None
    inner = cond["StringLike"]
    if not isinstance(inner, dict) or list(inner) != ["s3:prefix"]:
        return None
    return as_list(inner["s3:prefix"])


def check_s3(name, props, table):
    if "Role" in props:
        return [f"{name}: Role is set, so Policies are ignored and the S3 grants cannot be checked"]
    granted, problems = s3_grants(name, props.get("Policies"))
    verbs = {"read": "reads", "write": "writes", "list": "lists"}
    for action, prefix in sorted(granted):
        col = next(c for c, a in ACTIONS.items() if a == action)
        if prefix not in table:
            problems.append(f"{name}: {action} on {prefix}: not a prefix of layout.rs")
        elif not table[prefix][col]:
            problems.append(f"{name}: {action} on {prefix}: layout.rs never {verbs[col]} {prefix}")
    for prefix, flags in table.items():
        for col, action in ACTIONS.items():
            if flags[col] and (action, prefix) not in granted:
                problems.append(f"{name}: no {action} on {prefix}: layout.rs {verbs[col]} {prefix}")
    return problems


def allow_statements(resources, functions=True):
    """Every Allow statement anywhere in the resources' properties, as (resource name,
    statement); without the functions' own (their Policies) when `functions` is False."""

    def walk(name, node):
        if isinstance(node, list):
            for x in node:
                yield from walk(name, x)
        elif isinstance(node, dict):
            if node.get("Effect") == "Allow":
                yield name, node
            for v in node.values():
                yield from walk(name, v)

    for name, res in resources.items():
        if functions or res.get("Type") != "AWS::Serverless::Function":
            yield from walk(name, res.get("Properties", {}))


def allowed_actions(statement):
    """The actions an Allow grants, as strings; an Allow by NotAction grants all but a few,
    so it counts as '*'."""
    if "NotAction" in statement:
        return ["*"]
    return [a for a in as_list(statement.get("Action", [])) if isinstance(a, str)]


def s3_elsewhere(resources):
    """Any Allow of an S3 action outside the functions' Policies (an AWS::IAM::Policy on a
    function's role, an Allow in the bucket policy): it would grant past the check."""
    return [
        f"{name}: allows {a} outside the functions' Policies, past the layout.rs check"
        for name, st in allow_statements(resources, functions=False)
        for a in allowed_actions(st)
        if a == "*" or a.lower().startswith("s3:")
    ]


ELASTICACHE_KINDS = ("serverlesscache:", "replicationgroup:", "user:")


def arn_texts(r):
    """The ARN strings a Resource names: each branch of an Fn::If, each item of a list,
    an Fn::Sub's template; anything else as its JSON."""
    if isinstance(r, dict) and "Fn::If" in r:
        for branch in r["Fn::If"][1:]:
            yield from arn_texts(branch)
    elif isinstance(r, list):
        for x in r:
            yield from arn_texts(x)
    elif isinstance(r, str):
        yield r
    elif isinstance(r, dict) and "Fn::Sub" in r:
        sub = r["Fn::Sub"]
        yield sub if isinstance(sub, str) else sub[0]
    else:
        yield json.dumps(r)


def check_elasticache(resources):
    """ElastiCache IAM authentication: the only ElastiCache action any policy allows is
    elasticache:Connect, and only on named caches and users (never '*', never a wildcard
    name)."""
    problems = []
    for name, st in allow_statements(resources):
        cache_actions = [a for a in allowed_actions(st) if a == "*" or a.lower().startswith("elasticache:")]
        problems += [
            f"{name}: allows {a}; lawsync needs elasticache:Connect only"
            for a in cache_actions
            if a != "elasticache:Connect"
        ]
        if "elasticache:Connect" in cache_actions:
            for t in arn_texts(st.get("Resource")):
                kind_ok = any(k in t.rsplit(":elasticache:", 1)[-1] for k in ELASTICACHE_KINDS)
                if "*" in t or not kind_ok:
                    problems.append(f"{name}: elasticache:Connect on {t[:80]}: name the cache and the user")
    return problems


def check_schedules(resources):
    """The search queue's schedules: a valid JSON Input naming its kind and the scheduled
    time, each kind once."""
    problems, seen = [], {}
    for name, res in resources.items():
        if res.get("Type") != "AWS::Scheduler::Schedule":
            continue
        target = res.get("Properties", {}).get("Target", {})
        raw = target.get("Input")
        try:
            body = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            body = None
        if not isinstance(body, dict):
            problems.append(f"{name}: Target.Input must be a JSON object, got {json.dumps(raw)[:80]}")
            continue
        kind = body.get("schedule")
        if kind not in SCHEDULE_KINDS:
            problems.append(f"{name}: Input schedule must be one of {sorted(SCHEDULE_KINDS)}, got {json.dumps(kind)}")
        else:
            seen.setdefault(kind, []).append(name)
        if body.get("at") != SCHEDULED_TIME:
            problems.append(f"{name}: Input at must be {SCHEDULED_TIME}, got {json.dumps(body.get('at'))}")
        extra = set(body) - {"schedule", "at"}
        if extra:
            problems.append(f"{name}: Input has fields the search function does not read: {sorted(extra)}")
        if target.get("Arn") != {"Fn::GetAtt": ["SearchQueue", "Arn"]}:
            problems.append(f"{name}: Target.Arn must be the search queue")
    for kind in sorted(SCHEDULE_KINDS):
        if len(seen.get(kind, [])) != 1:
            problems.append(f"schedules: want exactly one {kind} schedule, found {seen.get(kind, [])}")
    return problems


def check_sqs(path):
    """Each function's role, rendered by SAM's transform, sends to exactly the queues SENDS
    names; each schedule's role to its target and its dead-letter queue."""
    try:
        stack = render(path, {"Env": "dev"})
    except Unsupported as e:
        return [f"roles: the template's IAM cannot be rendered: {e}"]
    problems = check_schedule_delivery(stack)
    queues = {n for n, r in stack.resources.items() if r["Type"] == "AWS::SQS::Queue"}
    elsewhere = "arn:aws:sqs:ap-northeast-2:123456789012:another-stacks-queue"
    for fn, wanted in sorted(SENDS.items()):
        if fn not in stack.function_role:
            problems.append(f"{fn}: no such function in the rendered template")
            continue
        policies = stack.policies_for(fn)
        for q in sorted(queues | {elsewhere}):
            arn = q if q == elsewhere else stack.arn(q)
            allowed = evaluate(policies, "sqs:SendMessage", arn) == "allow"
            if q in wanted and not allowed:
                problems.append(f"{fn}: its role may not sqs:SendMessage to {q}, which the code sends to "
                                f"(see SENDS in check_template.py)")
            elif q not in wanted and allowed:
                problems.append(f"{fn}: its role may sqs:SendMessage to {q.rsplit(':', 1)[-1]}, which the code never sends to")
    for name, res in stack.resources.items():
        if res["Type"] != "AWS::Scheduler::Schedule":
            continue
        target = stack.r.value(res["Properties"]["Target"])
        role = stack.role_id(res["Properties"]["Target"]["RoleArn"], name)
        dlq = target.get("DeadLetterConfig", {}).get("Arn")
        for arn, what in ((target["Arn"], "its target"), (dlq, "its dead-letter queue")):
            if not arn or ":sqs:" not in arn:
                continue
            if evaluate(stack.roles.get(role, []), "sqs:SendMessage", arn) != "allow":
                problems.append(f"{name}: its role {role} may not sqs:SendMessage to {what} ({arn.rsplit(':', 1)[-1]})")
    return problems


def check_deploy(template, resources, globals_fn):
    """The rules that keep a first deploy and every later stack change safe."""
    problems = []
    arch = template.get("Parameters", {}).get("Architecture", {}).get("Default")
    if arch != TESTED_ARCHITECTURE:
        problems.append(f"Architecture: defaults to {arch!r}; the bootstraps are built and run by the tests "
                        f"for {TESTED_ARCHITECTURE} only")
    for name, res in resources.items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        props = res.get("Properties", {})
        env = {**globals_fn.get("Environment", {}).get("Variables", {}),
               **props.get("Environment", {}).get("Variables", {})}
        if "RUST_LOG" in env:
            problems.append(f"{name}: RUST_LOG overrides Lambda's log level (and lifts the quiet default "
                            f"of the libraries); set LoggingConfig.ApplicationLogLevel instead")
        logging = {**globals_fn.get("LoggingConfig", {}), **props.get("LoggingConfig", {})}
        if logging.get("LogFormat") != "JSON":
            problems.append(f"{name}: LoggingConfig.LogFormat must be JSON (Lambda filters levels of JSON logs only)")
        app = logging.get("ApplicationLogLevel")
        if app not in METRIC_SAFE_LEVELS:
            problems.append(f"{name}: LoggingConfig.ApplicationLogLevel {app!r} would drop the EMF metric lines "
                            f"(Lambda counts them INFO); use one of {sorted(METRIC_SAFE_LEVELS)}")
        if logging.get("SystemLogLevel") not in SYSTEM_LEVELS:
            problems.append(f"{name}: LoggingConfig.SystemLogLevel must be set, one of {sorted(SYSTEM_LEVELS)}")
    for name, res in resources.items():
        kind = res.get("Type")
        if kind in RETAINED:
            for policy in ("DeletionPolicy", "UpdateReplacePolicy"):
                if res.get(policy) != "Retain":
                    problems.append(f"{name}: {policy} must be Retain: a stack delete or a replacing change would destroy it")
        props = res.get("Properties", {})
        if kind == "AWS::S3::Bucket":
            if props.get("VersioningConfiguration", {}).get("Status") != "Enabled":
                problems.append(f"{name}: versioning must be Enabled, or a revision overwrites the text it replaces")
            rules = [r for r in props.get("LifecycleConfiguration", {}).get("Rules", []) if r.get("Status") == "Enabled"]
            for field, what in (("NoncurrentVersionExpiration", "old versions"),
                                ("AbortIncompleteMultipartUpload", "incomplete uploads")):
                if not any(field in r for r in rules):
                    problems.append(f"{name}: an enabled lifecycle rule with {field} ({what}) is missing")
        if kind == "AWS::ElastiCache::ServerlessCache" and not props.get("SnapshotRetentionLimit"):
            problems.append(f"{name}: SnapshotRetentionLimit must keep daily snapshots (1-35 days)")
    return problems


def check_schedule_delivery(stack):
    """Every schedule, SAM's included, retries a failed delivery and then keeps it."""
    problems = []
    for name, res in stack.resources.items():
        if res["Type"] != "AWS::Scheduler::Schedule":
            continue
        target = res["Properties"].get("Target", {})
        if "RetryPolicy" not in target:
            problems.append(f"{name}: no RetryPolicy: a failed delivery is not retried")
        if not target.get("DeadLetterConfig", {}).get("Arn"):
            problems.append(f"{name}: no DeadLetterConfig: a delivery that fails for good is a silently skipped run")
    return problems


def main(path, layout=LAYOUT):
    table = read_layout(layout)
    template, matches = decode(path)
    if matches:
        return [f"{path}: cannot be read: {m}" for m in matches]
    resources = template.get("Resources", {})
    globals_fn = template.get("Globals", {}).get("Function", {})
    problems = []
    queues = {name: r for name, r in resources.items() if r.get("Type") == "AWS::SQS::Queue"}
    for name, res in resources.items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        props = res.get("Properties", {})
        merged = {**globals_fn, **props}
        if merged.get("Runtime") != "provided.al2023" or merged.get("Handler") != "bootstrap":
            problems.append(f"{name}: must run provided.al2023 with Handler bootstrap")
        if res.get("Metadata", {}).get("BuildMethod") != "rust-cargolambda":
            problems.append(f"{name}: Metadata.BuildMethod must be rust-cargolambda")
        env = {**globals_fn.get("Environment", {}).get("Variables", {}),
               **props.get("Environment", {}).get("Variables", {})}
        for var in SECRET_VARS & set(env):
            problems.append(f"{name}: {var} as a plain environment value; use the *_SECRET_ARN variable")
        problems += check_s3(name, props, table)
        timeout = int(merged.get("Timeout", 3))
        for ev_name, ev in props.get("Events", {}).items():
            if ev.get("Type") != "SQS":
                continue
            ep = ev.get("Properties", {})
            if "ReportBatchItemFailures" not in ep.get("FunctionResponseTypes", []):
                problems.append(f"{name}.{ev_name}: FunctionResponseTypes must include ReportBatchItemFailures")
            if "MaximumConcurrency" not in ep.get("ScalingConfig", {}):
                problems.append(f"{name}.{ev_name}: ScalingConfig.MaximumConcurrency must bound the pollers")
            queue = ep.get("Queue", {})
            target = queue.get("Fn::GetAtt", [None])[0] if isinstance(queue, dict) else None
            q = queues.get(target, {}).get("Properties", {})
            vt = int(q.get("VisibilityTimeout", 30))
            if vt < 6 * timeout:
                problems.append(f"{name}.{ev_name}: {target} VisibilityTimeout {vt} s is under 6 x the {timeout} s timeout")
            if "RedrivePolicy" not in q:
                problems.append(f"{name}.{ev_name}: {target} needs a RedrivePolicy to a dead-letter queue")
    problems += s3_elsewhere(resources)
    problems += check_schedules(resources)
    problems += check_elasticache(resources)
    problems += check_sqs(path)
    problems += check_deploy(template, resources, globals_fn)
    return problems


if __name__ == "__main__":
    args = sys.argv[1:]
    layout = LAYOUT
    if len(args) == 3 and args[1] == "--layout":
        layout = args[2]
    elif len(args) != 1:
        sys.exit("usage: check_template.py TEMPLATE [--layout LAYOUT_RS]")
    try:
        found = main(args[0], layout)
    except LayoutError as e:
        print(f"layout: {e}")
        sys.exit(2)
    for p in found:
        print(p)
    sys.exit(1 if found else 0)
