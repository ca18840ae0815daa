# lawsync — the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
CARGO ?= cargo
REDIS_ENV := .run/redis/env
MOTO_ENV := .run/moto/env
# Every AWS call the suites made, checked against the template's roles (infra/iam): denied
# or unevaluated calls of a function fail the run.
IAM_REPORT = (cd infra && ../.venv/bin/python -m iam.report "$$LAWSYNC_TEST_IAM_LOG")

.PHONY: test lint lint-infra redis-up redis-down moto-up moto-down bench-gate bench-queue bench-cost bench-mirror soak soak-rule build lambda-build sam-build deploy logs deps demo fuzz help

GATE ?= shared
# Lambda architecture: x86_64, the template's default and the one the tests build and run;
# arm64 needs the aarch64 standard library (rustup target add aarch64-unknown-linux-gnu).
ARCH ?= x86_64
# This machine's architecture, for the bootstraps `make test` builds and runs under a local
# Lambda Runtime API (tests/tests/runtime.rs).
HOST_ARCH := $(if $(filter aarch64 arm64,$(shell uname -m)),arm64,x86_64)
STACK ?= lawsync-dev

help:
	@echo "make demo        the package end to end on this machine against a law.go.kr look-alike (GATE=per-instance for contrast)"
	@echo "make test        lint, the deployed bootstraps built, then every test against real Redis (standalone + 3-node cluster)"
	@echo "make bench-gate  the gate against the seed's polling gate, printed as a table"
	@echo "make bench-queue a drainer pass of the seed's queue against this queue's claim, 1e4..1e6 entries"
	@echo "make bench-cost  billed handler time per law.go.kr call, this package against the seed's sleep-in-handler, at SQS concurrency 1/2/5/10"
	@echo "make bench-mirror three mirror designs, backfill + 60 days each, at law.go.kr's volume (BENCH_MIRROR_ARGS='--scale 0.1' for a quick run)"
	@echo "make soak        the long reliability suites (ignored by make test), release build"
	@echo "make soak-rule   the shipped gate (1050 ms, 10 ms tolerance) against a 1000 ms rule: 1,000+ calls, 12 environments in 4 processes (about 20 min)"
	@echo "make fuzz        cargo-fuzz on the parsers for FUZZ_SECONDS (default 60) per target, with a summary"
	@echo "make lint        rustfmt and clippy, warnings as errors"
	@echo "make build       the three bootstrap zips with cargo-lambda (ARCH=x86_64 default, or arm64), with sizes"
	@echo "make sam-build   sam build of infra/template.yaml (runs cargo lambda itself)"
	@echo "make lint-infra  sam validate --lint, cfn-lint 1.53.0 and the template's own checks"
	@echo "make deploy      sam deploy (--guided the first time); STACK=lawsync-dev"
	@echo "make deps        install what the tests need (redis-server, redis-tools, python3-venv) when missing"

deps:
	@scripts/install-deps.sh

redis-up: deps
	@scripts/test-redis.sh up >/dev/null

redis-down:
	@scripts/test-redis.sh down

# moto (S3, SQS, Secrets Manager) from PyPI into the project's .venv, on a port of its own.
moto-up: deps
	@scripts/test-moto.sh up >/dev/null

moto-down:
	@scripts/test-moto.sh down

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

# The SAM template through its linters, and proof that they catch broken copies of it.
lint-infra: deps
	@scripts/lint-infra.sh

# Builds the deployed bootstraps for this machine (cargo-lambda, release profile: what
# tests/tests/runtime.rs runs), starts the test Redis servers and moto, runs every test,
# and stops them whatever happened.
test: lint lint-infra redis-up moto-up
	@ARCH=$(HOST_ARCH) scripts/lambda-build.sh
	@set -a; . $(REDIS_ENV); . $(MOTO_ENV); set +a; \
	status=0; $(CARGO) test --workspace --locked || status=$$?; \
	iam=0; $(IAM_REPORT) || iam=$$?; \
	scripts/test-redis.sh down; scripts/test-moto.sh down; [ $$status != 0 ] || status=$$iam; exit $$status

bench-gate: redis-up
	@set -a; . $(REDIS_ENV); set +a; \
	status=0; $(CARGO) run --release --locked -p lawsync-tests --bin bench-gate || status=$$?; \
	scripts/test-redis.sh down; exit $$status

bench-queue: redis-up
	@set -a; . $(REDIS_ENV); set +a; \
	status=0; $(CARGO) run --release --locked -p lawsync-tests --bin bench-queue || status=$$?; \
	scripts/test-redis.sh down; exit $$status

# Real processes (lawsync local) against the look-alike: release builds, Redis and moto of
# the test setup.
bench-cost: redis-up moto-up
	@set -a; . $(REDIS_ENV); . $(MOTO_ENV); set +a; \
	status=0; $(CARGO) build --release --locked -p lawsync --bin lawsync && \
	$(CARGO) run --release --locked -p lawsync-tests --bin bench-cost || status=$$?; \
	scripts/test-redis.sh down; scripts/test-moto.sh down; exit $$status

# Three mirror designs, each a backfill and 60 days of schedules, against the look-alike at
# law.go.kr's volume (docs/bench-mirror.md); BENCH_MIRROR_ARGS passes flags, e.g. --scale 0.1.
bench-mirror: redis-up moto-up
	@set -a; . $(REDIS_ENV); . $(MOTO_ENV); set +a; \
	status=0; $(CARGO) run --release --locked -p lawsync-tests --bin bench-mirror -- $(BENCH_MIRROR_ARGS) || status=$$?; \
	scripts/test-redis.sh down; scripts/test-moto.sh down; exit $$status

# The suites too long for make test (marked #[ignore = "soak: ..."]), in release.
soak: redis-up moto-up
	@set -a; . $(REDIS_ENV); . $(MOTO_ENV); set +a; \
	status=0; $(CARGO) build --release --locked --workspace --bins && \
	$(CARGO) test --release --locked --workspace -- --ignored --nocapture || status=$$?; \
	iam=0; $(IAM_REPORT) || iam=$$?; \
	scripts/test-redis.sh down; scripts/test-moto.sh down; [ $$status != 0 ] || status=$$iam; exit $$status

# The promise as deployed: the shipped interval and tolerance (1050/10 ms, the defaults)
# against the look-alike enforcing law.go.kr's 1000 ms, 1,121 precedents through 4 release
# `lawsync local` processes of 3 environments per function, nothing injected; prints the
# figures and [ok]/[fail] (0 rule 429s, no grant closer than 1050 ms on Redis' clock). About
# 20 minutes: not part of make test. SOAK_ARGS adds demo flags.
soak-rule:
	@DEMO_PROFILE=release DEMO_ARGS="--soak --from 20230101 --to 20251231 --processes 4 --concurrency 3 --rule-ms 1000 --gate-ms 1050 --out .run/soak-rule $(SOAK_ARGS)" scripts/demo.sh

# cargo-fuzz on the parsers (Retry-After, search/detail bodies, SQS messages, config values).
fuzz:
	@scripts/fuzz.sh

build:
	@ARCH=$(ARCH) scripts/lambda-build.sh

lambda-build: build

sam-build:
	@bin=$$(scripts/infra-tools.sh); export PATH="$$bin:$$PATH" SAM_CLI_TELEMETRY=0 SAM_CLI_BETA_RUST_CARGO_LAMBDA=1; \
	sam build --template infra/template.yaml --parameter-overrides Architecture=$(ARCH)

deploy: sam-build
	@bin=$$(scripts/infra-tools.sh); export PATH="$$bin:$$PATH" SAM_CLI_TELEMETRY=0; \
	if [ -f samconfig.toml ]; then sam deploy --stack-name $(STACK); \
	else sam deploy --guided --stack-name $(STACK) --capabilities CAPABILITY_IAM; fi

logs:
	@bin=$$(scripts/infra-tools.sh); export PATH="$$bin:$$PATH" SAM_CLI_TELEMETRY=0; \
	sam logs --stack-name $(STACK) --tail

# The whole package against the law.go.kr look-alike; GATE=per-instance turns the shared
# gate off for contrast. Starts and stops its own Redis (6393) and moto (5393).
demo:
	@GATE=$(GATE) scripts/demo.sh
