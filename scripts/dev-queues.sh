#!/usr/bin/env bash
# Creates the search and detail queues (and the bucket, when DOCUMENT_BUCKET is set) on the
# AWS endpoint in AWS_ENDPOINT_URL (moto: `make moto-up`), and prints the exports that
# `lawsync sync` and `lawsync local` read. Usage: eval "$(scripts/dev-queues.sh PREFIX)"
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:?usage: scripts/dev-queues.sh PREFIX}
: "${AWS_ENDPOINT_URL:?set AWS_ENDPOINT_URL to the moto server (see .run/moto/env)}"
[ -x .venv/bin/python ] || { echo "dev-queues: no .venv; run make moto-up first" >&2; exit 1; }
PREFIX=$prefix .venv/bin/python - <<'PY'
import os, boto3
kw = dict(endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name=os.environ.get("AWS_REGION", "ap-northeast-2"),
          aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
          aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"))
sqs = boto3.client("sqs", **kw)
for name in ("search", "detail"):
    url = sqs.create_queue(QueueName=f"{os.environ['PREFIX']}-{name}")["QueueUrl"]
    print(f"export {name.upper()}_QUEUE_URL={url}")
bucket = os.environ.get("DOCUMENT_BUCKET")
if bucket:
    boto3.client("s3", **kw).create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": kw["region_name"]})
PY
