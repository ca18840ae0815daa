"""IAM policy evaluation, as AWS documents it, for the statements lawsync's template uses.

`evaluate(policies, request)` answers "allow", "deny" (an explicit Deny) or "implicit"
(nothing allows it) for one request: an action, a resource ARN and the request context
(the condition keys the request carries, such as `s3:prefix`). The rules followed:

- An explicit Deny in any policy wins; otherwise any Allow allows; otherwise the request is
  implicitly denied (identity and resource policies of one account, no boundaries).
- Actions match case-blind, with `*` and `?` wildcards; `NotAction` and `NotResource`
  match everything they do not name.
- Resources match case-sensitively, with `*` (any run of characters, `:` and `/`
  included) and `?` wildcards.
- A Condition block holds when every operator in it holds; an operator holds when every
  key under it holds; a key holds when any of its values matches. A key missing from the
  request makes a positive operator false and a negated one (`StringNotEquals`,
  `StringNotLike`, `ArnNotLike`, ...) true; `...IfExists` makes a missing key true.

Anything outside this (an operator not listed in OPERATORS, a policy variable `${...}`
in a resource, a Principal-scoped statement the request cannot be matched with) raises
`Unsupported`, so the caller reports the request as one it could not evaluate rather
than guessing.
"""
import re


class Unsupported(Exception):
    """A policy or request this evaluator does not model."""


def as_list(v):
    return v if isinstance(v, list) else [v]


def _wild(pattern, value, case_blind):
    """IAM's wildcard match: `*` any run of characters, `?` one; nothing else special."""
    if case_blind:
        pattern, value = pattern.lower(), value.lower()
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(rx, value, re.DOTALL) is not None


def action_matches(pattern, action):
    return _wild(pattern, action, case_blind=True)


def resource_matches(pattern, arn):
    if "${" in pattern:
        raise Unsupported(f"policy variable in resource {pattern}")
    return _wild(pattern, arn, case_blind=False)


def _string_equals(want, got):
    return want == got


def _string_equals_ic(want, got):
    return want.lower() == got.lower()


def _string_like(want, got):
    return _wild(want, got, case_blind=False)


def _bool(want, got):
    return str(want).lower() == str(got).lower()


def _arn_like(want, got):
    # ArnLike compares each of the six ARN parts; with wildcards per part this is the
    # same as a whole-string wildcard match for the ARNs lawsync names.
    return _wild(want, got, case_blind=False)


# Operator → (value test, negated). Negated operators hold when no value matches.
OPERATORS = {
    "StringEquals": (_string_equals, False),
    "StringNotEquals": (_string_equals, True),
    "StringEqualsIgnoreCase": (_string_equals_ic, False),
    "StringNotEqualsIgnoreCase": (_string_equals_ic, True),
    "StringLike": (_string_like, False),
    "StringNotLike": (_string_like, True),
    "ArnEquals": (_string_equals, False),
    "ArnNotEquals": (_string_equals, True),
    "ArnLike": (_arn_like, False),
    "ArnNotLike": (_arn_like, True),
    "Bool": (_bool, False),
}


def condition_holds(block, context):
    """Whether a statement's Condition block holds for `context` ({key: value or [values]})."""
    if not block:
        return True
    if not isinstance(block, dict):
        raise Unsupported(f"Condition is not an object: {block!r}")
    lowered = {k.lower(): v for k, v in context.items()}
    for op, keys in block.items():
        if_exists = op.endswith("IfExists")
        base = op[: -len("IfExists")] if if_exists else op
        if base.startswith(("ForAnyValue:", "ForAllValues:")):
            raise Unsupported(f"set operator {op}")
        if base not in OPERATORS:
            raise Unsupported(f"condition operator {op}")
        test, negated = OPERATORS[base]
        if not isinstance(keys, dict):
            raise Unsupported(f"{op} is not an object")
        for key, wanted in keys.items():
            got = lowered.get(key.lower())
            if got is None:
                holds = if_exists or negated
            else:
                got_values = as_list(got)
                any_match = any(test(str(w), str(g)) for w in as_list(wanted) for g in got_values)
                holds = not any_match if negated else any_match
            if not holds:
                return False
    return True


def statement_applies(st, action, resource, context):
    """Whether one statement speaks to this request (its Effect aside)."""
    if "NotAction" in st:
        if any(action_matches(p, action) for p in as_list(st["NotAction"])):
            return False
    elif not any(action_matches(p, action) for p in as_list(st.get("Action", []))):
        return False
    if "NotResource" in st:
        if any(resource_matches(p, resource) for p in as_list(st["NotResource"])):
            return False
    elif not any(resource_matches(p, resource) for p in as_list(st.get("Resource", []))):
        return False
    return condition_holds(st.get("Condition"), context)


def evaluate(policies, action, resource, context=None):
    """"allow", "deny" or "implicit" for `action` on `resource` under `policies`: a list of
    policy documents (each {"Statement": [...]}, or a bare list of statements)."""
    context = context or {}
    allowed = False
    for doc in policies:
        statements = doc.get("Statement", []) if isinstance(doc, dict) else doc
        for st in as_list(statements):
            if not isinstance(st, dict):
                raise Unsupported(f"statement is not an object: {st!r}")
            effect = st.get("Effect")
            if effect not in ("Allow", "Deny"):
                raise Unsupported(f"Effect {effect!r}")
            if not statement_applies(st, action, resource, context):
                continue
            if effect == "Deny":
                return "deny"
            allowed = True
    return "allow" if allowed else "implicit"


# AWS managed policies SAM attaches to function roles, as AWS documents them (the policy
# versions current in 2026): what they allow is part of a role's grants, so a role that
# names one is evaluated with it. A role naming any other managed policy cannot be
# evaluated (see MANAGED).
_LOGS = {"Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"], "Resource": "*"}
MANAGED = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": {"Statement": [_LOGS]},
    "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole": {
        "Statement": [
            _LOGS,
            {
                "Effect": "Allow",
                "Action": [
                    "ec2:CreateNetworkInterface",
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeSubnets",
                    "ec2:DeleteNetworkInterface",
                    "ec2:AssignPrivateIpAddresses",
                    "ec2:UnassignPrivateIpAddresses",
                ],
                "Resource": "*",
            },
        ]
    },
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": {
        "Statement": [
            {"Effect": "Allow", "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"], "Resource": "*"},
            _LOGS,
        ]
    },
}


def managed(arn):
    """The document of an AWS managed policy SAM attaches; Unsupported for any other."""
    try:
        return MANAGED[arn]
    except KeyError:
        raise Unsupported(f"managed policy {arn}: its statements are not known here") from None

