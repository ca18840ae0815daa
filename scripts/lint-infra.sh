#!/usr/bin/env bash
# make lint-infra: the SAM template through `sam validate --lint`, cfn-lint (which expands
# the SAM transform) and infra/check_template.py; then the proof that the linters are
# awake: each deliberately broken copy of the template, and of the S3 prefix table in
# shared/src/mirror/layout.rs it is checked against, must fail. No AWS account needed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(scripts/infra-tools.sh)
export SAM_CLI_TELEMETRY=0
template=infra/template.yaml

lint() { # template
  "$bin/sam" validate --lint --template "$1" >/dev/null 2>&1 || { "$bin/sam" validate --lint --template "$1" 2>&1 | tail -5; return 1; }
  "$bin/cfn-lint" "$1" || return 1
  "$bin/python" infra/check_template.py "$1" || return 1
}

# The IAM evaluator and SAM rendering the SQS check and the tests' stand-in rest on.
(cd infra && "$bin/python" -m unittest -q iam.test_iam 2>&1 | tail -1) | grep -q '^OK' || {
  (cd infra && "$bin/python" -m unittest iam.test_iam); exit 1; }
echo "lint-infra: the IAM evaluator and the role rendering pass their tests (infra/iam/test_iam.py)"

lint "$template"
echo "lint-infra: $template passes sam validate --lint, cfn-lint $("$bin/cfn-lint" --version | cut -d' ' -f2) and check_template.py"

# Each broken copy: a description, then a sed expression applied to the template.
broken=(
  "MaximumConcurrency 1 (SQS allows 2 and up)|s/MaximumConcurrency: !Ref DetailMaxConcurrency/MaximumConcurrency: 1/"
  "an unknown runtime|s/Runtime: provided.al2023/Runtime: provided.al2024/"
  "a Ref to a resource that does not exist|s/DETAIL_QUEUE_URL: !Ref DetailQueue/DETAIL_QUEUE_URL: !Ref DetailQeue/"
  "no ReportBatchItemFailures|0,/FunctionResponseTypes: \\[ReportBatchItemFailures\\]/s//FunctionResponseTypes: []/"
  "a visibility timeout under six function timeouts|0,/VisibilityTimeout: 720/s//VisibilityTimeout: 120/"
  "the key as a plain environment value|s/^        DOCUMENT_BUCKET: !Ref DocumentBucket$/&\n        LAW_API_OC: plain-key/"
  # What a first deploy and later stack changes rely on.
  "RUST_LOG undoing Lambda's log controls|s/^        DOCUMENT_BUCKET: !Ref DocumentBucket$/&\n        RUST_LOG: info/"
  "an application log level that drops the metric lines|s/ApplicationLogLevel: INFO/ApplicationLogLevel: WARN/"
  "the bucket deleted with the stack|/^  DocumentBucket:/,/Properties:/{/Policy: Retain/d}"
  "the cache deleted or replaced with the stack|/^  Cache:/,/Properties:/{/Policy: Retain/d}"
  "the key's secret deleted with the stack|/^  OcSecret:/,/Properties:/{/Policy: Retain/d}"
  "an unversioned bucket|/VersioningConfiguration:/,+1d"
  "no lifecycle for incomplete uploads|/- Id: incomplete-uploads/,+2d"
  "a cache without snapshots|/SnapshotRetentionLimit: !Ref CacheSnapshotDays/d"
  "the drainer's schedule without a dead-letter queue|0,/DeadLetterConfig: {Arn: !GetAtt ScheduleDeadLetterQueue.Arn}/{//d}"
  "the daily schedule without a retry policy|/^  DailySync:/,/^  FullSweep:/{/RetryPolicy:/d}"
  "the schedules' role unable to reach their dead-letter queue|s/Resource: \[!GetAtt SearchQueue.Arn, !GetAtt ScheduleDeadLetterQueue.Arn\]/Resource: !GetAtt SearchQueue.Arn/"
  "an arm64 default no test has run|/^  Architecture:/,/AllowedValues/{s/Default: x86_64/Default: arm64/}"
  # S3 grants against shared/src/mirror/layout.rs; each edit touches SearchFunction only
  # (the first policy in the file), the other two keep theirs.
  "a function without PutObject on runs/|0,/Action: s3:ListBucket/{/Action: s3:PutObject/,/Action: s3:ListBucket/{/\/runs\/\*'/d}}"
  "a function granted s3:*|0,/Action: s3:GetObject/s//Action: 's3:*'/"
  "a bucket-wide object grant|0,/\/prec\/\*'/s//\/*'/"
  "GetObject on changes/, which the code only writes|0,/Action: s3:PutObject/{/\/runs\/\*'/{p;s/runs/changes/}}"
  "a ListBucket without its s3:prefix condition|0,/Condition: {StringLike: {'s3:prefix'/{//d}"
  "a ListBucket condition naming a prefix the code never lists|0,/'runs\/\*'\]}}/s//'runs\/*', 'index\/*']}}/"
  # The schedules' messages, as the search function reads them.
  "a schedule still sending the old dayBefore message|s/{\"schedule\":\"daily\",\"at\"/{\"dayBefore\"/"
  "a schedule kind the search function does not know|s/\"schedule\":\"sweep\"/\"schedule\":\"weekly\"/"
  # SQS sends, rendered by SAM's transform, against what the code sends (SENDS).
  "the detail function without its send to the detail queue|/^  DetailFunction:/,/^  DrainerFunction:/{/SQSSendMessagePolicy: {QueueName: !GetAtt DetailQueue.QueueName}/d}"
  "a function allowed to send to a dead-letter queue|0,/SQSSendMessagePolicy: {QueueName: !GetAtt SearchQueue.QueueName}/s//SQSSendMessagePolicy: {QueueName: !GetAtt SearchDeadLetterQueue.QueueName}/"
  "elasticache:Connect on every cache|s/serverlesscache:lawsync-\${Env}'/serverlesscache:*'/"
  "an ElastiCache action beyond Connect|s/Action: elasticache:Connect/Action: elasticache:*/"
  "an Allow by NotAction on the cache|s/Action: elasticache:Connect/NotAction: s3:GetObject/"
  "a schedule Input that is not JSON|s/\"at\":\"<aws.scheduler.scheduled-time>\"}'/\"at\":<aws.scheduler.scheduled-time>}'/"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for case in "${broken[@]}"; do
  what=${case%%|*}
  cp "$template" "$tmp/template.yaml"
  sed -i "${case#*|}" "$tmp/template.yaml"
  if cmp -s "$template" "$tmp/template.yaml"; then
    echo "lint-infra: the broken case '$what' changed nothing; fix its sed expression" >&2; exit 1
  fi
  if lint "$tmp/template.yaml" >"$tmp/out" 2>&1; then
    echo "lint-infra: a template with $what passed the linters" >&2; exit 1
  fi
  echo "lint-infra: caught $what: $(grep -m1 -E '^[EW][0-9]|: ' "$tmp/out" | cut -c1-110)"
done

# The table's side: the check must fail for a layout.rs the template no longer matches, and
# fail loudly for one it cannot read, rather than check against part of it.
layouts=(
  "a table reading index/, which no policy grants|s/path: \"index\/\", read: false/path: \"index\/\", read: true/"
  "a Prefix line the check cannot parse|s/path: \"runs\/\", read: true/path: \"runs\/\", read: yes/"
  "a table with no Prefix at all|/: Prefix = Prefix {/d"
)
layout=shared/src/mirror/layout.rs
for case in "${layouts[@]}"; do
  what=${case%%|*}
  cp "$layout" "$tmp/layout.rs"
  sed -i "${case#*|}" "$tmp/layout.rs"
  if cmp -s "$layout" "$tmp/layout.rs"; then
    echo "lint-infra: the broken case '$what' changed nothing; fix its sed expression" >&2; exit 1
  fi
  if "$bin/python" infra/check_template.py "$template" --layout "$tmp/layout.rs" >"$tmp/out" 2>&1; then
    echo "lint-infra: check_template.py passed the template against $what" >&2; exit 1
  fi
  echo "lint-infra: caught $what: $(head -1 "$tmp/out" | cut -c1-110)"
done
