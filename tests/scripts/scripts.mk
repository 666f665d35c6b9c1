# The test runner itself (scripts/run-tests.sh): a binary that runs no
# test fails the run.
.PHONY: check-run-tests
check-run-tests:
	@sh tests/scripts/run-tests-check.sh

CHECK_EXTRA += check-run-tests
