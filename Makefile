.PHONY: run test test-cluster bench lint format

run:  ## serve Tess on the embedded default with demo accounts
	@bash scripts/run.sh

test:  ## ruff, mypy and the whole suite against real PostgreSQL and Redis, then the two-node cluster suite
	@bash scripts/test.sh
	@bash scripts/test-cluster.sh

test-cluster:  ## only the cluster suite: two nodes, two workers and beat under faults and a 60-second load (TESS_LOAD_SECONDS)
	@bash scripts/test-cluster.sh

bench:  ## performance figures as ratios against a baseline measured in the same run
	@bash scripts/bench.sh

lint:
	@.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy .

format:
	@.venv/bin/ruff format . && .venv/bin/ruff check --fix .
