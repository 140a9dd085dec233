.PHONY: run test bench lint format

run:  ## serve Tess on the embedded default with demo accounts
	@bash scripts/run.sh

test:  ## ruff, mypy and the whole suite against real PostgreSQL and Redis
	@bash scripts/test.sh

bench:  ## performance figures as ratios against a baseline measured in the same run
	@bash scripts/bench.sh

lint:
	@.venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy .

format:
	@.venv/bin/ruff format . && .venv/bin/ruff check --fix .
