.PHONY: up test bootstrap

bootstrap:
	@scripts/bootstrap

up: bootstrap
	.venv/bin/weir up

test: bootstrap
	.venv/bin/python -m pytest -q
