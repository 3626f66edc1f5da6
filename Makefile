.PHONY: up test bootstrap

bootstrap:
	@scripts/bootstrap

up: bootstrap
	.venv/bin/weir up

test: bootstrap
	.venv/bin/python -m pytest -q -n 2 --dist worksteal
