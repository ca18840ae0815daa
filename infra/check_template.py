"""Checks the template for what lawsync relies on and cfn-lint cannot know.

Run with the project venv's python (cfn-lint's YAML loader reads the intrinsic tags):
    .venv/bin/python infra/check_template.py infra/template.yaml
Exits 1 with one line per broken rule.
"""
import sys

from cfnlint.decode import decode

SECRET_VARS = {"LAW_API_OC", "SLACK_WEBHOOK_URL"}


def main(path):
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
    return problems


if __name__ == "__main__":
    found = main(sys.argv[1])
    for p in found:
        print(p)
    sys.exit(1 if found else 0)
