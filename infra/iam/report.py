"""What the suites' AWS calls showed about the template's roles: the end of `make test`.

    python -m iam.report .run/moto/iam-calls.jsonl

Reads the IAM gate's call log (`gate.py`) and prints, per principal of the template, the
calls checked and allowed by action, then every call that was denied and every call that
could not be evaluated, each named (principal, operation, action, resource, why). Calls
made on purpose to be refused (`~probe` keys) and the harness's own calls are counted
apart. Exits 1 when a function's call was denied or could not be evaluated: on AWS the
first would fail, and the second is a call nobody checked. Exits 2 when the log is
missing or unreadable.
"""
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from .gate import PROBE_SUFFIX


def read(path):
    calls = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if line.strip():
            try:
                calls.append(json.loads(line))
            except ValueError as e:
                raise ValueError(f"{path}:{n}: not a JSON line: {e}") from None
    return calls


def summarize(calls):
    """(lines to print, failed)."""
    allowed = defaultdict(Counter)
    denied, unevaluated, probes, harness = [], [], Counter(), 0
    for c in calls:
        who, outcome = c["principal"], c["outcome"]
        if who == "harness":
            harness += 1
            continue
        if who.endswith(PROBE_SUFFIX):
            probes[outcome] += 1
            continue
        if outcome == "allowed":
            for check in c["checks"]:
                if check.get("for") is None:
                    allowed[who][check["action"]] += 1
        elif outcome == "denied":
            denied.append(c)
        else:
            unevaluated.append(c)
    lines = []
    total = sum(sum(a.values()) for a in allowed.values())
    lines.append(f"iam: {total} calls by the template's roles checked and allowed, "
                 f"{len(denied)} denied, {len(unevaluated)} not evaluated")
    for who in sorted(allowed):
        per = ", ".join(f"{a} {n}" for a, n in sorted(allowed[who].items()))
        lines.append(f"  {who:<18} {sum(allowed[who].values()):>6}  {per}")
    for c in denied:
        last = c["checks"][-1] if c["checks"] else {}
        lines.append(f"  DENIED {c['principal']} {c['operation']}: {last.get('action')} on "
                     f"{last.get('resource')} {json.dumps(last.get('context', {}))}"
                     + (f" ({c['why']})" if c.get("why") else ""))
    for c in unevaluated:
        lines.append(f"  NOT EVALUATED {c['principal']} {c['service']} {c['operation']}: {c.get('why')}")
    if probes:
        lines.append(f"  refusals provoked on purpose (~probe keys): {dict(probes)}")
    lines.append(f"  test harness calls (set-up and reading back, not a role's): {harness}")
    return lines, bool(denied or unevaluated)


def main(argv=None):
    argv = argv if argv is not None else sys.argv[1:]
    if len(argv) != 1:
        sys.exit("usage: python -m iam.report CALLS.jsonl")
    try:
        calls = read(argv[0])
    except (OSError, ValueError) as e:
        print(f"iam: the call log cannot be read: {e}", file=sys.stderr)
        sys.exit(2)
    lines, failed = summarize(calls)
    print("\n".join(lines))
    if failed:
        print("iam: a function made a call its role in infra/template.yaml does not allow, or one "
              "the check could not evaluate (above); on AWS the first fails", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
