"""The template's IAM as AWS would hold it: SAM's own transform, then CloudFormation's
intrinsic functions resolved for one set of parameters.

`render(template, parameters)` runs `samtranslator` (the transform `sam deploy` runs, from
the project's venv through aws-sam-cli), so every grant SAM adds (policy templates such as
`SQSSendMessagePolicy`, the managed policies of an SQS event source or a VPC, the roles of
ScheduleV2 events) is there as deployed. It then resolves `Ref`, `Fn::GetAtt`, `Fn::Sub`,
`Fn::If`, `Fn::Join`, `Fn::Select` and the Conditions, giving each role its policy
documents with concrete ARNs (a parameter may hold a wildcard, which stays one), and each
function its role.

Physical names come from the resources' own name properties (`QueueName`, `BucketName`,
a secret's `Name`), so a stand-in that names its resources as the stack does is matched
by the same grants. A secret's ARN ends in a random six-character suffix on AWS: a `Ref`
to a created secret renders as its name followed by `-??????`.
"""
import copy
import os

from cfnlint.decode import decode

from .policy import Unsupported, as_list, managed

ACCOUNT = "123456789012"
REGION = "ap-northeast-2"
PARTITION = "aws"


class Rendered:
    """Roles, functions and resource policies of one rendered stack."""

    def __init__(self, resources, resolver):
        self.resources = resources
        self.r = resolver
        self.roles = {}  # role logical id -> [policy documents]
        self.function_role = {}  # function logical id -> role logical id
        self.resource_policies = []  # (resource ARN pattern, policy document)
        for name, res in resources.items():
            kind, props = res["Type"], res.get("Properties", {})
            if kind == "AWS::IAM::Role":
                docs = [self.r.value(p["PolicyDocument"]) for p in props.get("Policies", [])]
                docs += [managed(self.r.value(a)) for a in props.get("ManagedPolicyArns", [])]
                if "PermissionsBoundary" in props:
                    raise Unsupported(f"{name}: a permissions boundary")
                self.roles.setdefault(name, []).extend(docs)
        for name, res in resources.items():
            kind, props = res["Type"], res.get("Properties", {})
            if kind in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
                doc = self.r.value(props["PolicyDocument"])
                for role in as_list(props.get("Roles", [])):
                    role_id = self.role_id(role, name)
                    self.roles.setdefault(role_id, []).append(doc)
            elif kind == "AWS::Lambda::Function":
                self.function_role[name] = self.role_id(props.get("Role"), name)
            elif kind == "AWS::S3::BucketPolicy":
                bucket = self.r.value(props["Bucket"])
                doc = self.r.value(props["PolicyDocument"])
                for st in as_list(doc.get("Statement", [])):
                    if st.get("Principal") not in ("*", {"AWS": "*"}):
                        raise Unsupported(f"{name}: a bucket policy statement for {st.get('Principal')!r}")
                self.resource_policies.append((f"arn:{PARTITION}:s3:::{bucket}", doc))

    def role_id(self, ref, owner):
        """The logical id of the role `ref` names ({"Ref": R} or {"Fn::GetAtt": [R, "Arn"]})."""
        if isinstance(ref, dict) and "Ref" in ref:
            return ref["Ref"]
        if isinstance(ref, dict) and "Fn::GetAtt" in ref:
            att = ref["Fn::GetAtt"]
            att = att.split(".", 1) if isinstance(att, str) else att
            return att[0]
        raise Unsupported(f"{owner}: a role given as {ref!r}, not a role of the stack")

    def policies_for(self, principal):
        """The policy documents of a function (by logical id) or a role."""
        role = self.function_role.get(principal, principal)
        if role not in self.roles:
            raise Unsupported(f"no role {principal} in the template")
        return self.roles[role]

    def resource_policies_for(self, arn):
        from .policy import resource_matches

        return [doc for pattern, doc in self.resource_policies
                if resource_matches(pattern, arn) or resource_matches(pattern + "/*", arn)]

    def arn(self, logical):
        """The ARN of a resource of the stack (a queue, a bucket, a secret...)."""
        return self.r.value({"Fn::GetAtt": [logical, "Arn"]}) if self.resources[logical]["Type"] != \
            "AWS::SecretsManager::Secret" else self.r.value({"Ref": logical})


class Resolver:
    """CloudFormation's intrinsic functions over one template and its parameters."""

    NO_VALUE = object()

    def __init__(self, template, parameters):
        self.template = template
        self.resources = template.get("Resources", {})
        self.params = {}
        for name, spec in template.get("Parameters", {}).items():
            v = parameters.get(name, spec.get("Default"))
            if v is None:
                raise Unsupported(f"parameter {name} has no value and no default")
            if spec.get("Type") == "CommaDelimitedList" and isinstance(v, str):
                v = [x for x in v.split(",")] if v else [""]
            self.params[name] = v
        self.conditions = {}
        for name in template.get("Conditions", {}):
            self.condition(name)

    def condition(self, name):
        if name not in self.conditions:
            self.conditions[name] = bool(self.value(self.template["Conditions"][name]))
        return self.conditions[name]

    def present(self, logical):
        cond = self.resources.get(logical, {}).get("Condition")
        return cond is None or self.condition(cond)

    def value(self, node):
        """`node` with every intrinsic function resolved; AWS::NoValue removed."""
        out = self._value(node)
        return None if out is self.NO_VALUE else out

    def _value(self, node):
        if isinstance(node, list):
            items = [self._value(x) for x in node]
            return [x for x in items if x is not self.NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (fn, arg), = node.items()
            handler = {
                "Ref": self._ref,
                "Fn::GetAtt": self._getatt,
                "Fn::Sub": self._sub,
                "Fn::If": self._if,
                "Fn::Join": lambda a: a[0].join(str(x) for x in as_list(self._value(a[1]))),
                "Fn::Select": lambda a: self._value(a[1])[int(self._value(a[0]))],
                "Fn::Equals": lambda a: self._value(a[0]) == self._value(a[1]),
                "Fn::Not": lambda a: not self._value(a[0]),
                "Fn::And": lambda a: all(self._value(x) for x in a),
                "Fn::Or": lambda a: any(self._value(x) for x in a),
                "Condition": self.condition,
                "Fn::GetAZs": lambda a: [f"{REGION}a", f"{REGION}b", f"{REGION}c"],
                "Fn::Cidr": lambda a: [f"10.0.{i}.0/24" for i in range(int(self._value(a[1])))],
            }.get(fn)
            if handler is not None:
                return handler(arg)
            if fn.startswith("Fn::"):
                raise Unsupported(f"intrinsic {fn}")
        out = {}
        for k, v in node.items():
            r = self._value(v)
            if r is not self.NO_VALUE:
                out[k] = r
        return out

    def _if(self, arg):
        name, yes, no = arg
        return self._value(yes if self.condition(name) else no)

    def _ref(self, name):
        pseudo = {
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::Partition": PARTITION,
            "AWS::StackName": "lawsync",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": self.NO_VALUE,
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.params:
            return self.params[name]
        res = self.resources.get(name)
        if res is None:
            raise Unsupported(f"Ref to {name}, which the template does not define")
        kind, props = res["Type"], res.get("Properties", {})
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self._name(name)}"
        if kind == "AWS::SecretsManager::Secret":
            return f"arn:{PARTITION}:secretsmanager:{REGION}:{ACCOUNT}:secret:{self._name(name)}-??????"
        if kind in ("AWS::S3::Bucket", "AWS::IAM::Role", "AWS::Lambda::Function"):
            return self._name(name)
        return f"{name}-physical-id"

    NAME_PROPS = {
        "AWS::SQS::Queue": "QueueName",
        "AWS::S3::Bucket": "BucketName",
        "AWS::SecretsManager::Secret": "Name",
        "AWS::Lambda::Function": "FunctionName",
        "AWS::IAM::Role": "RoleName",
    }

    def _name(self, logical):
        res = self.resources[logical]
        prop = self.NAME_PROPS.get(res["Type"])
        given = res.get("Properties", {}).get(prop) if prop else None
        return self._value(given) if given is not None else f"lawsync-{logical}"

    def _getatt(self, arg):
        logical, att = arg.split(".", 1) if isinstance(arg, str) else arg
        res = self.resources.get(logical)
        if res is None:
            raise Unsupported(f"GetAtt of {logical}, which the template does not define")
        kind = res["Type"]
        name = self._name(logical)
        arns = {
            "AWS::SQS::Queue": f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::S3::Bucket": f"arn:{PARTITION}:s3:::{name}",
            "AWS::IAM::Role": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{name}",
            "AWS::Lambda::Function": f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{name}",
        }
        if att == "Arn" and kind in arns:
            return arns[kind]
        if att == "QueueName" and kind == "AWS::SQS::Queue":
            return name
        return f"{logical}.{att}"

    def _sub(self, arg):
        text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], self._value(arg[1]))
        out, i = [], 0
        while i < len(text):
            if text.startswith("${!", i):
                out.append("${")
                i += 3
                continue
            if text.startswith("${", i):
                end = text.index("}", i)
                var = text[i + 2:end]
                if var in extra:
                    v = extra[var]
                elif "." in var and not var.startswith("AWS::"):
                    v = self._getatt(var)
                else:
                    v = self._ref(var)
                out.append(str(v))
                i = end + 1
                continue
            out.append(text[i])
            i += 1
        return "".join(out)


def render(template_path, parameters):
    """The template at `template_path`, transformed by SAM and resolved for `parameters`."""
    from samtranslator.translator.transform import transform

    template, matches = decode(str(template_path))
    if matches:
        raise Unsupported(f"{template_path}: cannot be read: {matches[0]}")
    template = copy.deepcopy(template)
    for res in template.get("Resources", {}).values():
        if res.get("Type") == "AWS::Serverless::Function":
            # The transform wants a deployed artifact; where the code is does not change a grant.
            res.setdefault("Properties", {})["CodeUri"] = "s3://lawsync-artifacts/bootstrap.zip"

    class NoManagedPolicyLookup:
        def load(self):
            return {}

    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    params = {k: v for k, v in parameters.items()}
    transformed = transform(template, params, NoManagedPolicyLookup())
    resolver = Resolver(transformed, params)
    resources = {k: v for k, v in transformed["Resources"].items() if resolver.present(k)}
    resolver.resources = transformed["Resources"]
    return Rendered(resources, resolver)
