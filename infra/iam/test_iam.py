"""The evaluator and the renderer against what AWS documents (run by `make lint-infra`):
    cd infra && ../.venv/bin/python -m unittest iam.test_iam
"""
import unittest
from pathlib import Path

from .policy import Unsupported, evaluate
from .render import render

ALLOW = "Allow"
Q = "arn:aws:sqs:ap-northeast-2:123456789012:lawsync-dev-search"


def doc(*statements):
    return [{"Statement": list(statements)}]


class Matching(unittest.TestCase):
    def test_actions_match_case_blind_with_wildcards(self):
        p = doc({"Effect": ALLOW, "Action": "sqs:SendMessage*", "Resource": Q})
        self.assertEqual(evaluate(p, "sqs:sendmessage", Q), "allow")
        self.assertEqual(evaluate(p, "sqs:SendMessageBatch", Q), "allow")
        self.assertEqual(evaluate(p, "sqs:ReceiveMessage", Q), "implicit")
        q = doc({"Effect": ALLOW, "Action": "s3:?etObject", "Resource": "*"})
        self.assertEqual(evaluate(q, "s3:GetObject", "arn:aws:s3:::b/k"), "allow")
        self.assertEqual(evaluate(q, "s3:GetObjects", "arn:aws:s3:::b/k"), "implicit")

    def test_resources_match_case_sensitively_and_star_crosses_separators(self):
        p = doc({"Effect": ALLOW, "Action": "s3:GetObject", "Resource": "arn:aws:s3:::lawsync-*-eu/prec/*"})
        self.assertEqual(evaluate(p, "s3:GetObject", "arn:aws:s3:::lawsync-a:b-eu/prec/x/y.json"), "allow")
        self.assertEqual(evaluate(p, "s3:GetObject", "arn:aws:s3:::lawsync-a-eu/PREC/1.json"), "implicit")
        self.assertEqual(evaluate(p, "s3:GetObject", "arn:aws:s3:::lawsync-a-eu/index/1.json"), "implicit")

    def test_not_action_and_not_resource_cover_what_they_do_not_name(self):
        p = doc({"Effect": ALLOW, "NotAction": "s3:DeleteObject", "Resource": "*"})
        self.assertEqual(evaluate(p, "sqs:SendMessage", Q), "allow")
        self.assertEqual(evaluate(p, "s3:DeleteObject", "arn:aws:s3:::b/k"), "implicit")
        r = doc({"Effect": ALLOW, "Action": "*", "NotResource": Q})
        self.assertEqual(evaluate(r, "sqs:SendMessage", Q), "implicit")
        self.assertEqual(evaluate(r, "sqs:SendMessage", Q + "-dlq"), "allow")

    def test_an_explicit_deny_wins_over_any_allow(self):
        p = doc({"Effect": ALLOW, "Action": "*", "Resource": "*"},
                {"Effect": "Deny", "Action": "s3:*", "Resource": "*", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})
        self.assertEqual(evaluate(p, "s3:GetObject", "arn:aws:s3:::b/k", {"aws:SecureTransport": "false"}), "deny")
        self.assertEqual(evaluate(p, "s3:GetObject", "arn:aws:s3:::b/k", {"aws:SecureTransport": "true"}), "allow")
        # A missing key makes a positive operator false: the deny does not apply.
        self.assertEqual(evaluate(p, "s3:GetObject", "arn:aws:s3:::b/k"), "allow")


class Conditions(unittest.TestCase):
    LIST = {"Effect": ALLOW, "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b",
            "Condition": {"StringLike": {"s3:prefix": ["prec/*", "runs/*"]}}}

    def test_string_like_needs_the_key_and_any_value_matching(self):
        p = doc(self.LIST)
        self.assertEqual(evaluate(p, "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "runs/x.json"}), "allow")
        self.assertEqual(evaluate(p, "s3:ListBucket", "arn:aws:s3:::b", {"s3:prefix": "index/x"}), "implicit")
        self.assertEqual(evaluate(p, "s3:ListBucket", "arn:aws:s3:::b", {}), "implicit")

    def test_negated_operators_hold_for_a_missing_key_and_if_exists_too(self):
        neg = doc({"Effect": ALLOW, "Action": "*", "Resource": "*",
                   "Condition": {"StringNotEquals": {"aws:RequestedRegion": "us-east-1"}}})
        self.assertEqual(evaluate(neg, "sqs:SendMessage", Q), "allow")
        self.assertEqual(evaluate(neg, "sqs:SendMessage", Q, {"aws:RequestedRegion": "us-east-1"}), "implicit")
        opt = doc({"Effect": ALLOW, "Action": "*", "Resource": "*",
                   "Condition": {"StringEqualsIfExists": {"aws:RequestedRegion": "eu-west-1"}}})
        self.assertEqual(evaluate(opt, "sqs:SendMessage", Q), "allow")
        self.assertEqual(evaluate(opt, "sqs:SendMessage", Q, {"aws:RequestedRegion": "us-east-1"}), "implicit")

    def test_every_operator_and_every_key_must_hold(self):
        both = doc({"Effect": ALLOW, "Action": "*", "Resource": "*",
                    "Condition": {"StringEquals": {"a": "1", "b": "2"}, "Bool": {"c": "true"}}})
        self.assertEqual(evaluate(both, "x:Y", "*", {"a": "1", "b": "2", "c": "true"}), "allow")
        self.assertEqual(evaluate(both, "x:Y", "*", {"a": "1", "b": "3", "c": "true"}), "implicit")
        self.assertEqual(evaluate(both, "x:Y", "*", {"a": "1", "b": "2", "c": "false"}), "implicit")

    def test_what_is_not_modelled_is_refused_not_guessed(self):
        for cond in ({"NumericLessThan": {"s3:max-keys": "10"}},
                     {"ForAnyValue:StringLike": {"aws:TagKeys": "x"}}):
            p = doc({"Effect": ALLOW, "Action": "*", "Resource": "*", "Condition": cond})
            with self.assertRaises(Unsupported):
                evaluate(p, "s3:ListBucket", "arn:aws:s3:::b", {"s3:max-keys": "5"})
        with self.assertRaises(Unsupported):
            evaluate(doc({"Effect": ALLOW, "Action": "*", "Resource": "arn:aws:s3:::${aws:username}/*"}),
                     "s3:GetObject", "arn:aws:s3:::b/k")


class Rendering(unittest.TestCase):
    """The real template, through SAM's transform."""

    @classmethod
    def setUpClass(cls):
        cls.stack = render(Path(__file__).resolve().parent.parent / "template.yaml", {"Env": "dev"})

    def test_every_function_has_its_role_with_the_stacks_own_arns(self):
        self.assertEqual(set(self.stack.function_role), {"SearchFunction", "DetailFunction", "DrainerFunction"})
        self.assertEqual(self.stack.arn("SearchQueue"), Q)
        self.assertEqual(self.stack.arn("DocumentBucket"), "arn:aws:s3:::lawsync-dev-123456789012-ap-northeast-2")

    def test_the_created_key_secret_is_readable_by_its_arn_with_any_suffix(self):
        arn = "arn:aws:secretsmanager:ap-northeast-2:123456789012:secret:lawsync/dev/law-api-oc-Ab12Cd"
        for fn in self.stack.function_role:
            self.assertEqual(evaluate(self.stack.policies_for(fn), "secretsmanager:GetSecretValue", arn), "allow", fn)
        other = arn.replace("law-api-oc", "other")
        self.assertEqual(evaluate(self.stack.policies_for("DetailFunction"), "secretsmanager:GetSecretValue", other),
                         "implicit")

    def test_sams_sqs_event_source_grants_receiving_to_the_queue_functions_only(self):
        for fn, can in (("SearchFunction", "allow"), ("DetailFunction", "allow"), ("DrainerFunction", "implicit")):
            self.assertEqual(evaluate(self.stack.policies_for(fn), "sqs:ReceiveMessage", Q), can, fn)


if __name__ == "__main__":
    unittest.main()
